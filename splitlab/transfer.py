"""Moving a KV cache from the worker that prefilled it to the worker that will decode it (in one process).

Every transfer carries a :class:`TransferHeader` (model identity, dtype, layers, KV heads, head_dim, sequence
lengths, and the first token(s) the prefill side chose). The receiver calls :func:`check` before touching the
tensors, so a cache from another model, dtype or shape fails with a :class:`CacheMismatchError` that names every
mismatching field, before any decode step runs.

Copy paths (``copy_cache``), chosen from the two devices:

| from -> to                 | method           | how                                                           |
|----------------------------|------------------|---------------------------------------------------------------|
| same device                | ``clone``        | ``tensor.clone()`` (what an emulated split on one device does) |
| GPU a -> GPU b (peer)      | ``gpu-to-gpu``   | ``tensor.to(b)`` (NVLink / PCIe peer copy)                     |
| GPU -> GPU via the host    | ``via-pinned-host`` | GPU -> pinned CPU buffer -> GPU (the path of a NIC without GPUDirect) |
| GPU -> CPU / CPU -> GPU    | ``gpu-to-host`` / ``host-to-gpu`` | through a pinned (page-locked) host buffer        |

``mode="whole"`` copies all layers then synchronises once; ``mode="layerwise"`` copies and synchronises layer by
layer (timing each), the granularity at which DistServe/Splitwise-style systems stream KV while the next
layer is still computing. Times come from :class:`splitlab.device.Timer` after synchronising both devices.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from .device import Timer, synchronize
from .kv_cache import CacheMismatchError, KVCache

__all__ = ["TransferHeader", "TransferStats", "Packet", "make_header", "check", "pack", "receive", "copy_cache"]


@dataclass(frozen=True)
class TransferHeader:
    """What the receiver must know before it accepts a cache. ``seq_len`` is the padded length held per row,
    ``lengths`` the real tokens per row, ``first_tokens`` the tokens the prefill side sampled (one per row)."""

    model_id: str
    dtype: str
    layers: int
    kv_heads: int
    head_dim: int
    batch: int
    seq_len: int
    lengths: tuple[int, ...]
    first_tokens: tuple[int, ...] = ()
    request_ids: tuple[int, ...] = ()

    @property
    def nbytes(self) -> int:
        """Bytes of keys and values the header announces (padding included).

        Raises:
            ValueError: ``dtype`` is not a torch dtype name.
        """
        dtype = getattr(torch, self.dtype, None) if isinstance(self.dtype, str) else None
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"header dtype {self.dtype!r} is not a torch dtype")
        return 2 * self.layers * self.batch * self.kv_heads * self.seq_len * self.head_dim * dtype.itemsize

    def to_bytes(self) -> bytes:
        """JSON encoding (to send ahead of the tensors over torch.distributed or a socket)."""
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "TransferHeader":
        d = json.loads(bytes(data).decode())
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


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


@dataclass
class Packet:
    """A header and the cache it describes, as handed from the prefill side to the decode side."""

    header: TransferHeader
    cache: KVCache


def make_header(cache: KVCache, first_tokens=None, request_ids=None) -> TransferHeader:
    """The header describing ``cache`` (``first_tokens``/``request_ids``: one per row, optional)."""
    _, _, batch, kv_heads, seq, head_dim = cache.shape
    return TransferHeader(cache.model_id, str(cache.dtype).replace("torch.", ""), cache.num_layers, kv_heads,
                          head_dim, batch, seq, tuple(int(x) for x in cache.lengths.tolist()),
                          tuple(int(t) for t in (first_tokens if first_tokens is not None else ())),
                          tuple(int(i) for i in (request_ids if request_ids is not None else ())))


def pack(cache: KVCache, first_tokens=None, request_ids=None) -> Packet:
    """Wrap ``cache`` with its header for sending."""
    return Packet(make_header(cache, first_tokens, request_ids), cache)


def check(header: TransferHeader, lm, cache: KVCache | None = None) -> None:
    """Raise :class:`CacheMismatchError` unless the receiving model ``lm`` (a :class:`splitlab.LoadedModel`) can
    decode the cache ``header`` announces, and, if ``cache`` is given, the tensors really have that shape.

    The header must also agree with itself: one length per row, each in ``1..seq_len``, one first token (in the
    receiver's vocabulary) and one request id per row when they are given.
    The message lists every mismatching field as ``field: sent X, receiver expects Y``.
    """
    g = lm.geometry
    want = dict(model_id=lm.model_id, dtype=str(lm.dtype).replace("torch.", ""), layers=g.layers,
                kv_heads=g.kv_heads, head_dim=g.head_dim)
    problems = [f"{k}: sent {getattr(header, k)!r}, receiver expects {v!r}" for k, v in want.items()
                if getattr(header, k) != v]
    if cache is not None:
        got = make_header(cache)
        problems += [f"{k}: header says {getattr(header, k)!r}, tensors have {getattr(got, k)!r}"
                     for k in ("model_id", "dtype", "layers", "kv_heads", "head_dim", "batch", "seq_len", "lengths")
                     if getattr(header, k) != getattr(got, k)]
    if header.batch < 1 or header.seq_len < 1:
        problems.append(f"batch {header.batch} x seq_len {header.seq_len}: a cache holds at least one token")
    if len(header.lengths) != header.batch:
        problems.append(f"lengths: {len(header.lengths)} for a batch of {header.batch}")
    if any(not 1 <= n <= header.seq_len for n in header.lengths):
        problems.append(f"lengths: {list(header.lengths)}, each row holds 1..seq_len ({header.seq_len}) tokens")
    if header.first_tokens and len(header.first_tokens) != header.batch:
        problems.append(f"first_tokens: {len(header.first_tokens)} for a batch of {header.batch}")
    if header.first_tokens:
        vocab = lm.vocab_size
        bad = [t for t in header.first_tokens if not 0 <= t < vocab]
        if bad:
            problems.append(f"first_tokens: {bad} outside the receiver's vocabulary 0..{vocab - 1}")
    if header.request_ids and len(header.request_ids) != header.batch:
        problems.append(f"request_ids: {len(header.request_ids)} for a batch of {header.batch}")
    if max(header.lengths, default=0) + 1 > lm.max_context:
        problems.append(f"lengths: {max(header.lengths)} tokens leave no room in a context of {lm.max_context}")
    if problems:
        raise CacheMismatchError("KV cache transfer rejected before decoding:\n  " + "\n  ".join(problems))


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
        ValueError: unknown mode.
    """
    if mode not in ("whole", "layerwise"):
        raise ValueError(f"mode must be 'whole' or 'layerwise', got {mode!r}")
    src = cache.device
    dst = torch.device(device) if device is not None else src
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
    received = KVCache(keys, values, mask, cache.model_id)
    stats = TransferStats(cache.nbytes, float(sum(layer_s)), method, mode, str(src), str(dst),
                          layer_s if mode == "layerwise" else [])
    return received, stats


def receive(packet: Packet, lm, mode: str = "whole", via_host: bool = False) -> tuple[KVCache, TransferStats]:
    """Check ``packet.header`` against the receiving model ``lm`` (raises :class:`CacheMismatchError` first),
    then copy the cache onto ``lm.device``. Returns the received cache and the copy's stats."""
    check(packet.header, lm, packet.cache)
    return copy_cache(packet.cache, lm.device, mode=mode, via_host=via_host)
