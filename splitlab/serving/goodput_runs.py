"""The runs of a goodput search (:mod:`.goodput_search`): one seeded request set, its first requests at each
tested rate with their arrival times scaled (:class:`Runs`), each run summarised as one point of the attainment
curve; and :func:`workload_requests`, a workload sized to a back end's model or cost model."""
from __future__ import annotations

import math
import sys
from typing import Sequence

from . import metrics as M
from .request import Request
from .runner import backend_for, run
from .workload import WorkloadSpec, make_workload, workload_scale

__all__ = ["Runs", "workload_requests"]


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


class Runs:
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
        if duration_s is None and not math.isfinite(self.duration):  # 1e308 + 1e308 is inf
            raise ValueError(f"ttft_slo_s + tpot_slo_s must be at most {sys.float_info.max / 20:.3g} s (each run "
                             f"lasts 20 x their sum), got {ttft_slo_s!r} and {tpot_slo_s!r}")
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
        wanted = min(rate_per_worker * self.workers * self.duration, self.limits[1])  # inf at a rate of 1e308
        return len(self.base) if self.fixed else min(self.limits[1], max(self.limits[0], math.ceil(wanted)))

    def __call__(self, rate_per_worker: float) -> dict:
        workers, (ttft, tpot) = self.workers, self.slos
        n = self.n(rate_per_worker)
        res = run(_rescaled(self.base[:n], self.rate / (rate_per_worker * workers)), self.cfg, self.ex,
                  progress=False)  # the search has its own bar
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
