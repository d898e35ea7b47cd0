"""Moving a KV cache: the header and in-process copy, the wire format between processes, the links that send
and receive caches (whole, or layer by layer while the prefill computes), process groups and their control
plane, the two-process :class:`~.peer.Peer`, and the transfer benchmark.

- :mod:`.header`: ``TransferHeader``, ``make_header``, ``pack``, ``check`` (what the receiver verifies first).
- :mod:`.copy`: ``copy_cache``, ``receive`` (same process: device to device).
- :mod:`.wire`: the byte layout and messages; :mod:`.link`: ``send_cache``, ``recv_cache``, ``prefill_streaming``.
- :mod:`.group`, :mod:`.mailbox`, :mod:`.spawn`: processes joined with torch.distributed, their control plane,
  and starting them on this machine.
- :mod:`.peer`: a second process to move caches to; :mod:`.bench`: what each way of moving costs here.

Names are imported on first use (``splitlab.transfer.copy_cache`` and the like), so importing the package is cheap.
"""
from __future__ import annotations

import importlib

_EXPORTS = {"header": ["TransferHeader", "Packet", "make_header", "pack", "check"],
            "copy": ["TransferStats", "copy_cache", "receive"],
            "peer": ["Peer"]}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
_SUBMODULES = ("header", "copy", "wire", "link", "group", "mailbox", "spawn", "control", "peer", "peer_child", "bench")
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
