"""The distributed back end: one process per worker, joined with torch.distributed, real wall clocks.

- :mod:`.backend`: :class:`DistributedBackend` (this process is the router; it starts and stops the workers).
- :mod:`.worker`: what a worker process does (the steps and hand-offs the router asks for).
- :mod:`.messages`: the typed control-plane messages between them.
- :mod:`.launch`: the same under ``torchrun``.

The router's decisions are the cluster's (:mod:`splitlab.serving.cluster`) on a wall clock (:mod:`..wall`).
"""
from __future__ import annotations


def __getattr__(name: str):
    if name == "DistributedBackend":
        from .backend import DistributedBackend
        return DistributedBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
