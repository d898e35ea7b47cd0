"""A hybrid step as ONE forward (Sarathi-Serve, Agrawal et al., OSDI'24): the decode rows of a running batch and
the prompt chunks of a chunked-prefill step packed into one sequence, so the decode tokens ride along in the
chunk's forward and the weights are read once.

The packed sequence holds, in order, each decode row's latest token and each chunk's tokens; in front of them
sits one cache row made of every row's own cached keys and values, one segment after the other. Every linear
layer runs once over all the packed tokens; attention runs per row (ragged, as FlashAttention's variable-length
kernel or PagedAttention do on a GPU): for each layer, a row's queries attend to its own cached segment and its
own new keys only, through the model's own attention function (sdpa or eager), a chunk after a cached prefix
through the causal mask aligned to its last key, as in the two-pass path. Explicit position ids give each token
its own row's position (RoPE and learned absolute positions alike). Each row computes what it would alone, so the
tokens equal the two-pass path's (tested on several families in fp32, greedy).

Families where this cannot hold fall back to two passes (:func:`fused_unsupported` says why): sliding-window
layers (a packed segment would leave the window of its row) and MLA latent caches. Only the forward is timed;
packing and unpacking the caches is bookkeeping, as a paged-attention server needs none of it.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from ..kvcache import KVCache, cache_kwarg, output_cache
from ..kvcache.bridge import build_dynamic_cache, read_layers
from .device import Timer
from .engine import accepts_logits_to_keep
from .models import LoadedModel, require_loaded

__all__ = ["HybridOutput", "hybrid_forward", "fused_unsupported"]


@dataclass
class HybridOutput:
    """Result of :func:`hybrid_forward`.

    Attributes:
        decode_logits: ``[B, vocab]`` float32, the next-token logits of each decode row.
        decode_cache: the decode rows' cache, one position longer per row (left-padded batch of B rows).
        chunk_logits: ``[chunks, vocab]`` float32, the logits after each chunk's last token.
        chunk_caches: per chunk, its single-row cache extended by the chunk.
        seconds: wall time of the one forward (synchronised).
    """

    decode_logits: torch.Tensor
    decode_cache: KVCache
    chunk_logits: torch.Tensor
    chunk_caches: list[KVCache]
    seconds: float


def fused_unsupported(lm: LoadedModel) -> str | None:
    """Why a hybrid step of ``lm`` cannot run as one packed forward (None: it can)."""
    g = lm.geometry
    if any(w is not None for w in g.windows):
        return "sliding-window layers (a packed row's keys would fall out of its window)"
    if any(layer.kind == "mla" for layer in g.per_layer):
        return "an MLA latent cache"
    return None


def _rows(decode_cache: KVCache | None, chunks) -> list[tuple[int, int]]:
    """``(cached, new)`` tokens of every row of the packed forward: decode rows first, then chunks."""
    lengths = decode_cache.lengths.tolist() if decode_cache is not None else []
    return [(int(n), 1) for n in lengths] + [(0 if c is None else int(c.lengths[0]), len(ids)) for c, ids in chunks]


def _packed_cache(decode_cache: KVCache | None, chunks, layers: int):
    """Per layer, every row's real cached keys and values side by side in one row ``[1, heads, K, dim]``."""
    keys, values = [], []
    for i in range(layers):
        ks, vs = [], []
        if decode_cache is not None:
            seq = decode_cache.seq_len
            for b, n in enumerate(decode_cache.lengths.tolist()):
                ks.append(decode_cache.keys[i][b, :, seq - n:])
                vs.append(decode_cache.values[i][b, :, seq - n:])
        for c, _ in chunks:
            if c is not None:
                ks.append(c.keys[i][0, :, c.seq_len - int(c.lengths[0]):])
                vs.append(c.values[i][0, :, c.seq_len - int(c.lengths[0]):])
        keys.append(torch.cat(ks, dim=1)[None])
        values.append(torch.cat(vs, dim=1)[None])
    return keys, values


#: the rows of the fused forward in progress: (``[(cached, new)] per row``, the model's own attention function)
_ACTIVE: dict = {}
RAGGED = "splitlab_ragged"


def _row_mask(cached: int, new: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor | None:
    """``[1, 1, new, cached + new]`` additive causal mask aligned to the last key (None: a lone query, or no
    cache, where the kernel's own causal flag serves)."""
    if new == 1 or cached == 0:
        return None
    keep = torch.ones(new, cached + new, dtype=torch.bool, device=device).tril(cached)
    return torch.zeros(keep.shape, dtype=dtype, device=device).masked_fill_(~keep, torch.finfo(dtype).min)[None, None]


def _ragged_attention(module, query, key, value, attention_mask, **kwargs):
    """Attention of the packed forward, row by row (module docstring): ``query [1, heads, Q, dim]``, ``key`` and
    ``value [1, kv_heads, K + Q, dim]`` (every row's cache, then every new token). Returns ``([1, Q, heads, dim],
    None)`` like transformers' attention functions."""
    rows, inner = _ACTIVE["rows"], _ACTIVE["inner"]
    total = sum(c for c, _ in rows)
    outs, at_c, at_q = [], 0, 0
    for c, n in rows:
        k = torch.cat([key[:, :, at_c:at_c + c], key[:, :, total + at_q:total + at_q + n]], dim=2)
        v = torch.cat([value[:, :, at_c:at_c + c], value[:, :, total + at_q:total + at_q + n]], dim=2)
        mask = _row_mask(c, n, query.dtype, query.device)
        out, _ = inner(module, query[:, :, at_q:at_q + n], k, v, mask, **dict(kwargs, is_causal=mask is None and n > 1))
        outs.append(out)
        at_c, at_q = at_c + c, at_q + n
    return torch.cat(outs, dim=1), None


def _inner_attention(lm: LoadedModel):
    """The model's own attention function (what its layers call for its ``_attn_implementation``)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    impl = lm.model.config._attn_implementation
    if impl in ALL_ATTENTION_FUNCTIONS:
        return ALL_ATTENTION_FUNCTIONS[impl]
    return sys.modules[type(lm.model).__module__].eager_attention_forward


def hybrid_forward(lm: LoadedModel, decode_cache: KVCache | None, decode_tokens, chunks) -> HybridOutput:
    """One timed forward over the decode rows and the prompt chunks of a hybrid step.

    Args:
        decode_cache: the running batch's cache (B rows, left-padded; None: no decode rows).
        decode_tokens: ``[B]`` each decode row's latest token.
        chunks: ``(cache, ids)`` per chunk: its single-row cache (None: the prompt's first chunk) and the chunk's
            next token ids.

    Returns:
        a :class:`HybridOutput`.

    Raises:
        ValueError: a family :func:`fused_unsupported` names, or nothing to run.
    """
    require_loaded(lm, "hybrid_forward()")
    if (why := fused_unsupported(lm)) is not None:
        raise ValueError(f"{lm.name} cannot run a hybrid step as one forward: {why}")
    decode_tokens = [int(t) for t in decode_tokens]
    rows = _rows(decode_cache, chunks)
    if not rows:
        raise ValueError("hybrid_forward needs decode rows or chunks")
    dev, layers = lm.device, lm.geometry.layers
    ids = torch.tensor([decode_tokens + [t for _, c in chunks for t in c]], device=dev)
    positions = torch.tensor([[c + j for c, n in rows for j in range(n)]], device=dev)
    # a 4D mask is taken as given (no mask is built); the ragged attention above ignores it
    kwargs = dict(input_ids=ids, position_ids=positions, attention_mask=torch.zeros(1, 1, 1, 1, device=dev),
                  use_cache=True)
    cached = sum(c for c, _ in rows)
    if cached:
        keys, values = _packed_cache(decode_cache, chunks, layers)
        kwargs[cache_kwarg(lm.model)] = build_dynamic_cache(keys, values, (None,) * layers, cached)
    ends = torch.tensor(_ends(rows), device=dev)
    if accepts_logits_to_keep(type(lm.model)):
        kwargs["logits_to_keep"] = ends
    config, inner = lm.model.config, _inner_attention(lm)
    impl, _ACTIVE["rows"], _ACTIVE["inner"] = config._attn_implementation, rows, inner
    _register()
    config._attn_implementation = RAGGED
    try:
        with torch.inference_mode(), Timer(dev) as timer:
            out = lm.model(**kwargs)
            logits = out.logits if "logits_to_keep" in kwargs else out.logits[:, ends]
            logits = logits[0].float()
    finally:
        config._attn_implementation = impl
        _ACTIVE.clear()
    new_k, new_v, _, _ = read_layers(output_cache(out))
    return _unpack(lm, rows, len(decode_tokens), new_k, new_v, logits, timer.seconds)


def _register() -> None:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface
    if RAGGED not in ALL_ATTENTION_FUNCTIONS:
        AttentionInterface.register(RAGGED, _ragged_attention)


def _ends(rows: list[tuple[int, int]]) -> list[int]:
    """Positions in the packed sequence whose logits are wanted: every row's last new token, in row order."""
    out, at = [], 0
    for _, n in rows:
        at += n
        out.append(at - 1)
    return out


def _unpack(lm, rows, b, new_k, new_v, logits, seconds) -> HybridOutput:
    """Each row's cache again: its cached segment then its new keys, out of the packed forward's one row."""
    cached = sum(c for c, _ in rows)
    caches, at_c, at_n = [], 0, cached
    for c, n in rows:
        keys = [torch.cat([k[:, :, at_c:at_c + c], k[:, :, at_n:at_n + n]], dim=2) for k in new_k]
        values = [torch.cat([v[:, :, at_c:at_c + c], v[:, :, at_n:at_n + n]], dim=2) for v in new_v]
        mask = torch.ones(1, c + n, dtype=torch.long, device=lm.device)
        caches.append(KVCache(keys, values, mask, lm.model_id))
        at_c, at_n = at_c + c, at_n + n
    decode_cache = KVCache.merge(caches[:b]) if b else None
    return HybridOutput(logits[:b], decode_cache, logits[b:], caches[b:], seconds)
