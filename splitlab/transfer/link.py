"""Moving a :class:`~splitlab.KVCache` between processes in the format of :mod:`splitlab.transfer.wire`: a
complete cache after prefill (:func:`send_cache` / :func:`recv_cache`; :func:`prefill_flat` prefills straight
into a send buffer), or layer by layer while the prefill still computes (:func:`prefill_streaming`).

Sources: DistServe (Zhong et al., OSDI'24) moves KV from prefill to decode instances and argues the hand-off is
affordable next to the compute it saves; streaming each layer as soon as it exists hides most of it behind the
later layers (measured by :func:`splitlab.transfer.bench.measure_transfers`).
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

import torch

from ..kvcache import CacheMismatchError, KVCache, cache_kwarg, empty_dynamic_cache, output_cache
from ..phases.device import Timer, synchronize
from ..phases.engine import PrefillOutput, accepts_logits_to_keep
from ..phases.inputs import as_token_batch
from .header import Packet, check, make_header
from .wire import (HEADER_BYTES, MODES, TAG_HEADER, TAG_PAYLOAD, TAG_TRAILER, ProtocolError, WireStats,
                   _check_layout, _irecv, _isend, _mask, _parse_header, _payload, _wire_device, send_header,
                   stream_header, unpack_flat)

__all__ = ["send_cache", "recv_cache", "prefill_streaming", "prefill_flat"]


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
        off = 0
        for k, v in zip(cache.keys, cache.values):  # layers differ in size (sliding windows, MLA)
            nk, nv = k.numel() * k.element_size(), v.numel() * v.element_size()
            seg = flat[off:off + nk + nv]
            seg[:nk].view(k.dtype).view(k.shape).copy_(k)
            seg[nk:].view(v.dtype).view(v.shape).copy_(v)
            off += nk + nv
            works.append((_isend(seg, dst, group, TAG_PAYLOAD), seg))
        firsts = torch.tensor(list(first_tokens) if first_tokens is not None else [-1] * cache.batch_size)
        works.append((_isend(firsts, dst, group, TAG_TRAILER), firsts))
    for w, _ in reversed(works):  # the last message completes last: one wake-up of this thread, not one per message
        w.wait()
    segs = len(parts) if mode == "whole" else cache.num_layers
    return WireStats(header.nbytes, time.perf_counter() - t0, mode, segs, hbytes)


def recv_cache(src: int, lm=None, device=None, group=None, plan: dict | None = None,
               out: torch.Tensor | None = None, on_posted: Callable[[], None] | None = None
               ) -> tuple[Packet, WireStats]:
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
        out: a preallocated uint8 buffer (on the payload's device, at least ``nbytes``) to receive into, as a
            server receives into its KV pool; the cache's views then share it (do not reuse it while they live).
            None: a fresh buffer (whose first touch costs page faults: ~1 ms per 8 MiB on a busy CPU).
        on_posted: called once the receives are posted (e.g. to tell the sender "go": data that arrives
            before its receive is posted waits for one more round trip).

    Returns:
        ``(Packet(header with first tokens, cache), WireStats)``; the cache's tensors are views of one buffer.
        The stats' ``seconds`` run from the receives being posted to the cache being usable; ``layer_s``
        (layer-wise) from the same start to each layer's arrival.

    Raises:
        CacheMismatchError: the header is for another model, dtype or shape (every mismatching field is named).
            The payload is received and dropped first, so the connection stays usable; nothing is decoded.
        ProtocolError: not a splitlab header, or not the announced plan. RuntimeError: the peer died or the
            group's timeout passed.
    """
    device = torch.device(device) if device is not None else (lm.device if lm is not None else torch.device("cpu"))
    wire = _wire_device(device, group)

    def post(nbytes: int, sizes: list[int], mode: str, batch: int):
        if out is not None and (out.numel() < nbytes or out.dtype != torch.uint8 or out.device != wire):
            raise ValueError(f"out= must be a uint8 buffer of >= {nbytes} bytes on {wire}, got {out.dtype} "
                             f"[{out.numel()}] on {out.device}")
        if sum(sizes) != nbytes:
            raise ProtocolError(f"segment sizes {sizes} do not add up to {nbytes} bytes")
        flat = out[:nbytes] if out is not None else torch.empty(nbytes, dtype=torch.uint8, device=wire)
        works, off = [], 0
        for n in sizes:
            works.append(_irecv(flat[off:off + n], src, group, TAG_PAYLOAD))
            off += n
        trailer = torch.empty(batch, dtype=torch.int64)
        if mode == "layerwise":
            works.append(_irecv(trailer, src, group, TAG_TRAILER))
        return flat, works, trailer

    msg = torch.empty(HEADER_BYTES, dtype=torch.uint8)
    hw = _irecv(msg, src, group, TAG_HEADER)
    if plan is not None:
        sizes = plan.get("sizes") or [plan["nbytes"] // plan["segments"]] * plan["segments"]
        flat, works, trailer = post(plan["nbytes"], sizes, plan["mode"], plan["batch"])
    if on_posted is not None:
        on_posted()
    t0 = time.perf_counter()
    layer_s = []
    if plan is not None and plan["mode"] == "whole":
        for w in works:  # the header came first: sleep through the payload, wake up once (on 2 busy cores every
            w.wait()     # extra wake-up of this thread mid-transfer slows the threads moving the bytes)
        works = []       # a gloo receive must be waited for exactly once
    hw.wait()
    header, mode, segments, hbytes = _parse_header(msg, src, group)
    if plan is not None:
        if (header.nbytes, segments, mode, header.batch, header.segment_sizes(segments)) != (
                plan["nbytes"], plan["segments"], plan["mode"], plan["batch"], sizes):
            raise ProtocolError(f"rank {src} announced {plan} but sent {header.nbytes} B in {segments} {mode} "
                                f"segment(s) for a batch of {header.batch}")
    else:
        flat, works, trailer = post(header.nbytes, header.segment_sizes(segments), mode, header.batch)
    mismatch = None
    if lm is not None:
        try:
            check(header, lm)
        except CacheMismatchError as err:
            mismatch = err
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

def _prefill_into(lm, prompts, flat: torch.Tensor, header, on_layer: Callable[[int, torch.Tensor], None]):
    """One prefill forward whose K/V land in ``flat`` (wire layout) as each layer's attention writes them.

    A wrapper on the cache's ``update`` copies layer i's K and V into its slice of ``flat``, makes the cache hold
    views of that slice (so the finished cache *is* the flat buffer: one message, no packing pass), and calls
    ``on_layer(i, slice)``. Returns ``(PrefillOutput, mask, compute_end)``; the forward is the one of
    :func:`splitlab.prefill` (same inputs, same kernels), so the cache is bit-identical to its.
    """
    batch, seq, lengths = as_token_batch(lm, prompts), header.seq_len, header.lengths
    ids = torch.zeros(len(batch), seq, dtype=torch.long)
    for b, p in enumerate(batch):
        ids[b, seq - len(p):] = torch.tensor(p)
    mask = _mask(lengths, seq, "cpu").to(lm.device)
    sizes = header.tensor_nbytes()  # K_0, V_0, K_1, ...: layers differ in size (sliding windows, MLA)
    starts = [sum(sizes[:2 * i]) for i in range(header.layers)]
    cache = empty_dynamic_cache(header.windows)
    update = cache.update

    def update_into_flat(key_states, value_states, layer_idx, *args, **kwargs):
        keys, values = update(key_states, value_states, layer_idx, *args, **kwargs)
        layer = cache.layers[layer_idx]
        held_k, held_v = layer.keys, layer.values  # what the layer keeps (a sliding one: its last W - 1)
        nk, nv = sizes[2 * layer_idx], sizes[2 * layer_idx + 1]
        if held_k.numel() * held_k.element_size() != nk or held_v.numel() * held_v.element_size() != nv:
            raise RuntimeError(f"layer {layer_idx} cached K {tuple(held_k.shape)} / V {tuple(held_v.shape)}, not "
                               f"the {nk} + {nv} bytes the header announced")
        seg = flat[starts[layer_idx]:starts[layer_idx] + nk + nv]
        k = seg[:nk].view(held_k.dtype).view(held_k.shape)
        v = seg[nk:].view(held_v.dtype).view(held_v.shape)
        k.copy_(held_k)  # NCCL's stream waits for these copies before it sends
        v.copy_(held_v)
        if seg.device == held_k.device:
            if keys is held_k and values is held_v:  # a full layer: attention reads what it keeps
                keys, values = k, v
            layer.keys, layer.values = k, v  # the cache now lives in the wire buffer
        on_layer(layer_idx, seg)
        return keys, values

    cache.update = update_into_flat
    kwargs = dict(input_ids=ids.to(lm.device), use_cache=True, **{cache_kwarg(lm.model): cache})
    if min(lengths) < seq:  # as engine.forward_logits: mask and positions only when a row is padded
        kwargs.update(attention_mask=mask, position_ids=(mask.cumsum(dim=1) - 1).clamp(min=0))
    if accepts_logits_to_keep(type(lm.model)):
        kwargs["logits_to_keep"] = 1
    with torch.inference_mode(), Timer(lm.device) as timer:
        out = lm.model(**kwargs)
        logits = out.logits[:, -1, :].float()
    compute_end = time.perf_counter()
    del cache.update  # back to the class method
    kv = KVCache.from_transformers(output_cache(out), mask, lm.model_id, compact=False)
    return PrefillOutput(kv, logits, timer.seconds), compute_end


def prefill_flat(lm, prompts, request_ids=None) -> PrefillOutput:
    """:func:`splitlab.prefill` whose cache is written straight into one flat buffer in wire order, as a
    prefill worker of a disaggregated server writes into memory it will send from: :func:`send_cache` then
    sends it as one message with no packing pass (the copy happens inside the forward, layer by layer).
    The cache is bit-identical to :func:`splitlab.prefill`'s."""
    header = stream_header(lm, prompts, request_ids)
    flat = torch.empty(header.nbytes, dtype=torch.uint8, device=lm.device)
    out, _ = _prefill_into(lm, prompts, flat, header, lambda i, seg: None)
    if len(out.cache.keys) != lm.geometry.layers:
        raise RuntimeError("this model did not update its cache once per layer")
    return out


def prefill_streaming(lm, prompts, dst: int, request_ids=None, on_first: Callable[[list[int]], None] | None = None,
                      group=None) -> tuple[PrefillOutput, list[int], WireStats]:
    """Prefill ``prompts`` and stream their KV to rank ``dst`` layer by layer, while the forward runs.

    The header goes out before the forward (everything but the first tokens is known from the prompts). As soon
    as attention of layer i has written its K and V, they are copied into layer i's slice of the flat buffer and
    an asynchronous send of that slice starts; layers i+1.. compute meanwhile. After the forward,
    ``on_first(first_tokens)`` is called (e.g. to stream the first token to the client), then the greedy first
    tokens follow as the trailer. Rows of different lengths are left-padded as in :func:`splitlab.prefill`.

    Returns:
        ``(PrefillOutput, first_tokens, WireStats)``: the prefill (cache identical to :func:`splitlab.prefill`'s),
        one greedy first token per row, and stats whose ``compute_s`` is the forward and ``seconds`` runs until
        every send completed (``compute_end`` marks the forward's end: what follows it is the exposed transfer).

    Raises:
        the errors of :func:`splitlab.engine.as_token_batch`; RuntimeError when the peer is gone, or for a model
        that does not update its cache once per layer.
    """
    header = stream_header(lm, prompts, request_ids)
    g = lm.geometry
    flat = torch.empty(header.nbytes, dtype=torch.uint8, device=_wire_device(lm.device, group))
    works, layer_s = [], []
    t0 = time.perf_counter()
    hbytes = send_header(header, dst, "layerwise", g.layers, group, works)

    def send_layer(i: int, seg: torch.Tensor) -> None:
        works.append((_isend(seg, dst, group, TAG_PAYLOAD), seg))
        layer_s.append(time.perf_counter() - t0)

    out, compute_end = _prefill_into(lm, prompts, flat, header, send_layer)
    if len(layer_s) != g.layers:
        raise RuntimeError(f"streamed {len(layer_s)} layers of {g.layers}: this model does not update its cache "
                           "once per layer, so it cannot be streamed layer by layer")
    firsts = out.logits.argmax(-1).tolist()
    if on_first is not None:
        on_first(firsts)
    trailer = torch.tensor(firsts, dtype=torch.int64)
    works.append((_isend(trailer, dst, group, TAG_TRAILER), trailer))
    for w, _ in works:
        w.wait()
    stats = WireStats(header.nbytes, time.perf_counter() - t0, "layerwise", g.layers, hbytes, layer_s, out.seconds,
                      compute_end)
    return out, firsts, stats
