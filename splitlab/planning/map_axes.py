"""The map's axes (:mod:`.split_map`), in the units that carry from one machine to another: the prefill cost in
lone decode steps (:func:`prefill_steps`; :func:`prompt_axis`: prompt lengths whose costs are evenly spaced), a
chunk's stall in the same steps (:func:`chunk_steps`), and their checks."""
from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Iterable

import numpy as np

from ..costmodel import CostModel
from ..serving import CostModelExecutor

__all__ = ["geometric_axis", "prompt_axis", "prefill_steps", "chunk_steps", "check_axis", "MAX_POINTS"]

#: the most points an axis may hold: a map holds at most this many cells (``split_map.MAX_CELLS``), so one axis of
#: more can never be served, and is refused before it is built
MAX_POINTS = 400


def geometric_axis(low: float, high: float, points: int, integer: bool = False) -> list:
    """``points`` values from ``low`` to ``high`` evenly spaced on a log scale (rounded and deduplicated if
    ``integer``).

    Raises:
        ValueError: low or high not a finite number > 0, low > high, points not an integer >= 1 (1 with low < high,
            or more than 1 with low == high)."""
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (math.isfinite(v) and v > 0):
            raise ValueError(f"the axis' {name} end must be a finite number > 0, got {v!r}")
    if low > high:
        raise ValueError(f"an empty range: low {low:g} is above high {high:g}")
    if isinstance(points, bool) or not isinstance(points, numbers.Integral) or points < 1:
        raise ValueError(f"points must be an integer >= 1, got {points!r}")
    if points == 1 and low < high:  # one point of a range would silently drop its high end
        raise ValueError(f"one point needs low equal to high, got {low:g} to {high:g}")
    if points > 1 and low == high:  # a range of one value holds one point: was it once, or duplicates
        raise ValueError(f"{points} points need low below high, got {low:g} to {high:g} (one point: points=1)")
    if points > MAX_POINTS:  # checked before the axis is built: a million points took 30 s, then was refused
        raise ValueError(f"points must be at most {MAX_POINTS} (a map holds at most {MAX_POINTS} cells), got {points}")
    vals = np.geomspace(low, high, points) if points > 1 else np.array([low])
    if integer:
        return sorted({int(round(v)) for v in vals})
    out = [float(f"{v:.3g}") for v in vals]
    if len(set(out)) < len(out):  # 1 to 1.01 in 4 points was [1.0, 1.0, 1.01, 1.01], then 'a value twice'
        raise ValueError(f"{points} points from {low:g} to {high:g} round to only {len(set(out))} distinct values at 3 "
                         f"significant digits: widen the range or ask for at most {len(set(out))} points")
    return out


def _check_tokens(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:  # 0, -5, NaN and '64' were read
        raise ValueError(f"{name} must be an integer number of tokens >= 1, got {v!r}")


def prefill_steps(cost: CostModel, prompt_tokens: int) -> float:
    """The prefill of a ``prompt_tokens``-token prompt in lone decode steps at that context:
    ``cost.prefill_s(n) / cost.decode_s(1, n)`` (the map's across axis).

    Raises:
        TypeError: ``cost`` not a CostModel. ValueError: ``prompt_tokens`` not an integer >= 1; the cost model
            predicts a decode step of 0 s (no step to count in)."""
    if not isinstance(cost, CostModel):
        raise TypeError(f"cost must be a CostModel, got {type(cost).__name__}")
    _check_tokens("prompt_tokens", prompt_tokens)
    d = cost.decode_s(1, prompt_tokens)
    if not d > 0:
        raise ValueError(f"this cost model ({cost.source}) predicts a decode step of 0 s: a map's axes are in decode "
                         f"steps")
    return cost.prefill_s(prompt_tokens) / d


def chunk_steps(cost: CostModel, chunk_tokens: int, prompt_tokens: int) -> float:
    """One hybrid step of a fresh ``chunk_tokens``-token prompt chunk beside one decode row at a context of
    ``prompt_tokens`` (one fused forward, or two passes where ``cost.hybrid_path`` says its engine cannot fuse),
    in lone decode steps at that context (``cost.hybrid_s`` / ``cost.decode_s(1, n)``): what a
    chunk stalls a running stream for. Near 1 where a chunk rides in a memory-bound decode step for free (a GPU's
    roofline), several where every prompt token costs time (a CPU). Raises what :func:`prefill_steps` raises, and
    ValueError for ``chunk_tokens`` not an integer >= 1."""
    _check_tokens("chunk_tokens", chunk_tokens)
    prefill_steps(cost, prompt_tokens)  # refuses a free decode step, a bad prompt or cost
    return cost.hybrid_s(chunk_tokens, chunk_tokens ** 2, 0, 1, prompt_tokens) / cost.decode_s(1, prompt_tokens)


def prompt_axis(cost: CostModel | None, low_tokens: int, high_tokens: int, points: int) -> list[int]:
    """``points`` prompt lengths in ``[low_tokens, high_tokens]`` whose prefill costs (in lone decode steps,
    ``prefill_s(n) / decode_s(1, n)``) are evenly spaced on a log scale: for each target cost the shortest prompt
    that reaches it (by bisection; the cost grows with the prompt). Where the cost does not grow over the range
    (a roofline's prefill is memory-bound, 1 step, up to a few hundred tokens), lengths evenly spaced on a log
    scale instead. Deduplicated, so possibly fewer than ``points``.

    Raises:
        ValueError: as :func:`geometric_axis` (an empty range, points < 1 or one in a range), a decode step of 0 s;
            an end that is not an integer number of tokens, or a high end past the cost model's context."""
    cost = CostModelExecutor(cost).cost
    for name, v in (("low_tokens", low_tokens), ("high_tokens", high_tokens)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):  # 16.5 gave [16.5, 48.0, 100]
            raise ValueError(f"{name} must be an integer number of tokens, got {v!r}")
    if high_tokens > cost.max_context:  # was returned as a prompt length no request can have
        raise ValueError(f"high_tokens ({high_tokens}) exceeds the cost model's context of {cost.max_context} tokens")
    geometric_axis(low_tokens, high_tokens, points, integer=True)  # the range's own checks
    steps = functools.partial(prefill_steps, cost)
    lo, hi = steps(low_tokens), steps(high_tokens)
    if not hi > lo * 1.01:
        return geometric_axis(low_tokens, high_tokens, points, integer=True)
    out = set()
    for target in np.geomspace(lo, hi, points) if points > 1 else [lo]:
        a, b = low_tokens, high_tokens  # steps(b) >= target
        while b - a > 1:
            mid = (a + b) // 2
            a, b = (a, mid) if steps(mid) >= target else (mid, b)
        out.add(a if steps(a) >= target else b)
    return sorted(out)


def check_axis(name: str, values, integer: bool, lowest: float) -> list:
    if isinstance(values, (str, bytes)) or not (values is None or isinstance(values, Iterable)):
        raise ValueError(f"{name} must be a list of {'prompt lengths' if integer else 'numbers'}, e.g. "
                         f"{[64] if integer else [2.5]}, got {values!r}")  # 2.5 was "'float' object is not iterable"
    vals = list(values) if values is not None else []
    if not vals:
        raise ValueError(f"{name} is empty: give at least one value")
    for v in vals:
        ok = not isinstance(v, bool) and isinstance(v, numbers.Integral if integer else numbers.Real)
        if not ok or not (math.isfinite(v) and v >= lowest):
            kind = "an integer" if integer else "a finite number"
            raise ValueError(f"every {name} value must be {kind} >= {lowest:g}, got {v!r}")
    if len(set(vals)) != len(vals):
        raise ValueError(f"{name} holds a value twice: {vals}")
    return sorted(int(v) if integer else float(v) for v in vals)
