"""The wire protocol that moves a :class:`~splitlab.KVCache` between processes with torch.distributed.

A transfer from the prefill process to the decode process is three kinds of point-to-point messages:

1. **Header** (CPU, gloo): one 4 KiB uint8 message: a 6-element int64 preamble ``[MAGIC, VERSION, mode, segments,
   json_bytes, 0]`` then the :class:`splitlab.transfer.header.TransferHeader` as UTF-8 JSON (model identity, dtype,
   layers and each layer's sizes, batch, sequence length, real lengths, first tokens, request ids), zero-padded; a
   longer JSON (large batches) continues in a second message. One message, not two: each message costs the
   receiver a wake-up before the next can flow. The receiver checks the header against its own model with
   :func:`splitlab.transfer.header.check` *before* it uses a single byte of KV.
2. **Payload**: the cache laid out as ONE flat buffer of ``header.nbytes`` bytes, in the order
   ``K_0, V_0, K_1, V_1, ...``, each ``[batch, kv_heads_i, n_i, k_dim_i]`` / ``[..., v_dim_i]`` contiguous, where
   ``n_i`` is ``seq_len`` for a full-attention layer and ``min(seq_len, W - 1)`` for a sliding-window layer of
   window W (``header.layer_dims``): layers may differ in size. It travels in ``segments`` messages whose sizes
   both sides compute from the header (``header.segment_sizes``): 1 (a packed flat buffer), ``2 x layers`` (each K
   or V tensor sent in place, no packing copy), or ``layers`` (layer-wise streaming: layer i leaves while prefill
   still computes layer i+1). The receiver always lands it in one preallocated flat buffer and hands out
   zero-copy views.
3. **Trailer** (layer-wise only): ``[batch]`` int64 first tokens, which exist only after the last layer.

The attention mask is not sent: rows are left-padded, so ``lengths`` in the header rebuilds it.
Every payload tensor is contiguous uint8 (``send`` needs contiguous memory; uint8 works on every backend).
With ``init_process_group("cpu:gloo,cuda:nccl")`` CUDA payloads go over NCCL and headers over gloo; with plain
gloo a GPU cache is staged through host memory.

This module is the format (header, layout, plans, raw baseline, acknowledgements); :mod:`splitlab.transfer.link`
moves caches with it (``send_cache``, ``recv_cache``, ``prefill_streaming``, ``prefill_flat``).

Why bother streaming: DistServe (Zhong et al., OSDI'24) argues the hand-off is affordable because KV of
layer i can move while later layers compute, and because bytes per token (2 x layers x kv_heads x head_dim x
element size) are small next to a modern link; :func:`prefill_streaming` measures how much is hidden here.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ..common import dtypes
from ..kvcache import KVCache
from ..phases.inputs import as_token_batch
from .group import Timed as _Timed
from .header import TransferHeader, make_header, model_layer_dims

__all__ = ["WireStats", "ProtocolError", "plan_of", "cache_plan", "stream_header", "send_header", "recv_header",
           "pack_flat", "unpack_flat", "send_raw", "recv_raw", "send_ack", "recv_ack", "MAGIC", "VERSION",
           "HEADER_BYTES"]

MAGIC, VERSION = 0x534C4B56, 2  # "SLKV"; version 2: per-layer sizes (layer_dims in the header)
MODES = {"whole": 1, "layerwise": 2}
HEADER_BYTES, _PRE = 4096, 48  # one header message; the preamble is 6 little-endian int64
_CPU = torch.device("cpu")
TAG_HEADER, TAG_PAYLOAD, TAG_TRAILER, TAG_ACK, TAG_RAW = 0x5100, 0x5101, 0x5102, 0x5103, 0x5104


class ProtocolError(RuntimeError):
    """Bytes that are not a splitlab KV transfer (wrong magic or version, an impossible header): the stream
    cannot be resynchronised, so the connection should be dropped."""


@dataclass
class WireStats:
    """One side of one transfer. ``seconds``: sender = header start -> every send completed; receiver = header
    arrived -> cache usable. ``layer_s``: seconds from the start at which each layer was handed to the backend
    (sender) or had arrived (receiver), layer-wise only. ``compute_s``: the prefill forward, streaming only;
    ``compute_end``: ``time.perf_counter()`` when that forward ended (to time what is left after it)."""

    nbytes: int
    seconds: float
    mode: str
    segments: int
    header_bytes: int
    layer_s: list[float] = field(default_factory=list)
    compute_s: float = float("nan")
    compute_end: float = float("nan")

    @property
    def gbps(self) -> float:
        """Payload gigabytes (1e9 B) per second."""
        return self.nbytes / self.seconds / 1e9 if self.seconds > 0 else float("inf")


def _wire_device(device: torch.device, group=None) -> torch.device:
    """Where payload buffers must live for the backend: the GPU under NCCL, else host memory."""
    device = torch.device(device)
    if device.type == "cuda" and "nccl" in str(dist.get_backend(group)):
        return device
    return _CPU


def _isend(t: torch.Tensor, peer: int, group, tag: int) -> _Timed:
    """``dist.isend`` straight on the ProcessGroup: the same backend call without the Python wrapper's checks and
    logging, which cost tens of microseconds per message (every transfer here is several messages)."""
    pg = group if group is not None else dist.group.WORLD
    return _Timed(pg.send([t], peer if group is None else dist.get_group_rank(group, peer), tag))


def _irecv(t: torch.Tensor, peer: int, group, tag: int) -> _Timed:
    pg = group if group is not None else dist.group.WORLD
    return _Timed(pg.recv([t], peer if group is None else dist.get_group_rank(group, peer), tag))


# --- header ------------------------------------------------------------------------------------------------

def send_header(header: TransferHeader, dst: int, mode: str, segments: int, group=None, works: list | None = None
                ) -> int:
    """Send the header to rank ``dst`` as one ``HEADER_BYTES`` uint8 message (preamble + JSON + zero padding; a
    JSON longer than fits follows in a second message). Returns the bytes sent.

    With a ``works`` list the sends are asynchronous: their handles (and buffers) are appended there and the
    caller waits for them later, so the payload can follow without waiting for the receiver to read the header.
    """
    body = header.to_bytes()  # bytes built in Python, one tensor made of them: a handful of microseconds
    first = body[:HEADER_BYTES - _PRE]
    blob = struct.pack("<6q", MAGIC, VERSION, MODES[mode], segments, len(body), 0) + first
    msgs = [torch.frombuffer(bytearray(blob.ljust(HEADER_BYTES, b"\0")), dtype=torch.uint8)]
    if len(body) > len(first):  # a large batch: the rest of the JSON
        msgs.append(torch.frombuffer(bytearray(body[len(first):]), dtype=torch.uint8))
    for m in msgs:
        if works is None:
            _isend(m, dst, group, TAG_HEADER).wait()
        else:
            works.append((_isend(m, dst, group, TAG_HEADER), m))
    return HEADER_BYTES + max(0, len(body) - len(first))


def _parse_header(msg: torch.Tensor, src: int, group=None) -> tuple[TransferHeader, str, int, int]:
    raw = msg.numpy().tobytes()
    magic, version, mode, segments, n, _ = struct.unpack_from("<6q", raw)
    if magic != MAGIC or version != VERSION or mode not in MODES.values() or not 0 < n < 1 << 24:
        raise ProtocolError(f"rank {src} sent no splitlab KV header (magic {magic:#x}, version {version}, mode {mode})")
    body = raw[_PRE:_PRE + n]
    if n > HEADER_BYTES - _PRE:
        rest = torch.empty(n - (HEADER_BYTES - _PRE), dtype=torch.uint8)
        _irecv(rest, src, group, TAG_HEADER).wait()
        body += rest.numpy().tobytes()
    try:
        header = TransferHeader.from_bytes(body)
    except (ValueError, TypeError) as err:
        raise ProtocolError(f"unreadable KV header from rank {src}: {err}") from None
    if not header.possible(segments):
        raise ProtocolError(f"impossible KV header from rank {src}: {header}")
    return header, {v: k for k, v in MODES.items()}[mode], segments, HEADER_BYTES + max(0, n - (HEADER_BYTES - _PRE))


def recv_header(src: int, group=None) -> tuple[TransferHeader, str, int, int]:
    """Receive a header from rank ``src``: ``(header, mode, segments, bytes)``.

    Raises:
        ProtocolError: wrong magic/version/mode, or a header that describes no valid cache.
    """
    msg = torch.empty(HEADER_BYTES, dtype=torch.uint8)
    _irecv(msg, src, group, TAG_HEADER).wait()
    return _parse_header(msg, src, group)


def plan_of(header: TransferHeader, mode: str = "whole", segments: int | None = None) -> dict:
    """What a receiver must know to post its receive buffers before the header arrives: ``{"nbytes",
    "segments", "mode", "batch"}``, plus ``"sizes"`` (bytes of each segment) where segments differ in size, as the
    layers of a sliding-window or MLA model do (JSON-ready; send it on the control plane with the announcement).
    Defaults: whole = one message per K/V tensor, layerwise = one per layer."""
    if segments is None:
        segments = 2 * header.layers if mode == "whole" else header.layers
    plan = dict(nbytes=header.nbytes, segments=segments, mode=mode, batch=header.batch)
    sizes = header.segment_sizes(segments)
    return plan if len(set(sizes)) == 1 else dict(plan, sizes=sizes)


def cache_plan(cache: KVCache, mode: str = "whole", segments: str = "tensors") -> dict:
    """:func:`plan_of` the transfer :func:`send_cache` will make of ``cache`` with these arguments."""
    header = make_header(cache)
    if mode == "layerwise":
        return plan_of(header, mode)
    tensors = [t for kv in zip(cache.keys, cache.values) for t in kv]
    each = segments == "tensors" and _flat_backed(tensors) is None and all(t.is_contiguous() for t in tensors)
    return plan_of(header, mode, len(tensors) if each else 1)  # the choice _payload makes


def stream_header(lm, prompts, request_ids=None) -> TransferHeader:
    """The header :func:`prefill_streaming` will send for ``prompts`` (left-padded batch), before any compute."""
    batch = as_token_batch(lm, prompts)
    dims, lengths = model_layer_dims(lm), tuple(len(p) for p in batch)
    return TransferHeader(lm.model_id, dtypes.name_of(lm.dtype), len(dims), dims[0][0], dims[0][1], len(batch),
                          max(lengths), lengths, (), tuple(int(r) for r in (request_ids or ())), dims)


# --- layout ------------------------------------------------------------------------------------------------

def _mask(lengths, seq_len: int, device) -> torch.Tensor:
    """``[batch, seq]`` left-padding mask: row b has ``lengths[b]`` ones at its right end."""
    if all(n == seq_len for n in lengths):
        return torch.ones(len(lengths), seq_len, dtype=torch.long, device=device)
    pos = torch.arange(seq_len, device=device)
    return (pos[None, :] >= seq_len - torch.tensor(lengths, device=device)[:, None]).long()


def _check_layout(cache: KVCache) -> None:
    cache.check()
    mask = cache.attention_mask
    if not bool(mask.all()) and not torch.equal(mask.cpu(), _mask(cache.lengths.tolist(), cache.seq_len, "cpu")):
        raise ValueError("the wire layout needs left-padded rows (the mask is rebuilt from lengths)")


def pack_flat(cache: KVCache, out: torch.Tensor | None = None) -> torch.Tensor:
    """The cache as one flat uint8 buffer in wire order (``K_0, V_0, K_1, ...``): copied into ``out`` (or a new
    buffer) with one ``copy_`` per tensor, no intermediate. Raises ValueError for rows that are not left-padded
    and CacheMismatchError for layers whose lengths do not fit the mask."""
    _check_layout(cache)
    out = torch.empty(cache.nbytes, dtype=torch.uint8, device=cache.device) if out is None else out
    off = 0
    for k, v in zip(cache.keys, cache.values):
        for t in (k, v):
            n = t.numel() * t.element_size()
            out[off:off + n].view(t.dtype).view(t.shape).copy_(t)
            off += n
    return out


def unpack_flat(flat: torch.Tensor, header: TransferHeader) -> KVCache:
    """Zero-copy views of ``flat`` (uint8, ``header.nbytes``) as a :class:`KVCache` of ``header.model_id``."""
    dtype = dtypes.torch_dtype(header.dtype, dtypes.WIRE_DTYPES)
    mask = _mask(header.lengths, header.seq_len, flat.device)
    shapes = header.tensor_shapes()
    if all(s == shapes[0] for s in shapes):  # one shape for every tensor: K_0, V_0, K_1, ... in three view ops
        views = flat.view(dtype).view((len(shapes), *shapes[0])).unbind(0)
    else:
        views, off = [], 0
        for shape, n in zip(shapes, header.tensor_nbytes()):
            views.append(flat[off:off + n].view(dtype).view(shape))
            off += n
    return KVCache(list(views[0::2]), list(views[1::2]), mask, header.model_id, header.windows)


def _flat_backed(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """The one uint8 buffer these tensors already are, back to back in wire order (a cache that came off the
    wire, or one prefilled into a wire buffer), else None."""
    first = tensors[0]
    if not all(t.is_contiguous() and t.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
               for t in tensors):
        return None
    off = first.data_ptr()
    for t in tensors:  # back to back: each starts where the one before ends
        if t.data_ptr() != off:
            return None
        off += t.numel() * t.element_size()
    storage = torch.empty(0, dtype=torch.uint8, device=first.device).set_(first.untyped_storage())
    start = first.data_ptr() - first.untyped_storage().data_ptr()
    return storage[start:start + off - first.data_ptr()]


def _payload(cache: KVCache, wire: torch.device, segments: str) -> list[torch.Tensor]:
    """Payload messages: one message when the cache already is one flat buffer; else the K/V tensors themselves
    when contiguous (no copy); else one packed buffer."""
    tensors = [t for kv in zip(cache.keys, cache.values) for t in kv]
    flat = _flat_backed(tensors)
    if flat is not None:
        return [flat.to(wire)]
    if segments == "tensors" and all(t.is_contiguous() for t in tensors):
        return [t.to(wire).reshape(-1).view(torch.uint8) for t in tensors]
    return [pack_flat(cache).to(wire)]


# --- baselines and acknowledgements ----------------------------------------------------------------------------

def send_raw(buf: torch.Tensor, dst: int, group=None) -> None:
    """The baseline: one contiguous tensor, no header, no layout."""
    _isend(buf, dst, group, TAG_RAW).wait()


def recv_raw(buf: torch.Tensor, src: int, group=None, on_posted=None) -> None:
    """Receive :func:`send_raw` into ``buf``; ``on_posted()`` runs once the receive is posted."""
    work = _irecv(buf, src, group, TAG_RAW)
    if on_posted is not None:
        on_posted()
    work.wait()


def send_ack(dst: int, ok: bool = True, group=None) -> None:
    """One byte: 1 = "received and usable", 0 = "rejected" (so the sender can time a transfer end to end, and
    is never left waiting when the receiver refuses a cache)."""
    _isend(torch.tensor([int(ok)], dtype=torch.uint8), dst, group, TAG_ACK).wait()


def recv_ack(src: int, group=None) -> bool:
    """Wait for :func:`send_ack` from ``src``; True if the receiver accepted."""
    ack = torch.empty(1, dtype=torch.uint8)
    _irecv(ack, src, group, TAG_ACK).wait()
    return bool(ack.item())
