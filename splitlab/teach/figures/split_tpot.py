"""Chapter 6's words on TPOT, from the runs and their :func:`.split_tables.step_table`: each run's measured TPOT
against the formula's (:func:`tpot_prediction_note`), the stretch of prefill-first's streams against
``1 / (1 - rho)`` (:func:`stretch_words`), the share of the streams' lives their workers spent prefilling
(:func:`stream_prefill_share`) and the paragraph on the split and its TPOT SLO (:func:`tpot_slo_note`)."""
from __future__ import annotations

import math
import numbers
from typing import Mapping

import numpy as np
import pandas as pd

from .split_tables import FUSED_STEPS, NO_STEADY_STATE, short_name
from .style import fmt2, fmt3

__all__ = ["stream_prefill_share", "tpot_prediction_note", "stretch_words", "tpot_slo_note"]


def stream_prefill_share(res) -> float:
    """The share of its streams' lives that a run's decode workers spent prefilling (0..1): for every finished
    request with a second token, the prefill time on its decode worker between its first and its last token over
    that span, averaged over the requests. The colocated TPOT formula assumes ``rho`` here."""
    t = res.request_table()
    t = t[(t.state == "finished") & (t.output_tokens > 1)]
    prefills = res.timeline[res.timeline.kind == "prefill"]
    shares = []
    for r in t.itertuples():
        lo, hi = r.arrival_s + r.ttft_s, r.arrival_s + r.e2e_s
        mine = prefills[prefills.worker == r.decode_worker]
        overlap = (np.minimum(mine.end_s, hi) - np.maximum(mine.start_s, lo)).clip(lower=0).sum()
        shares.append(overlap / (hi - lo) if hi > lo else 0.0)
    return float(np.mean(shares)) if shares else float("nan")




def tpot_prediction_note(runs: Mapping[str, object], steps: pd.DataFrame, rho: float, split: str,
                         tolerance: float = 0.2) -> str:
    """A sentence on a :func:`step_table` of ``runs``: how far each colocated run's measured mean TPOT is from the
    formula's (its predicted step stretched by ``1 / (1 - rho)``) and, where it misses by more than
    ``tolerance``, why, from the run: the share of its streams' lives its workers really spent prefilling
    (:func:`stream_prefill_share`) against ``rho``. ``split``: the split's column (short name): its measured TPOT
    against its predicted step at its batches, and where that misses by more than ``tolerance``, how much of the
    miss its slower steps explain (:func:`_split_tpot_note`). Raises ValueError for ``rho`` not a finite number
    >= 0."""
    if not (isinstance(rho, numbers.Real) and 0 <= rho < math.inf):  # nan said 'At rho = nan% ...'
        raise ValueError(f"rho must be a finite number >= 0 (a share of a worker's time), got {rho!r}")
    measured, predicted = steps.loc["TPOT, measured (ms)"].drop(split), steps.loc["TPOT, predicted (ms)"].drop(split)
    none = [name for name in measured.index if predicted[name] == NO_STEADY_STATE]
    fused = [name for name in measured.index if predicted[name] == FUSED_STEPS]
    errors = {name: float(measured[name]) / float(predicted[name]) - 1 for name in measured.index
              if name not in none and name not in fused}
    said = [f"{name}: {float(measured[name]):.3g} ms measured, {float(predicted[name]):.3g} predicted ({e:+.0%})"
            for name, e in errors.items()]
    said += [f"{name}: {float(measured[name]):.3g} ms measured, none predicted" for name in none]
    said += [f"{name}: {float(measured[name]):.3g} ms measured, no formula here (a chunked stream also takes tokens "
             "from fused steps, each a chunk's forward with the decode rows in it, not a decode step stretched by "
             "stalls)" for name in fused]
    text = "Against the formula, " + "; ".join(said) + "."
    if none:
        text += (f" At rho = {rho:.0%} the formula's colocated worker would spend all its time prefilling, so it has "
                 "no steady TPOT to predict: a run this short ends before that backlog builds.")
    # judged on the printed (whole) percentages, so that a printed -20% is never called a miss of 20%
    missed = [name for name, e in errors.items() if round(abs(e) * 100) > round(tolerance * 100)]
    text += _split_tpot_note(steps, split, tolerance)
    if not missed:
        return text + (f" Each colocated run is within the {tolerance:.0%} we allow a formula here." if errors else "")
    by_short = {short_name(name): res for name, res in runs.items()}
    shares = {name: stream_prefill_share(by_short[name]) for name in missed}
    spent = (f"{next(iter(shares.values())):.0%}" if len(shares) == 1 else
             " and ".join(f"{v:.0%} ({name})" for name, v in shares.items()))
    text += (f" {' and '.join(missed)} {'misses' if len(missed) == 1 else 'miss'} by more than the {tolerance:.0%} we "
             f"allow: the formula assumes {'its' if len(missed) == 1 else 'their'} workers spend rho = {rho:.0%} of "
             f"every stream's life prefilling, and in this run they spent {spent} of those lives prefilling "
             "(measured on the timeline).")
    if any(v < rho for v in shares.values()):
        text += (" Two things the steady-state formula leaves out put fewer prefills inside the streams' lives: a "
                 "short run starts on idle workers and ends draining them, and the router sends each new prompt to "
                 "the worker that owes the least work, which is the one with the fewest streams left to serve.")
    if any(v >= rho for v in shares.values()):
        text += (" Where they spent more, the prefills came in bursts, so more of them landed inside the streams' "
                 "lives than a steady trickle would give.")
    return text


def stretch_words(steps: pd.DataFrame, rho: float, split: str, colocated: str, tolerance: float = 0.2) -> str:
    """The clause that follows "Colocated, the mean TPOT was ... than the split's ... ms" on a :func:`step_table`:
    the stretch measured on the prefill-first column ``colocated`` (its mean TPOT over its mean measured decode
    step) beside the formula's ``1 / (1 - rho)``, in words that follow the two numbers ("close to" within
    ``tolerance``, compared in whole percent, else "less than" or "more than"); ``split``: the split's column.

    Raises:
        ValueError: ``rho`` not a finite number >= 0."""
    if not (isinstance(rho, numbers.Real) and 0 <= rho < math.inf):
        raise ValueError(f"rho must be a finite number >= 0 (a share of a worker's time), got {rho!r}")
    tpot = steps.loc["TPOT, measured (ms)"]
    step = float(steps.loc["step, measured (ms)", colocated])
    measured = float(tpot[colocated]) / step
    said = (f"on {colocated} a stream's mean gap was {fmt2(measured)}x its worker's mean decode step "
            f"({fmt3(step)} ms)")
    if rho >= 1:
        return f" ({said}; at $\\rho$ = {rho:.2f} the formula's stretch $1 / (1 - \\rho)$ has no value: below)"
    formula = 1 / (1 - rho)
    off = measured / formula - 1
    near = "close to" if round(abs(off) * 100) <= round(tolerance * 100) else "less than" if off < 0 else "more than"
    if min(tpot.drop(split)) > float(tpot[split]):
        return (f", the prefills' stalls at work: {said}, {near} the formula's stretch $1 / (1 - \\rho)$ = "
                f"{formula:.2f}")
    return (f", though {said}, {near} the formula's stretch $1 / (1 - \\rho)$ = {formula:.2f}, which predicts "
            f"{float(steps.loc['step, predicted (ms)', colocated]) * formula:.3g} ms")


def tpot_slo_note(results: Mapping[str, object], split, steps: pd.DataFrame, rho: float, decode_fit,
                  ttft_slo_s: float, tpot_slo_s: float, prefill_first: str) -> str:
    """Chapter 6's paragraph "The split and its TPOT SLO", from one seed's runs ``results`` (layout name ->
    ServingResult): how many of the split's requests had a TPOT over ``tpot_slo_s`` (s) and its TPOT P90, who sets
    it (its decode pool, its mean and largest batch), its measured decode step against the cost model's
    (``decode_fit``'s worst residual as the yardstick), the binding SLO the planner found, and the colocated runs'
    mean TPOT beside the split's (:func:`stretch_words`, :func:`tpot_prediction_note`). ``split``: the planner's
    split candidate; ``steps``: :func:`step_table` of ``results``; ``prefill_first``: the prefill-first layout's
    name. Raises ValueError for ``rho`` not a finite number >= 0."""
    from ...serving.metrics import slo_misses
    s, run = short_name(split.name), results[split.name]
    p90 = run.metrics(ttft_slo_s, tpot_slo_s)["tpot_s"]["p90"] * 1e3
    n_tpot = slo_misses(run.requests, ttft_slo_s, tpot_slo_s)["tpot"]
    n_over = int((run.request_table().tpot_s > tpot_slo_s).sum())  # each request's own TPOT
    counted = (f"{n_tpot} of them counted under TPOT in the table, the others under an SLO they missed first; "
               if n_tpot != n_over else "")
    step, predicted = float(steps.loc["step, measured (ms)", s]), float(steps.loc["step, predicted (ms)", s])
    off, tp_all = step / predicted - 1, steps.loc["TPOT, measured (ms)"]
    others = tp_all.drop(s)
    more = "more" if min(others) > tp_all[s] else "less" if max(others) < tp_all[s] else "some more, some less"
    one = split.decode_workers == 1
    return (f"**The split and its TPOT SLO.** {s} "
            f"{f'had a TPOT above the SLO for {n_over}' if n_over else 'kept its TPOT within the SLO for all'} of its "
            f"{len(run.requests)} requests in the first seed ({counted}TPOT P90 {p90:.3g} ms against the SLO's "
            f"{tpot_slo_s * 1e3:.3g} ms). Its TPOT is set by its decode {'worker' if one else 'workers'} alone, "
            f"{split.decode_workers} of {split.workers}: {'that one worker carries' if one else 'they carry'} every "
            f"stream, {steps.loc['mean decode batch', s]:.3g} on average and up to "
            f"{steps.loc['largest decode batch', s]} at once, and a step grows with its batch. Its steps took "
            f"{step:.3g} ms on average, {abs(off):.0%} {'more' if off > 0 else 'less'} than the cost model's "
            f"{predicted:.3g} ms for the same batches and contexts "
            f"({'beyond' if abs(off) > decode_fit.max_abs_residual else 'within'} the decode fit's worst residual, "
            f"{decode_fit.max_abs_residual:.0%}). The planner, simulating the fitted steps, found "
            f"{split.binding_slo.upper()} binding for {s}; live, its TPOT P90 was "
            f"{'over' if p90 > tpot_slo_s * 1e3 else 'within'} the TPOT SLO. Colocated, the mean TPOT was "
            f"{min(others):.3g} to {max(others):.3g} ms, {more} than the split's {tp_all[s]:.3g} ms"
            f"{stretch_words(steps, rho, s, short_name(prefill_first))}.\n"
            f"{tpot_prediction_note(results, steps, rho, s)}")


def _split_tpot_note(steps: pd.DataFrame, split: str, tolerance: float) -> str:
    """The split's measured mean TPOT against its prediction (the cost model's step at its batches) in a sentence
    of a :func:`step_table`; beyond ``tolerance``, the share of the miss its measured steps explain."""
    tpot, pred = float(steps.loc["TPOT, measured (ms)", split]), float(steps.loc["TPOT, predicted (ms)", split])
    e = tpot / pred - 1
    text = f" {split}: {tpot:.3g} ms measured, {pred:.3g} predicted, its step at its batches ({e:+.0%})"
    if round(abs(e) * 100) <= round(tolerance * 100):
        return text + f", within the {tolerance:.0%} we allow."
    step = float(steps.loc["step, measured (ms)", split])
    text += (f", beyond the {tolerance:.0%} we allow: its decode steps themselves took {step / pred - 1:+.0%} against "
             f"the cost model's seconds for the same batches (the row above)")
    if tpot > step * 1.005:
        text += (f", and a stream's mean gap is longer still than the mean step ({tpot:.3g} against {step:.3g} ms): "
                 "a stream lives through the large batches, whose steps are longer, more often than a mean over "
                 "steps counts them")
    return text + "."

