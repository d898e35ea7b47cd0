"""The runs of a goodput search (:mod:`.goodput_search`): one seeded request set, its first requests at each
tested rate with their arrival times scaled (:class:`Runs`), each run summarised as one point of the attainment
curve; and :func:`workload_requests`, a workload sized to a back end's model or cost model.

**Runs at steady state.** A run is sized by the request *lifetime*, the most time its SLOs allow a request of the
mean output length, ``L = TTFT SLO + (mean output tokens - 1) x TPOT SLO``: its arrivals span ``lifetimes`` x L
(default :data:`LIFETIMES`), and hold at least ``min_requests`` requests (default :data:`MIN_REQUESTS`, or
``max_requests`` if fewer). A decode backlog builds over lifetimes, not over SLOs: a decode batch fills only after
about one lifetime of arrivals, so a run of a few SLOs ends before an overloaded layout shows it (issue 20
measured +25% to +40% on such runs). And near its boundary a queue's waits are correlated over many requests, so
a run of a few hundred is a noisy sample of its attainment (1P+1D on the built-in cost model, 256 / 24 tokens,
10% above its goodput: 92.5% of 267 counted requests met the SLOs, 84% of 2,000, 84.3% of 80,000).

Attainment counts only the requests arriving after a *warm-up* (the first :data:`WARMUP_LIFETIMES` lifetimes: the
cluster starts empty) and before a *cool-down* (the last :data:`COOLDOWN_LIFETIMES` lifetime: those requests keep
the load on while the counted ones finish; they are served but not counted), each at most a quarter of the run's
span. A goodput search stops a run once its verdict is settled, and goes on past its requests (the same seeded
set, continued: :meth:`Runs._continue`) up to ``extend`` x them while it is not (:mod:`.goodput_spread`: a run
measures its own spread; seed 2 of DistServe's toy landed 7.7% low on plain runs of 2,000 because of a burst in its
first 1,000 arrivals); an attainment curve runs each to its end.

**At exactly its rate.** A run at ``r`` requests/s scales its requests' arrivals so that its first ``m`` span
exactly ``(m - 1) / r`` at each of its checkpoints ``m`` (:func:`~.arrival_rate.at_rate`: the seeded Poisson set
conditioned on its counts, the order and shape of its gaps kept), as a trace replayed at a rate is. Scaled by one
factor instead, a set whose first arrivals happen to come fast ran above the rate it reported: seed 2's first 1,000
arrivals come 8% fast, and the default search of the built-in 1P+3D landed 6.4% below runs 20x longer (4.2% with
this, and 30 of 30 layouts, cost models and seeds within 5%: ``benchmarks/results/goodput_steady_rate_2026-12-04.txt``).

DistServe's own search (``simdistserve/benchmarks/search_binary.py``, LLMServe/DistServe) sizes a run by a count
instead: ``run_binary_search(..., N=1000)``, 1000 requests per rate whatever the rate.
"""
from __future__ import annotations

import functools
import math
import numbers
import sys
from operator import attrgetter
from typing import Sequence

from . import metrics as M
from .cluster import Cluster
from .goodput_spread import EXTEND, MAX_EXTEND, Settle
from .goodput_verdict import misses_of
from .arrival_rate import at_rate
from .request import Request, State
from .runner import backend_for
from .workload import WorkloadSpec, make_workload, workload_scale

__all__ = ["Runs", "workload_requests", "lifetime_s", "LIFETIMES", "MIN_REQUESTS"]


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
    key = (workload, n_requests, rate_per_s, seed, shape.max_context, shape.vocab_size, arrival, cv, scale)
    try:
        hash(key)
    except TypeError:  # an argument that is not hashable: make_workload's checks say what is wrong with it
        key = None
    if key is not None and lm is None and isinstance(workload, (str, WorkloadSpec)):  # a cost model's set: kept
        return [r.fresh(own_prompt=True) for r in _made(*key)]
    return make_workload(workload, n_requests, rate_per_s, seed=seed, model=shape, arrival=arrival, cv=cv, scale=scale)


@functools.lru_cache(maxsize=8, typed=True)  # typed: seed=True or n=5.0 is refused, not served 1's or 5's set
def _made(workload, n_requests, rate_per_s, seed, max_context, vocab_size, arrival, cv, scale) -> tuple:
    """A cost model's request set, made once per arguments: the planner's and the map's searches each ask for the
    same set (making 3,000 requests costs about 7 times copying them; each caller gets fresh copies, prompt lists
    included, so one that edits a prompt in place leaves the next caller's set as made)."""
    return tuple(make_workload(workload, n_requests, rate_per_s, seed=seed, model=_Shape(max_context, vocab_size),
                               arrival=arrival, cv=cv, scale=scale))


def _rescaled(requests: Sequence[Request], factor: float) -> list[Request]:
    """The same requests with arrival times multiplied by ``factor`` (a rate divided by it)."""
    out = [r.fresh() for r in requests]
    for c in out:
        c.arrival_s *= factor
    return out


#: a run's arrivals span this many request lifetimes by default (module docstring; measured in
#: ``benchmarks/goodput_steady.py``)
LIFETIMES = 20
#: counted requests a run holds at least by default (module docstring): near its boundary an unsaturated queue's
#: waits are correlated over many requests, and runs of a few hundred missed the long-run attainment by 10-20%
MIN_REQUESTS = 2000
#: lifetimes of arrivals at the start of a run (the warm-up) and at its end (the cool-down) that are not counted
WARMUP_LIFETIMES, COOLDOWN_LIFETIMES = 2.0, 1.0


def lifetime_s(requests: Sequence[Request], ttft_slo_s: float, tpot_slo_s: float) -> float:
    """The most time its SLOs allow a request of the mean output length: TTFT SLO + (mean output - 1) x TPOT SLO."""
    mean = sum(r.max_new_tokens for r in requests) / len(requests)
    return ttft_slo_s + tpot_slo_s * max(mean - 1, 0.0)


class Runs:
    """Runs of one configuration at chosen rates per worker, each summarised as one point of the curve."""

    bar = None  # a progress bar of the runs (goodput's ``progress``)

    def __init__(self, workload, config, backend, model, ttft_slo_s, tpot_slo_s, target, duration_s, min_requests,
                 max_requests, seed, scale, prefixes, lifetimes=LIFETIMES, extend=EXTEND):
        M._check_slos(ttft_slo_s, tpot_slo_s)
        if ttft_slo_s is None or tpot_slo_s is None:
            raise ValueError("goodput needs both a TTFT and a TPOT SLO")
        for name, slo in (("ttft_slo_s", ttft_slo_s), ("tpot_slo_s", tpot_slo_s)):
            if not math.isfinite(slo):  # it also sets the runs' length: lifetimes of TTFT SLO + output x TPOT SLO
                raise ValueError(f"{name} must be a finite time > 0 s (goodput needs an SLO that some rate breaks), "
                                 f"got {slo!r}")
        if not (isinstance(lifetimes, numbers.Real) and not isinstance(lifetimes, bool) and 0 < lifetimes < math.inf):
            raise ValueError(f"lifetimes must be a number > 0 (request lifetimes of arrivals per run), got "
                             f"{lifetimes!r}")
        if isinstance(extend, bool) or not isinstance(extend, numbers.Integral) or not 1 <= extend <= MAX_EXTEND:
            raise ValueError(f"extend must be an integer >= 1 and <= {MAX_EXTEND} (how many times its requests a run "
                             f"may go on to), got {extend!r}")
        self.ex, self.cfg = backend_for(model, backend), config.with_(trace=False)
        self.workers, self.slos, self.target, self.points = self.cfg.n_workers, (ttft_slo_s, tpot_slo_s), target, []
        if min_requests is None:
            min_requests = min(MIN_REQUESTS, max_requests) if isinstance(max_requests, numbers.Integral) else 2
        if not 2 <= min_requests <= max_requests:
            raise ValueError(f"2 <= min_requests <= max_requests must hold, got {min_requests!r} and {max_requests!r}")
        self.limits, self.extend = (min_requests, max_requests), int(extend)
        self.source = (workload, seed, scale) if isinstance(workload, (str, WorkloadSpec)) else None
        if self.source is not None:
            self.base, self.rate, self.fixed = workload_requests(workload, max_requests, 1.0, self.ex, seed, scale), \
                1.0, False
        else:
            self.base, self.fixed = sorted(workload, key=attrgetter("arrival_s")), not prefixes  # stable: ties kept
            least = len(self.base) if self.fixed else min(min_requests, len(self.base))  # the fewest a run serves
            if least < 2 or self.base[least - 1].arrival_s <= self.base[0].arrival_s:
                raise ValueError("goodput needs at least 2 requests arriving at different times" + (
                    "" if least == len(self.base) else f" among its first min_requests ({least}): a run serves those"))
            head = self.base if self.fixed else self.base[:max_requests]  # a longer set's tail is for extending
            self.rate = (len(head) - 1) / (head[-1].arrival_s - head[0].arrival_s)
        self.lifetime = lifetime_s(self.base, ttft_slo_s, tpot_slo_s)
        self.duration = lifetimes * self.lifetime if duration_s is None else duration_s
        if duration_s is None and not math.isfinite(self.duration):  # 1e308 + 1e308 is inf
            raise ValueError(f"ttft_slo_s + tpot_slo_s x output tokens must be at most {sys.float_info.max:.3g} s "
                             f"/ lifetimes (a run's arrivals span {lifetimes:g} lifetimes), got {ttft_slo_s!r} and "
                             f"{tpot_slo_s!r}")
        if not 0 < self.duration < math.inf:
            raise ValueError(f"duration_s must be a finite time > 0 (default {lifetimes:g} request lifetimes), got "
                             f"{duration_s!r}")

    def span_s(self, rate_per_worker: float) -> float:
        """Seconds from the first to the last arrival of the run at ``rate_per_worker`` (exactly ``(n - 1) /
        rate`` for a set whose first ``n`` a run scales to its rate, :func:`~.arrival_rate.at_rate`)."""
        if not self.fixed:
            return (len(self.base[:self.n(rate_per_worker)]) - 1) / (rate_per_worker * self.workers)
        return (self.base[-1].arrival_s - self.base[0].arrival_s) * self.rate / (rate_per_worker * self.workers)

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
        """Requests of the run at ``rate_per_worker``: rate x duration, within the limits (given requests: at most
        as many as were given)."""
        wanted = min(rate_per_worker * self.workers * self.duration, self.limits[1])  # inf at a rate of 1e308
        if self.fixed:
            return len(self.base)
        most = self.limits[1] if self.source is not None else min(self.limits[1], len(self.base))  # given: no more
        return min(most, max(self.limits[0], math.ceil(wanted)))

    def counted(self, requests: Sequence[Request]) -> list[Request]:
        """The requests whose attainment decides a run (arrival order): those after the warm-up and before the
        cool-down, each at most a quarter of the run's span (module docstring); all of them if that leaves none."""
        first, last = requests[0].arrival_s, requests[-1].arrival_s
        quarter = (last - first) / 4
        begin = first + min(WARMUP_LIFETIMES * self.lifetime, quarter)
        end = last - min(COOLDOWN_LIFETIMES * self.lifetime, quarter)
        return [r for r in requests if begin <= r.arrival_s <= end] or list(requests)

    def requests_for(self, n: int) -> list[Request]:
        """The first ``n`` requests of the set (given requests: the whole set if every run serves it, else at most
        as many as it holds; a named workload's set continued as far as needed, :meth:`_continue`)."""
        while self.source is not None and len(self.base) < n:
            self._continue()
        return self.base if self.fixed else self.base[:n]

    def _continue(self) -> None:
        """Continue a named workload's request set by one more of its lengths: the same workload drawn with the
        next seed of this one's sequence (``seed + 2**32 x k``), its arrivals after the set's last one. Poisson
        arrivals continued by an independent Poisson stretch stay a Poisson process of the same rate, so an
        extended run is the same process, only longer; the set's first requests do not change."""
        workload, seed, scale = self.source
        k = len(self.base) // self.limits[1]
        more = workload_requests(workload, self.limits[1], 1.0, self.ex, seed + 2 ** 32 * k, scale)
        shift, first = self.base[-1].arrival_s, len(self.base)
        for i, r in enumerate(more):
            r.id, r.arrival_s = first + i, r.arrival_s + shift
        self.base.extend(more)

    def __call__(self, rate_per_worker: float, early: bool = True) -> dict:
        """One run at ``rate_per_worker``, as one point. ``early``: stopped once its verdict is settled, going on
        past its requests up to ``extend`` x them while it is not (:mod:`.goodput_spread`); else run to its end."""
        workers, (ttft, tpot) = self.workers, self.slos
        n = self.n(rate_per_worker)
        sizes = [n]
        while early and not self.fixed and sizes[-1] < n * self.extend:
            sizes.append(min(2 * sizes[-1], n * self.extend))  # at most extend x n, also when not a power of 2
        stop, stage = None, 0
        while True:  # stages of two checkpoints each (1, 2 x n; then 4, 8 x n ...): a run that goes on starts again
            want = sizes[min(2 * stage + 1, len(sizes) - 1)]
            base = self.requests_for(want)
            marks = [m for m in sizes[2 * stage:2 * stage + 2] if m < len(base)] + [len(base)]
            marks = sorted(set(marks))[:2] if len(base) < want else sizes[2 * stage:2 * stage + 2]
            reqs = _rescaled(base, self.rate / (rate_per_worker * workers)) if self.fixed else \
                at_rate(base, rate_per_worker * workers, marks)
            final = marks[-1] >= sizes[-1] or len(reqs) < want  # the longest, or all a given set holds
            stop = Settle([self.counted(reqs[:m]) for m in marks], ttft, tpot, self.target, stage == 0,
                          final) if early else None
            Cluster(self.ex, self.cfg).run(reqs, stop=stop)
            if stop is not None and stop.decided is None:
                stop(math.inf)  # every request ended before a checkpoint's last deadline: judge them now
            if stop is None or stop.decided is not None:
                break
            stage += 1
        k = 0 if stop is None else 2 * stage + stop.k
        n, counted = (n, self.counted(reqs)) if stop is None else (marks[stop.k], stop.cps[stop.k])
        stopped = stop.decided if stop is not None and stop.attainment is None else None
        if stop is None:
            att, misses = M.slo_attainment(counted, ttft, tpot), M.slo_misses(counted, ttft, tpot)
        elif stopped is None:  # settled at a checkpoint: its exact attainment
            att = stop.attainment
            misses = misses_of([r for r in counted if not M.meets_slo(r, ttft, tpot)], ttft, tpot)
        else:  # a bound: at most (fail) or at least (pass) the full run's attainment
            verdict = stop.verdict
            att = (len(counted) - len(verdict.missed) if stopped == "fail" else verdict.met) / len(counted)
            misses = verdict.misses()
        done = [r for r in counted if r.state == State.FINISHED]
        p90 = {f"{k}_p90_s": M.percentiles((f(r) for r in done), (90,))["p90"]
               for k, f in (("ttft", M.ttft_s), ("ttst", M.ttst_s), ("tpot", M.tpot_s))}
        point = dict(rate_per_worker=rate_per_worker, rate_per_s=rate_per_worker * workers, requests=n,
                     counted=len(counted), attainment=att, passed=stopped == "pass" or (stopped is None and
                                                                                       att >= self.target),
                     stopped=stopped, extended=k, attainment_se=None if stop is None else stop.se, **misses, **p90)
        self.points.append(point)
        if self.bar is not None:
            self.bar.set_postfix_str(f"{rate_per_worker:.4g}/s per worker: {att:.1%}")
            self.bar.update()
        return point
