"""The map: where the split pays off. For a fixed cluster of ``workers`` workers, one cell per (prompt length,
TPOT SLO), each with the winner in goodput per worker among three layouts of that very cluster:

- **split**: the best xPyD split with x + y = workers (prefill-first prefill pool, a decode pool, a KV transfer);
- **prefill-first**: ``workers`` colocated workers, whole prompts before decode steps;
- **chunked**: ``workers`` colocated workers, chunked prefill in fused hybrid steps (Sarathi-Serve), the best of
  ``chunk_tokens``.

The axes are in the units that carry from one machine to another. Across: the **prefill cost in decode steps**,
``prefill_s(n) / decode_s(1, n)`` for a prompt of ``n`` tokens (the prompt length moves it). Up: the **TPOT SLO in
lone decode steps** (the SLO is ``tpot_steps x decode_s(1, n)``; chapter 6 takes 2.5): small is tight. The TTFT SLO
is ``ttft_prefills`` (5, chapter 6) prefills of the prompt. Every request has the cell's prompt and
``output_tokens`` answer tokens.

Each layout's goodput is :func:`splitlab.serving.goodput` on the cost model (calibrated, analytic or built in),
as :func:`splitlab.planner.plan` runs it; the closed form (:mod:`.closed_form`) prunes the splits (only the
split it ranks best and its neighbours, x +- 1, are simulated) and gives every search its first rate, corrected by
the nearest cell searched before (:mod:`.map_search`, which also rules out in one run a neighbour that fails at the
best split's goodput). The axes are :mod:`.map_axes`'. Every
search gets its cell's workload and one ``extend``, the same rule for every layout: by default
:data:`MAP_EXTEND` = 1, plain runs that never go on (a map of 12 cells took 11 s of CPU; letting its runs go on to 8x
took more than 4x that, past the seconds a map should take), so a map's goodputs carry the plain search's seed
spread (benchmarks/goodput_steady.py: its 'plain' column). A cell's
``margin`` is ``1 - runner-up / winner``; within ``tie_tolerance`` (default 10%: twice the searches' 5%
tolerance, each goodput lying up to 5% below its boundary) the cell is a tie. ``link_bytes_per_s`` models the KV
link between the pools (None: the cost model's transfer): a slow link can make the split lose. Every layout's
decode batch is bounded as the planner bounds it: by each worker's KV budget, with no cap unless ``max_batch``
gives one (chunked without one caps at ``chunk_tokens - 1``); the closed form takes the batch that budget holds.
"""
from __future__ import annotations

import math
import numbers
from typing import Sequence

import numpy as np

from ..common.progress import progress_bar
from ..costmodel import CostModel
from ..serving import CostModelExecutor, ServingConfig
from ..serving.goodput_runs import LIFETIMES
from ..serving.workload import Fixed, WorkloadSpec
from .batch import batch_bound
from .chunk_budget import TPOT, resolve_chunks
from .closed_form import first_guess, link_capacity, split_capacity
from .conditional_layouts import check_queues, conditional_contenders
from .defaults import TPOT_STEPS, TTFT_PREFILLS
from .map_axes import MAX_POINTS, check_axis, chunk_steps, geometric_axis, prefill_steps, prompt_axis
from .map_search import CellSearch
from .map_result import KIND_LABELS, KINDS, Cell, SplitMap
from .options import chunk_sizes, colocated_name, layout_options
from .planner import CLOSED_FORM_BATCH

__all__ = ["split_map", "SplitMap", "Cell", "KINDS", "KIND_LABELS", "geometric_axis", "prompt_axis", "prefill_steps",
           "chunk_steps", "MAX_CELLS"]

#: most cells of a map: each is about 5 goodput searches (the default 6 x 4 map of 4 workers on the built-in cost
#: model, its chunked layout at 256 tokens and each cell's TPOT budget: 128 searches, 13.4 CPU seconds; 8 workers:
#: 138, 15.7 CPU s, on 2026-12-04 at load average 0.5)
MAX_CELLS = MAX_POINTS
#: how far a map's goodput runs may go on while unsettled (``extend`` of :func:`~splitlab.serving.goodput`), the
#: same for every layout of every cell: 1, plain runs (module docstring)
MAP_EXTEND = 1


def _check(cost, workers, prompt_tokens, tpot_steps, output_tokens, ttft_prefills, link_bytes_per_s,
           tie_tolerance) -> tuple[list, list]:
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or not 2 <= workers <= 16:
        raise ValueError(f"workers must be an integer in 2 .. 16 (a split needs a prefill and a decode worker; each "
                         f"split of the cluster is a goodput search), got {workers!r}")
    prompts = check_axis("prompt_tokens", prompt_tokens, True, 1)
    steps = check_axis("tpot_steps", tpot_steps, False, 1.0)
    if len(prompts) * len(steps) > MAX_CELLS:
        raise ValueError(f"a map of at most {MAX_CELLS} cells (each is about 5 goodput searches), got "
                         f"{len(prompts)} x {len(steps)}")
    if isinstance(output_tokens, bool) or not isinstance(output_tokens, numbers.Integral) or output_tokens < 2:
        raise ValueError(f"output_tokens must be an integer >= 2 (one TPOT needs two tokens), got {output_tokens!r}")
    for n in prompts:
        if not cost.prefill_s(n) > 0:
            raise ValueError(f"this cost model ({cost.source}) predicts a prefill of 0 s for a {n}-token prompt: the "
                             f"TTFT SLO, ttft_prefills prefills of the prompt, would be 0 s")
    if prompts[-1] + output_tokens > cost.max_context:
        raise ValueError(f"the longest prompt ({prompts[-1]} tokens) and output_tokens ({output_tokens}) exceed the "
                         f"cost model's context of {cost.max_context} tokens")
    for name, v in (("ttft_prefills", ttft_prefills), ("tie_tolerance", tie_tolerance)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    if tie_tolerance >= 1:
        raise ValueError(f"tie_tolerance must be below 1 (a share of the winner's goodput), got {tie_tolerance!r}")
    if link_bytes_per_s is not None and (isinstance(link_bytes_per_s, bool) or not isinstance(
            link_bytes_per_s, numbers.Real) or not (math.isfinite(link_bytes_per_s) and link_bytes_per_s > 0)):
        raise ValueError(f"link_bytes_per_s must be a finite number of bytes/s > 0 (or None: the cost model's "
                         f"transfer), got {link_bytes_per_s!r}")
    return prompts, steps


def _spec(prompt: int, output_tokens: int) -> WorkloadSpec:
    """One cell's workload: every request ``prompt`` tokens in, ``output_tokens`` out (a spec, not a request list,
    so that each search continues its request set as far as its runs go on: the same rule for every layout)."""
    return WorkloadSpec(f"{prompt}-token prompts", Fixed(prompt), Fixed(output_tokens), "one cell of the map")


def split_map(cost: CostModel | None = None, workers: int = 4, prompt_tokens: Sequence[int] | None = None,
              tpot_steps: Sequence[float] = (1.5, TPOT_STEPS, 4.0, 8.0), output_tokens: int = 64,
              ttft_prefills: float = TTFT_PREFILLS, link_bytes_per_s: float | None = None,
              tie_tolerance: float = 0.1, chunk_tokens: Sequence = (256, TPOT), max_batch: int | None = None,
              max_requests: int = 400, tolerance: float = 0.05, seed: int = 0, min_requests: int | None = 100,
              progress: bool | None = None, colocated_from: SplitMap | None = None,
              conditional_queues: Sequence[int] = (), extend: int = MAP_EXTEND, **options) -> SplitMap:
    """The map of the module docstring on ``cost``.

    Args:
        cost: a :class:`~splitlab.costmodel.CostModel` (calibrated, ``roofline_cost_model``) or None (built in).
        workers: the cluster (2 .. 16); every layout of a cell has exactly this many workers.
        prompt_tokens: the columns (prompt lengths, tokens); None: 6 from 16 tokens to the context less
            ``output_tokens``, their prefill costs evenly spaced on a log scale (:func:`prompt_axis`). tpot_steps: the
            rows (TPOT SLO in lone decode steps, each >= 1).
        output_tokens: answer tokens of every request. ttft_prefills: the TTFT SLO in prefills of the prompt.
        link_bytes_per_s: the KV link between the pools (bytes/s); None: the cost model's ``transfer_s``.
        tie_tolerance: margins below it are ties. chunk_tokens: chunk sizes of the chunked layout (best counts);
            ``"tpot"``: each cell's largest budget whose hybrid step fits its TPOT SLO (:mod:`.chunk_budget`).
        max_batch, options: :class:`~splitlab.serving.ServingConfig` fields of every layout (``max_batch`` None,
            the default: no cap, each worker's KV budget bounds its batch, as in the planner).
        max_requests, tolerance, seed: of each goodput search (:func:`~splitlab.serving.goodput`).
        min_requests: the fewest requests of a run (at most ``max_requests``); None: goodput's own, runs of 20
            request lifetimes and at least 2,000 requests (``max_requests`` if fewer), as the planner's.
        extend: every search's runs go on while their verdict is unsettled to at most this many times their
            requests (:mod:`~splitlab.serving.goodput_spread`), the same rule for every layout of every cell;
            default :data:`MAP_EXTEND`.
        progress: a tqdm bar of the searches on stderr (True, False, None: when stderr is a terminal).
        colocated_from: a map of the same cluster, axes, answers, TTFT rule, chunk sizes, max_batch, seed, run
            lengths, tolerance, extend and options whose colocated goodputs to take instead of searching them again
            (they do not depend on the link): a map at another ``link_bytes_per_s`` searches only its splits.
        conditional_queues: off when empty (the default: the map of three layouts, unchanged). Else the conditional
            contender: each cell's best split again with its decode workers prefilling a request themselves when
            ``Q`` requests wait at its prefill worker, for each ``Q`` given (:mod:`.conditional_layouts`); the best
            goes in ``Cell.conditional``, outside the cell's winner, and :func:`~.conditional_layouts.conditional_wins`
            lists the cells where it beats both pure layouts. (A prompt threshold would be all or nothing here:
            every request of a cell has the same prompt.)

    Returns:
        a :class:`SplitMap` (``.table()``, ``.grid(key)``, ``.to_json()``). A cell where no layout meets the SLOs
        has winner "none" and goodputs 0, with each search's binding SLO.

    Raises:
        ValueError: workers not in 2 .. 16; an empty axis, a value twice, a NaN or a value out of range (prompts
            integers >= 1 fitting the context with the answer, TPOT steps >= 1); a cost model predicting a prefill of
            0 s (no TTFT SLO); more than 400 cells; bad output_tokens, ttft_prefills, tie_tolerance (in (0, 1)),
            link_bytes_per_s or chunk sizes (integers above max_batch, or 1, or "tpot"); min_requests not an integer
            >= 2 or None, max_requests not one >= 2; a ``colocated_from`` of other inputs; a search that did not end
            within its runs (a tolerance too small to reach); and those of :func:`~splitlab.serving.goodput`.
            TypeError: an option that is no ServingConfig field or one the map sets per layout
            (:func:`~.options.layout_options`); a ``colocated_from`` that is no SplitMap.
    """
    ex = CostModelExecutor(cost)
    cost = ex.cost
    if prompt_tokens is None:
        prompt_tokens = prompt_axis(cost, 16, max(16, cost.max_context - output_tokens), 6)
    prompts, steps = _check(cost, workers, prompt_tokens, tpot_steps, output_tokens, ttft_prefills,
                            link_bytes_per_s, tie_tolerance)
    conditional_queues = check_queues(conditional_queues)
    chunk_tokens = chunk_sizes(chunk_tokens, max_batch, 1, tpot=True)
    common = dict(max_batch=max_batch, **layout_options("split_map", options))
    same = dict(workers=workers, prompt_tokens=prompts, tpot_steps=steps, output_tokens=output_tokens,
                ttft_prefills=ttft_prefills, chunk_tokens=list(chunk_tokens), max_batch=max_batch, seed=seed,
                cost_source=cost.source)
    search = dict(max_requests=max_requests, min_requests=min_requests, tolerance=tolerance, extend=extend,
                  options=dict(options))  # runs of another length or tolerance find other goodputs
    if colocated_from is not None and not isinstance(colocated_from, SplitMap):  # was "no attribute 'search'"
        raise TypeError(f"colocated_from must be a SplitMap (split_map's) or None, got {type(colocated_from).__name__}")
    if colocated_from is not None:
        other = {k: getattr(colocated_from, k, None) for k in same} | {k: colocated_from.search.get(k) for k in search}
        mine = same | search
        if other != mine:
            diff = sorted(k for k in mine if other[k] != mine[k])
            raise ValueError(f"colocated_from is a map of other inputs ({', '.join(diff)}): its colocated goodputs "
                             f"are not this map's")
        reused = {(c.tpot_steps, c.prompt_tokens): c for c in colocated_from.cells}
    if min_requests is not None and (isinstance(min_requests, bool) or not isinstance(min_requests, numbers.Integral)
                                     or min_requests < 2):
        raise ValueError(f"min_requests must be an integer >= 2 or None (goodput's: 2,000), got {min_requests!r}")
    if isinstance(max_requests, bool) or not isinstance(max_requests, numbers.Integral) or max_requests < 2:
        raise ValueError(f"max_requests must be an integer >= 2, got {max_requests!r}")  # was goodput's 'min_requests'
    least = None if min_requests is None else min(min_requests, max_requests)
    link = {} if link_bytes_per_s is None else dict(link_bytes_per_s=float(link_bytes_per_s))
    cells, notes = [], []
    finder = CellSearch(ex, dict(tolerance=tolerance, min_requests=least, max_requests=max_requests, seed=seed,
                                 extend=extend))
    bar = progress_bar(len(prompts) * len(steps), f"map of {workers} workers", progress, unit="cell")
    requests = {n: _spec(n, output_tokens) for n in prompts}
    cache_bytes = {n: n * getattr(ex, "kv_bytes_per_token", cost.kv_bytes_per_token) for n in prompts}
    transfer = {n: cost.transfer_s(cache_bytes[n]) if link_bytes_per_s is None else cache_bytes[n] / link_bytes_per_s
                for n in prompts}  # a cache's seconds on the link (the closed form's bound on a split: link_capacity)
    ratio = {n: prefill_steps(cost, n) for n in prompts}
    longest = max(ttft_prefills * cost.prefill_s(n) + (output_tokens - 1) * steps[-1] * cost.decode_s(1, n)
                  for n in prompts)  # a request's lifetime at the loosest TPOT SLO; was refused 38 s into the map
    if not math.isfinite(LIFETIMES * longest):
        raise ValueError(f"tpot_steps up to {steps[-1]:g} make a request's lifetime ({longest:.3g} s) too long for a "
                         f"run of {LIFETIMES} lifetimes to span (it overflows a float): give TPOT SLOs of a size a "
                         f"reader waits for")
    with bar:
        for row, k in enumerate(steps):
            for col, n in enumerate(prompts):
                reqs, t_p, t_d, t_x = requests[n], cost.prefill_s(n), cost.decode_s(1, n), transfer[n]
                ttft, tpot = ttft_prefills * t_p, k * t_d
                prompts_arr, outs = np.full(1, n), np.full(1, output_tokens)
                held = batch_bound(ex, ServingConfig.disaggregated(1, 1, **common), prompts_arr, outs).batch
                guess = first_guess(cost, prompts_arr, outs, ttft, tpot, workers, int(min(held, CLOSED_FORM_BATCH)),
                                    common.get("max_prefill_tokens", 2048))
                link_cap = {x: link_capacity(t_x, x, workers - x) for x in range(1, workers)}
                cap = {x: min(split_capacity(guess["prefill_rps"], guess["decode_rps"], x, workers - x), link_cap[x])
                       for x in range(1, workers)}
                best_x = max(cap, key=lambda x: (cap[x], -x))
                xs = sorted({max(1, best_x - 1), best_x, min(workers - 1, best_x + 1)},
                            key=lambda x: (x != best_x, -cap[x], x))  # the closed form's best first
                found = [("split", cfg, res) for cfg, res in finder.splits(
                    (row, col), reqs, ttft, tpot, [(x, ServingConfig.disaggregated(x, workers - x, **link, **common),
                                                    cap[x], link_cap[x]) for x in xs],
                    (guess["prefill_rps"], guess["decode_rps"]))]
                good, binding, names = {}, {}, {}
                if colocated_from is None:
                    sizes, budget = resolve_chunks(chunk_tokens, cost, tpot, n, max_batch)
                    for kind, cfg in [("prefill-first", ServingConfig.colocated(workers, **common))] + [
                            ("chunked", ServingConfig.colocated(workers, policy="chunked", chunk_tokens=c, **common))
                            for c in sizes]:  # the TPOT budget's corrections learned from its own earlier cells
                        size = TPOT if cfg.chunk_tokens == budget else cfg.chunk_tokens
                        key = kind if kind != "chunked" else f"chunked {size}"
                        found.append((kind, cfg, finder.learned(key, (row, col), guess["colocated_rps"], reqs, cfg,
                                                                ttft, tpot)))
                else:
                    old = reused[(k, n)]
                    for kind in ("prefill-first", "chunked"):
                        good[kind], binding[kind], names[kind] = old.goodput[kind], old.binding[kind], old.names[kind]
                for kind, cfg, res in found:
                    if res is None:  # a split one run ruled out: below the best split (map_search)
                        continue
                    if res.outcome == "unbounded":
                        notes.append(f"{cfg.name} at {n} tokens, TPOT {k:g} steps: {res.reason}")
                    g = res.goodput_rps_per_worker
                    if kind not in good or g > good[kind]:
                        good[kind], binding[kind] = g, res.binding_slo
                        names[kind] = cfg.name if kind != "chunked" else \
                            colocated_name(workers, "chunked", cfg.chunk_tokens)
                best = [cfg for kind, cfg, _ in found if kind == "split" and cfg.name == names["split"]]
                extra = {}
                for cfg in conditional_contenders(best[0] if best else None, conditional_queues):
                    res = finder.learned(f"conditional {cfg.local_prefill_queue}", (row, col), good["split"], reqs,
                                         cfg, ttft, tpot)
                    if not extra or res.goodput_rps_per_worker > extra["goodput_rps_per_worker"]:
                        extra = dict(layout=cfg.name, goodput_rps_per_worker=res.goodput_rps_per_worker,
                                     binding_slo=res.binding_slo, local_prefill_queue=cfg.local_prefill_queue)
                cells.append(Cell(n, ratio[n], k, ttft, tpot, good, binding, names, conditional=extra
                                  ).decide(tie_tolerance))
                bar.update()
    return SplitMap(cells, workers, prompts, [ratio[n] for n in prompts], steps, output_tokens, ttft_prefills,
                    link_bytes_per_s, tie_tolerance, cost.source, list(chunk_tokens), max_batch, seed, finder.searches,
                    notes, [chunk_steps(cost, c, n) for n in prompts for c in chunk_tokens[:1] if c != TPOT],
                    finder.runs, search)
