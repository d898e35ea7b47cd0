"""Chapter 7's live check of the map (:mod:`splitlab.planning.split_map`): a cell of each region (the split wins,
colocated prefill-first wins, colocated chunked wins) served by the real model (emulated), its winner against its
runner-up, on paired seeds (:mod:`.split_seeds`: each seed's requests served by both layouts, the verdict by
chapter 6's rule, :func:`~.split_seeds.paired_gaps`).

Right before a cell's live runs, :mod:`.pools_live_probe` times its steps and puts the cell back at its map
coordinates on this machine as it runs now (:func:`step_probe`, :func:`rescaled`, :func:`cell_now`); then

- :func:`live_cell`: the rate where the rescaled simulator, on the very requests of the live runs, predicts the
  gap's 95% interval furthest above zero (a tie: the most loaded rate where it is even, :func:`even`), then both layouts
  served there live (:func:`~.split_seeds.paired_runs`).

:func:`gap_cells` picks the cells: per region (the ties one more), the one the simulator tells apart best on these
short runs; :func:`live_regions` serves a region on the slider's slowest link where the map's own link has no
cell of it that short runs tell apart. What the runs found, in a table and words (:func:`live_outcome`,
:func:`live_table`, :func:`live_words`), is :mod:`.pools_live_words`' and :mod:`.pools_live_text`'; imported
here with the rest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ...planning.options import chunk_of
from .pools_live_args import (check_cell, check_map, check_options, check_prompt_cap, check_rates, cost_of,
                              ordered_maps, prompt_cap_of, requests_of, seeds_of)
from .pools_live_probe import cell_now, rescaled, step_probe, step_ratios
from .pools_live_text import live_table, live_words
from .pools_live_words import (LEAD_FLOOR, REGIONS, T95, TIE_CEILING, TIE_FLOOR, TIE_GAP, TIE_LOADED, even,
                               gap_interval, live_outcome, pick_rate, rate_score)
from .split_seeds import PairedRuns, paired_runs

__all__ = ["layout_config", "split_pools", "step_ratios", "step_probe", "rescaled", "cell_now", "LiveCell",
           "gap_cells", "live_regions", "live_cell", "gap_interval", "live_outcome", "live_table", "live_words",
           "REGIONS", "LEAD_FLOOR", "TIE_GAP", "TIE_LOADED", "T95", "even", "TIE_FLOOR", "TIE_CEILING", "rate_score",
           "pick_rate"]


def split_pools(name: str) -> tuple[int, int] | None:
    """(prefill workers, decode workers) of a map's split name ("2P+2D"); None for any other name (a non-string
    too)."""
    split = re.fullmatch(r"(\d+)P\+(\d+)D", name) if isinstance(name, str) else None
    return (int(split[1]), int(split[2])) if split else None


def layout_config(name: str, workers: int, chunk_tokens: Sequence[int], **options):
    """The :class:`~splitlab.serving.ServingConfig` of a map's layout name ("2P+2D", "4 colocated (prefill-first)",
    "4 colocated (chunked, 256-token chunks)"), with ``options`` (``max_batch``...).

    Raises:
        ValueError: a name the map does not write, or one of another cluster size than ``workers`` ("4 colocated
        (prefill-first)" with workers=2 was served on 2 workers in silence)."""
    from ...serving import ServingConfig
    if not isinstance(name, str):
        raise ValueError(f"not a layout name of a map: {name!r}")
    split = split_pools(name)
    named = sum(split) if split else int(re.match(r"\d+", name)[0]) if re.match(r"\d+ colocated", name) else None
    if named is not None and named != workers:
        raise ValueError(f"{name!r} is a layout of {named} workers, not of the map's {workers}")
    if split:
        return ServingConfig.disaggregated(*split, **options)
    chunk = chunk_of(name)
    if chunk:
        return ServingConfig.colocated(workers, policy="chunked", chunk_tokens=chunk, **options)
    if name.endswith("(prefill-first)"):
        return ServingConfig.colocated(workers, **options)
    raise ValueError(f"not a layout name of a map: {name!r}")


#: how far a live run's steps may stray from the probed speed (measured under nbval on a loaded 2-core machine: decode
#: steps 0.71x the cost model in the probe, 0.87x in the runs after it): a rate is chosen by its narrowest gap over
#: decode steps this many times slower, as fast, and faster
DRIFT = 1.15


@dataclass
class LiveCell:
    """What :func:`live_cell` served: the map's ``cell``, ``winner`` and ``rival`` (layout names), the ``probe``
    (:func:`step_probe`), ``prompt_tokens``, ``ttft_slo_s`` and ``tpot_slo_s`` (:func:`cell_now`), ``prefill_steps``
    (that prompt's prefill in lone decode steps on the rescaled model: the cell's own, unless no prompt reaches
    it), ``rate_per_s``
    (the cluster's), ``predicted`` (per rate tried, :func:`rate_score` on the rescaled simulator: the lowest end
    of the gap's 95% interval winner - rival, points; a tie's, the lowest attainment, %),
    ``runs`` (:class:`~.split_seeds.PairedRuns`, live) and ``steps`` (:func:`step_ratios` of the live runs); both
    None where no rate qualified (:func:`pick_rate`), so that nothing was served; ``drift``: :data:`DRIFT`;
    ``link_bytes_per_s``: the map's KV link where it names one (a slider's slower link), else None; ``workers``:
    the map's cluster size (None: not recorded), which :func:`live_words` checks against the map it is given."""

    cell: object
    winner: str
    rival: str
    probe: dict
    prompt_tokens: int
    ttft_slo_s: float
    tpot_slo_s: float
    prefill_steps: float
    rate_per_s: float
    predicted: pd.Series
    runs: PairedRuns | None
    steps: pd.DataFrame | None
    drift: float = DRIFT
    link_bytes_per_s: float | None = None
    workers: int | None = None


def _contest(m, cell, cost, prompt: int, ttft_s: float, tpot_s: float, n_requests: int, seeds, rates: int,
             slow: float, model, options: dict) -> tuple:
    """(spec, configs, rate or None, scores): the cell's two layouts (the map's winner or a tie's leader, and the
    runner-up) on prompts of ``prompt`` tokens, simulated on ``cost`` with its decode steps :data:`DRIFT` x slower,
    as fast and faster at each of ``rates`` rates on the very requests a live run serves (same seeds), each rate
    scored by :func:`rate_score`, and the rate :func:`pick_rate` serves (:func:`live_cell`)."""
    from ...serving import CostModelExecutor
    from ...serving.workload import Fixed, WorkloadSpec
    cost = CostModelExecutor(cost).cost  # None: the built-in model
    options = _on_link(m, options)
    spec = WorkloadSpec(f"{prompt}-token prompts", Fixed(prompt), Fixed(m.output_tokens))
    names = [cell.names[k] for k in (cell.leader, cell.runner_up)]
    configs = {n: layout_config(n, m.workers, m.chunk_tokens, max_batch=m.max_batch, trace=False, **options)
               for n in names}
    low = max(cell.goodput[cell.runner_up], 1e-3 * cell.goodput[cell.leader])
    tries = m.workers / slow * np.geomspace(0.5 * low, 4 * cell.goodput[cell.leader], rates)
    exs = {f: CostModelExecutor(rescaled(cost, 1.0, f)) for f in (1 / DRIFT, 1.0, DRIFT)}
    scores = pd.Series({float(r): rate_score(cell, {f: paired_runs(spec, n_requests, r, configs, ex, ttft_s, tpot_s,
                                                               seeds, model, 1.0) for f, ex in exs.items()})
                        for r in tries}, name="score")
    return spec, configs, pick_rate(cell, scores), scores


def _scored(m, cost, kind: str, n_requests, seeds, rates: int, max_prompt_tokens, options, lazy: bool = False):
    """[(cell, score)] of every cell of ``m`` that ``kind`` wins (prompts of at most ``max_prompt_tokens``): the
    score of its best rate on the cost model (:func:`rate_score`; a tie's: minus its margin), -inf where no rate
    qualifies (:func:`pick_rate`). ``lazy``: an iterator instead, shortest prompts first (the cheapest to serve)."""
    cap = prompt_cap_of(max_prompt_tokens, kind)
    cells = [c for c in m.cells if c.winner == kind and (cap is None or c.prompt_tokens <= cap)]
    for c in cells:
        check_cell(c)
    n = requests_of(n_requests, kind)

    def score(c):
        _, _, rate, scores = _contest(m, c, cost, c.prompt_tokens, c.ttft_slo_s, c.tpot_slo_s, n, seeds, rates,
                                      1.0, None, options)
        return c, -np.inf if rate is None else -c.margin if kind == "tie" else float(scores[rate])
    if lazy:
        return (score(c) for c in sorted(cells, key=lambda c: (c.prompt_tokens, c.tpot_steps)))
    return [score(c) for c in cells]


def _checked(n_requests, seeds, rates, max_prompt_tokens) -> tuple:
    """The seeds as a tuple, once every argument of a search is checked (before its first run: a map without a cell
    of a region took a bad ``rates`` or ``n_requests`` in silence)."""
    check_rates(rates)
    check_prompt_cap(max_prompt_tokens)
    for kind in REGIONS:  # every region's count, where a map without that region's cell took {'tie': 2.5}
        requests_of(n_requests, kind)
    return seeds_of(seeds)


def gap_cells(m, cost, n_requests: int | dict = 24, seeds: Sequence[int] = (0, 1, 2), rates: int = 8,
              max_prompt_tokens: int | dict | None = None, **options) -> dict:
    """{kind: cell}: per region of the map ``m`` (:data:`REGIONS`, the ties included; prompts of at most
    ``max_prompt_tokens`` if given: one cap, or {region: cap}), the cell a short live check tells apart best: of the
    cells the kind wins, the one whose best rate scores highest (:func:`rate_score`: the lowest end of the predicted
    gap's 95% interval, with decode steps :data:`DRIFT` x slower, as fast and faster) on :func:`live_cell`'s runs
    (``n_requests``: a number or {kind: number}, ``seeds``, ``rates``, ``options``, on the map's link where it names
    one); of the ties with a loaded rate to serve, the one the map finds most even (the smallest margin). A map's
    goodputs are steady state; a run of a few dozen requests starts on idle workers and may end before any backlog
    builds (a 16-token cell the split wins by 47% left no gap in runs of 24 requests), so the widest margin is not
    the widest short-run gap. A region the map gives no cell is left out. ValueError: fewer than 2 distinct seeds,
    ``max_prompt_tokens`` not None or a whole number >= 1, an ``n_requests`` key no region; and :func:`live_cell`'s."""
    check_map(m)
    seeds = _checked(n_requests, seeds, rates, max_prompt_tokens)
    check_options("gap_cells", options)
    out = {}
    for kind in REGIONS:
        scored = _scored(m, cost, kind, n_requests, seeds, rates, max_prompt_tokens, options)
        if scored:
            out[kind] = max(scored, key=lambda cs: cs[1])[0]
    return out


def live_regions(maps: dict, lm, cost, n_requests: int | dict = 24, seeds: Sequence[int] = (0, 1, 2), rates: int = 8,
                 max_prompt_tokens: int | dict | None = None, **options) -> dict:
    """{kind: :class:`LiveCell`}: per region (:data:`REGIONS`), a cell served live (:func:`live_cell`) from the map
    on the cost model's own link (of ``maps``, {link GB/s or None: map} as
    :func:`~splitlab.teach.widgets.split_map_grid` returns them, in any order: the map whose link is None, else the
    fastest) or, where that map gives the region no cell a short run tells apart (none scores, :func:`gap_cells`'
    choice, or its probe moved it out of reach), from the map on the slider's slowest link (its cell of the shortest
    prompt whose short runs tell apart, the cheapest to serve), served on that link: there the split pays for moving
    its caches (chapter 7's chunked region once had its one own-link cell too close for short runs; on the slowest
    link it had six). A region served nowhere keeps the first cell that reached :func:`live_cell`, else its own
    link's best (its words say it was not served); a region no map gives a cell is left out. Arguments as
    :func:`live_cell`'s.

    Raises:
        ValueError: ``maps`` not a dict of maps with at least one, maps of different cluster sizes; those of
            :func:`gap_cells` and :func:`live_cell`.
        TypeError: ``lm`` not a LoadedModel (before the simulations, which take minutes), an unknown option."""
    from ...phases.loaded import require_loaded
    ms = ordered_maps(maps)
    seeds = _checked(n_requests, seeds, rates, max_prompt_tokens)
    check_options("live_regions", options)
    require_loaded(lm, "live_regions")  # before minutes of simulations, not after
    cost = cost_of(cost)
    out = {}
    for kind in REGIONS:
        tried = []
        for m in ms:
            if m is ms[0]:  # the own link: the cell short runs tell apart best
                scored = _scored(m, cost, kind, n_requests, seeds, rates, max_prompt_tokens, options)
                best = max(scored, key=lambda cs: cs[1]) if scored else None
            else:  # the slowest link: the shortest prompts whose runs tell (cheapest to serve)
                lazy = _scored(m, cost, kind, n_requests, seeds, rates, max_prompt_tokens, options, lazy=True)
                best = next((cs for cs in lazy if cs[1] > -np.inf), None)
            if best is None:
                continue
            cell, score = best
            tried.append((m, cell))
            if score == -np.inf:  # no rate short runs tell apart even before the probe
                continue
            lc = live_cell(m, cell, lm, cost, n_requests, seeds, rates, **options)
            if lc.runs is not None:
                out[kind] = lc
                break
            out.setdefault(kind, lc)
        if kind not in out and tried:
            out[kind] = live_cell(*tried[0], lm, cost, n_requests, seeds, rates, **options)
    return out


def _on_link(m, options: dict) -> dict:
    """``options`` with the KV link of the map ``m`` where it names one (a slider's slower link: its bandwidth, no
    latency, as :func:`~splitlab.planning.split_map.split_map` ran its splits), else as given."""
    if m.link_bytes_per_s is None:
        return options
    return dict(options, link_bytes_per_s=float(m.link_bytes_per_s), link_latency_s=0.0)


def live_cell(m, cell, lm, cost, n_requests: int | dict = 24, seeds: Sequence[int] = (0, 1, 2), rates: int = 8,
              **options) -> LiveCell:
    """Serve ``cell`` (of the map ``m``, calibrated as ``cost``) live on ``lm``: probe the steps
    (:func:`step_probe`), rescale ``cost`` (:func:`rescaled`), place the cell on it (:func:`cell_now`), simulate
    ``rates`` rates (from half the runner-up's goodput to 4x the winner's, per worker, over the slower of the
    two ratios) on these very runs, with decode steps :data:`DRIFT` x slower, as fast and faster (a gap at a TPOT
    SLO of 1.5 steps can vanish if decode steps run 15% slower than probed), and serve ``n_requests`` requests (a
    number, or {region: number}) per seed on both layouts (:func:`~.split_seeds.paired_runs`, the model's executor)
    at the rate :func:`pick_rate` chooses: for a cell one kind wins, where the predicted gap's 95% interval starts
    highest above zero, and at least :data:`LEAD_FLOOR` points; for a tie, the most loaded rate where both layouts
    keep :data:`TIE_FLOOR`% (the lower at most :data:`TIE_CEILING`%) and the gap is even (:func:`even`). Where no
    rate qualifies, nothing is served (``runs`` None, ``rate_per_s`` NaN).
    ``options``: :class:`~splitlab.serving.ServingConfig` fields of both layouts (the link:
    ``serving.link_fields``; a map at a slower link serves on its own, :func:`live_regions`).

    Raises:
        ValueError: a cell no layout wins and no tie (none), a cell not of ``m``, rates < 2, n_requests not >= 1,
            fewer than 2 distinct seeds; those of :func:`step_probe` and :func:`~.split_seeds.paired_runs`.
        TypeError: ``cell`` not a map's cell, ``cost`` not a CostModel or None (the built-in)."""
    from ...serving import ModelExecutor
    check_cell(cell)
    seeds = _checked(n_requests, seeds, rates, None)
    n_requests = requests_of(n_requests, cell.winner)
    check_options("live_cell", options)
    check_map(m)
    if cell not in m.cells:
        raise ValueError(f"cell must be a cell of the map m (its SLO rules, output and link place the cell), got the "
                         f"{cell.prompt_tokens}-token, {cell.tpot_steps:g}-step cell and a map without it")
    cost = cost_of(cost)
    prompt = cell.prompt_tokens
    for _ in range(2):  # probed at the cell's prompt, then again at the prompt that places it, if that moved
        probe = step_probe(lm, cost, prompt)
        now = rescaled(cost, probe["prefill"], probe["decode"])
        moved, (prompt, ttft, tpot) = prompt, cell_now(m, cell, now)
        if abs(prompt / moved - 1) <= 0.1:
            break
    spec, configs, rate, predicted = _contest(m, cell, now, prompt, ttft, tpot, n_requests, seeds, rates,
                                              max(probe["prefill"], probe["decode"], 1.0), lm, options)
    from ...planning.split_map import prefill_steps
    placed = (cell, *configs, probe, prompt, ttft, tpot, prefill_steps(now, prompt),
              float("nan") if rate is None else rate, predicted)
    link = dict(link_bytes_per_s=m.link_bytes_per_s, workers=m.workers)
    if rate is None:  # no rate where runs this short would tell: serving them would tell nothing
        return LiveCell(*placed, None, None, **link)
    ex = ModelExecutor(lm)
    ex.step_log = []
    runs = paired_runs(spec, n_requests, rate, configs, ex, ttft, tpot, seeds=seeds, model=lm, scale=1.0)
    return LiveCell(*placed, runs, step_ratios(cost, ex.step_log), **link)
