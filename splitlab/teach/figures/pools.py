"""Chapter 7's figures: goodput, attainment against rate, and the planner's candidates.

- :func:`attainment_curves`: SLO attainment against the request rate per worker, one line per layout, the 90%
  target and each layout's goodput marked.
- :func:`ratio_sweep`: goodput per worker of every xPyD split against the prefill share x / (x + y), one line per
  total number of workers, the colocated layouts as horizontal lines.
- :func:`candidates`: the planner's candidates as horizontal bars of goodput per worker (best on top), each with
  its binding SLO and the closed-form first guess.
- :func:`trap_table`: the backlog trap in numbers: attainment with and without the second-token bound.
- :func:`pools_plan`, :func:`pools_grid`: the planner at chosen SLOs and lengths, and over a grid of them (the
  numbers of chapter 7's explorers).

Every function draws on a given Axes (or makes one at most 8 inches wide), labels both axes with units, sets a
title and returns the Axes.
"""
from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...serving import metrics as M

__all__ = ["attainment_curves", "ratio_sweep", "candidates", "trap_table", "pools_plan", "pools_grid", "short_name",
           "LAYOUT_COLORS"]

LAYOUT_COLORS = {"colocated": "tab:blue", "chunked": "tab:purple", "disaggregated": "tab:orange"}


def _ax(ax, size=(8, 3.6)):
    return ax if ax is not None else plt.subplots(figsize=size, layout="constrained")[1]


def attainment_curves(curves: Mapping[str, object], target: float = 0.9, goodputs: Mapping[str, float] | None = None,
                      ax=None, title: str | None = None):
    """``curves``: name -> DataFrame with ``rate_per_worker`` and ``attainment`` (from
    :func:`splitlab.serving.attainment_curve` or ``GoodputResult.curve()``); ``goodputs``: name -> goodput per
    worker, drawn as a marker on the target line."""
    ax = _ax(ax)
    for name, df in curves.items():
        df = df.sort_values("rate_per_worker")
        line, = ax.plot(df.rate_per_worker, 100 * df.attainment, "o-", ms=3, label=name)
        if goodputs and name in goodputs:
            ax.plot(goodputs[name], 100 * target, "v", ms=9, color=line.get_color(), mec="black")
    ax.axhline(100 * target, color="black", ls=":", lw=1, label=f"target {target:.0%}")
    ax.set_ylim(0, 102)
    ax.set_xlabel("request rate per worker (requests/s)")
    ax.set_ylabel("requests within both SLOs (%)")
    ax.set_title(title or "SLO attainment against load (triangles: goodput)")
    ax.legend(fontsize=9, loc="lower left")
    return ax


def ratio_sweep(plan, ax=None, title: str | None = None):
    """Goodput per worker of each split of ``plan`` (a :class:`splitlab.planner.Plan`) against its prefill
    share, one line per total of workers; the colocated candidates as dashed horizontal lines."""
    ax = _ax(ax)
    splits = [c for c in plan.candidates if c.layout == "disaggregated"]
    for n in sorted({c.workers for c in splits}):
        mine = sorted((c for c in splits if c.workers == n), key=lambda c: c.prefill_workers)
        x = [c.prefill_workers / n for c in mine]
        line, = ax.plot(x, [c.goodput_rps_per_worker for c in mine], "o-", label=f"{n} workers")
        peak = max(mine, key=lambda c: c.goodput_rps_per_worker)  # name only each line's best split
        ax.annotate(peak.name, (peak.prefill_workers / n, peak.goodput_rps_per_worker), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=9, color=line.get_color())
    best_colocated = max((c for c in plan.candidates if c.layout == "colocated"),
                         key=lambda c: c.goodput_rps_per_worker, default=None)
    if best_colocated is not None:
        ax.axhline(best_colocated.goodput_rps_per_worker, color=LAYOUT_COLORS["colocated"], ls="--",
                   label=f"best colocated: {best_colocated.name}")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("prefill share of the workers, x / (x + y)")
    ax.set_ylabel("goodput per worker (requests/s)")
    ax.set_title(title or "Which P:D ratio? Goodput per worker of every split")
    ax.legend(fontsize=9, loc="upper left", ncols=2)
    ax.set_ylim(0, 1.35 * max(c.goodput_rps_per_worker for c in plan.candidates))
    return ax


def candidates(plan, ax=None, title: str | None = None, top: int = 10):
    """The ``top`` candidates of ``plan`` as bars of goodput per worker (best on top), coloured by kind, each
    labelled with its binding SLO; the closed-form first guess as a black tick."""
    cands = plan.candidates[:top]
    ax = _ax(ax, (8, 0.42 * len(cands) + 1.3))
    y = np.arange(len(cands))[::-1]
    for yi, c in zip(y, cands):
        kind = "chunked" if c.policy == "chunked" else c.layout
        ax.barh(yi, c.goodput_rps_per_worker, color=LAYOUT_COLORS[kind], height=0.7)
        ax.plot([c.first_guess_rps_per_worker] * 2, [yi - 0.35, yi + 0.35], color="black", lw=2)
        ax.text(c.goodput_rps_per_worker, yi, f" {c.binding_slo}", va="center", fontsize=9)
    ax.set_yticks(y, [c.name.replace("colocated", "coloc.").replace("-token chunks", "") for c in cands], fontsize=9)
    ax.set_xlim(0, 1.25 * max([c.goodput_rps_per_worker for c in cands] + [c.first_guess_rps_per_worker
                                                                              for c in cands] + [1e-9]))
    ax.set_xlabel("goodput per worker (requests/s); black tick: closed-form first guess")
    ax.set_title(title or "The planner's candidates (label: the SLO that binds)", fontsize=10)
    return ax


def trap_table(runs: Mapping[str, object], ttft_slo_s: float, tpot_slo_s: float) -> pd.DataFrame:
    """One column per run: TTFT, TTST (time to second token), TPOT and E2E P90 (s), output tokens/s, and the SLO
    attainment counted two ways (%): TTFT and TPOT only, and with the second-token bound TTFT SLO + TPOT SLO."""
    cols = {}
    for name, res in runs.items():
        m = res.metrics(ttft_slo_s, tpot_slo_s)
        t = res.request_table()
        old = ((t.state == "finished") & (t.ttft_s <= ttft_slo_s) & ~(t.tpot_s > tpot_slo_s)).mean()
        cols[name] = {"TTFT P90 (s)": m["ttft_s"]["p90"], "TTST P90 (s)": m["ttst_s"]["p90"],
                      "TPOT P90 (s)": m["tpot_s"]["p90"], "E2E P90 (s)": m["e2e_s"]["p90"],
                      "output tokens/s": m["throughput_tokens_per_s"],
                      "attainment, TTFT and TPOT only (%)": 100 * old,
                      "attainment with the TTST bound (%)": 100 * m["slo_attainment"]}
    return pd.DataFrame(cols).map(lambda v: float(f"{v:.3g}")).astype(object)


_PLANS: dict = {}  # (inputs) -> Plan: the simulator is deterministic, so the same inputs give the same plan


def pools_plan(cost, workload="research", ttft_slo_s: float = 0.5, tpot_slo_s: float = 0.02, scale: float = 1.0,
               max_workers: int = 4, chunk_tokens=(256,), max_requests: int = 100, tolerance: float = 0.1,
               price_per_hour: float = 1.0):
    """:func:`splitlab.planner.plan` on the simulator with ``cost`` (a :class:`~splitlab.costmodel.CostModel` or
    a calibration) for the explorers: few requests per run (``max_requests``) and a coarse ``tolerance`` (each
    goodput within 10% by default), so one plan takes about a second; remembered, so a figure and an explorer
    asking for the same point share one search. Arguments and errors: those of :func:`~splitlab.planner.plan`."""
    from ...planning.planner import plan

    cost = getattr(cost, "cost", cost)
    key = (repr(cost), repr(workload), ttft_slo_s, tpot_slo_s, scale, max_workers, tuple(chunk_tokens), max_requests,
           tolerance, price_per_hour)
    if key not in _PLANS:
        _PLANS[key] = plan(cost, workload, ttft_slo_s, tpot_slo_s, max_workers, price_per_hour,
                           chunk_tokens=chunk_tokens, scale=scale, max_requests=max_requests, tolerance=tolerance,
                           progress=False)
    return _PLANS[key]


def short_name(c) -> str:
    """A candidate's name in a few characters ("4 coloc.", "4 chunked", "3P+1D")."""
    if c.layout == "disaggregated":
        return c.name
    return f"{c.workers} {'chunked' if c.policy == 'chunked' else 'coloc.'}"


def pools_grid(cost, workload="research", ttft_slo_s: float = 0.5, tpot_slos_s=(0.02,), scales=(1.0,),
               **options) -> pd.DataFrame:
    """:func:`pools_plan` at every TPOT SLO of ``tpot_slos_s`` (s) x lengths ``scale`` of ``scales``
    (``options``: its other arguments).

    Returns:
        two rows per candidate of each plan: its simulated goodput per worker (``label`` "simulated") and the
        closed-form first guess (``label`` "predicted (closed form)"); columns ``tpot_slo_s``, ``scale``,
        ``candidate`` (:func:`short_name`), ``layout``, ``policy``, ``workers``, ``prefill_workers``,
        ``decode_workers``, ``binding_slo``, ``goodput_rps_per_worker`` (requests/s) and ``label``.
    """
    rows = []
    for tpot in tpot_slos_s:
        for scale in scales:
            for c in pools_plan(cost, workload, ttft_slo_s, tpot, scale, **options).candidates:
                common = dict(tpot_slo_s=tpot, scale=scale, candidate=short_name(c), layout=c.layout, policy=c.policy,
                              workers=c.workers, prefill_workers=c.prefill_workers, decode_workers=c.decode_workers,
                              binding_slo=c.binding_slo)
                rows += [dict(common, goodput_rps_per_worker=c.goodput_rps_per_worker, label="simulated"),
                         dict(common, goodput_rps_per_worker=c.first_guess_rps_per_worker,
                              label="predicted (closed form)")]
    return pd.DataFrame(rows)
