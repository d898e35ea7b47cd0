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

The search has two stages (:mod:`.refine`): a plain search of every layout (runs of 20 request lifetimes and at
least 2,000 requests that never go on) brackets its goodput and ranks it; then every layout within 10% of the best
(the plain search's measured error: it could still win) is searched again from its bracket on runs that go on
while their verdict is unsettled, the same search for each, until every layout left plain is more than 10% below
the best. Only where the answer is decided does the planner pay for the longer runs.
"""
from __future__ import annotations

import contextlib
import math
import numbers

import numpy as np

from ..common.progress import show_progress
from ..costmodel import CostModel
from ..serving import CostModelExecutor, ServingConfig, goodput, workload_requests
from ..serving.goodput_search import SearchNotEnded
from ..serving.goodput_spread import MAX_EXTEND
from .batch import batch_bound
from .closed_form import first_guess, split_capacity
from .conditional_layouts import conditional_layouts, prompt_thresholds
from .defaults import choose_defaults
from .options import chunk_sizes, layout_options
from .plan_result import Candidate, Plan
from .refine import PLAIN, REFINE_EXTEND, REFINE_MARGIN, refine, refine_contenders
from .starts import Starts

__all__ = ["plan", "Plan", "Candidate"]

#: most workers :func:`plan` searches: every xPyD split up to it is a goodput search of its own (120 splits at 16;
#: 8 workers took 43-46 CPU seconds of the built-in cost model on a shared 2-core CPU with steady-state runs and two
#: contenders refined, 32 s plain, at load average 5-6, 2026-12-04)
MAX_WORKERS = 16


#: the largest batch the closed form tries (its loops go batch by batch) when KV memory is unlimited
CLOSED_FORM_BATCH = 65_536
#: the contenders' refined searches go on to this many times their requests while unsettled (:mod:`.refine`: every
#: layout a plain search first; going on to 8x for every layout took plan --max-workers 8 past 40 s); 1: plain only
PLAN_EXTEND = REFINE_EXTEND


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


@contextlib.contextmanager
def _named(cfg: ServingConfig, tolerance: float):
    """A search that did not end within its runs, said in plan()'s words (goodput()'s advice names its own)."""
    try:
        yield
    except SearchNotEnded as e:
        raise ValueError(f"plan: the goodput search of {cfg.name} did not end within its runs at tolerance "
                         f"{tolerance!r}: pass plan() a larger tolerance (default 0.03)") from e


def _take(c: Candidate, res, price_per_hour: float, mean_output: float) -> None:
    """Set a candidate's goodput, cost per million output tokens, binding SLO and result from a search."""
    g = res.goodput_rps_per_worker
    c.goodput_rps_per_worker, c.binding_slo, c.result = g, res.binding_slo, res
    c.cost_per_million_tokens = price_per_hour / 3600 / (g * mean_output) * 1e6 if g > 0 else math.inf


def plan(cost: CostModel | None = None, workload="chat", ttft_slo_s: float | None = None,
         tpot_slo_s: float | None = None,
         max_workers: int = 8, price_per_hour: float = 2.0, chunk_tokens=(128, 256, 512), max_batch: int | None = None,
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
        chunk_tokens: chunk sizes tried for chunked prefill (each > ``max_batch``; empty: none).
        max_batch, max_prefill_tokens, options: :class:`~splitlab.serving.ServingConfig` fields for every layout
            (``max_batch`` None: no cap, each worker's KV budget bounds its batch; ``Plan.batch`` states it).
        target, tolerance: of each goodput search. seed: of the request set. max_requests: per run.
        extend: every layout gets the plain search (runs never going on), then the contenders within
            :data:`~.refine.REFINE_MARGIN` of the best are searched again on runs going on up to ``extend`` x their
            requests while unsettled (:mod:`.refine`; ``Candidate.refined``), the same rule for each; default
            :data:`PLAN_EXTEND` (8); 1: plain runs only.
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
            above max_batch (:func:`~.options.chunk_sizes`), max_requests not an integer >= 2, extend not an integer
            in 1 .. 64, or a bad option value; a goodput search that did not end within its runs (a tolerance too
            small to reach).
        TypeError: ``progress`` not True, False or None; an option that is no ServingConfig field or one the planner
            sets per layout (:func:`~.options.layout_options`).
    """
    chunk_tokens, options = chunk_sizes(chunk_tokens, max_batch), layout_options("plan", options)
    show_progress(progress)  # a bad progress is refused before any search
    if isinstance(max_requests, bool) or not isinstance(max_requests, numbers.Integral) or max_requests < 2:
        raise ValueError(f"max_requests must be an integer >= 2 (requests of a goodput run), got {max_requests!r}")
    if isinstance(extend, bool) or not isinstance(extend, numbers.Integral) or not PLAIN <= extend <= MAX_EXTEND:
        raise ValueError(f"extend must be an integer in 1 .. {MAX_EXTEND} (how far a contender's refined runs go on; "
                         f"1: plain runs only), got {extend!r}")
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
    search = dict(ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, target=target, tolerance=tolerance,
                  max_requests=max_requests, seed=seed, scale=scale)
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
        with _named(cfg, tolerance):  # stage 1: the plain search of every layout
            res = goodput(workload, cfg, ex, start_rate_per_worker=max(start, 1e-3), extend=PLAIN,
                          step=1 + 2 * tolerance if learned else 1.25, **search)  # near: pass, fail, bisect once
        candidates.append(Candidate(layout, policy, cfg.n_workers, x, y, chunk, 0.0, math.inf, "", first, cfg))
        _take(candidates[-1], res, price_per_hour, outputs.mean())
        starts.learn(candidates[-1])

    def again(i: int, plain):  # stage 2: a contender searched again on runs that go on while unsettled
        with _named(candidates[i].config, tolerance):
            return refine(workload, candidates[i].config, ex, plain, extend=extend, **search)

    results = {i: c.result for i, c in enumerate(candidates)}
    refined = [] if extend == PLAIN else refine_contenders(results, again)
    for i in refined:
        candidates[i].plain_rps_per_worker = candidates[i].goodput_rps_per_worker
        _take(candidates[i], results[i], price_per_hour, outputs.mean())
    candidates.sort(key=lambda c: (-c.goodput_rps_per_worker, c.workers, c.name))
    return Plan(candidates, guess, ttft_slo_s, tpot_slo_s, max_workers, price_per_hour, float(outputs.mean()),
                ex.cost.source, chosen, dict(bound.to_json(), line=bound.line()),
                dict(extend=extend, margin=REFINE_MARGIN, refined=len(refined)))
