"""Chapter 7's live check of the map (:mod:`splitlab.planning.split_map`): a cell of each region served by the real
model (emulated), against the layout of the other region, over several seeds.

- :func:`region_cells`: per region (the split wins; a colocated layout wins) the cell the map gives the widest
  margin, on one TPOT row if asked.
- :func:`live_cells`: each chosen cell's winner and its best rival of the other region, served on the same
  requests (the cell's prompt and answer lengths) at a rate between their simulated goodputs, once per seed:
  SLO attainment per seed, its mean and its spread (largest - smallest).
- :func:`live_verdict`: the table in sentences: the live winner, whether the gap is outside the runs' own spread,
  and whether it matches the map.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd

from .style import sig3

__all__ = ["region_cells", "live_cells", "live_verdict", "layout_config", "split_pools"]

_COLOCATED = ("prefill-first", "chunked")
#: the numeric columns of :func:`live_cells`' table, kept to 3 significant digits
_SHOWN = ("goodput (sim.)", "rate (req/s per worker)", "mean (%)", "spread (pp)")


def region_cells(m, tpot_steps: float | None = None, max_prompt_tokens: int | None = None) -> dict:
    """{"split": cell, "colocated": cell}: per region of the map ``m`` the cell its winner leads by the widest
    margin (ties and empty cells skipped), on the row ``tpot_steps`` if given, among prompts of at most
    ``max_prompt_tokens`` if given (a live run's cost grows with the prompt); a region the map (or that choice)
    has no cell of is left out."""
    out = {}
    for region, kinds in (("split", ("split",)), ("colocated", _COLOCATED)):
        cells = [c for c in m.cells if c.winner in kinds and (tpot_steps is None or c.tpot_steps == tpot_steps)
                 and (max_prompt_tokens is None or c.prompt_tokens <= max_prompt_tokens)]
        if cells:
            out[region] = max(cells, key=lambda c: c.margin)
    return out


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
    chunk = re.search(r"chunked, (\d+)-token chunks", name)
    if chunk:
        return ServingConfig.colocated(workers, policy="chunked", chunk_tokens=int(chunk[1]), **options)
    if name.endswith("(prefill-first)"):
        return ServingConfig.colocated(workers, **options)
    raise ValueError(f"not a layout name of a map: {name!r}")


def _rival(cell) -> str:
    """The best kind of the other region than the cell's winner."""
    kinds = _COLOCATED if cell.winner == "split" else ("split",)
    return max(kinds, key=lambda k: cell.goodput[k])


def live_cells(m, executor, cells: dict, n_requests: int | dict = 20, seeds: Sequence[int] = (0, 1, 2),
               toward_winner: float = 0.5, **options) -> pd.DataFrame:
    """Serve each cell of ``cells`` ({region: cell} of :func:`region_cells`) on ``executor`` (a
    :class:`~splitlab.serving.ModelExecutor`: the real model; a cost model's executor simulates): its winner's
    layout and its best rival's, on the same ``n_requests`` requests of the cell's prompt and answer lengths,
    Poisson arrivals at a rate between the two simulated goodputs (times the cluster): ``rival^(1 - t) x
    winner^t`` for ``t = toward_winner`` (0.5: their geometric mean; nearer 1, nearer the winner's goodput and
    further above the rival's, where a short run shows the rival's overload sooner), once per seed, with the map's
    batch cap and SLOs; ``options``: more :class:`~splitlab.serving.ServingConfig` fields of every layout (the
    link: ``serving.link_fields``).

    Returns a DataFrame, one row per (cell, layout): ``cell`` ("428-token prompts, TPOT 2.5 steps"), ``map``
    (the map's winner kind of that cell), ``kind``, ``layout``, ``goodput (sim.)`` (requests/s per worker),
    ``rate (req/s per worker)``, ``attainment (%)`` per seed ("75 / 80 / 85"), ``mean (%)`` and ``spread (pp)``
    (largest - smallest over the seeds), ``requests`` (per seed); the goodputs, rates, means and spreads with 3
    significant digits (:func:`.style.sig3`, a column of ``dtype=object`` that prints each as written).

    Raises:
        ValueError: n_requests < 2 (an int, or {region: int} for every region of ``cells``), no seeds,
            toward_winner outside [0, 1]; and those of :func:`splitlab.serving.compare`."""
    from ...serving import compare, make_workload
    from ...serving.workload import Fixed, WorkloadSpec
    counts = n_requests if isinstance(n_requests, dict) else {region: n_requests for region in cells}
    for n in (counts.get(region) for region in cells):
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f"n_requests must be an integer >= 2 (or one per region of cells), got {n_requests!r}")
    if not 0 <= toward_winner <= 1:
        raise ValueError(f"toward_winner must be in [0, 1] (0: the rival's goodput, 1: the winner's), got "
                         f"{toward_winner!r}")
    if not len(seeds):
        raise ValueError("seeds is empty: give at least one seed")
    rows = []
    for region, cell in cells.items():
        kinds, n_requests = (cell.winner, _rival(cell)), counts[region]
        rate = cell.goodput[kinds[0]] ** toward_winner * max(cell.goodput[kinds[1]], 1e-9) ** (1 - toward_winner)
        configs = {cell.names[k]: layout_config(cell.names[k], m.workers, m.chunk_tokens, max_batch=m.max_batch,
                                                trace=False, **options) for k in kinds}
        spec = WorkloadSpec(f"{cell.prompt_tokens}-token prompts", Fixed(cell.prompt_tokens), Fixed(m.output_tokens))
        att = {k: [] for k in kinds}
        for seed in seeds:
            reqs = make_workload(spec, n_requests, rate * m.workers, seed=seed, model=getattr(executor, "lm", None),
                                 scale=1.0)
            runs = compare(reqs, configs, executor).results
            for k in kinds:
                att[k].append(100 * runs[cell.names[k]].metrics(cell.ttft_slo_s, cell.tpot_slo_s)["slo_attainment"])
        for k in kinds:
            rows.append({"cell": f"{cell.prompt_tokens}-token prompts, TPOT {cell.tpot_steps:g} steps",
                         "map": cell.winner, "kind": k, "layout": cell.names[k],
                         "goodput (sim.)": cell.goodput[k], "rate (req/s per worker)": rate,
                         "attainment (%)": " / ".join(f"{a:.0f}" for a in att[k]), "mean (%)": np.mean(att[k]),
                         "spread (pp)": max(att[k]) - min(att[k]), "requests": n_requests})
    table = pd.DataFrame(rows)
    for col in _SHOWN:  # as the page shows them: 3 significant digits, 100 and 71.9, not 100.000 and 71.875
        table[col] = pd.Series([sig3(v) for v in table[col]], dtype=object)
    return table


def live_verdict(table: pd.DataFrame) -> str:
    """One sentence per cell of a :func:`live_cells` table: which layout met the SLOs for more requests live, by
    how many points against the spread of its runs, and whether that matches the map's winner."""
    out = []
    for cell, rows in table.groupby("cell", sort=False):
        a, b = rows.iloc[0], rows.iloc[1]  # the map's winner, then its rival
        live, other = (a, b) if a["mean (%)"] >= b["mean (%)"] else (b, a)
        gap, spread = live["mean (%)"] - other["mean (%)"], max(a["spread (pp)"], b["spread (pp)"])
        clear = gap > spread
        match = live["kind"] == a["map"]
        out.append(f"At {cell}, {live['layout']} met the SLOs for {live['mean (%)']:.0f}% of requests on average "
                   f"against {other['mean (%)']:.0f}% for {other['layout']}: a gap of {gap:.0f} points, "
                   + (f"outside the runs' own spread of {spread:.0f}" if clear else
                      f"within the runs' own spread of {spread:.0f}, so these runs cannot tell the two apart")
                   + (f"; the map's winner, {a['layout']}, {'won live too' if match else 'did not win live'}."
                      if clear else f" (the map's winner: {a['layout']}).")
                   + ("" if not clear or match else " The simulator's step times are the cost model's: where the "
                      "real steps run slower or faster than the fit, the boundary between the regions moves."))
    return " ".join(out)
