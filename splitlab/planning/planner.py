"""How many prefill and decode workers? The planner ranks every layout up to a number of workers by simulated
goodput per worker and by cost per million output tokens.

    import splitlab as sl
    p = sl.planner.plan(workload="research", ttft_slo_s=0.5, tpot_slo_s=0.02, max_workers=6)
    p.table()        # one row per candidate, best first
    p.best, p.why()  # the winner, and which SLO binds each contender

Candidates (DistServe searches placements the same way, by simulating each and bisecting the rate, OSDI'24
sec. 4): ``max_workers`` colocated workers prefill-first; the same, chunked, for each chunk size of
``chunk_tokens`` (Sarathi-Serve); and every split xPyD with x + y <= ``max_workers``. Each gets
:func:`splitlab.serving.goodput` on the cost model (calibrated or analytic), all on one request set, and
``cost_per_million_tokens = price_per_hour / 3600 / (goodput per worker x mean output tokens) x 1e6``: the price
of the output tokens a worker produces while serving at its goodput. The closed-form first guess
(:mod:`.closed_form`) is printed beside each simulated answer.
"""
from __future__ import annotations

import math
import numbers
import textwrap
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..common.progress import show_progress
from ..costmodel import CostModel
from ..serving import CostModelExecutor, ServingConfig, goodput, workload_requests
from ..serving.goodput_search import SearchNotEnded
from .batch import batch_bound, chunked_cap_words
from .chunk_budget import resolve_chunks, tpot_budget_words
from .closed_form import first_guess, split_capacity
from .conditional_layouts import conditional_layouts, prompt_thresholds
from .defaults import choose_defaults
from .options import chunk_sizes, colocated_name, layout_options
from .starts import Starts

__all__ = ["plan", "Plan", "Candidate"]


@dataclass
class Candidate:
    """One layout the planner tried, with its search (``result``: a :class:`~splitlab.serving.GoodputResult`).

    ``goodput_rps_per_worker`` is simulated; ``first_guess_rps_per_worker`` is the closed form of
    :mod:`.closed_form` for this layout (``colocated_rps``, or ``min(x mu_p, y mu_d) / (x + y)``) on the very
    request set, SLOs, ``max_batch`` and ``max_prefill_tokens`` of the simulation, never copied from its result;
    the goodput search starts there corrected by the layouts searched before it (:mod:`.starts`)."""

    layout: str
    policy: str
    workers: int
    prefill_workers: int
    decode_workers: int
    chunk_tokens: int | None
    goodput_rps_per_worker: float
    cost_per_million_tokens: float
    binding_slo: str
    first_guess_rps_per_worker: float
    config: ServingConfig = field(repr=False, default=None)
    result: object = field(repr=False, default=None)

    @property
    def batch_cap(self) -> int | None:
        """The cap on a worker's batch this layout ran with (None: none, KV memory bounds it; chunked layouts
        without ``max_batch``: ``chunk_tokens - 1``)."""
        cap = self.config.batch_cap if self.config is not None else math.inf
        return None if math.isinf(cap) else int(cap)

    @property
    def outcome(self) -> str:
        """How its goodput search ended: "found", "unmet" (no rate meets the SLOs: goodput 0) or "unbounded" (no
        rate breaks them: the goodput is a lower bound); see :mod:`splitlab.serving.goodput_result`."""
        return getattr(self.result, "outcome", "found")

    @property
    def reason(self) -> str:
        """Why its goodput is what it is, in one sentence (the search's ``reason``)."""
        return getattr(self.result, "reason", "")

    @property
    def name(self) -> str:
        if self.layout == "disaggregated":  # a conditional split's name says its rule
            return self.config.name if self.config is not None else f"{self.prefill_workers}P+{self.decode_workers}D"
        return colocated_name(self.workers, self.policy, self.chunk_tokens)

    def to_json(self) -> dict:
        keys = ("layout", "policy", "workers", "prefill_workers", "decode_workers", "chunk_tokens",
                "goodput_rps_per_worker", "cost_per_million_tokens", "binding_slo", "first_guess_rps_per_worker")
        out = {k: getattr(self, k) for k in keys}
        cost = None if math.isinf(self.cost_per_million_tokens) else self.cost_per_million_tokens
        return dict(out, name=self.name, outcome=self.outcome, reason=self.reason, cost_per_million_tokens=cost,
                    batch_cap=self.batch_cap, local_prefill_tokens=getattr(self.config, "local_prefill_tokens", None))


@dataclass
class Plan:
    """What :func:`plan` found: ``candidates`` (best first), ``best``, ``first_guess`` (the closed form) and the
    inputs (``ttft_slo_s``, ``tpot_slo_s``, ``max_workers``, ``price_per_hour``, ``mean_output_tokens``,
    ``cost_source``); ``chosen``: the SLOs left out, chosen, and why (:meth:`.defaults.Chosen.to_json`; None if
    both were given); ``batch``: the decode batch bound of a worker, stated (:class:`.batch.BatchBound`: the KV
    budget, the requests it holds, the cap and which binds; ``batch_line`` says it in words)."""

    candidates: list[Candidate]
    first_guess: dict
    ttft_slo_s: float
    tpot_slo_s: float
    max_workers: int
    price_per_hour: float
    mean_output_tokens: float
    cost_source: str
    chosen: dict | None = None
    batch: dict | None = None  # the decode batch bound every layout ran with (planning.batch.BatchBound.to_json)

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    def best_of(self, layout: str | None = None, policy: str | None = None) -> Candidate:
        """The best candidate of a ``layout`` ("colocated" or "disaggregated") and/or ``policy``
        ("prefill-first", "chunked").

        Raises:
            KeyError: no candidate is of that kind.
        """
        for c in self.candidates:
            if (layout is None or c.layout == layout) and (policy is None or c.policy == policy):
                return c
        raise KeyError(f"no candidate with layout={layout!r}, policy={policy!r}")

    def table(self) -> pd.DataFrame:
        """One row per candidate, best first: goodput per worker (simulated and closed-form guess, requests/s),
        cost per million output tokens, the binding SLO, and why (the search's reason: the rates either side of
        the boundary, or why no rate meets the SLOs or none breaks them).

        Each goodput search starts at its candidate's first guess corrected by the layouts searched before it
        (:mod:`.starts`; a good start saves runs), so the goodput is a rate the search tested, and the true
        boundary lies within the search's tolerance (3%) above it."""
        rows = [{"layout": c.name, "workers": c.workers, "batch cap": c.batch_cap or "none (KV)",
                 "goodput (req/s per worker)": c.goodput_rps_per_worker,
                 "first guess (req/s per worker)": c.first_guess_rps_per_worker,
                 "cost per 1M tokens": c.cost_per_million_tokens, "binding SLO": c.binding_slo, "why": c.reason}
                for c in self.candidates]
        return pd.DataFrame(rows).set_index("layout")

    @property
    def batch_line(self) -> str:
        """The decode batch bound every layout ran with, in one sentence (empty if unknown)."""
        return self.batch.get("line", "") if self.batch else ""

    def why(self, width: int | None = None) -> str:
        """Why the winner wins: its goodput against the best of the other kind, and the SLO binding each; on
        lines of at most ``width`` characters if given (a phone's column holds about 60)."""
        best = self.best
        if best.outcome != "found":  # every search ended "unmet", or the winner's SLOs break at no rate
            text = (f"No layout meets TTFT <= {self.ttft_slo_s:g} s and TPOT <= {self.tpot_slo_s:g} s at any rate; "
                    f"{best.name}: {best.reason}." if best.goodput_rps_per_worker == 0 else
                    f"{best.name} ranks first at {best.goodput_rps_per_worker:.3g} requests/s per worker, which says "
                    f"little: {best.reason}.")
            return text if width is None else textwrap.fill(text, width, break_on_hyphens=False)
        other = next((c for c in self.candidates if (c.layout == "colocated") != (best.layout == "colocated")), None)
        text = (f"{best.name} wins: {best.goodput_rps_per_worker:.3g} requests/s per worker within TTFT <= "
                f"{self.ttft_slo_s:g} s and TPOT <= {self.tpot_slo_s:g} s (binding: {best.binding_slo})")
        if other is not None:
            kind = "colocated" if other.layout == "colocated" else "split"
            less = 1 - other.goodput_rps_per_worker / best.goodput_rps_per_worker if best.goodput_rps_per_worker else 0
            text += (f"; the best {kind} layout, {other.name}, serves {other.goodput_rps_per_worker:.3g} (binding: "
                     f"{other.binding_slo}), {less:.0%} less per worker")
        text += "."
        return text if width is None else textwrap.fill(text, width, break_on_hyphens=False)

    def to_json(self) -> dict:
        return dict(candidates=[c.to_json() for c in self.candidates], best=self.best.to_json(),
                    first_guess=self.first_guess, ttft_slo_s=self.ttft_slo_s, tpot_slo_s=self.tpot_slo_s,
                    max_workers=self.max_workers, price_per_hour=self.price_per_hour, chosen=self.chosen,
                    mean_output_tokens=self.mean_output_tokens, cost_source=self.cost_source, batch=self.batch)


#: most workers :func:`plan` searches: every xPyD split up to it is a goodput search of its own (120 splits at 16;
#: 8 workers took 22 CPU seconds of the built-in cost model on a shared 2-core CPU with steady-state runs, 2026-12-03)
MAX_WORKERS = 16
#: the largest batch the closed form tries (its loops go batch by batch) when KV memory is unlimited
CLOSED_FORM_BATCH = 65_536
#: plain runs, every layout alike (8x took plan past 30 s CPU); 25 of 30 within 5% of 20x runs, misses on seed 2
PLAN_EXTEND = 1


def _splits(n: int) -> int:
    """xPyD splits with x + y <= n (x, y >= 1)."""
    return n * (n - 1) // 2


def _check(ttft_slo_s, tpot_slo_s, max_workers, price_per_hour) -> None:
    for name, v in (("ttft_slo_s", ttft_slo_s), ("tpot_slo_s", tpot_slo_s), ("price_per_hour", price_per_hour)):
        if not (isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a number > 0, got {v!r}")
    if not isinstance(max_workers, numbers.Integral) or isinstance(max_workers, bool) or max_workers < 2:
        raise ValueError(f"max_workers must be an integer >= 2 (a split needs a prefill and a decode worker), got "
                         f"{max_workers!r}")
    if max_workers > MAX_WORKERS:
        raise ValueError(f"max_workers must be <= {MAX_WORKERS}: the planner runs a goodput search for every xPyD "
                         f"split up to it ({_splits(MAX_WORKERS)} at {MAX_WORKERS}, {_splits(max_workers):,} at "
                         f"{max_workers}), got {max_workers}")


def plan(cost: CostModel | None = None, workload="chat", ttft_slo_s: float | None = None,
         tpot_slo_s: float | None = None, max_workers: int = 8, price_per_hour: float = 2.0,
         chunk_tokens=(128, 256, 512, "tpot"), max_batch: int | None = None,
         max_prefill_tokens: int = 2048, target: float = 0.9, tolerance: float = 0.03, seed: int = 0,
         scale: float | None = None, max_requests: int = 3000, progress: bool | None = None,
         local_prefill_tokens=None, extend: int = PLAN_EXTEND, **options) -> Plan:
    """Rank layouts up to ``max_workers`` by simulated goodput per worker (module docstring).

    Args:
        cost: a :class:`~splitlab.costmodel.CostModel` (a calibration's ``.cost``, or
            :func:`~splitlab.costmodel.roofline_cost_model`); None: the built-in one.
        workload: a workload name or :class:`~splitlab.serving.WorkloadSpec` (lengths scaled to the cost
            model's context unless ``scale``).
        ttft_slo_s, tpot_slo_s: the SLOs (s); None: chosen from the cost model by chapter 6's rule (5 mean
            prefills, 2.5 lone decode steps: :func:`~.defaults.choose_defaults`; ``Plan.chosen`` says so).
        max_workers: at most this many workers (2 .. :data:`MAX_WORKERS`).
        price_per_hour: of one worker (any currency; the cost column is in the same).
        chunk_tokens: chunk sizes tried for chunked prefill (each > ``max_batch``; empty: none); ``"tpot"``: the
            budget the TPOT SLO allows at the median prompt (:func:`~.chunk_budget.tpot_budget`, Sarathi-Serve's).
        max_batch, max_prefill_tokens, options: :class:`~splitlab.serving.ServingConfig` fields for every layout
            (``max_batch`` None: no cap, each worker's KV budget bounds its batch; ``Plan.batch`` states it).
        target, tolerance: of each goodput search. seed: of the request set. max_requests: per run. extend: of each
            search, the same for every layout (each gets the workload; default :data:`PLAN_EXTEND`, 1: plain runs).
        progress: a tqdm bar on stderr: True, False, or None (the default: when stderr is a terminal and there are
            more than 4 candidates).
        local_prefill_tokens: prompt thresholds of conditional contenders (every split again, its decode workers
            prefilling prompts up to the threshold: :mod:`.conditional_layouts`), e.g. ``["median", 512]``; None:
            none.

    Returns:
        a :class:`Plan`: ``.table()``, ``.best``, ``.why()``, ``.first_guess``, ``.to_json()``. A layout that meets
        the SLOs at no rate ranks last with goodput 0 and its reason (``Candidate.reason``); none is an error.

    Raises:
        ValueError: SLOs or price that are not > 0, max_workers < 2 or > 16, chunk_tokens not a list of integers
            above max_batch or "tpot" (:func:`~.options.chunk_sizes`), max_requests not an integer >= 2, or a bad
            option value; a goodput search that did not end within its runs (a tolerance too small to reach).
        TypeError: ``progress`` not True, False or None; an option that is no ServingConfig field or one the planner
            sets per layout (:func:`~.options.layout_options`).
    """
    chunk_tokens, options = chunk_sizes(chunk_tokens, max_batch, tpot=True), layout_options("plan", options)
    show_progress(progress)  # a bad progress is refused before any search
    if isinstance(max_requests, bool) or not isinstance(max_requests, numbers.Integral) or max_requests < 2:
        raise ValueError(f"max_requests must be an integer >= 2 (requests of a goodput run), got {max_requests!r}")
    chosen = None
    if ttft_slo_s is None or tpot_slo_s is None:
        slos = choose_defaults(cost, workload, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, seed=seed, scale=scale)
        ttft_slo_s, tpot_slo_s, chosen = slos.ttft_slo_s, slos.tpot_slo_s, slos.to_json()
    _check(ttft_slo_s, tpot_slo_s, max_workers, price_per_hour)
    ex = CostModelExecutor(cost)
    common = dict(max_batch=max_batch, max_prefill_tokens=max_prefill_tokens, **options)
    requests = workload_requests(workload, max_requests, 1.0, ex, seed, scale)
    prompts = np.array([r.prompt_len for r in requests])
    outputs = np.array([r.max_new_tokens for r in requests])
    median = int(np.median(prompts))  # the "tpot" chunk size is sized at it
    chunk_tokens, budget = resolve_chunks(chunk_tokens, ex.cost, tpot_slo_s, median, max_batch)
    said = chunked_cap_words(chunk_tokens, max_batch) + tpot_budget_words(ex.cost, budget, tpot_slo_s, median)
    bound = batch_bound(ex, ServingConfig.disaggregated(1, 1, **common), prompts, outputs)
    guess = first_guess(ex.cost, prompts, outputs, ttft_slo_s, tpot_slo_s, max_workers,
                        int(min(bound.batch, CLOSED_FORM_BATCH)), max_prefill_tokens)
    layouts = [("colocated", "prefill-first", max_workers, 0, 0, None)]
    layouts += [("colocated", "chunked", max_workers, 0, 0, c) for c in chunk_tokens]
    layouts += [("disaggregated", "prefill-first", n, x, n - x, None)
                for n in range(2, max_workers + 1) for x in range(1, n)]
    layouts += conditional_layouts(max_workers, prompt_thresholds(local_prefill_tokens, prompts))
    from tqdm import tqdm
    show = show_progress(progress) and (progress is not None or len(layouts) > 4)
    candidates, starts = [], Starts(guess["prefill_rps"], guess["decode_rps"])
    for layout, policy, n, x, y, chunk, *local in tqdm(layouts, desc="planner: goodput of each layout",
                                                       disable=not show, leave=False):
        if layout == "colocated":
            cfg = ServingConfig.colocated(n, policy=policy, chunk_tokens=chunk or 256, **common)
            first = guess["colocated_rps"]
        else:
            cfg = ServingConfig.disaggregated(x, y, **common, **(local[0] if local else {}))
            first = split_capacity(guess["prefill_rps"], guess["decode_rps"], x, y)
        start, learned = starts.start(policy, x, y, first, local[0] if local else None)
        try:
            res = goodput(workload, cfg, ex, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, target=target,
                          tolerance=tolerance, max_requests=max_requests, start_rate_per_worker=max(start, 1e-3),
                          seed=seed, scale=scale, extend=extend,
                          step=1 + 2 * tolerance if learned else 1.25)  # near: pass, fail, bisect once
        except SearchNotEnded as e:  # its advice names goodput()'s arguments: name plan()'s
            raise ValueError(f"plan: the goodput search of {cfg.name} did not end within its runs at tolerance "
                             f"{tolerance!r}: pass plan() a larger tolerance (default 0.03)") from e
        g = res.goodput_rps_per_worker
        price = price_per_hour / 3600 / (g * outputs.mean()) * 1e6 if g > 0 else math.inf
        candidates.append(Candidate(layout, policy, cfg.n_workers, x, y, chunk, g, price, res.binding_slo, first,
                                    cfg, res))
        starts.learn(candidates[-1])
    candidates.sort(key=lambda c: (-c.goodput_rps_per_worker, c.workers, c.name))
    return Plan(candidates, guess, ttft_slo_s, tpot_slo_s, max_workers, price_per_hour, float(outputs.mean()),
                ex.cost.source, chosen, dict(bound.to_json(), tpot_chunk_tokens=budget, line=bound.line() + said))
