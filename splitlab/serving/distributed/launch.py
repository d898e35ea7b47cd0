"""Running the distributed back end under ``torchrun``, on one machine or several: every rank runs the same
command; rank 0 becomes the router and the other ranks the workers::

    torchrun --nproc-per-node 3 -m splitlab serve --backend distributed --torchrun --layout disaggregated \\
        --prefill-workers 1 --decode-workers 1 --requests 8 --json

:func:`join` joins the group torchrun set up (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``); on a
worker rank :func:`work` serves until the router says stop, on rank 0 :func:`backend` is the
:class:`~.backend.DistributedBackend` over the other ranks.
"""
from __future__ import annotations

from ...transfer.group import Group, join_from_env, pick_backend
from .backend import DistributedBackend
from .worker import serve_worker

__all__ = ["join", "work", "backend"]


def join(device: str = "cpu", timeout_s: float = 30.0) -> Group:
    """Join the processes torchrun started. Raises DistributedError when this was not started by torchrun (the
    message names the missing variable), PeerJoinTimeout when the others do not come."""
    return join_from_env(pick_backend(device), timeout_s)


def work(group: Group, model: str = "tiny", dtype=None, device: str = "cpu", seed: int = 0) -> None:
    """Serve as worker rank ``group.rank`` until the router says stop, then leave the group."""
    try:
        serve_worker(group, dict(model=model, dtype=dtype, device=device, seed=seed))
    finally:
        group.close()


def backend(group: Group, model: str = "tiny", dtype=None, device: str = "cpu", seed: int = 0,
            timeout_s: float = 30.0) -> DistributedBackend:
    """The back end of rank 0 over the workers torchrun started."""
    return DistributedBackend(model, dtype=dtype, device=device, seed=seed, timeout_s=timeout_s, group=group)
