"""The roofline model of a forward pass: FLOPs, bytes moved, arithmetic intensity, and the time bounds they set.

Sources:
- About 2 FLOPs per parameter per token for the matmuls of a forward pass (Kaplan et al. 2020, sec. 2.1).
- Roofline: attainable FLOP/s = min(peak, intensity x bandwidth); ridge point = peak / bandwidth
  (Williams, Waterman and Patterson 2009).
"""
from __future__ import annotations

import math
import numbers
from typing import Any

from .kv import KVGeometry, dtype_bytes, kv_bytes_per_token, kv_geometry, resolve_config
from .tables import gpu_spec

__all__ = ["prefill_flops", "decode_flops", "prefill_bytes", "decode_bytes", "arithmetic_intensity", "ridge_point",
           "min_decode_step_s", "max_decode_batch", "roofline_time_s", "predicted_prefill_s"]


def check_amounts(positive: dict | None = None, nonnegative: dict | None = None) -> None:
    """Refuse, naming each, the values of ``positive`` (name -> value) that are not finite real numbers > 0 and those
    of ``nonnegative`` that are not finite real numbers >= 0 (NaN, inf, a negative, a string or a bool).

    Raises:
        ValueError: one such value or more, every one named with what it must be."""
    real = lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)  # noqa: E731
    bad = [f"{k} must be a finite positive number, got {v!r}" for k, v in (positive or {}).items()
           if not (real(v) and v > 0)]
    bad += [f"{k} must be a finite number >= 0, got {v!r}" for k, v in (nonnegative or {}).items()
            if not (real(v) and v >= 0)]
    if bad:
        raise ValueError("; ".join(bad))


def prefill_flops(n_params: float, prompt_tokens: int, geometry: KVGeometry, batch: int = 1) -> float:
    """FLOPs of a prefill: 2 x params x tokens for the matmuls (Kaplan et al. 2020) plus causal attention,
    2 x layers x heads x head_dim x tokens^2 (QK^T and AV over the lower triangle), per sequence."""
    t = prompt_tokens
    attn = 2 * geometry.layers * geometry.heads * geometry.head_dim * t * t
    return batch * (2 * n_params * t + attn)


def decode_flops(n_params: float, batch: int, context: int, geometry: KVGeometry) -> float:
    """FLOPs of one decode step for ``batch`` sequences at ``context`` cached tokens each:
    2 x params per token plus 4 x layers x heads x head_dim x context (QK^T and AV over the cache)."""
    attn = 4 * geometry.layers * geometry.heads * geometry.head_dim * context
    return batch * (2 * n_params + attn)


def prefill_bytes(weight_bytes: float, prompt_tokens: int, kv_bytes_token: float, batch: int = 1) -> float:
    """Bytes moved by a prefill: the weights read once plus the KV cache written."""
    return weight_bytes + batch * prompt_tokens * kv_bytes_token


def decode_bytes(weight_bytes: float, batch: int, context: int, kv_bytes_token: float) -> float:
    """Bytes moved by one decode step: the weights read once plus every sequence's KV cache read."""
    return weight_bytes + batch * context * kv_bytes_token


def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """FLOPs per byte moved (Williams et al. 2009). Raises ValueError: ``nbytes`` not a finite number > 0 or
    ``flops`` not one >= 0."""
    check_amounts(dict(nbytes=nbytes), dict(flops=flops))
    return flops / nbytes


def ridge_point(peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Intensity (FLOP/byte) above which a kernel is compute-bound: peak FLOP/s / memory bandwidth."""
    check_amounts(dict(peak_flops_per_s=peak_flops_per_s, bandwidth_bytes_per_s=bandwidth_bytes_per_s))
    return peak_flops_per_s / bandwidth_bytes_per_s


def min_decode_step_s(weight_bytes: float, kv_bytes_total: float, bandwidth_bytes_per_s: float) -> float:
    """Lower bound on one decode step (s): every weight and every cached K/V byte is read once per step,
    so step >= (weight bytes + KV bytes) / memory bandwidth."""
    check_amounts(dict(bandwidth_bytes_per_s=bandwidth_bytes_per_s),
                  dict(weight_bytes=weight_bytes, kv_bytes_total=kv_bytes_total))
    return (weight_bytes + kv_bytes_total) / bandwidth_bytes_per_s


def max_decode_batch(memory_bytes: float, weight_bytes: float, context: int, kv_bytes_token: float) -> int:
    """The largest decode batch whose caches fit beside the weights: the most sequences B of ``context`` cached
    tokens each with weights + B x context x KV bytes per token <= ``memory_bytes`` (0 when not even one fits).
    Chapter 3's memory-full point (its curves and its explorer both take it from here).

    Raises:
        ValueError: ``context`` < 1 or ``kv_bytes_token`` <= 0; a value that is not a finite number (NaN).
    """
    check_amounts(dict(kv_bytes_token=kv_bytes_token), dict(memory_bytes=memory_bytes, weight_bytes=weight_bytes))
    if not context >= 1 or kv_bytes_token <= 0:
        raise ValueError(f"a decode batch needs context >= 1 token and KV bytes per token > 0, got {context}, "
                         f"{kv_bytes_token}")
    per_seq = context * kv_bytes_token
    fits = lambda b: weight_bytes + b * per_seq <= memory_bytes  # noqa: E731 (the one test, also at the edges)
    batch = max(0, int((memory_bytes - weight_bytes) // per_seq))
    while fits(batch + 1):  # float division may land one off either way
        batch += 1
    while batch > 0 and not fits(batch):
        batch -= 1
    return batch


def roofline_time_s(flops: float, nbytes: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Roofline time (s) of a kernel: max(FLOPs / peak, bytes / bandwidth).

    Raises:
        ValueError: a peak or bandwidth that is not a finite number > 0, FLOPs or bytes not one >= 0."""
    check_amounts(dict(peak_flops_per_s=peak_flops_per_s, bandwidth_bytes_per_s=bandwidth_bytes_per_s),
                  dict(flops=flops, nbytes=nbytes))
    return max(flops / peak_flops_per_s, nbytes / bandwidth_bytes_per_s)


def predicted_prefill_s(model: str, prompt_tokens: int, gpu: str = "H100", dtype: Any = "fp16") -> float:
    """Roofline prefill time (s) of one ``prompt_tokens`` prompt of a published ``model`` on a datasheet ``gpu``:
    max(FLOPs / peak, (weights + KV written) / memory bandwidth). A lower bound: real kernels reach a fraction of
    the peak.

    Raises:
        ValueError: an unknown model, GPU or dtype (the message lists the known ones), or ``prompt_tokens`` not an
            integer >= 0."""
    cfg, g = resolve_config(model), gpu_spec(gpu)
    if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, numbers.Integral) or prompt_tokens < 0:
        raise ValueError(f"prompt_tokens must be an integer >= 0, got {prompt_tokens!r}")
    per_token = kv_bytes_per_token(cfg, dtype)
    return roofline_time_s(prefill_flops(cfg["n_params"], prompt_tokens, kv_geometry(cfg)),
                           prefill_bytes(cfg["n_params"] * dtype_bytes(dtype), prompt_tokens, per_token),
                           g["peak_flops_per_s"], g["bandwidth_bytes_per_s"])


