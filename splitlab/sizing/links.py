"""Moving the KV cache from a prefill worker to a decode worker: link time, fitted link models, layer-wise
streaming, and DistServe's comparison of the hand-off with a decode step.

Source: time = latency + KV bytes / link bandwidth, to compare with a decode step and a prefill (Zhong et al.
2024, DistServe, OSDI'24, sec. 4); link speeds in :data:`splitlab.sizing.LINKS`, each with its specification or
datasheet.
"""
from __future__ import annotations

import numbers
from typing import Any

from .kv import dtype_bytes, kv_bytes, resolve_config
from .roofline import check_amounts, min_decode_step_s, predicted_prefill_s
from .tables import LINKS, gpu_spec

__all__ = ["transfer_time_s", "fit_latency_bandwidth", "streamed_exposed_s", "handoff", "link_bandwidth"]


def link_bandwidth(link: str | float) -> float:
    """Bytes/s of ``link`` in one direction: a name in :data:`~splitlab.sizing.LINKS` (its datasheet bandwidth) or a
    bandwidth itself (a measured one, e.g. :func:`fit_latency_bandwidth`'s).

    Raises:
        ValueError: an unknown name (the message lists the known ones), or a bandwidth that is not a finite
            number > 0.
    """
    if isinstance(link, str):
        if link not in LINKS:
            raise ValueError(f"unknown link {link!r}; choose one of {', '.join(LINKS)}, or give bytes/s")
        return float(LINKS[link]["bandwidth_bytes_per_s"])
    if isinstance(link, bool) or not isinstance(link, numbers.Real) or not 0 < link < float("inf"):
        raise ValueError(f"a link is a name in sizing.LINKS or a bandwidth in bytes/s > 0, got {link!r}")
    return float(link)


def transfer_time_s(nbytes: float, bandwidth_bytes_per_s: float, latency_s: float = 0.0) -> float:
    """Time (s) to move ``nbytes`` over a link: latency + bytes / bandwidth.

    Raises:
        ValueError: a bandwidth that is not a finite number > 0, bytes or latency not finite numbers >= 0.
    """
    check_amounts(dict(bandwidth_bytes_per_s=bandwidth_bytes_per_s), dict(nbytes=nbytes, latency_s=latency_s))
    return latency_s + nbytes / bandwidth_bytes_per_s


def fit_latency_bandwidth(nbytes, seconds) -> tuple[float, float]:
    """Fit ``seconds = latency + nbytes / bandwidth`` to measured transfers, minimising the squared *relative*
    errors (so that small transfers, where the latency shows, count as much as large ones).

    Returns ``(latency_s, bandwidth_bytes_per_s)``. A negative fitted latency (noise) is clipped to 0 and the
    bandwidth refitted through the origin.

    Raises:
        ValueError: fewer than two distinct sizes, a size or time that is not finite (NaN: a size never timed),
            times that are not positive, or a fit without a positive slope.
    """
    import numpy as np

    n, t = np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float)
    if n.shape != t.shape or len(np.unique(n)) < 2:
        raise ValueError("need matching arrays with at least two distinct sizes")
    if not (np.isfinite(n).all() and np.isfinite(t).all()):
        raise ValueError(f"sizes and times must be finite numbers, got {int((~np.isfinite(t)).sum())} times and "
                         f"{int((~np.isfinite(n)).sum())} sizes that are not (NaN, inf)")
    if (t <= 0).any():
        raise ValueError("transfer times must be positive")
    slope, latency = np.polyfit(n, t, 1, w=1 / t)
    if latency < 0:
        latency, slope = 0.0, float(np.mean(n / t) / np.mean((n / t) ** 2))  # min sum ((slope n - t) / t)^2
    if slope <= 0:
        raise ValueError("the measured times do not grow with the bytes: no bandwidth can be fitted")
    return float(latency), float(1 / slope)


def streamed_exposed_s(prefill_s: float, nbytes: float, layers: int, bandwidth_bytes_per_s: float,
                       latency_s: float = 0.0) -> float:
    """Transfer time left after the prefill ends when each layer's KV is sent as soon as it is computed.

    Model: the forward computes the ``layers`` layers at an even pace, so layer i's KV (``nbytes / layers``) is
    ready at (i + 1) x prefill_s / layers; the link sends one layer at a time, each taking latency + its bytes /
    bandwidth, in order. Returns (when the last layer has arrived) - prefill_s: at least one layer's transfer,
    and more when the link is slower than the compute.

    Raises:
        ValueError: ``layers`` not an integer >= 1, ``prefill_s`` not a finite number >= 0, and those of
            :func:`transfer_time_s`.
    """
    if isinstance(layers, bool) or not isinstance(layers, numbers.Integral) or layers < 1:
        raise ValueError(f"layers must be an integer >= 1, got {layers!r}")
    check_amounts(nonnegative=dict(prefill_s=prefill_s))
    per_layer = transfer_time_s(nbytes / layers, bandwidth_bytes_per_s, latency_s)
    finish = 0.0
    for i in range(layers):
        finish = max(finish, (i + 1) * prefill_s / layers) + per_layer
    return finish - prefill_s


def handoff(model: str, prompt_tokens: int, link: str | float, gpu: str = "H100", dtype: Any = "fp16") -> dict:
    """DistServe's comparison for one request: the KV bytes its prompt leaves behind, the time to move them over
    ``link`` (a name in ``LINKS`` or bytes/s), the minimum decode step of the same model on ``gpu`` (weights plus
    this cache read once, :func:`min_decode_step_s`) and its roofline prefill (:func:`predicted_prefill_s`).

    Returns a dict: ``kv_bytes``, ``transfer_s``, ``decode_step_s``, ``prefill_s``, ``decode_steps`` (transfer /
    decode step) and ``prefill_share`` (transfer / prefill).

    Raises:
        ValueError: an unknown model, link, GPU or dtype (each message lists the known ones), or ``prompt_tokens``
            not an integer >= 0.
    """
    cfg, g = resolve_config(model), gpu_spec(gpu)
    bandwidth = link_bandwidth(link)
    nbytes = kv_bytes(cfg, prompt_tokens, dtype=dtype)
    transfer = transfer_time_s(nbytes, bandwidth)
    step = min_decode_step_s(cfg["n_params"] * dtype_bytes(dtype), nbytes, g["bandwidth_bytes_per_s"])
    prefill = predicted_prefill_s(model, prompt_tokens, gpu, dtype)
    return dict(kv_bytes=nbytes, transfer_s=transfer, decode_step_s=step, prefill_s=prefill,
                decode_steps=transfer / step, prefill_share=transfer / prefill)
