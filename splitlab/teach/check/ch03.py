"""Chapter 3 (the roofline): its exercise checkers."""
from __future__ import annotations

import math
from typing import Any

from ... import sizing
from .verdict import say, verdict

__all__ = ['ridge_point', 'decode_intensity', 'compute_bound_batch', 'decode_floor', 'max_batch_for_tpot',
           'decode_step_prediction', 'measured_step']


def _roofs(gpu: str | None, peak_flops_per_s: float | None, bandwidth_bytes_per_s: float | None) -> tuple[float, float]:
    if gpu is not None:
        g = sizing.tables.gpu_spec(gpu)
        return g["peak_flops_per_s"], g["bandwidth_bytes_per_s"]
    if not peak_flops_per_s or not bandwidth_bytes_per_s:
        raise ValueError("give a GPU name from sizing.GPUS, or both peak_flops_per_s and bandwidth_bytes_per_s")
    return peak_flops_per_s, bandwidth_bytes_per_s


def ridge_point(answer: Any, gpu: str | None = None, peak_flops_per_s: float | None = None,
                bandwidth_bytes_per_s: float | None = None) -> bool:
    """Ch. 3: the ridge point (FLOP/byte) of a GPU from splitlab.sizing.GPUS, or of a chip given by its numbers."""
    peak, bw = _roofs(gpu, peak_flops_per_s, bandwidth_bytes_per_s)
    return verdict(answer, sizing.ridge_point(peak, bw), 0.01, "the ridge point in FLOP/byte",
                   "peak FLOP/s divided by memory bandwidth in B/s.")


def decode_intensity(answer: Any, batch: int, bytes_per_param: float = 2) -> bool:
    """Ch. 3: arithmetic intensity (FLOP/byte) of a decode step's weight matmuls at ``batch``, ignoring the KV
    cache: 2 x params x batch FLOPs over params x bytes_per_param bytes = 2 x batch / bytes_per_param."""
    return verdict(answer, 2 * batch / bytes_per_param, 0.01, f"the decode intensity at batch {batch}",
                   "each weight (bytes_per_param bytes) is read once and used for 2 FLOPs per sequence.")


def compute_bound_batch(answer: Any, gpu: str | None = None, bytes_per_param: float = 2,
                        peak_flops_per_s: float | None = None, bandwidth_bytes_per_s: float | None = None) -> bool:
    """Ch. 3: smallest decode batch whose weight-matmul intensity (2B/bytes_per_param) reaches the ridge point of a
    datasheet ``gpu`` or of a chip given by ``peak_flops_per_s`` and ``bandwidth_bytes_per_s``."""
    peak, bw = _roofs(gpu, peak_flops_per_s, bandwidth_bytes_per_s)
    return verdict(answer, math.ceil(sizing.ridge_point(peak, bw) * bytes_per_param / 2), 0.02,
                   "the batch at which decode becomes compute-bound",
                   "solve 2 x batch / bytes_per_param = ridge point for batch, and round up.")


def _step_s(cfg: dict, gpu: dict, batch: int, context: int, dtype: str) -> float:
    kv = sizing.kv_bytes_per_token(cfg, dtype)
    return sizing.roofline_time_s(sizing.decode_flops(cfg["n_params"], batch, context, sizing.kv_geometry(cfg)),
                                  sizing.decode_bytes(cfg["n_params"] * sizing.dtype_bytes(dtype), batch, context, kv),
                                  gpu["peak_flops_per_s"], gpu["bandwidth_bytes_per_s"])


def decode_floor(answer: Any, model: str, gpu: str, batch: int, context: int, dtype: str = "bf16") -> bool:
    """Ch. 3: the memory floor (s) of one decode step of a published ``model`` on ``gpu``:
    (weights + batch x context x KV bytes per token) / bandwidth (``sizing.min_decode_step_s``)."""
    cfg, g = sizing.resolve_config(model), sizing.tables.gpu_spec(gpu)
    kv_total = batch * context * sizing.kv_bytes_per_token(cfg, dtype)
    expected = sizing.min_decode_step_s(cfg["n_params"] * sizing.dtype_bytes(dtype), kv_total,
                                        g["bandwidth_bytes_per_s"])
    return verdict(answer, expected, 0.02, f"the decode floor of {model} on an {gpu} in seconds",
                   "every weight and every cached K/V byte of every sequence is read once per step.")


def max_batch_for_tpot(answer: Any, model: str, gpu: str, context: int, tpot_slo_s: float,
                       dtype: str = "bf16") -> bool:
    """Ch. 3: the largest decode batch whose roofline step (= TPOT) meets ``tpot_slo_s`` and whose caches fit in
    ``gpu``'s memory beside the weights, for sequences of ``context`` tokens."""
    cfg, g = sizing.resolve_config(model), sizing.tables.gpu_spec(gpu)
    weights, kv = cfg["n_params"] * sizing.dtype_bytes(dtype), sizing.kv_bytes_per_token(cfg, dtype)
    best, b = 0, 1
    while weights + b * context * kv <= g["memory_bytes"] and _step_s(cfg, g, b, context, dtype) <= tpot_slo_s:
        best, b = b, b + 1
    return verdict(answer, best, 0, f"the largest batch meeting a {tpot_slo_s * 1e3:.3g} ms TPOT",
                   "in the memory-bound range, step = (weights + batch x context x KV bytes) / bandwidth; solve "
                   "for batch, round down, and check that the caches fit.")


def measured_step(measured: Any) -> tuple[float, float]:
    """(the fastest step in seconds, the spread) of ``measured``: a ``profiling.measure_decode`` table of one row,
    seconds, or a list of either (repeated measurements of the same step); the spread is how much slower the
    slowest repeat was than the fastest (0 for one)."""
    runs = measured if isinstance(measured, (list, tuple)) else [measured]
    if not runs:
        raise ValueError("measured needs at least one measurement")
    seconds = [float(m["step_s"].iloc[0]) if hasattr(m, "columns") else float(m) for m in runs]
    return min(seconds), max(seconds) / min(seconds) - 1


def decode_step_prediction(predicted_s: Any, measured: Any, rel_tol: float = 0.35) -> bool:
    """Ch. 3 experiment: the reader's predicted decode step (s) against the one they measured (``measured``: a
    ``profiling.measure_decode`` table of one row, seconds, or a list of repeats: the fastest is compared), within
    ``rel_tol`` or the repeats' own spread if that is more (a check is never tighter than the measurement agrees
    with itself); the measurement is printed once a prediction is given."""
    if predicted_s is None:
        say("Not answered yet: set your predicted step time in seconds, then run the cell again.")
        return False
    seconds, spread = measured_step(measured)
    ok = verdict(predicted_s, seconds, max(rel_tol, spread), "the measured decode step in seconds",
                 "bytes read per step (weights + batch x context x KV bytes per token) over the bandwidth a "
                 "memory-bound step achieved.")
    say(f"measured: {seconds * 1e3:.3g} ms (repeats {spread:.0%} apart); predicted {float(predicted_s) * 1e3:.3g} "
        f"ms ({float(predicted_s) / seconds:.2f}x)")
    return ok
