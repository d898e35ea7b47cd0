"""Moving a KV cache from the worker that prefilled it to the worker that will decode it, in one process.

Copy paths (``copy_cache``), chosen from the two devices:

| from -> to                 | method           | how                                                           |
|----------------------------|------------------|---------------------------------------------------------------|
| same device                | ``clone``        | ``tensor.clone()`` (what an emulated split on one device does) |
| GPU a -> GPU b (peer)      | ``gpu-to-gpu``   | ``tensor.to(b)`` (NVLink / PCIe peer copy)                     |
| GPU -> GPU via the host    | ``via-pinned-host`` | GPU -> pinned CPU buffer -> GPU (a NIC without GPUDirect) |
| GPU -> CPU / CPU -> GPU    | ``gpu-to-host`` / ``host-to-gpu`` | through a pinned (page-locked) host buffer        |

``mode="whole"`` copies all layers then synchronises once; ``mode="layerwise"`` copies and synchronises layer by
layer (timing each), the granularity at which DistServe/Splitwise-style systems stream KV while the next
layer is still computing. Times come from :class:`splitlab.phases.device.Timer` after synchronising both devices.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from ..kvcache import KVCache
from ..phases.device import Timer, pick_device, synchronize
from .header import Packet, check

__all__ = ["TransferStats", "copy_cache", "receive"]


@dataclass
class TransferStats:
    """What a copy cost: ``nbytes`` moved, ``seconds`` (synchronised wall time), ``method`` (see module doc),
    ``mode`` ("whole" or "layerwise"), devices, and per-layer seconds for layer-wise copies."""

    nbytes: int
    seconds: float
    method: str
    mode: str
    src: str
    dst: str
    layer_seconds: list[float] = field(default_factory=list)

    @property
    def bytes_per_s(self) -> float:
        return self.nbytes / self.seconds if self.seconds > 0 else float("inf")


def _indexed(device: torch.device) -> torch.device:
    """``device`` with its index: "cuda" means the current GPU, so that "cuda" and "cuda:0" compare equal there (a
    copy to "cuda" on a one-GPU machine went through pinned host memory: "cuda" != "cuda:0", and no GPU is its own
    peer)."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _method(src: torch.device, dst: torch.device, via_host: bool) -> str:
    if src.type == "cuda" and dst.type == "cuda":
        if via_host:
            return "via-pinned-host"
        if src == dst:
            return "clone"
        return "gpu-to-gpu" if torch.cuda.can_device_access_peer(src.index or 0, dst.index or 0) else "via-pinned-host"
    if src == dst:
        return "clone"
    if src.type == "cuda" and dst.type == "cpu":
        return "gpu-to-host"
    if src.type == "cpu" and dst.type == "cuda":
        return "host-to-gpu"
    return "to"  # mps and other pairs: a plain .to()


def _copy(t: torch.Tensor, dst: torch.device, method: str) -> torch.Tensor:
    if method == "clone":
        return t.clone()
    if method == "gpu-to-gpu" or method == "to":
        return t.to(dst)
    if method == "gpu-to-host":
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        return host.copy_(t)
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    host.copy_(t)  # cpu -> pinned, or gpu -> pinned (via-pinned-host)
    return host.to(dst, non_blocking=True)


def copy_cache(cache: KVCache, device: str | torch.device | None = None, mode: str = "whole",
               via_host: bool = False, on_layer: Callable[[int, float], None] | None = None
               ) -> tuple[KVCache, TransferStats]:
    """Copy ``cache`` to ``device`` (None = its own device) and measure it.

    Args:
        mode: "whole" (copy everything, synchronise once) or "layerwise" (copy, synchronise and time each layer;
            ``on_layer(layer, seconds)`` is called after each).
        via_host: force GPU -> pinned host -> GPU even when a peer copy would work (emulates a network hop).

    Returns:
        (the received cache, :class:`TransferStats`). The received tensors never share storage with ``cache``.

    Raises:
        ValueError: unknown mode; a device that is unknown, not here, or not one splitlab runs on.
        TypeError: ``cache`` is not a KVCache; ``on_layer`` is not callable.
    """
    if not isinstance(cache, KVCache):
        raise TypeError(f"copy_cache() takes a splitlab.KVCache, got {type(cache).__name__}")
    if mode not in ("whole", "layerwise"):
        raise ValueError(f"mode must be 'whole' or 'layerwise', got {mode!r}")
    if on_layer is not None and not callable(on_layer):
        raise TypeError(f"on_layer must be a function on_layer(layer, seconds) or None, got {type(on_layer).__name__}")
    src = _indexed(cache.device)
    dst = _indexed(pick_device(device)) if device is not None else src
    method = _method(src, dst, via_host)
    timer_device = src if (src == dst and method == "clone") else "cpu"
    keys, values, layer_s = [], [], []

    def sync() -> None:
        synchronize(src)
        synchronize(dst)

    sync()
    mask = cache.attention_mask.to(dst, copy=True)
    groups = [range(cache.num_layers)] if mode == "whole" else [[i] for i in range(cache.num_layers)]
    for group in groups:
        with Timer(timer_device) as t:
            for i in group:
                keys.append(_copy(cache.keys[i], dst, method))
                values.append(_copy(cache.values[i], dst, method))
            sync()
        layer_s.append(t.seconds)
        if on_layer is not None and mode == "layerwise":
            on_layer(group[0], t.seconds)
    received = KVCache(keys, values, mask, cache.model_id, cache.windows)
    stats = TransferStats(cache.nbytes, float(sum(layer_s)), method, mode, str(src), str(dst),
                          layer_s if mode == "layerwise" else [])
    return received, stats


def receive(packet: Packet, lm, mode: str = "whole", via_host: bool = False) -> tuple[KVCache, TransferStats]:
    """Check ``packet.header`` against the receiving model ``lm`` (raises :class:`CacheMismatchError` first),
    then copy the cache onto ``lm.device``. Returns the received cache and the copy's stats."""
    check(packet.header, lm, packet.cache)
    return copy_cache(packet.cache, lm.device, mode=mode, via_host=via_host)
