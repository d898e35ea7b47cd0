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
draws times 1 / rate), so every rate sees the same lengths and prompts. The search doubles or halves the rate
until one passes and one fails, then bisects until the two are within ``tolerance`` of each other: the answer is
the highest rate that passed.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd

from . import metrics as M
from .config import ServingConfig
from .request import Request
from .runner import backend_for, run
from .virtual import progress_bar
from .workload import WorkloadSpec, make_workload, workload_scale

__all__ = ["goodput", "attainment_curve", "GoodputResult", "workload_requests", "BINDING"]

#: what ``binding_slo`` may be: the SLO most requests missed at the lowest failing rate
BINDING = ("ttft", "ttst", "tpot", "unfinished", "none")


@dataclass
class GoodputResult:
    """What :func:`goodput` found for one configuration.

    Attributes:
        name: the configuration's name; workers: its workers (both pools).
        goodput_rps_per_worker: the highest tested rate per worker that passed (0.0 if none did).
        goodput_rps: the same for the whole cluster (x workers).
        binding_slo: at the lowest failing rate, the SLO most requests missed: "ttft", "ttst" (the second
            token later than TTFT SLO + TPOT SLO), "tpot" or "unfinished"; "none" if no tested rate failed.
        points: every run of the search, in the order walked (see :meth:`curve`).
        target, tolerance, duration_s: the search's settings.
    """

    name: str
    workers: int
    goodput_rps_per_worker: float
    binding_slo: str
    points: list[dict] = field(default_factory=list)
    target: float = 0.9
    tolerance: float = 0.03
    duration_s: float = 0.0

    @property
    def goodput_rps(self) -> float:
        return self.goodput_rps_per_worker * self.workers

    def curve(self) -> pd.DataFrame:
        """The attainment curve the search walked, sorted by rate: rate_per_worker, rate_per_s, attainment,
        passed, the misses of each SLO and TTFT / TTST / TPOT P90 (s)."""
        return pd.DataFrame(self.points).sort_values("rate_per_worker").reset_index(drop=True)

    def __repr__(self) -> str:
        return (f"GoodputResult({self.name}: {self.goodput_rps_per_worker:.4g} requests/s per worker x "
                f"{self.workers} workers, binding {self.binding_slo}, {len(self.points)} runs)")


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


def _lone_request(runs: "_Runs") -> float | None:
    """Refuse SLOs that no rate can meet, by the cost model (None for back ends without one): the shortest prompt's
    prefill alone longer than the TTFT SLO, or one decode step of one request longer than the TPOT SLO. Returns that
    prefill's seconds (the burst below which the arrivals of a run are all at once)."""
    cost = getattr(runs.ex, "cost", None)
    if not hasattr(cost, "prefill_s") or not hasattr(cost, "decode_s"):
        return None
    (ttft, tpot), shortest = runs.slos, min(r.prompt_len for r in runs.base)
    prefill, step = cost.prefill_s(shortest), cost.decode_s(1, shortest + 1)
    if prefill > ttft:
        raise ValueError(f"no rate meets a TTFT SLO of {ttft:g} s: one prefill of the workload's shortest prompt "
                         f"({shortest} tokens) takes {prefill:.3g} s on this cost model")
    if step > tpot and any(r.max_new_tokens > 1 for r in runs.base):
        raise ValueError(f"no rate meets a TPOT SLO of {tpot:g} s: one decode step of a single request after the "
                         f"workload's shortest prompt ({shortest} tokens) takes {step:.3g} s on this cost model")
    return prefill


def goodput(workload: str | WorkloadSpec | Sequence[Request], config: ServingConfig, backend=None, *,
            ttft_slo_s: float, tpot_slo_s: float, target: float = 0.9, tolerance: float = 0.03,
            duration_s: float | None = None, min_requests: int = 100, max_requests: int = 4000,
            start_rate_per_worker: float = 1.0, seed: int = 0, scale: float | None = None, max_runs: int = 40,
            model=None, prefixes: bool = False, step: float = 2.0, progress: bool = False) -> GoodputResult:
    """Bisect the request rate to the highest rate per worker at which ``target`` of requests meet their SLOs.

    Args:
        workload: a workload name, a :class:`WorkloadSpec`, or requests (their arrival times are scaled to each
            tested rate; their mean rate is taken as measured from the first to the last arrival).
        config: the layout (its ``trace`` is switched off: metrics only).
        backend, model: as :func:`splitlab.serving.run` (default: the built-in cost model).
        ttft_slo_s, tpot_slo_s: the SLOs (s, > 0).
        target: SLO attainment that passes (DistServe: 0.9).
        tolerance: stop when the failing rate is within this share above the passing one.
        duration_s: seconds of arrivals per run (default 20 x (TTFT SLO + TPOT SLO)); each run serves
            rate x duration requests, at least ``min_requests`` and at most ``max_requests`` (given requests:
            all of them, every run, unless ``prefixes``: then the first rate x duration of them, which lets
            several searches share one request set of ``max_requests``).
        start_rate_per_worker: the first rate tried (requests/s per worker); ``step``: the factor by which the
            rate grows or shrinks until one rate passes and one fails (a good start deserves a small step).
        seed, scale: of the workload (see :func:`workload_requests`).
        max_runs: give up after this many runs (a ValueError says so).
        progress: a tqdm bar of the runs on stderr once the search has gone on for a few seconds.

    Returns:
        a :class:`GoodputResult`.

    Raises:
        ValueError: SLOs that are not finite times > 0 (True is no time), target outside (0, 1], tolerance outside
            (0, 1), a start rate that is not > 0, max_runs not an integer >= 1, fewer than 2 requests; on a cost
            model, SLOs that no rate meets (the shortest prompt's prefill alone longer than the TTFT SLO, one decode step longer than the TPOT
            SLO) or that no rate breaks (a burst of every request of a run meets them); or a search that did not
            converge within ``max_runs``.
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
    cfg, workers, points = runs.cfg, runs.workers, runs.points
    lone = _lone_request(runs)
    runs.bar = progress_bar(None, f"goodput of {cfg.name}", progress, unit="run")

    def attempt(rate_per_worker: float) -> bool:
        if len(points) >= max_runs:
            if hi == math.inf and lo > 0:  # never a failing rate: the SLOs are the problem, not the search
                raise ValueError(f"goodput of {cfg.name}: every rate tried met the SLOs (TTFT {ttft_slo_s:g} s, TPOT "
                                 f"{tpot_slo_s:g} s), up to {lo:.4g} requests/s per worker in {max_runs} runs: SLOs "
                                 f"this loose may be met at any rate (tighten them), or the search needs more runs "
                                 f"(goodput()'s max_runs)")
            raise ValueError(f"goodput of {cfg.name} did not converge in {max_runs} runs (last rate "
                             f"{rate_per_worker:.4g}/s per worker): pass goodput() a larger max_runs or tolerance, "
                             f"or a start_rate_per_worker nearer the answer")
        return runs(rate_per_worker)["passed"]

    lo, hi, rate = 0.0, math.inf, start_rate_per_worker
    if attempt(rate):  # double until a rate fails ...
        lo = rate
        while hi == math.inf:
            if lone is not None and runs.span_s(rate) <= lone:  # one burst passed: no higher rate can fail
                raise ValueError(f"goodput of {cfg.name}: the SLOs (TTFT {ttft_slo_s:g} s, TPOT {tpot_slo_s:g} s) "
                                 f"are so loose that even {rate:.4g} requests/s per worker meets them (every request "
                                 f"of the run arriving within {runs.span_s(rate):.3g} s, one prefill's time): no "
                                 f"rate breaks them; tighten the SLOs")
            rate *= step
            lo, hi = (rate, hi) if attempt(rate) else (lo, rate)
    else:  # ... or halve until one passes (or the rate is a trickle: goodput 0)
        hi = rate
        while lo == 0.0 and rate > start_rate_per_worker * 1e-4:
            rate /= step
            lo, hi = (rate, hi) if attempt(rate) else (lo, rate)
    while lo > 0 and hi - lo > tolerance * hi:
        mid = (lo + hi) / 2
        if attempt(mid):
            lo = mid
        else:
            hi = mid
    failing = [p for p in points if not p["passed"]]
    binding = "none"
    if failing:
        worst = min(failing, key=lambda p: p["rate_per_worker"])
        counts = {k: worst[k] for k in ("ttft", "ttst", "tpot", "unfinished")}
        binding = max(counts, key=counts.get)
    if runs.bar is not None:
        runs.bar.close()
    return GoodputResult(cfg.name, workers, lo, binding, points, target, tolerance, runs.duration)
