"""Chapter 7's live check of the map (:mod:`splitlab.planning.split_map`): a cell of each region (the split wins,
colocated prefill-first wins, colocated chunked wins) served by the real model (emulated), its winner against its
runner-up, on paired seeds (:mod:`.split_seeds`: each seed's requests served by both layouts, the verdict by
chapter 6's rule, :func:`~.split_seeds.paired_gaps`).

A shared CPU runs the same step slower or faster from one minute to the next, and prefill and decode drift by
different amounts (measured under nbval on a loaded 2-core machine: prefill 1.1x, decode 0.71x the cost model a
few minutes after its calibration). The map's axes are in decode steps, so such a drift moves a cell on the map,
and no single speed factor moves it back. So right before a cell's live runs:

- :func:`step_probe`: a few of the cell's requests through the live executor, prefill and decode timed apart
  against the cost model (:func:`step_ratios`);
- :func:`rescaled`: the cost model with its prefill and decode seconds times those two ratios;
- :func:`cell_now`: the prompt and SLOs that put the cell at its map coordinates (prefill cost and TPOT SLO in
  lone decode steps) on that rescaled model;
- :func:`live_cell`: the rate where the rescaled simulator, on the very requests of the live runs, predicts the
  gap's 95% interval furthest above zero (a tie: the most loaded rate where it holds zero), then both layouts
  served there live (:func:`~.split_seeds.paired_runs`).

:func:`gap_cells` picks the cells: per region (the ties one more), the one the simulator tells apart best on these
short runs. What the runs found, in a table and words (:func:`live_outcome`, :func:`live_table`, :func:`live_words`), is
:mod:`.pools_live_words`'; imported here with the rest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import pandas as pd

from ...costmodel.model import HYBRID_TERMS
from ...planning.options import chunk_of
from .pools_live_words import REGIONS, TIE_FLOOR, gap_interval, live_outcome, live_table, live_words, pick_rate, \
    rate_score
from .split_seeds import PairedRuns, paired_runs

__all__ = ["layout_config", "split_pools", "step_ratios", "step_probe", "rescaled", "cell_now", "LiveCell",
           "gap_cells", "live_cell", "gap_interval", "live_outcome", "live_table", "live_words", "REGIONS",
           "TIE_FLOOR", "rate_score", "pick_rate"]

def split_pools(name: str) -> tuple[int, int] | None:
    """(prefill workers, decode workers) of a map's split name ("2P+2D"); None for any other name."""
    split = re.fullmatch(r"(\d+)P\+(\d+)D", name)
    return (int(split[1]), int(split[2])) if split else None


def layout_config(name: str, workers: int, chunk_tokens: Sequence[int], **options):
    """The :class:`~splitlab.serving.ServingConfig` of a map's layout name ("2P+2D", "4 colocated (prefill-first)",
    "4 colocated (chunked, 256-token chunks)"), with ``options`` (``max_batch``...).

    Raises:
        ValueError: a name the map does not write."""
    from ...serving import ServingConfig
    split = split_pools(name)
    if split:
        return ServingConfig.disaggregated(*split, **options)
    chunk = chunk_of(name)
    if chunk:
        return ServingConfig.colocated(workers, policy="chunked", chunk_tokens=chunk, **options)
    if name.endswith("(prefill-first)"):
        return ServingConfig.colocated(workers, **options)
    raise ValueError(f"not a layout name of a map: {name!r}")


def step_ratios(cost, steps) -> pd.DataFrame:
    """The steps a run measured against ``cost``'s prediction of each: ``steps`` is an executor's ``step_log``
    (:func:`splitlab.serving.executor.run_step`). One row per kind of step ("prefill", "decode", "hybrid", and
    "two-pass": a hybrid step of a model that cannot fuse, whole; kinds not run left out): ``steps``,
    ``measured (ms)`` and ``predicted (ms)`` (medians) and ``measured / predicted`` (the median of the per-step
    ratios: a step the machine stalled once does not move it)."""
    rows = {}
    for r in steps:
        if r["kind"] == "decode":
            seconds, pred = r["step_s"], cost.decode_s(r["batch"], r["context_tokens"])
        elif r["kind"] == "prefill":
            seconds, pred = r["prefill_s"], cost.prefill_s(r["tokens"], r["squares"], r["masked_pairs"])
        else:  # a hybrid step, one fused forward or two passes (recorded whole after its two)
            form = cost.fused_hybrid_s if r["kind"] == "hybrid" else cost.two_pass_s
            seconds, pred = r["step_s"], form(*(r[k] for k in HYBRID_TERMS))
        rows.setdefault(r["kind"], []).append((seconds, pred))
    out = {k: {"steps": len(v), "measured (ms)": 1e3 * float(np.median([a for a, _ in v])),
               "predicted (ms)": 1e3 * float(np.median([b for _, b in v])),
               "measured / predicted": float(np.median([a / b for a, b in v]))}
           for k, v in sorted(rows.items(), key=lambda kv: ("prefill", "decode", "hybrid", "two-pass").index(kv[0]))}
    return pd.DataFrame.from_dict(out, orient="index")


def step_probe(lm, cost, prompt_tokens: int, output_tokens: int = 16, requests: int = 6) -> dict:
    """How many times ``cost``'s seconds this device's prefills and decode steps take now, apart: ``requests``
    requests of ``prompt_tokens`` prompt and ``output_tokens`` answer tokens arriving at once on one
    prefill-first worker of :class:`~splitlab.serving.ModelExecutor` (the live runs' executor; each prompt its own
    prefill, then a decode batch of them all), timed step by step (:func:`step_ratios`). Returns {"prefill": ratio,
    "decode": ratio, "steps": the table}.

    Raises:
        ValueError: prompt_tokens, output_tokens (>= 2) or requests not a whole number in range."""
    from ...serving import ModelExecutor, ServingConfig, make_workload, run
    from ...serving.workload import Fixed, WorkloadSpec
    for name, v, low in (("prompt_tokens", prompt_tokens, 1), ("output_tokens", output_tokens, 2),
                         ("requests", requests, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    ex = ModelExecutor(lm)
    ex.step_log = []
    spec = WorkloadSpec("probe", Fixed(int(prompt_tokens)), Fixed(int(output_tokens)))
    run(make_workload(spec, requests, 1e6, seed=0, model=lm, scale=1.0),
        ServingConfig.colocated(1, max_prefill_tokens=int(prompt_tokens), trace=False), ex)
    table = step_ratios(cost, ex.step_log)
    return {"prefill": float(table.loc["prefill", "measured / predicted"]),
            "decode": float(table.loc["decode", "measured / predicted"]), "steps": table}


def rescaled(cost, prefill: float, decode: float):
    """``cost`` with every prefill term (and a fused hybrid step's, a prefill forward with decode rows riding in
    it) times ``prefill`` and every decode term times ``decode``: the cost model of a machine whose prefills take
    ``prefill`` x and whose decode steps ``decode`` x the calibration's (:func:`step_probe`).

    Raises:
        ValueError: a factor not a finite number > 0."""
    for name, f in (("prefill", prefill), ("decode", decode)):
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating)) or not (0 < f < float("inf")):
            raise ValueError(f"{name} must be a finite factor > 0, got {f!r}")
    terms = {k: getattr(cost, k) * prefill for k in ("prefill_base_s", "prefill_per_token_s", "prefill_per_token2_s",
                                                     "prefill_masked_per_pair_s", "hybrid_per_row_s",
                                                     "hybrid_per_context_token_s")}
    terms.update({k: getattr(cost, k) * decode for k in ("decode_base_s", "decode_per_seq_s", "decode_per_token_s",
                                                        "decode_batched_s")})
    return replace(cost, **terms, source=f"{cost.source}; prefill x{prefill:.3g}, decode x{decode:.3g}")


def cell_now(m, cell, cost_now) -> tuple[int, float, float]:
    """(prompt tokens, TTFT SLO s, TPOT SLO s) of ``cell`` (a cell of the map ``m``) on ``cost_now``
    (:func:`rescaled`): the prompt whose prefill costs the cell's lone decode steps there (the nearest of the
    prompts the context holds with the map's answers), the map's SLO rules on it (``m.ttft_prefills`` of its
    prefills; the cell's TPOT steps of its lone decode step)."""
    from ...planning.split_map import prefill_steps
    a, b = 1, cost_now.max_context - m.output_tokens  # prefill_steps grows with the prompt
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if prefill_steps(cost_now, mid) < cell.prefill_steps else (a, mid)
    n = min((a, b), key=lambda p: abs(prefill_steps(cost_now, p) - cell.prefill_steps))
    return n, m.ttft_prefills * cost_now.prefill_s(n), cell.tpot_steps * cost_now.decode_s(1, n)


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
    None where no rate qualified (:func:`pick_rate`), so that nothing was served; ``drift``: :data:`DRIFT`."""

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


def _contest(m, cell, cost, prompt: int, ttft_s: float, tpot_s: float, n_requests: int, seeds, rates: int,
             slow: float, model, options: dict) -> tuple:
    """(spec, configs, rate or None, scores): the cell's two layouts (the map's winner or a tie's leader, and the
    runner-up) on prompts of ``prompt`` tokens, simulated on ``cost`` with its decode steps :data:`DRIFT` x slower,
    as fast and faster at each of ``rates`` rates on the very requests a live run serves (same seeds), each rate
    scored by :func:`rate_score`, and the rate :func:`pick_rate` serves (:func:`live_cell`)."""
    from ...serving import CostModelExecutor
    from ...serving.workload import Fixed, WorkloadSpec
    cost = CostModelExecutor(cost).cost  # None: the built-in model
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


def _check_cell(cell, rates) -> None:
    if cell.winner not in REGIONS:
        raise ValueError(f"a live check needs a cell one layout wins or a tie, got winner {cell.winner!r}")
    if isinstance(rates, bool) or not isinstance(rates, int) or rates < 2:
        raise ValueError(f"rates must be an integer >= 2 (rates tried on the simulator), got {rates!r}")


def _check_seeds(seeds) -> None:
    """A live check's verdict is a 95% interval over its seeds: one seed has none (unbounded, it 'holds zero', and a
    tie served on one seed 'matched', its interval printed as -inf to +inf points)."""
    given = list(seeds) if hasattr(seeds, "__iter__") and not isinstance(seeds, (str, bytes)) else [seeds]
    if len(given) < 2 or len(set(given)) != len(given):
        raise ValueError(f"seeds must be at least 2 distinct seeds (a 95% interval over the seeds needs a spread), "
                         f"got {seeds!r}")


def _requests(n_requests, kind: str) -> int:
    """``n_requests`` for a region: one number for all, or {kind: number} (a region not in it: 24)."""
    n = n_requests.get(kind, 24) if isinstance(n_requests, dict) else n_requests
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n_requests must be a whole number >= 1 (or a dict of them per region), got {n!r}")
    return int(n)


def gap_cells(m, cost, n_requests: int | dict = 24, seeds: Sequence[int] = (0, 1, 2), rates: int = 8,
              max_prompt_tokens: int | None = None, **options) -> dict:
    """{kind: cell}: per region of the map ``m`` (:data:`REGIONS`, the ties included; prompts of at most
    ``max_prompt_tokens`` if given), the cell a short live check tells apart best: of the cells the kind wins, the
    one whose best rate scores highest (:func:`rate_score`: the lowest end of the predicted gap's 95% interval, with
    decode steps :data:`DRIFT` x slower, as fast and faster) on :func:`live_cell`'s runs (``n_requests``: a number
    or {kind: number}, ``seeds``, ``rates``, ``options``); of the ties with a loaded rate to serve, the one the map
    finds most even (the smallest margin). A map's goodputs are steady state; a run of a few dozen requests starts
    on idle workers and may end before any backlog builds (a 16-token cell the split wins by 47% left no gap in runs
    of 24 requests), so the widest margin is not the widest short-run gap. A region the map gives no cell is left
    out. ValueError: fewer than 2 distinct seeds, and :func:`live_cell`'s."""
    _check_seeds(seeds)
    out = {}
    for kind in REGIONS:
        cells = [c for c in m.cells if c.winner == kind
                 and (max_prompt_tokens is None or c.prompt_tokens <= max_prompt_tokens)]
        for c in cells:
            _check_cell(c, rates)
        n = _requests(n_requests, kind)
        best = []
        for c in cells:
            _, _, rate, scores = _contest(m, c, cost, c.prompt_tokens, c.ttft_slo_s, c.tpot_slo_s, n, seeds, rates,
                                          1.0, None, options)
            best.append(-np.inf if rate is None else -c.margin if kind == "tie" else scores[rate])
        if cells:
            out[kind] = cells[int(np.argmax(best))]
    return out


def live_cell(m, cell, lm, cost, n_requests: int | dict = 24, seeds: Sequence[int] = (0, 1, 2), rates: int = 8,
              **options) -> LiveCell:
    """Serve ``cell`` (of the map ``m``, calibrated as ``cost``) live on ``lm``: probe the steps
    (:func:`step_probe`), rescale ``cost`` (:func:`rescaled`), place the cell on it (:func:`cell_now`), simulate
    ``rates`` rates (from half the runner-up's goodput to 4x the winner's, per worker, over the slower of the
    two ratios) on these very runs, with decode steps :data:`DRIFT` x slower, as fast and faster (a gap at a TPOT
    SLO of 1.5 steps can vanish if decode steps run 15% slower than probed), and serve ``n_requests`` requests (a
    number, or {region: number}) per seed on both layouts (:func:`~.split_seeds.paired_runs`, the model's executor)
    at the rate :func:`pick_rate` chooses: for a cell one kind wins, where the predicted gap's 95% interval starts
    highest above zero; for a tie, the most loaded rate where both layouts keep :data:`TIE_FLOOR`% and the
    interval holds zero. Where no rate qualifies, nothing is served (``runs`` None, ``rate_per_s`` NaN).
    ``options``: :class:`~splitlab.serving.ServingConfig` fields of both layouts (the link:
    ``serving.link_fields``).

    Raises:
        ValueError: a cell no layout wins and no tie (none), rates < 2, n_requests not >= 1, fewer than 2
            distinct seeds; those of
            :func:`step_probe` and :func:`~.split_seeds.paired_runs`."""
    from ...serving import ModelExecutor
    _check_cell(cell, rates)
    _check_seeds(seeds)
    n_requests = _requests(n_requests, cell.winner)
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
    if rate is None:  # no rate where runs this short would tell: serving them would tell nothing
        return LiveCell(*placed, None, None)
    ex = ModelExecutor(lm)
    ex.step_log = []
    runs = paired_runs(spec, n_requests, rate, configs, ex, ttft, tpot, seeds=seeds, model=lm, scale=1.0)
    return LiveCell(*placed, runs, step_ratios(cost, ex.step_log))
