"""A comparison's goodput searches in two stages: a plain search brackets every layout, then the layouts that could
still win are searched again on runs that go on until their verdict is settled.

A goodput search on *plain* runs (``extend=1``: each run its 20 request lifetimes of arrivals and at least 2,000
requests, never more) lands within 5% of the same search on runs 20 x longer in 25 of 30 cases measured
(``benchmarks/results/goodput_steady_settle_2026-12-03.txt``: plain / 20 x longer 0.927-1.026, the misses all on
seed 2, whose first 1,000 arrivals come 8% faster than the rate asked); the search whose runs go on while
unsettled (``extend`` 8, :mod:`splitlab.serving.goodput_spread`) in 29 of 30, at 3.5 x the CPU. A planner needs the
accurate answer only where it decides something, so :func:`refine_contenders` does what a planning tool does:

1. **Bracket.** Every layout gets the plain search; its answer is the highest rate that passed and the lowest
   failing rate above it (:func:`bracket`, within the search's tolerance).
2. **Refine the contenders.** A layout whose plain goodput is within :data:`REFINE_MARGIN` (10%) of the best
   goodput could still be the best: a plain answer lies up to 7.3% low and the best's up to 2.6% high (the measured
   range above). Each such layout is searched again (:func:`refine`: the same search, with runs going on up to
   ``extend`` x their requests while unsettled, to a tolerance of at most 3%), starting at its bracket's low end
   with a step to its high end, so that a refined search whose bracket holds ends in two or three runs. A refined
   best that drops can bring more layouts within the margin; they are refined in turn, until every layout left
   plain is more than the margin below the best.

The comparison stays fair: every layout that could win is judged by the same (refined) search, and a layout left
plain is out by more than the plain search's measured error. ``extend=1`` skips the second stage (plain runs
for every layout, as before). DistServe's planner (OSDI'24, sec. 4) bisects each placement's rate once on a fixed
number of requests; this search's claims are measured against runs 20 x longer (``benchmarks/plan_steady.py``).
"""
from __future__ import annotations

import math
import numbers
from typing import Callable, Hashable, Mapping

from ..serving import goodput
from ..serving.goodput_spread import EXTEND, MAX_EXTEND

__all__ = ["bracket", "refine", "refine_contenders", "contenders", "REFINE_MARGIN", "REFINE_EXTEND", "REFINE_TOLERANCE",
           "PLAIN"]

#: a layout whose plain goodput is within this share of the best is refined: plain answers measured 0.927-1.026
#: of runs 20 x longer, so one 7.3% low can beat a best 2.6% high (module docstring)
REFINE_MARGIN = 0.1
#: the refined searches' ``extend``: the default search's (runs going on to 8 x their requests while unsettled)
REFINE_EXTEND = EXTEND
#: ``extend`` of a plain run (one that never goes on)
PLAIN = 1
#: the refined searches' tolerance at most (the default search's): a map's plain searches bisect to 5%, and a
#: contender refined to 5% landed 5.7% below runs 20 x longer (the built-in 4 colocated chunked, seed 0)
REFINE_TOLERANCE = 0.03


def bracket(result) -> tuple[float, float] | None:
    """``(lo, hi)`` of a search that found a boundary (``outcome == "found"``): the highest rate that passed and the
    lowest failing rate above it (requests/s per worker); None for a search that found none ("unmet",
    "unbounded")."""
    if getattr(result, "outcome", "found") != "found":
        return None
    lo = result.goodput_rps_per_worker
    above = [p["rate_per_worker"] for p in result.points if not p["passed"] and p["rate_per_worker"] > lo]
    return (lo, min(above)) if lo > 0 and above else None


def refine(workload, config, backend, plain, *, extend: int = REFINE_EXTEND, **search):
    """The search of ``config`` again, its runs going on up to ``extend`` x their requests while unsettled,
    started at the bracket of its plain search ``plain`` (a :class:`~splitlab.serving.GoodputResult`): the
    bracket's low end first, then its high end (the step between them), so that a bracket that holds ends the search
    in two runs and one that does not is left by the search's own steps.

    Args:
        workload, config, backend: as :func:`~splitlab.serving.goodput` (a named workload or spec, so that runs
            can go on). search: goodput's other arguments (SLOs, target, tolerance, requests, seed, scale), those of
            the plain search; the tolerance at most :data:`REFINE_TOLERANCE` (3%).

    Returns:
        a :class:`~splitlab.serving.GoodputResult`; ``plain`` itself when it found no boundary (goodput 0, or a
        lower bound no rate breaks: longer runs change neither).

    Raises:
        ValueError: extend not an integer in 2 .. 64; those of :func:`~splitlab.serving.goodput`.
    """
    if isinstance(extend, bool) or not isinstance(extend, numbers.Integral) or not 2 <= extend <= MAX_EXTEND:
        raise ValueError(f"extend of a refined search must be an integer in 2 .. {MAX_EXTEND} (1 is the plain "
                         f"search), got {extend!r}")
    edges = bracket(plain)
    if edges is None:
        return plain
    lo, hi = edges
    search = {k: v for k, v in search.items() if k not in ("start_rate_per_worker", "step", "extend")}
    search["tolerance"] = min(search.get("tolerance", REFINE_TOLERANCE), REFINE_TOLERANCE)
    return goodput(workload, config, backend, start_rate_per_worker=lo, step=min(hi / lo, 100.0), extend=extend,
                   **search)


def contenders(goodputs: Mapping[Hashable, float], refined, margin: float = REFINE_MARGIN) -> list:
    """The keys of ``goodputs`` (key -> goodput per worker) not in ``refined`` whose goodput is within ``margin``
    (a share) of the best of them all, best first; none when the best is 0 (no layout meets the SLOs)."""
    best = max(goodputs.values(), default=0.0)
    if not best > 0:
        return []
    near = [k for k, g in goodputs.items() if k not in refined and g >= (1 - margin) * best]
    return sorted(near, key=lambda k: -goodputs[k])


def refine_contenders(results: dict, search_again: Callable, margin: float = REFINE_MARGIN) -> list:
    """Refine, in ``results`` (key -> plain :class:`~splitlab.serving.GoodputResult`, replaced in place), every
    layout that could still win (module docstring): those within ``margin`` of the best, again after each round,
    until every layout left plain is more than ``margin`` below the best. ``search_again(key, plain)`` returns the
    refined result (:func:`refine`). Returns the keys refined, in the order searched.

    Raises:
        ValueError: margin not a number in [0, 1)."""
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 <= margin < 1 or math.isnan(margin):
        raise ValueError(f"margin must be a share in [0, 1) of the best goodput, got {margin!r}")
    refined, skipped = [], set()
    while True:
        values = {k: r.goodput_rps_per_worker for k, r in results.items()}
        near = contenders(values, set(refined) | skipped, margin)
        todo = [k for k in near if bracket(results[k]) is not None]
        skipped.update(k for k in near if k not in todo)  # no boundary found: longer runs would not move it
        if not todo:
            return refined
        for key in todo:
            results[key] = search_again(key, results[key])
            refined.append(key)
