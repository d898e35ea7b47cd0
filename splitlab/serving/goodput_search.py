"""Goodput: the highest request rate per worker a layout serves within its SLOs, found by bisection.

Definition (Zhong et al., "DistServe", OSDI'24, sec. 2.1 and 4): goodput is the maximum request rate per GPU at
which at least ``target`` (90%) of requests meet both the TTFT and the TPOT SLO. Here a worker stands for a GPU
and the workers of both pools count, so a 1P+3D split is 4 workers, like 4 colocated ones. A request meets its
SLOs as :func:`splitlab.serving.metrics.meets_slo` says, which also bounds the time to the *second* token by
TTFT SLO + TPOT SLO, so a layout that answers the first token at once and then leaves the request waiting for a
decode slot is not rewarded for hiding that backlog.

Each run's arrivals span ``lifetimes`` request lifetimes (TTFT SLO + (mean output tokens - 1) x TPOT SLO, default
20, :mod:`.goodput_runs`), with a warm-up and a cool-down left out of the attainment; a run stops as soon as its
verdict is settled and goes on (up to ``extend`` x its requests) while it is not (:mod:`.goodput_spread`: a
sequential test on the run's own batch-means spread; the arrivals stay the seeded Poisson process, but under
this optional stopping only the pass/fail verdict keeps its stated error, not the attainment a run reports: a run
that started low is the one that went on). How close the answer comes to
the same search on runs 20 x longer is measured, not argued: ``benchmarks/goodput_steady.py`` (prefill-first,
chunked and xPyD layouts on the built-in and the analytic cost models, over seeds) and
``tests/test_goodput_steady.py`` (a crafted case, within 5%). Every run takes the
first requests of one seeded request set, their arrival times rescaled to the rate (Poisson gaps are exponential
draws times 1 / rate; stretched piecewise so that a run arrives at exactly its rate at each checkpoint,
:func:`.arrival_rate.at_rate`, or by one factor where every run serves the whole of a given set), so every rate
sees the same lengths and prompts. The search steps the rate up or down
until one passes and one fails, then bisects until the two are within ``tolerance`` of each other: the answer is
the highest rate that passed. A search that finds no such pair still ends with an answer (:mod:`.goodput_result`):
goodput 0 when even a trickle of requests, each served alone, misses the SLOs, and a lower bound when even a
burst of every request at once meets them.
"""
from __future__ import annotations

import math
import numbers
from typing import Sequence

import pandas as pd

from .config import ServingConfig
from .goodput_result import (BINDING, GoodputResult, binding_of, found_reason, lone_request_reason, unbounded_reason,
                             unmet_reason)
from ..common.progress import show_progress
from .goodput_runs import LIFETIMES, Runs, workload_requests
from .goodput_spread import EXTEND


class SearchNotEnded(ValueError):
    """A goodput search that made ``max_runs`` runs without ending (its message names :func:`goodput`'s arguments;
    a caller with other arguments, such as the planner, catches it and names its own)."""
from .request import Request
from .virtual import progress_bar
from .workload import WorkloadSpec

__all__ = ["goodput", "attainment_curve", "GoodputResult", "workload_requests", "BINDING"]


def attainment_curve(workload, config: ServingConfig, backend=None, *, rates_per_worker: Sequence[float],
                     ttft_slo_s: float, tpot_slo_s: float, target: float = 0.9, duration_s: float | None = None,
                     min_requests: int | None = None, max_requests: int = 4000, seed: int = 0,
                     scale: float | None = None, model=None, prefixes: bool = False,
                     lifetimes: float = LIFETIMES) -> pd.DataFrame:
    """SLO attainment of ``config`` at each of ``rates_per_worker``, run as :func:`goodput` runs them (same
    arguments) but each to its end (the attainment itself, not a bound): one row per rate, the columns of
    :meth:`GoodputResult.curve`."""
    runs = Runs(workload, config, backend, model, ttft_slo_s, tpot_slo_s, target, duration_s, min_requests,
                 max_requests, seed, scale, prefixes, lifetimes)
    for rate in rates_per_worker:
        if not (rate > 0 and math.isfinite(rate)):
            raise ValueError(f"rates must be > 0 requests/s per worker, got {rate!r}")
        runs(rate, early=False)
    return pd.DataFrame(runs.points).assign(layout=runs.cfg.name)


def _burst_span_s(runs: "Runs") -> float:
    """How close together a burst's arrivals are: a thousandth of the shortest prompt's prefill on a cost model,
    else a millionth of the tighter SLO."""
    cost = getattr(runs.ex, "cost", None)
    if hasattr(cost, "prefill_s"):
        lone = cost.prefill_s(min(r.prompt_len for r in runs.base))
        if lone > 0:
            return 1e-3 * lone
    return 1e-6 * min(runs.slos)


#: the largest ``step``: at step inf the search tried a rate of inf and halved it 40 times ("did not end in 40
#: runs ... lowest failed inf"); at 1e308 it bisected 1 .. 1e308 by means, not geometric means (audit, 2026-12-03)
MAX_STEP = 100.0

#: same-direction steps of the search at ``step``; each one after them squares the factor (a far start is
#: left in a few runs)
WIDEN_AFTER = 8


def _factor(step: float, steps: int) -> float:
    """The factor of the search's ``steps``-th step in one direction: ``step``, squared for each step after
    :data:`WIDEN_AFTER` (after 2 for a step below 1.5: a start meant to be near the answer that was not)."""
    return step ** (2 ** max(0, steps - (WIDEN_AFTER if step >= 1.5 else 2)))


def goodput(workload: str | WorkloadSpec | Sequence[Request], config: ServingConfig, backend=None, *,
            ttft_slo_s: float, tpot_slo_s: float, target: float = 0.9, tolerance: float = 0.03,
            duration_s: float | None = None, min_requests: int | None = None, max_requests: int = 4000,
            start_rate_per_worker: float = 1.0, seed: int = 0, scale: float | None = None, max_runs: int = 40,
            model=None, prefixes: bool = False, step: float = 2.0, progress: bool | None = False,
            lifetimes: float = LIFETIMES, early: bool = True, extend: int = EXTEND) -> GoodputResult:
    """Bisect the request rate to the highest rate per worker at which ``target`` of requests meet their SLOs.

    The search steps the rate by ``step`` from ``start_rate_per_worker`` (each step after :data:`WIDEN_AFTER` in
    one direction squares the factor) until one rate passes and one fails, then bisects between them (by their
    geometric mean while they are more than ``max(2, step)`` apart, then their mean) until they are within
    ``tolerance``. It always ends with an answer (``GoodputResult.outcome``):

    - rates keep failing: after two failures (at a ``step`` below 1.5, once the rate is 4x below the start) it
      runs a *trickle* (arrivals so far apart that each request is
      served alone, :meth:`Runs.trickle_rate`); if that fails too, no rate meets the SLOs: goodput 0, with the
      SLO most requests missed ("unmet"). A cost model can say so before any run (one prefill of the shortest
      prompt longer than the TTFT SLO, one decode step longer than the TPOT SLO).
    - rates keep passing: once two runs in a row hold every request they can (a higher rate only brings the
      same requests closer), it runs a *burst* (every request at once); if that passes, no rate breaks the SLOs
      ("unbounded": goodput is the highest rate stepped to, a lower bound).

    Args:
        workload: a workload name, a :class:`WorkloadSpec`, or requests (taken in arrival order, in whatever order
            given; their arrival times are scaled to each tested rate; their mean rate is taken as measured from the
            first to the last arrival).
        config: the layout (its ``trace`` is switched off: metrics only).
        backend, model: as :func:`splitlab.serving.run` (default: the built-in cost model).
        ttft_slo_s, tpot_slo_s: the SLOs (s, finite, > 0).
        target: SLO attainment that passes (DistServe: 0.9).
        tolerance: stop when the failing rate is within this share above the passing one.
        lifetimes: a run's arrivals span this many request lifetimes (TTFT SLO + (mean output tokens - 1) x TPOT
            SLO; :mod:`.goodput_runs`), the first 2 and the last 1 of them not counted (each at most a quarter of
            the span); ``duration_s``: seconds of arrivals per run instead. Each run serves rate x duration
            requests, at least ``min_requests`` (default 2,000, or ``max_requests`` if fewer) and at most
            ``max_requests`` (given requests: all of them, every
            run, unless ``prefixes``: then the first rate x duration of them, which lets several searches share
            one request set of ``max_requests``).
        early: stop each run once its pass/fail is settled (:mod:`.goodput_spread`): at checkpoints of 1, 2, 4 ...
            x its requests, judged by the attainment and its batch-means standard error (the point's
            ``attainment`` and ``attainment_se``, ``extended``: the checkpoint, 0 for the run's own requests), or
            at once when its verdict is certain to be settled whatever its undecided requests do (``stopped``:
            "fail" or "pass", ``attainment`` a bound; :func:`~.goodput_spread.sure_margins`).
            False: every run to its end, never going on.
        extend: a run goes on to at most this many times its requests (default :data:`~.goodput_spread.EXTEND`,
            8, at most :data:`~.goodput_spread.MAX_EXTEND`, 64; as many as given requests hold); 1: the plain run
            of its requests, decided as the full run decides (early stopped once its verdict cannot change).
        start_rate_per_worker: the first rate tried (requests/s per worker); ``step``: the factor by which the
            rate grows or shrinks until one rate passes and one fails (a good start deserves a small step), at
            most :data:`MAX_STEP`.
        seed, scale: of the workload (see :func:`workload_requests`).
        max_runs: give up after this many runs (a ValueError says so; the search above ends within about 25
            runs at the default tolerance, so only a smaller ``max_runs`` is reached).
        progress: a tqdm bar of the runs on stderr once the search has gone on for a few seconds (True, False, or
            None: only when stderr is a terminal).

    Returns:
        a :class:`GoodputResult` (``outcome``, ``reason``: why the goodput is what it is).

    Raises:
        ValueError: SLOs that are not finite times > 0 (True is no time) or whose lifetime x lifetimes overflows,
            lifetimes not a number > 0, extend not an integer in 1 .. 64, target
            outside (0, 1], tolerance outside (0, 1), a start rate that is not > 0, step not in (1, 100], max_runs not
            an integer >= 1, fewer than 2 requests at different times (with ``prefixes``: among the first
            ``min_requests``); or ``max_runs`` runs made before the search ended.
        TypeError: a config that is not a :class:`ServingConfig`.
    """
    if not isinstance(config, ServingConfig):  # a list of configs failed deep in a run: 'list' has no 'with_'
        raise TypeError(f"config must be one ServingConfig (e.g. ServingConfig.disaggregated(1, 1)), got "
                        f"{type(config).__name__}")
    if not all(isinstance(x, numbers.Real) for x in (target, tolerance)) or not 0 < target <= 1 or not \
            0 < tolerance < 1:
        raise ValueError(f"target must be in (0, 1] and tolerance in (0, 1), got {target!r} and {tolerance!r}")
    if isinstance(max_runs, bool) or not isinstance(max_runs, numbers.Integral) or max_runs < 1:
        raise ValueError(f"max_runs must be an integer >= 1 (runs the search may make), got {max_runs!r}")
    if not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in (start_rate_per_worker, step)) or \
            not (start_rate_per_worker > 0 and math.isfinite(start_rate_per_worker)) or not 1 < step <= MAX_STEP:
        raise ValueError(f"start_rate_per_worker must be a finite rate > 0 and step a factor > 1 and at most "
                         f"{MAX_STEP:g}, got {start_rate_per_worker!r} and {step!r}")
    runs = Runs(workload, config, backend, model, ttft_slo_s, tpot_slo_s, target, duration_s, min_requests,
                 max_requests, seed, scale, prefixes, lifetimes, extend)
    cfg, points = runs.cfg, runs.points
    runs.bar = progress_bar(None, f"goodput of {cfg.name}", show_progress(progress), unit="run")

    def answer(rate: float, outcome: str, reason: str, binding: str | None = None) -> GoodputResult:
        failing = [p for p in points if not p["passed"]]
        if binding is None:
            binding = binding_of(min(failing, key=lambda p: p["rate_per_worker"])) if failing else "none"
        if runs.bar is not None:
            runs.bar.close()
        return GoodputResult(cfg.name, runs.workers, rate, binding, points, target, tolerance, runs.duration,
                             outcome, reason)

    unmet = lone_request_reason(getattr(runs.ex, "cost", None), runs.base, runs.slos, target)
    if unmet is not None:
        return answer(0.0, "unmet", unmet[1], unmet[0])

    def attempt(rate_per_worker: float, stop: bool = early) -> dict:
        if len(points) >= max_runs:
            raise SearchNotEnded(f"goodput of {cfg.name} did not end in {max_runs} runs (highest rate passed {lo:.4g}, "
                             f"lowest failed {hi:.4g} requests/s per worker): pass goodput() a larger max_runs or "
                             f"tolerance, or a start_rate_per_worker nearer the answer")
        return runs(rate_per_worker, stop)

    lo, hi, rate = 0.0, math.inf, start_rate_per_worker
    if attempt(rate)["passed"]:  # step up until a rate fails ...
        lo, capped, ups = rate, int(runs.capped(rate)), 0
        while hi == math.inf:
            if capped >= 2:  # the same requests ever closer: does even a burst of them meet the SLOs?
                point = attempt(max(runs.rate_for_span(_burst_span_s(runs)), lo * step), False)
                if point["passed"]:
                    return answer(lo, "unbounded", unbounded_reason(lo, point))
                hi = point["rate_per_worker"]
                break
            ups += 1
            rate *= _factor(step, ups)
            if attempt(rate)["passed"]:
                lo, capped = rate, (capped + 1 if runs.capped(rate) else 0)
            else:
                hi = rate
    else:  # ... or down until one passes; a trickle that fails says no rate does
        hi, floor, downs = rate, None, 0
        while lo == 0.0:
            # two failures (or, at a small step, a rate 4x below the start): does a trickle (each request alone) pass?
            if floor is None and (downs == 1 if step >= 1.5 else start_rate_per_worker >= 4 * rate):
                trickle = runs.trickle_rate()
                point = attempt(trickle, False) if trickle < rate else points[-1]
                if not point["passed"]:
                    return answer(0.0, "unmet", unmet_reason(point, target, ttft_slo_s, tpot_slo_s))
                floor = trickle
            downs += 1
            if floor is not None and rate / _factor(step, downs) <= floor:
                lo = floor  # bisect down to the trickle
                break
            rate /= _factor(step, downs)
            if attempt(rate)["passed"]:
                lo = rate
            else:
                hi = rate
    while hi - lo > tolerance * hi:
        mid = math.sqrt(lo * hi) if hi > max(2.0, step) * lo else (lo + hi) / 2
        if attempt(mid)["passed"]:
            lo = mid
        else:
            hi = mid
    at = {p["rate_per_worker"]: p for p in points}
    return answer(lo, "found", found_reason(at[lo], at[hi], ttft_slo_s, tpot_slo_s))
