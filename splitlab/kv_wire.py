"""The wire protocol that moves a :class:`~splitlab.KVCache` between processes with torch.distributed.

A transfer from the prefill process to the decode process is three kinds of point-to-point messages:

1. **Header** (CPU, gloo): one 4 KiB uint8 message: a 6-element int64 preamble ``[MAGIC, VERSION, mode, segments,
   json_bytes, 0]`` then the :class:`splitlab.transfer.TransferHeader` as UTF-8 JSON (model identity, dtype,
   layers, KV heads, head_dim, batch, sequence length, real lengths, first tokens, request ids), zero-padded; a
   longer JSON (large batches) continues in a second message. One message, not two: each message costs the
   receiver a wake-up before the next can flow. The receiver checks the header against its own model with
   :func:`splitlab.transfer.check` *before* it uses a single byte of KV.
2. **Payload**: the cache laid out as ONE flat buffer of ``header.nbytes`` bytes, in the order
   ``K_0, V_0, K_1, V_1, ...``, each ``[batch, kv_heads, seq, head_dim]`` contiguous. It travels in ``segments``
   equal messages: 1 (a packed flat buffer), ``2 x layers`` (each K or V tensor sent in place, no packing copy),
   or ``layers`` (layer-wise streaming: layer i leaves while prefill still computes layer i+1). The receiver
   always lands it in one preallocated flat buffer and hands out zero-copy views.
3. **Trailer** (layer-wise only): ``[batch]`` int64 first tokens, which exist only after the last layer.

The attention mask is not sent: rows are left-padded, so ``lengths`` in the header rebuilds it.
Every payload tensor is contiguous uint8 (``send`` needs contiguous memory; uint8 works on every backend).
With ``init_process_group("cpu:gloo,cuda:nccl")`` CUDA payloads go over NCCL and headers over gloo; with plain
gloo a GPU cache is staged through host memory.

Why bother streaming: DistServe (Zhong et al., OSDI'24) argues the hand-off is affordable because KV of
layer i can move while later layers compute, and because bytes per token (2 x layers x kv_heads x head_dim x
element size) are small next to a modern link; :func:`prefill_streaming` measures how much is hidden here.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

import torch
import torch.distributed as dist

from .device import Timer, synchronize
from .engine import PrefillOutput, as_token_batch, _accepts_logits_to_keep
from .kv_cache import CacheMismatchError, KVCache, cache_kwarg, output_cache
from .transfer import Packet, TransferHeader, check, make_header

__all__ = ["WireStats", "ProtocolError", "send_cache", "recv_cache", "prefill_streaming", "plan_of", "cache_plan",
           "stream_header", "send_header", "recv_header", "pack_flat", "unpack_flat", "send_raw", "recv_raw",
           "send_ack", "recv_ack", "MAGIC", "VERSION", "HEADER_BYTES"]

MAGIC, VERSION = 0x534C4B56, 1  # "SLKV"
MODES = {"whole": 1, "layerwise": 2}
HEADER_BYTES, _PRE = 4096, 48  # one header message; the preamble is 6 int64
TAG_HEADER, TAG_PAYLOAD, TAG_TRAILER, TAG_ACK, TAG_RAW = 0x5100, 0x5101, 0x5102, 0x5103, 0x5104
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


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
    return torch.device("cpu")


def _isend(t: torch.Tensor, peer: int, group, tag: int):
    """``dist.isend`` straight on the ProcessGroup: the same backend call without the Python wrapper's checks and
    logging, which cost tens of microseconds per message (every transfer here is several messages)."""
    pg = group if group is not None else dist.group.WORLD
    return pg.send([t], peer if group is None else dist.get_group_rank(group, peer), tag)


def _irecv(t: torch.Tensor, peer: int, group, tag: int):
    pg = group if group is not None else dist.group.WORLD
    return pg.recv([t], peer if group is None else dist.get_group_rank(group, peer), tag)


# --- header ------------------------------------------------------------------------------------------------

def send_header(header: TransferHeader, dst: int, mode: str, segments: int, group=None, works: list | None = None
                ) -> int:
    """Send the header to rank ``dst`` as one ``HEADER_BYTES`` uint8 message (preamble + JSON + zero padding; a
    JSON longer than fits follows in a second message). Returns the bytes sent.

    With a ``works`` list the sends are asynchronous: their handles (and buffers) are appended there and the
    caller waits for them later, so the payload can follow without waiting for the receiver to read the header.
    """
    body = header.to_bytes()
    pre = torch.tensor([MAGIC, VERSION, MODES[mode], segments, len(body), 0], dtype=torch.int64)
    msg = torch.zeros(HEADER_BYTES, dtype=torch.uint8)
    msg[:_PRE].copy_(pre.view(torch.uint8))
    first = body[:HEADER_BYTES - _PRE]
    msg[_PRE:_PRE + len(first)].copy_(torch.frombuffer(bytearray(first), dtype=torch.uint8))
    msgs = [msg]
    if len(body) > len(first):  # a large batch: the rest of the JSON
        msgs.append(torch.frombuffer(bytearray(body[len(first):]), dtype=torch.uint8))
    for m in msgs:
        if works is None:
            _isend(m, dst, group, TAG_HEADER).wait()
        else:
            works.append((_isend(m, dst, group, TAG_HEADER), m))
    return HEADER_BYTES + max(0, len(body) - len(first))


def _parse_header(msg: torch.Tensor, src: int, group=None) -> tuple[TransferHeader, str, int, int]:
    magic, version, mode, segments, n, _ = msg[:_PRE].view(torch.int64).tolist()
    if magic != MAGIC or version != VERSION or mode not in MODES.values() or not 0 < n < 1 << 24:
        raise ProtocolError(f"rank {src} sent no splitlab KV header (magic {magic:#x}, version {version}, mode {mode})")
    body = msg[_PRE:_PRE + n].numpy().tobytes()
    if n > HEADER_BYTES - _PRE:
        rest = torch.empty(n - (HEADER_BYTES - _PRE), dtype=torch.uint8)
        _irecv(rest, src, group, TAG_HEADER).wait()
        body += rest.numpy().tobytes()
    try:
        header = TransferHeader.from_bytes(body)
    except (ValueError, TypeError) as err:
        raise ProtocolError(f"unreadable KV header from rank {src}: {err}") from None
    layers = header.layers
    if header.dtype not in _DTYPES or min(layers, header.batch, header.kv_heads, header.head_dim) < 1 or \
            header.seq_len < 1 or len(header.lengths) != header.batch or segments not in (1, layers, 2 * layers):
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
    "segments", "mode", "batch"}`` (JSON-ready; send it on the control plane with the announcement).
    Defaults: whole = one message per K/V tensor, layerwise = one per layer."""
    if segments is None:
        segments = 2 * header.layers if mode == "whole" else header.layers
    return dict(nbytes=header.nbytes, segments=segments, mode=mode, batch=header.batch)


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
    g, lengths = lm.geometry, tuple(len(p) for p in batch)
    return TransferHeader(lm.model_id, str(lm.dtype).replace("torch.", ""), g.layers, g.kv_heads, g.head_dim,
                          len(batch), max(lengths), lengths, (), tuple(int(r) for r in (request_ids or ())))


# --- layout ------------------------------------------------------------------------------------------------

def _mask(lengths, seq_len: int, device) -> torch.Tensor:
    """``[batch, seq]`` left-padding mask: row b has ``lengths[b]`` ones at its right end."""
    pos = torch.arange(seq_len, device=device)
    return (pos[None, :] >= seq_len - torch.tensor(lengths, device=device)[:, None]).long()


def _check_layout(cache: KVCache) -> None:
    shapes = {tuple(t.shape) for t in (*cache.keys, *cache.values)}
    if len(shapes) != 1:
        raise ValueError(f"the wire layout needs one shape for every K and V tensor, got {sorted(shapes)}")
    if not torch.equal(cache.attention_mask.cpu(), _mask(cache.lengths.tolist(), cache.seq_len, "cpu")):
        raise ValueError("the wire layout needs left-padded rows (the mask is rebuilt from lengths)")


def pack_flat(cache: KVCache, out: torch.Tensor | None = None) -> torch.Tensor:
    """The cache as one flat uint8 buffer in wire order (``K_0, V_0, K_1, ...``): copied into ``out`` (or a new
    buffer) with one ``copy_`` per tensor, no intermediate. Raises ValueError for shapes that differ."""
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
    dtype = _DTYPES[header.dtype]
    shape = (header.batch, header.kv_heads, header.seq_len, header.head_dim)
    n = flat.numel() // (2 * header.layers)
    views = [flat[i * n:(i + 1) * n].view(dtype).view(shape) for i in range(2 * header.layers)]
    return KVCache(views[0::2], views[1::2], _mask(header.lengths, header.seq_len, flat.device), header.model_id)


def _flat_backed(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """The one uint8 buffer these tensors already are, back to back in wire order (a cache that came off the
    wire, or one prefilled into a wire buffer), else None."""
    first = tensors[0]
    if not all(t.is_contiguous() and t.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
               for t in tensors):
        return None
    nbytes = first.numel() * first.element_size()
    if any(t.data_ptr() != first.data_ptr() + i * nbytes for i, t in enumerate(tensors)):
        return None
    storage = torch.empty(0, dtype=torch.uint8, device=first.device).set_(first.untyped_storage())
    start = first.data_ptr() - first.untyped_storage().data_ptr()
    return storage[start:start + nbytes * len(tensors)]


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


# --- whole-request transfer ---------------------------------------------------------------------------------

def send_cache(cache: KVCache, dst: int, first_tokens=None, request_ids=None, mode: str = "whole",
               segments: str = "tensors", group=None) -> WireStats:
    """Send ``cache`` (complete, after prefill) to rank ``dst``: header, then the payload.

    Args:
        first_tokens, request_ids: one per row, carried in the header (layer-wise: in the trailer).
        mode: "whole" (every layer at once) or "layerwise" (one message per layer, each packed just before it
            leaves, then the trailer: the granularity of streaming, without a forward to overlap with).
        segments: for "whole": "tensors" (default: each contiguous K/V tensor is sent in place, 2 x layers
            messages into the receiver's one flat buffer) or "flat" (pack into one buffer first: one message,
            one extra copy of every byte).

    Raises:
        ValueError: a cache that is not left-padded, whose K/V shapes differ, or a bad mode; RuntimeError from
        the backend when the peer is gone (gloo: "Connection closed by peer") or the group's timeout passes.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be 'whole' or 'layerwise', got {mode!r}")
    _check_layout(cache)
    header = make_header(cache, first_tokens if mode == "whole" else None, request_ids)
    wire = _wire_device(cache.device, group)
    t0 = time.perf_counter()
    works: list = []  # (handle, buffer): everything is asynchronous, so no step waits for the receiver's reply
    if mode == "whole":
        parts = _payload(cache, wire, segments)
        hbytes = send_header(header, dst, "whole", len(parts), group, works)
        works += [(_isend(p, dst, group, TAG_PAYLOAD), p) for p in parts]
    else:
        hbytes = send_header(header, dst, "layerwise", cache.num_layers, group, works)
        flat = torch.empty(header.nbytes, dtype=torch.uint8, device=wire)
        n = header.nbytes // cache.num_layers
        for i, (k, v) in enumerate(zip(cache.keys, cache.values)):
            seg = flat[i * n:(i + 1) * n]
            seg[:n // 2].view(k.dtype).view(k.shape).copy_(k)
            seg[n // 2:].view(v.dtype).view(v.shape).copy_(v)
            works.append((_isend(seg, dst, group, TAG_PAYLOAD), seg))
        firsts = torch.tensor(list(first_tokens) if first_tokens is not None else [-1] * cache.batch_size)
        works.append((_isend(firsts, dst, group, TAG_TRAILER), firsts))
    for w, _ in works:
        w.wait()
    segs = len(parts) if mode == "whole" else cache.num_layers
    return WireStats(header.nbytes, time.perf_counter() - t0, mode, segs, hbytes)


def recv_cache(src: int, lm=None, device=None, group=None, plan: dict | None = None) -> tuple[Packet, WireStats]:
    """Receive one cache from rank ``src`` (whole or layer-wise; the preamble says which).

    Args:
        lm: the receiving :class:`splitlab.LoadedModel`; its identity, dtype and shapes must match the header.
            None skips that check (a relay or an echo peer).
        device: where the cache should end up (default ``lm.device``, else CPU).
        plan: :func:`plan_of` the coming transfer, from the announcement on the control plane. With it the
            receiver allocates and posts every receive before the header arrives, so the payload flows right
            behind the header (as disaggregated servers do: the decode side allocates KV blocks, then the prefill
            side writes them). Without it the receiver must read the header before posting the payload
            receives: one more wake-up of the receiver per transfer, milliseconds on a busy machine. The plan
            must come from the sender (:func:`cache_plan`, :func:`plan_of`): gloo aborts the process when a
            message is larger than the buffer posted for it.

    Returns:
        ``(Packet(header with first tokens, cache), WireStats)``; the cache's tensors are views of one buffer.

    Raises:
        CacheMismatchError: the header is for another model, dtype or shape (every mismatching field is named).
            The payload is received and dropped first, so the connection stays usable; nothing is decoded.
        ProtocolError: not a splitlab header, or not the announced plan. RuntimeError: the peer died or the
            group's timeout passed.
    """
    device = torch.device(device) if device is not None else (lm.device if lm is not None else torch.device("cpu"))
    wire = _wire_device(device, group)

    def post(nbytes: int, segments: int, mode: str, batch: int):
        flat = torch.empty(nbytes, dtype=torch.uint8, device=wire)
        n = nbytes // segments
        works = [_irecv(flat[i * n:(i + 1) * n], src, group, TAG_PAYLOAD) for i in range(segments)]
        trailer = torch.empty(batch, dtype=torch.int64)
        if mode == "layerwise":
            works.append(_irecv(trailer, src, group, TAG_TRAILER))
        return flat, works, trailer

    if plan is not None:
        msg = torch.empty(HEADER_BYTES, dtype=torch.uint8)
        hw = _irecv(msg, src, group, TAG_HEADER)
        flat, works, trailer = post(plan["nbytes"], plan["segments"], plan["mode"], plan["batch"])
        hw.wait()
        header, mode, segments, hbytes = _parse_header(msg, src, group)
        if (header.nbytes, segments, mode, header.batch) != (plan["nbytes"], plan["segments"], plan["mode"],
                                                             plan["batch"]):
            raise ProtocolError(f"rank {src} announced {plan} but sent {header.nbytes} B in {segments} {mode} "
                                f"segment(s) for a batch of {header.batch}")
    else:
        header, mode, segments, hbytes = recv_header(src, group)
        flat, works, trailer = post(header.nbytes, segments, mode, header.batch)
    t0 = time.perf_counter()
    mismatch = None
    if lm is not None:
        try:
            check(header, lm)
        except CacheMismatchError as err:
            mismatch = err
    layer_s = []
    for w in works:
        w.wait()
        layer_s.append(time.perf_counter() - t0)
    if mode == "layerwise":
        firsts = tuple(trailer.tolist())
        header = replace(header, first_tokens=() if all(t < 0 for t in firsts) else firsts)  # -1: none were sent
    if mismatch is not None:
        raise mismatch
    cache = unpack_flat(flat, header)
    if cache.device != device:
        cache = cache.to(device)
    synchronize(device)
    stats = WireStats(header.nbytes, time.perf_counter() - t0, mode, segments, hbytes,
                      layer_s[:segments] if mode == "layerwise" else [])
    return Packet(header, cache), stats


# --- layer-wise streaming during prefill ---------------------------------------------------------------------

def prefill_streaming(lm, prompts, dst: int, request_ids=None, on_first: Callable[[list[int]], None] | None = None,
                      group=None) -> tuple[PrefillOutput, list[int], WireStats]:
    """Prefill ``prompts`` and stream their KV to rank ``dst`` layer by layer, while the forward runs.

    The header goes out before the forward (everything but the first tokens is known from the prompts). A
    wrapper on the cache's ``update`` copies layer i's K and V into its slice of the flat buffer and starts an
    asynchronous send as soon as attention of layer i has written them; layers i+1.. compute meanwhile. After
    the forward, ``on_first(first_tokens)`` is called (e.g. to stream the first token to the client), then the
    greedy first tokens follow as the trailer. Rows of different lengths are left-padded as in
    :func:`splitlab.prefill`.

    Returns:
        ``(PrefillOutput, first_tokens, WireStats)``: the prefill (cache identical to :func:`splitlab.prefill`'s),
        one greedy first token per row, and stats whose ``compute_s`` is the forward and ``seconds`` runs until
        every send completed (``seconds - compute_s``: the transfer left exposed after the forward).

    Raises:
        the errors of :func:`splitlab.engine.as_token_batch`; RuntimeError when the peer is gone.
    """
    from transformers import DynamicCache
    header = stream_header(lm, prompts, request_ids)
    batch, seq, lengths, g = as_token_batch(lm, prompts), header.seq_len, header.lengths, lm.geometry
    ids = torch.zeros(len(batch), seq, dtype=torch.long)
    for b, p in enumerate(batch):
        ids[b, seq - len(p):] = torch.tensor(p)
    mask = _mask(lengths, seq, "cpu").to(lm.device)
    flat = torch.empty(header.nbytes, dtype=torch.uint8, device=_wire_device(lm.device, group))
    n = header.nbytes // g.layers
    works, layer_s = [], []
    t0 = time.perf_counter()
    hbytes = send_header(header, dst, "layerwise", g.layers, group, works)
    cache = DynamicCache(config=lm.config)
    update = cache.update

    def streaming_update(key_states, value_states, layer_idx, *args, **kwargs):
        keys, values = update(key_states, value_states, layer_idx, *args, **kwargs)
        seg = flat[layer_idx * n:(layer_idx + 1) * n]
        seg[:n // 2].view(keys.dtype).view(keys.shape).copy_(keys)  # NCCL's stream waits for this copy
        seg[n // 2:].view(values.dtype).view(values.shape).copy_(values)
        works.append((_isend(seg, dst, group, TAG_PAYLOAD), seg))
        layer_s.append(time.perf_counter() - t0)
        return keys, values

    cache.update = streaming_update
    kwargs = dict(input_ids=ids.to(lm.device), use_cache=True, **{cache_kwarg(lm.model): cache})
    if min(lengths) < seq:  # as engine.forward_logits: mask and positions only when a row is padded
        kwargs.update(attention_mask=mask, position_ids=(mask.cumsum(dim=1) - 1).clamp(min=0))
    if _accepts_logits_to_keep(type(lm.model)):
        kwargs["logits_to_keep"] = 1
    with torch.inference_mode(), Timer(lm.device) as timer:
        out = lm.model(**kwargs)
        logits = out.logits[:, -1, :].float()
    compute_end = time.perf_counter()
    del cache.update  # back to the class method
    firsts = logits.argmax(-1).tolist()
    if len(layer_s) != g.layers:
        raise RuntimeError(f"streamed {len(layer_s)} layers of {g.layers}: this model does not update its cache "
                           "once per layer, so it cannot be streamed layer by layer")
    if on_first is not None:
        on_first(firsts)
    trailer = torch.tensor(firsts, dtype=torch.int64)
    works.append((_isend(trailer, dst, group, TAG_TRAILER), trailer))
    for w, _ in works:
        w.wait()
    seconds = time.perf_counter() - t0
    kv = KVCache.from_transformers(output_cache(out), mask, lm.model_id)
    stats = WireStats(header.nbytes, seconds, "layerwise", g.layers, hbytes, layer_s, timer.seconds, compute_end)
    return PrefillOutput(kv, logits, timer.seconds), firsts, stats


# --- baselines and acknowledgements ----------------------------------------------------------------------------

def send_raw(buf: torch.Tensor, dst: int, group=None) -> None:
    """The baseline: one contiguous tensor, no header, no layout."""
    _isend(buf, dst, group, TAG_RAW).wait()


def recv_raw(buf: torch.Tensor, src: int, group=None) -> None:
    _irecv(buf, src, group, TAG_RAW).wait()


def send_ack(dst: int, ok: bool = True, group=None) -> None:
    """One byte: 1 = "received and usable", 0 = "rejected" (so the sender can time a transfer end to end, and
    is never left waiting when the receiver refuses a cache)."""
    _isend(torch.tensor([int(ok)], dtype=torch.uint8), dst, group, TAG_ACK).wait()


def recv_ack(src: int, group=None) -> bool:
    """Wait for :func:`send_ack` from ``src``; True if the receiver accepted."""
    ack = torch.empty(1, dtype=torch.uint8)
    _irecv(ack, src, group, TAG_ACK).wait()
    return bool(ack.item())
