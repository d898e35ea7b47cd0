"""Goodput: the highest request rate per worker a layout serves within its SLOs, found by bisection.

Definition (Zhong et al., "DistServe", OSDI'24, sec. 2.1 and 4): goodput is the maximum request rate per GPU at
which at least ``target`` (90%) of requests meet both the TTFT and the TPOT SLO. Here a worker stands for a GPU
and the workers of both pools count, so a 1P+3D split is 4 workers, like 4 colocated ones. A request meets its
SLOs as :func:`splitlab.serving.metrics.meets_slo` says, which also bounds the time to the *second* token by
TTFT SLO + TPOT SLO, so a layout that answers the first token at once and then leaves the request waiting for a
decode slot is not rewarded for hiding that backlog.

Each run lasts about ``duration_s`` of arrivals (default 20 x (TTFT SLO + TPOT SLO)): a run too short for
its rate ends before a backlog can build, and a burst of requests the cluster drains within the SLO would pass at
any rate. (Requests arriving above capacity wait (rate - capacity) / capacity x t after t seconds, so with 20
SLOs of arrivals a rate passes at most about 1 / (0.9 x 20) = 6% above the true capacity.) Every run takes the
first requests of one seeded request set, their arrival times scaled by 1 / rate (Poisson gaps are exponential
draws times 1 / rate), so every rate sees the same lengths and prompts. The search steps the rate up or down
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

from . import metrics as M
from .config import ServingConfig
from .goodput_result import (BINDING, GoodputResult, binding_of, found_reason, lone_request_reason, unbounded_reason,
                             unmet_reason)
from .request import Request
from .runner import backend_for, run
from ..common.progress import show_progress
from .virtual import progress_bar
from .workload import WorkloadSpec, make_workload, workload_scale

__all__ = ["goodput", "attainment_curve", "GoodputResult", "workload_requests", "BINDING"]


class _Shape:
    """What make_workload reads of a model (context and vocabulary), for back ends that are not a model."""

    def __init__(self, max_context: int, vocab_size: int | None):
        self.max_context, self.vocab_size = int(max_context), int(vocab_size or 256)


def workload_requests(workload, n_requests: int, rate_per_s: float, backend=None, seed: int = 0,
                      scale: float | None = None, arrival: str = "poisson", cv: float = 2.0) -> list[Request]:
    """``make_workload`` sized for ``backend``'s model: a model's own context and vocabulary (emulated), else the
    cost model's context (lengths scaled by :func:`~.workload.workload_scale` of it unless ``scale`` is given)."""
    lm = getattr(backend, "lm", None)
    shape = lm if lm is not None else _Shape(getattr(backend, "max_context", 2048),
                                             getattr(backend, "vocab_size", None))
    if scale is None:
        scale = workload_scale(shape.max_context)
    return make_workload(workload, n_requests, rate_per_s, seed=seed, model=shape, arrival=arrival, cv=cv,
                         scale=scale)


def _rescaled(requests: Sequence[Request], factor: float) -> list[Request]:
    """The same requests with arrival times multiplied by ``factor`` (a rate divided by it)."""
    out = []
    for r in requests:
        c = r.fresh()
        c.arrival_s = r.arrival_s * factor
        out.append(c)
    return out


class _Runs:
    """Runs of one configuration at chosen rates per worker, each summarised as one point of the curve."""

    bar = None  # a progress bar of the runs (goodput's ``progress``)

    def __init__(self, workload, config, backend, model, ttft_slo_s, tpot_slo_s, target, duration_s, min_requests,
                 max_requests, seed, scale, prefixes):
        M._check_slos(ttft_slo_s, tpot_slo_s)
        if ttft_slo_s is None or tpot_slo_s is None:
            raise ValueError("goodput needs both a TTFT and a TPOT SLO")
        for name, slo in (("ttft_slo_s", ttft_slo_s), ("tpot_slo_s", tpot_slo_s)):
            if not math.isfinite(slo):  # it also sets the runs' length: 20 x (TTFT SLO + TPOT SLO)
                raise ValueError(f"{name} must be a finite time > 0 s (goodput needs an SLO that some rate breaks), "
                                 f"got {slo!r}")
        self.ex, self.cfg = backend_for(model, backend), config.with_(trace=False)
        self.workers, self.slos, self.target, self.points = self.cfg.n_workers, (ttft_slo_s, tpot_slo_s), target, []
        self.duration = 20 * (ttft_slo_s + tpot_slo_s) if duration_s is None else duration_s
        if not (0 < self.duration < math.inf and 2 <= min_requests <= max_requests):
            raise ValueError(f"duration_s must be a finite time > 0 (default 20 x (TTFT SLO + TPOT SLO)) and 2 <= "
                             f"min_requests <= max_requests, got {duration_s!r}, {min_requests!r}, {max_requests!r}")
        self.limits = (min_requests, max_requests)
        if isinstance(workload, (str, WorkloadSpec)):
            self.base, self.rate, self.fixed = workload_requests(workload, max_requests, 1.0, self.ex, seed, scale), \
                1.0, False
        else:
            self.base, self.fixed = list(workload), not prefixes
            if len(self.base) < 2 or self.base[-1].arrival_s <= self.base[0].arrival_s:
                raise ValueError("goodput needs at least 2 requests arriving at different times")
            self.rate = (len(self.base) - 1) / (self.base[-1].arrival_s - self.base[0].arrival_s)

    def span_s(self, rate_per_worker: float) -> float:
        """Seconds from the first to the last arrival of the run at ``rate_per_worker``."""
        reqs = self.base if self.fixed else self.base[:self.n(rate_per_worker)]
        return (reqs[-1].arrival_s - reqs[0].arrival_s) * self.rate / (rate_per_worker * self.workers)

    def capped(self, rate_per_worker: float) -> bool:
        """True if the run at ``rate_per_worker`` already serves every request it can: any higher rate serves
        the same requests, only closer together."""
        return self.n(rate_per_worker) >= min(len(self.base), self.limits[1])

    def rate_for_span(self, span_s: float) -> float:
        """The rate per worker at which the largest run's arrivals span ``span_s`` seconds."""
        return self.span_s(1.0) / span_s

    def trickle_rate(self) -> float:
        """A rate per worker so low that requests are served one at a time: arrivals on average 1000 x apart
        the longest any request may take within its SLOs (TTFT SLO + TPOT SLO x (output tokens - 1)), at most
        1e6 s apart (arrival times stay far below the precision a double loses at 1e9 s)."""
        ttft, tpot = self.slos
        longest = ttft + tpot * max(max(r.max_new_tokens for r in self.base) - 1, 1)
        return 1.0 / (self.workers * min(1000 * longest, 1e6))

    def n(self, rate_per_worker: float) -> int:
        """Requests of the run at ``rate_per_worker``: rate x duration, within the limits."""
        return len(self.base) if self.fixed else min(self.limits[1], max(
            self.limits[0], math.ceil(rate_per_worker * self.workers * self.duration)))

    def __call__(self, rate_per_worker: float) -> dict:
        workers, (ttft, tpot) = self.workers, self.slos
        n = self.n(rate_per_worker)
        res = run(_rescaled(self.base[:n], self.rate / (rate_per_worker * workers)), self.cfg, self.ex)
        att = M.slo_attainment(res.requests, ttft, tpot)
        done = res.completed
        p90 = {f"{k}_p90_s": M.percentiles((f(r) for r in done), (90,))["p90"]
               for k, f in (("ttft", M.ttft_s), ("ttst", M.ttst_s), ("tpot", M.tpot_s))}
        point = dict(rate_per_worker=rate_per_worker, rate_per_s=rate_per_worker * workers, requests=n,
                     attainment=att, passed=att >= self.target, **M.slo_misses(res.requests, ttft, tpot), **p90)
        self.points.append(point)
        if self.bar is not None:
            self.bar.set_postfix_str(f"{rate_per_worker:.4g}/s per worker: {att:.1%}")
            self.bar.update()
        return point


def attainment_curve(workload, config: ServingConfig, backend=None, *, rates_per_worker: Sequence[float],
                     ttft_slo_s: float, tpot_slo_s: float, target: float = 0.9, duration_s: float | None = None,
                     min_requests: int = 100, max_requests: int = 4000, seed: int = 0, scale: float | None = None,
                     model=None, prefixes: bool = False) -> pd.DataFrame:
    """SLO attainment of ``config`` at each of ``rates_per_worker``, run as :func:`goodput` runs them (same
    arguments): one row per rate, the columns of :meth:`GoodputResult.curve`."""
    runs = _Runs(workload, config, backend, model, ttft_slo_s, tpot_slo_s, target, duration_s, min_requests,
                 max_requests, seed, scale, prefixes)
    for rate in rates_per_worker:
        if not (rate > 0 and math.isfinite(rate)):
            raise ValueError(f"rates must be > 0 requests/s per worker, got {rate!r}")
        runs(rate)
    return pd.DataFrame(runs.points).assign(layout=runs.cfg.name)


def _burst_span_s(runs: "_Runs") -> float:
    """How close together a burst's arrivals are: a thousandth of the shortest prompt's prefill on a cost model,
    else a millionth of the tighter SLO."""
    cost = getattr(runs.ex, "cost", None)
    if hasattr(cost, "prefill_s"):
        lone = cost.prefill_s(min(r.prompt_len for r in runs.base))
        if lone > 0:
            return 1e-3 * lone
    return 1e-6 * min(runs.slos)


#: same-direction steps of the search at ``step``; each one after them squares the factor (a far start is
#: left in a few runs)
WIDEN_AFTER = 8


def _factor(step: float, steps: int) -> float:
    """The factor of the search's ``steps``-th step in one direction: ``step``, squared for each step after
    :data:`WIDEN_AFTER`."""
    return step ** (2 ** max(0, steps - WIDEN_AFTER))


def goodput(workload: str | WorkloadSpec | Sequence[Request], config: ServingConfig, backend=None, *,
            ttft_slo_s: float, tpot_slo_s: float, target: float = 0.9, tolerance: float = 0.03,
            duration_s: float | None = None, min_requests: int = 100, max_requests: int = 4000,
            start_rate_per_worker: float = 1.0, seed: int = 0, scale: float | None = None, max_runs: int = 40,
            model=None, prefixes: bool = False, step: float = 2.0, progress: bool | None = False) -> GoodputResult:
    """Bisect the request rate to the highest rate per worker at which ``target`` of requests meet their SLOs.

    The search steps the rate by ``step`` from ``start_rate_per_worker`` (each step after :data:`WIDEN_AFTER` in
    one direction squares the factor) until one rate passes and one fails, then bisects between them (by their
    geometric mean while they are more than ``max(2, step)`` apart, then their mean) until they are within
    ``tolerance``. It always ends with an answer (``GoodputResult.outcome``):

    - rates keep failing: after two failures it runs a *trickle* (arrivals so far apart that each request is
      served alone, :meth:`_Runs.trickle_rate`); if that fails too, no rate meets the SLOs: goodput 0, with the
      SLO most requests missed ("unmet"). A cost model can say so before any run (one prefill of the shortest
      prompt longer than the TTFT SLO, one decode step longer than the TPOT SLO).
    - rates keep passing: once two runs in a row hold every request they can (a higher rate only brings the
      same requests closer), it runs a *burst* (every request at once); if that passes, no rate breaks the SLOs
      ("unbounded": goodput is the highest rate stepped to, a lower bound).

    Args:
        workload: a workload name, a :class:`WorkloadSpec`, or requests (their arrival times are scaled to each
            tested rate; their mean rate is taken as measured from the first to the last arrival).
        config: the layout (its ``trace`` is switched off: metrics only).
        backend, model: as :func:`splitlab.serving.run` (default: the built-in cost model).
        ttft_slo_s, tpot_slo_s: the SLOs (s, finite, > 0).
        target: SLO attainment that passes (DistServe: 0.9).
        tolerance: stop when the failing rate is within this share above the passing one.
        duration_s: seconds of arrivals per run (default 20 x (TTFT SLO + TPOT SLO)); each run serves
            rate x duration requests, at least ``min_requests`` and at most ``max_requests`` (given requests:
            all of them, every run, unless ``prefixes``: then the first rate x duration of them, which lets
            several searches share one request set of ``max_requests``).
        start_rate_per_worker: the first rate tried (requests/s per worker); ``step``: the factor by which the
            rate grows or shrinks until one rate passes and one fails (a good start deserves a small step).
        seed, scale: of the workload (see :func:`workload_requests`).
        max_runs: give up after this many runs (a ValueError says so; the search above ends within about 25
            runs at the default tolerance, so only a smaller ``max_runs`` is reached).
        progress: a tqdm bar of the runs on stderr once the search has gone on for a few seconds (True, False, or
            None: only when stderr is a terminal).

    Returns:
        a :class:`GoodputResult` (``outcome``, ``reason``: why the goodput is what it is).

    Raises:
        ValueError: SLOs that are not finite times > 0 (True is no time), target outside (0, 1], tolerance outside
            (0, 1), a start rate that is not > 0, step not > 1, max_runs not an integer >= 1, fewer than 2
            requests; or ``max_runs`` runs made before the search ended.
    """
    if not 0 < target <= 1 or not 0 < tolerance < 1:
        raise ValueError(f"target must be in (0, 1] and tolerance in (0, 1), got {target} and {tolerance}")
    if isinstance(max_runs, bool) or not isinstance(max_runs, numbers.Integral) or max_runs < 1:
        raise ValueError(f"max_runs must be an integer >= 1 (runs the search may make), got {max_runs!r}")
    if not (start_rate_per_worker > 0 and math.isfinite(start_rate_per_worker)) or not step > 1:
        raise ValueError(f"start_rate_per_worker must be a rate > 0 and step > 1, got {start_rate_per_worker!r} "
                         f"and {step!r}")
    runs = _Runs(workload, config, backend, model, ttft_slo_s, tpot_slo_s, target, duration_s, min_requests,
                 max_requests, seed, scale, prefixes)
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

    def attempt(rate_per_worker: float) -> dict:
        if len(points) >= max_runs:
            raise ValueError(f"goodput of {cfg.name} did not end in {max_runs} runs (highest rate passed {lo:.4g}, "
                             f"lowest failed {hi:.4g} requests/s per worker): pass goodput() a larger max_runs or "
                             f"tolerance, or a start_rate_per_worker nearer the answer")
        return runs(rate_per_worker)

    lo, hi, rate = 0.0, math.inf, start_rate_per_worker
    if attempt(rate)["passed"]:  # step up until a rate fails ...
        lo, capped, ups = rate, int(runs.capped(rate)), 0
        while hi == math.inf:
            if capped >= 2:  # the same requests ever closer: does even a burst of them meet the SLOs?
                point = attempt(max(runs.rate_for_span(_burst_span_s(runs)), lo * step))
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
            if downs == 1 and floor is None:  # two failures: does a trickle (each request alone) pass at all?
                trickle = runs.trickle_rate()
                point = attempt(trickle) if trickle < rate else points[-1]
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
