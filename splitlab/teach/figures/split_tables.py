"""Chapter 6's tables, each narrow enough for a 412 px phone (short names, units in headers, 3 significant
digits), and the numbers its prose is computed from.

- :func:`short_name`: "4 colocated (chunked, 256-token chunks)" -> "4 chunked 256" (a column or legend label).
- :func:`fit_table` / :func:`fit_formulas`: a calibration's residuals (one row per fit) and its fitted formulas
  (wrapped lines).
- :func:`plan_table` / :func:`plan_summary`: a plan's ranking (layout, goodput, closed form, binding SLO) and its
  verdict in two short lines.
- :func:`decode_steps`: every decode step of a run, measured against the cost model's seconds for it.
- :func:`step_table`: per run, the decode batch, the measured and predicted step and TPOT (the chapter's
  measured-against-predicted table); its words are :mod:`.split_tpot`'s.
"""
from __future__ import annotations

import math
import numbers
import textwrap
from typing import Mapping

import numpy as np
import pandas as pd

from ...planning.options import chunk_of
from .style import fmt3, sig3

__all__ = ["short_name", "fit_table", "fit_formulas", "plan_table", "plan_summary", "decode_steps", "step_table",
           "NO_STEADY_STATE", "FUSED_STEPS"]


def short_name(name: str) -> str:
    """A layout's name short enough for a table column: "4 colocated (prefill-first)" -> "4 colocated",
    "4 colocated (chunked, 256-token chunks)" -> "4 chunked 256"; a split ("3P+1D") is kept."""
    if " colocated (" not in name:
        return name
    n, rest = name.split(" colocated (", 1)
    if rest.startswith("chunked"):
        return f"{n} chunked {chunk_of(name) or ''}".strip()
    return f"{n} colocated"


_sig = sig3  # 3 significant digits, an int where that leaves no decimals (121, not 121.0)


def _as_written(columns: Mapping[str, Mapping[str, object]]) -> pd.DataFrame:
    """A table of ``{column: {row: value}}`` whose every value stays as written: ``pd.DataFrame`` of the dicts
    makes a column of ints and floats all floats, and a table of :func:`sig3` values printed 15 as 15.0."""
    return pd.DataFrame({name: pd.Series(values, dtype=object) for name, values in columns.items()})


def fit_table(calibration) -> pd.DataFrame:
    """One row per fit of ``calibration`` (prefill, decode, transfer): the largest and the rms relative residual
    (%, predicted / measured - 1), R^2 and the number of measurements (an integer)."""
    rows = {name: {"max |res.| (%)": _sig(100 * f.max_abs_residual), "rms res. (%)": _sig(100 * f.rms_residual),
                   "R²": _sig(f.r2), "points": int(len(f.rows))} for name, f in calibration.fits.items()}
    return _as_written(rows).T  # as is: 3 digits, points an integer


def fit_formulas(calibration, width: int = 56) -> str:
    """The fitted formulas of ``calibration``, one per fit, wrapped at ``width`` characters (seconds of one
    forward or copy)."""
    lines = []
    for name, f in calibration.fits.items():  # a term ("215 ns x context_tokens") is never split
        terms = f.formula().replace(" x ", "\xa0x\xa0").replace(" / ", "\xa0/\xa0").replace(" ", "\xa0")
        terms = terms.replace("\xa0+\xa0", " + ")
        lines += [line.replace("\xa0", " ") for line in textwrap.wrap(
            f"{name} = {terms}", width, subsequent_indent=" " * (len(name) + 1), break_on_hyphens=False)]
    return "\n".join(lines)


def plan_table(plan) -> pd.DataFrame:
    """A :class:`splitlab.planning.Plan`'s candidates, best first: short layout name, simulated goodput and the
    closed form's first guess (requests/s per worker, as text of 3 significant digits, :func:`.style.fmt3`: 15,
    not 15.0 beside a 14.3), the binding SLO."""
    rows = [{"layout": short_name(c.name), "goodput (/s/worker)": fmt3(c.goodput_rps_per_worker),
             "closed form (/s/worker)": fmt3(c.first_guess_rps_per_worker), "binds": c.binding_slo.upper()}
            for c in plan.candidates]
    return pd.DataFrame(rows).set_index("layout")


def plan_summary(plan) -> str:
    """The plan's verdict in lines of at most ~60 characters: the winner, then the best of the other kind
    and how much less it serves per worker, then the decode batch bound every layout ran with
    (``plan.batch_line``: the KV budget, the requests it holds, a cap and which binds)."""
    best = plan.best
    text = (f"best: {short_name(best.name)}, {best.goodput_rps_per_worker:.3g} req/s per worker "
            f"({best.binding_slo.upper()} binds)")
    other = next((c for c in plan.candidates if (c.layout == "colocated") != (best.layout == "colocated")), None)
    if other is not None and best.goodput_rps_per_worker > 0:
        less = 1 - other.goodput_rps_per_worker / best.goodput_rps_per_worker
        text += (f"\nbest {'colocated' if other.layout == 'colocated' else 'split'}: {short_name(other.name)}, "
                 f"{other.goodput_rps_per_worker:.3g} ({other.binding_slo.upper()} binds), {less:.0%} less")
    if plan.batch_line:
        text += "\n" + textwrap.fill(plan.batch_line, 60, break_on_hyphens=False)
    return text


def decode_steps(res, cost) -> pd.DataFrame:
    """Every decode step of ``res`` (a :class:`splitlab.serving.ServingResult` with a timeline): ``worker``,
    ``batch``, ``context_tokens`` (prompt + tokens already out, summed over the batch), ``measured_s`` (its
    duration), ``predicted_s`` (``cost.decode_s`` at that batch and context) and ``fused``: in a chunked run, a
    decode row a prefill row on its worker starts right after, the decode share of one fused hybrid forward (the
    timeline splits a fused step's seconds by tokens), no decode step of its own."""
    prompts = {r.id: r.prompt_len for r in res.requests}
    tok = res.token_table()
    times = {rid: np.sort(g.time_s.to_numpy()) for rid, g in tok.groupby("request_id")}
    steps = res.timeline[res.timeline.kind == "decode"]
    prefills = res.timeline[res.timeline.kind == "prefill"]
    chunked = getattr(res.config, "policy", None) == "chunked"
    starts = {(w, t) for w, t in zip(prefills.worker, prefills.start_s)} if chunked else set()
    rows = []
    for s in steps.itertuples():
        ids = list(s.request_ids)
        ctx = sum(prompts[i] + int(np.searchsorted(times.get(i, np.array([])), s.start_s, side="right"))
                  for i in ids)
        rows.append(dict(worker=s.worker, batch=int(s.batch), context_tokens=int(ctx),
                         measured_s=float(s.end_s - s.start_s), predicted_s=float(cost.decode_s(len(ids), ctx)),
                         fused=(s.worker, s.end_s) in starts))
    return pd.DataFrame(rows, columns=["worker", "batch", "context_tokens", "measured_s", "predicted_s", "fused"])


NO_STEADY_STATE = "none: rho >= 1"  # step_table's predicted TPOT of a colocated run the formula cannot predict
#: step_table's predicted TPOT of a chunked run: its streams take tokens from fused steps, which 1 / (1 - rho) is not
FUSED_STEPS = "none: fused steps"


def step_table(runs: Mapping[str, object], cost, rate_per_s: float, mean_prefill_s: float) -> pd.DataFrame:
    """Measured against predicted, one column per run (short names): mean and largest decode batch, the mean
    decode step measured and predicted by ``cost`` at the same batches and contexts (ms), the mean TPOT
    measured, and predicted (ms): the predicted step stretched by ``1 / (1 - rho)`` on a colocated worker
    (``rho = rate_per_s x mean_prefill_s / N``; :data:`NO_STEADY_STATE` when rho >= 1: the formula's worker would
    prefill all the time), the predicted step alone on a split. A chunked run's step rows are its decode steps of
    their own (:func:`decode_steps`' fused rows left out) and its predicted TPOT :data:`FUSED_STEPS`: its streams
    also take tokens from fused steps, which the stretch of prefill-first's stalls does not describe.

    Raises:
        ValueError: ``rate_per_s`` or ``mean_prefill_s`` not a finite number >= 0; a run that decoded no step."""
    if not all(isinstance(v, numbers.Real) and 0 <= v < math.inf for v in (rate_per_s, mean_prefill_s)):
        raise ValueError(f"rate_per_s and mean_prefill_s must be finite numbers >= 0, got {rate_per_s!r} and "
                         f"{mean_prefill_s!r}")  # nan said 'none: rho >= 1', a negative rate stretched by < 1
    cols = {}
    for name, res in runs.items():
        steps = decode_steps(res, cost)
        if steps.empty:  # was 'cannot convert float NaN to integer'
            raise ValueError(f"{short_name(name)}: no decode step to compare (every answer was one token long)")
        own = steps[~steps.fused]
        if own.empty:
            raise ValueError(f"{short_name(name)}: every decode row rode in a fused step: no decode step of its own "
                             "to compare")
        n = len(res.workers)
        rho = rate_per_s * mean_prefill_s / n
        stretch = (1 / (1 - rho) if rho < 1 else None) if res.config.layout == "colocated" else 1.0
        tpot_pred = (FUSED_STEPS if res.config.policy == "chunked" else NO_STEADY_STATE if stretch is None else
                     _sig(1e3 * own.predicted_s.mean() * stretch))
        steps = own
        cols[short_name(name)] = {
            "mean decode batch": _sig(steps.batch.mean()), "largest decode batch": int(steps.batch.max()),
            "step, measured (ms)": _sig(1e3 * steps.measured_s.mean()),
            "step, predicted (ms)": _sig(1e3 * steps.predicted_s.mean()),
            "TPOT, measured (ms)": _sig(1e3 * res.metrics()["tpot_s"]["mean"]),
            "TPOT, predicted (ms)": tpot_pred}
    return _as_written(cols)
