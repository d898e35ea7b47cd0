"""Chapter 3 (the roofline): its exercise checkers."""
from __future__ import annotations

import math
from typing import Any

from ... import sizing
from .verdict import verdict

__all__ = ['ridge_point', 'decode_intensity', 'compute_bound_batch']


def ridge_point(answer: Any, gpu: str) -> bool:
    """Ch. 3: the ridge point (FLOP/byte) of a GPU from splitlab.sizing.GPUS."""
    g = sizing.GPUS[gpu]
    return verdict(answer, sizing.ridge_point(g["peak_flops_per_s"], g["bandwidth_bytes_per_s"]), 0.01,
                   f"the ridge point of the {gpu} in FLOP/byte", "peak FLOP/s divided by memory bandwidth in B/s.")


def decode_intensity(answer: Any, batch: int, bytes_per_param: float = 2) -> bool:
    """Ch. 3: arithmetic intensity (FLOP/byte) of a decode step's weight matmuls at ``batch``, ignoring the KV
    cache: 2 x params x batch FLOPs over params x bytes_per_param bytes = 2 x batch / bytes_per_param."""
    return verdict(answer, 2 * batch / bytes_per_param, 0.01, f"the decode intensity at batch {batch}",
                   "each weight (bytes_per_param bytes) is read once and used for 2 FLOPs per sequence.")


def compute_bound_batch(answer: Any, gpu: str, bytes_per_param: float = 2) -> bool:
    """Ch. 3: smallest decode batch whose weight-matmul intensity (2B/bytes_per_param) reaches the ridge point."""
    g = sizing.GPUS[gpu]
    ridge = sizing.ridge_point(g["peak_flops_per_s"], g["bandwidth_bytes_per_s"])
    return verdict(answer, math.ceil(ridge * bytes_per_param / 2), 0.02,
                   f"the batch at which decode becomes compute-bound on a {gpu}",
                   "solve 2 x batch / bytes_per_param = ridge point for batch.")

