"""What a model's KV cache really holds, per layer, read from the cache of a two-token forward; and the model
kinds splitlab refuses, with the reason.

The config says what the cache should be (:func:`splitlab.sizing.kv_geometry`), but the cache is the truth: a
config can carry a field its model ignores (``num_key_value_heads`` on GPT-NeoX), and transformers 4.x cached
DeepSeek's MLA as per-head keys and values where 5.x caches the latent. So :func:`probe_geometry` runs the model
once on two tokens and reads each layer's heads, widths and window from the cache it returns; the analytic
geometry is kept when it agrees, and the measured one (with a note saying why) when it does not.
"""
from __future__ import annotations

from typing import Any

import torch

from ..kvcache import CacheMismatchError, KVCache, output_cache
from ..sizing import KVGeometry, LayerKV, UnsupportedCacheError, kv_geometry

__all__ = ["unsupported_reason", "probe_geometry"]

_OK_LAYERS = {"full_attention", "sliding_attention"}
_WHY = {"chunked_attention": "chunked attention (Llama 4) restarts its window at absolute chunk boundaries, so "
                             "left-padded batching would move them",
        "linear_attention": "linear-attention layers keep a recurrent state, not a KV cache",
        "mamba": "state-space layers keep a recurrent state, not a KV cache",
        "conv": "convolution layers keep a state, not a KV cache",
        "dummy": "some layers reuse another layer's cache (KV sharing) or have no attention"}


def unsupported_reason(config: Any) -> str | None:
    """Why splitlab cannot serve a model of ``config`` (None: it can). Checked before any weight is loaded."""
    if getattr(config, "is_encoder_decoder", False):
        return (f"{config.model_type} is an encoder-decoder model; splitlab's prefill/decode engine runs "
                f"decoder-only causal LMs")
    types = list(getattr(config, "layer_types", None) or [])
    if getattr(config, "kv_sharing_modes", None) is not None:
        types.append("dummy")
    if getattr(config, "attention_chunk_size", None) is not None:
        types.append("chunked_attention")
    for kind in types:
        if kind not in _OK_LAYERS:
            why = _WHY.get(kind, "splitlab handles full-attention and sliding-window layers")
            return f"its layers include {kind!r}: {why}"
    return None


def _measured(model: Any, cache: KVCache, mla: bool) -> tuple[LayerKV, ...]:
    rank = getattr(model.config, "kv_lora_rank", None)
    out = []
    for k, v, w in zip(cache.keys, cache.values, cache.windows):
        kind = "sliding" if w is not None else ("mla" if mla and k.shape[1] == 1 and k.shape[3] == rank else "full")
        out.append(LayerKV(int(k.shape[1]), int(k.shape[3]), int(v.shape[3]), w, kind))
    return tuple(out)


def probe_geometry(model: Any) -> tuple[KVGeometry, str | None]:
    """``(geometry, note)``: the geometry of ``model``'s KV cache as measured on a two-token forward; the
    analytic :func:`~splitlab.sizing.kv_geometry` of its config when that agrees, with ``note`` None; else the
    measured one and a note on the difference.

    Raises:
        CacheMismatchError: the forward returns no cache, or one with layers splitlab cannot hold.
    """
    device = next(model.parameters()).device
    ids = torch.zeros(1, 2, dtype=torch.long, device=device)
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=True)
    try:
        raw = output_cache(out)
    except AttributeError:
        raw = None
    if raw is None:
        raise CacheMismatchError(f"{type(model).__name__} returned no KV cache from a forward with use_cache=True")
    cache = KVCache.from_transformers(raw, torch.ones_like(ids), "probe")
    config = model.config
    mla = getattr(config, "kv_lora_rank", None) is not None
    measured = _measured(model, cache, mla)
    heads = int(getattr(config, "num_attention_heads", None) or getattr(config, "n_head", 0) or measured[0].kv_heads)
    analytic, why = None, None
    for variant in ("latent", "expanded") if mla else ("latent",):
        try:
            g = kv_geometry(config, mla=variant)
        except (UnsupportedCacheError, ValueError) as err:
            why = str(err)
            continue
        if g.per_layer == measured:
            note = None if variant == "latent" else (
                "this transformers version caches MLA as per-head keys and values, "
                f"{g.elements_per_token / kv_geometry(config).elements_per_token:.1f}x the latent an MLA engine caches")
            return g, note
        analytic = analytic or g
    first = measured[0]
    geometry = KVGeometry(len(measured), heads, first.kv_heads, first.k_dim, measured)
    if analytic is not None:
        note = (f"the config implies {analytic.elements_per_token:,} K/V elements per token, the cache holds "
                f"{geometry.elements_per_token:,}: sizes follow the cache")
    else:
        note = f"sized from the cache itself ({why})"
    return geometry, note
