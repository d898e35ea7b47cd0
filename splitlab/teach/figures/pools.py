"""Chapter 7's figures: goodput, attainment against rate, and the planner's candidates.

- :func:`attainment_curves`: SLO attainment against the request rate per worker, one line per layout, the 90%
  target and each layout's goodput marked.
- :func:`falls_words`: which layout's curve falls first and which last, ties within the searches' tolerance said
  as ties.
- :func:`ratio_sweep`: goodput per worker of every xPyD split against the prefill share x / (x + y), one line per
  total number of workers, the best colocated layout as a horizontal line.
- :func:`candidates`: the planner's candidates as horizontal bars of goodput per worker (best on top), each with
  its binding SLO and the closed-form first guess.
- :func:`pools_plan`, :func:`pools_grid`: the planner at chosen SLOs and lengths, and over a grid of them (the
  numbers of chapter 7's explorers).
- Tables and the sentences computed from them (:mod:`.pools_tables`): :func:`fit_table`, :func:`trap_table`,
  :func:`plan_table`, :func:`kinds_table`, :func:`validation_verdict`, :func:`guess_verdict`, :func:`ratio_verdict`.

Every figure is drawn for a 412 px phone: at most :data:`WIDTH` inches wide with fonts of :data:`STYLE` (12-13
pt), so that shown at the ~370 px text column its smallest text is still 9 pt; legends sit outside the data.
Each function draws on a given Axes (or makes one), labels both axes with units, sets a title, returns the Axes.
"""
from __future__ import annotations

import functools
from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..notebook import rc_style
from .style import LAYOUT_COLORS, TARGET, TARGET_LS, and_list, layout_color
from .pools_tables import (fit_table, guess_verdict, kinds_table, plan_table, ratio_verdict, short_name,
                           trap_table, trap_verdict, validation_verdict, zero_terms_note)

__all__ = ["attainment_curves", "falls_words", "ratio_sweep", "candidates", "trap_table", "trap_verdict", "pools_plan",
           "pools_grid", "short_name", "LAYOUT_COLORS", "fit_table", "plan_table", "kinds_table", "validation_verdict",
           "guess_verdict", "ratio_verdict", "zero_terms_note", "WIDTH", "STYLE"]

#: inches: a 370 px column shows a 5-inch figure (500 px at 100 dpi) at 0.74 of its size, 12 pt as ~9 pt
WIDTH = 5.0
#: matplotlib sizes (pt) of this module's figures
STYLE = {"font.size": 13, "axes.titlesize": 12, "axes.labelsize": 13, "xtick.labelsize": 12,
         "ytick.labelsize": 12, "legend.fontsize": 12, "legend.frameon": False}


def _style():
    """:data:`STYLE` for the figures made inside (interactive mode kept: :func:`splitlab.teach.notebook.rc_style`)."""
    return rc_style(STYLE)


def _styled(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _style():
            return fn(*args, **kwargs)
    return wrapper


def _ax(ax, height: float = 3.6):
    return ax if ax is not None else plt.subplots(figsize=(WIDTH, height), layout="constrained")[1]


@_styled
def attainment_curves(curves: Mapping[str, object], target: float = 0.9, goodputs: Mapping[str, float] | None = None,
                      ax=None, title: str | None = None):
    """``curves``: name -> DataFrame with ``rate_per_worker`` and ``attainment`` (from
    :func:`splitlab.serving.attainment_curve` or ``GoodputResult.curve()``); ``goodputs``: name -> goodput per
    worker, drawn as a marker on the target line."""
    ax = _ax(ax, 4.2)
    for name, df in curves.items():
        df = df.sort_values("rate_per_worker")
        line, = ax.plot(df.rate_per_worker, 100 * df.attainment, "o-", ms=4, label=name, color=layout_color(name))
        if goodputs and name in goodputs:
            ax.plot(goodputs[name], 100 * target, "v", ms=10, color=line.get_color(), mec="black")
    ax.axhline(100 * target, color=TARGET, ls=TARGET_LS, lw=1, label=f"target {target:.0%}")
    ax.set_ylim(0, 102)
    ax.set_xlabel("request rate per worker (req/s)")
    ax.set_ylabel("within both SLOs (%)")
    ax.set_title(title or "SLO attainment against load (triangles: goodput)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2)
    return ax


def falls_words(goodputs: Mapping[str, float], tolerance: float) -> str:
    """Which curve of :func:`attainment_curves` falls first and which last, from each layout's goodput per worker
    (name -> req/s): "4 colocated falls first, 3P+1D last"; layouts whose goodputs are within ``tolerance`` (the
    searches', a fraction) of the lowest or the highest fall together, said as a tie with their numbers ("4
    colocated and 4 chunked fall first, together: 4.75 and 4.75 req/s per worker, within the searches' 3%").

    Raises:
        ValueError: fewer than two goodputs, a goodput that is not finite and >= 0, or a ``tolerance`` that is
            not finite and >= 0.
    """
    if len(goodputs) < 2 or not 0 <= tolerance < float("inf"):
        raise ValueError(f"falls_words needs two goodputs or more and a finite tolerance >= 0, got {len(goodputs)} "
                         f"and {tolerance}")
    bad = {k: v for k, v in goodputs.items() if not 0 <= v < float("inf")}
    if bad:
        raise ValueError(f"goodputs must be finite and >= 0 req/s per worker, got {bad}")
    order = sorted(goodputs, key=goodputs.get)
    lo, hi = goodputs[order[0]], goodputs[order[-1]]

    def near(a: float, b: float) -> bool:
        return b <= 0 or 1 - a / b <= tolerance + 1e-12

    within = f"within the searches' {tolerance:.0%}"

    def nums(names) -> str:
        return f"{and_list(f'{goodputs[k]:.3g}' for k in names)} req/s per worker, {within}"
    if near(lo, hi):
        return f"All {len(order)} fall together ({nums(order)})"
    first = [k for k in order if near(lo, goodputs[k]) and not near(goodputs[k], hi)]
    last = [k for k in order if near(goodputs[k], hi)]

    def group(names, where: str) -> str:
        if len(names) == 1:
            return f"{names[0]} {where}"
        return f"{and_list(names)} {where}, together ({nums(names)})"
    head = group(first, "falls first" if len(first) == 1 else "fall first")
    tail = group(last, "last")
    return f"{head}; {tail}" if len(first) > 1 or len(last) > 1 else f"{head}, {tail}"


#: one (marker, line style) per total of workers of :func:`ratio_sweep`: every line is a split, in one colour
SWEEP_STYLES = ("o-", "s--", "^:", "D-.", "v-", "P--", "X:", "*-.")


@_styled
def ratio_sweep(plan, ax=None, title: str | None = None):
    """Goodput per worker of each split of ``plan`` (a :class:`splitlab.planner.Plan`) against its prefill
    share, one line per total of workers (all in the split's colour, told apart by marker and dash), the best split
    named; the best colocated candidate as a dashed horizontal line in its colour."""
    ax = _ax(ax, 4.6)
    splits = [c for c in plan.candidates if c.layout == "disaggregated"]
    for k, n in enumerate(sorted({c.workers for c in splits})):  # every line a split: the split's colour
        mine = sorted((c for c in splits if c.workers == n), key=lambda c: c.prefill_workers)
        x = [c.prefill_workers / n for c in mine]
        ax.plot(x, [c.goodput_rps_per_worker for c in mine], SWEEP_STYLES[k % len(SWEEP_STYLES)],
                color=LAYOUT_COLORS["split"], label=f"{n} workers")
    if splits:  # name only the best split: labels on every line's peak would overlap on a phone
        peak = max(splits, key=lambda c: c.goodput_rps_per_worker)
        ax.annotate(f"best: {peak.name}", (peak.prefill_workers / peak.workers, peak.goodput_rps_per_worker),
                    textcoords="offset points", xytext=(-8, 8), ha="right")
    best_colocated = max((c for c in plan.candidates if c.layout == "colocated"),
                         key=lambda c: c.goodput_rps_per_worker, default=None)
    if best_colocated is not None:
        ax.axhline(best_colocated.goodput_rps_per_worker, color=layout_color(best_colocated), ls="--",
                   label=f"best colocated ({short_name(best_colocated)})")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.2 * max(c.goodput_rps_per_worker for c in plan.candidates))
    ax.set_xlabel("prefill share of the workers, x / (x + y)")
    ax.set_ylabel("goodput per worker (req/s)")
    ax.set_title(title or "Which P:D ratio? Goodput of every split")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
    return ax


@_styled
def candidates(plan, ax=None, title: str | None = None, top: int = 10):
    """The ``top`` candidates of ``plan`` as bars of goodput per worker (best on top), coloured by kind, each
    labelled with its binding SLO; the closed-form first guess as a black tick."""
    cands = plan.candidates[:top]
    ax = _ax(ax, 0.45 * len(cands) + 1.8)
    y = np.arange(len(cands))[::-1]
    for yi, c in zip(y, cands):
        ax.barh(yi, c.goodput_rps_per_worker, color=layout_color(c), height=0.7)
        ax.plot([c.first_guess_rps_per_worker] * 2, [yi - 0.35, yi + 0.35], color="black", lw=2,
                label="first guess (closed form)" if yi == y[0] else None)
        ax.text(c.goodput_rps_per_worker, yi, f" {c.binding_slo}", va="center", fontsize=12)
    ax.set_yticks(y, [short_name(c) for c in cands])
    ax.set_xlim(0, 1.3 * max([c.goodput_rps_per_worker for c in cands] + [c.first_guess_rps_per_worker
                                                                             for c in cands] + [1e-9]))
    ax.set_xlabel("goodput per worker (req/s)")
    ax.set_title(title or "The planner's candidates (label: binding SLO)")
    ax.legend(loc="lower right")  # the shortest bars are at the bottom
    return ax


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
