"""Chapter 7's tables and the sentences computed from them (re-exported by :mod:`.pools`). Every table fits a
412 px phone's column: few columns, short names, units in the headers, three significant digits, counts as
integers; every sentence states what the numbers of this run say, so the page cannot claim what it did not measure.

- :func:`fit_table`: what a calibration was measured on, each fitted step form on short lines, its residuals.
- :func:`trap_table`: the backlog trap in numbers: attainment with and without the second-token bound.
- :func:`validation_tables`: the simulator against the emulated runs, one narrow table per workload.
- :func:`plan_table`: the planner's best candidates, with the best of each kind even when it ranks lower.
- :func:`kinds_table`: the best split against the best colocated layout of several plans.
- :func:`validation_verdict`, :func:`guess_verdict`, :func:`ratio_verdict`: sentences from a validation table
  and from a plan.
"""
from __future__ import annotations

import textwrap
from typing import Mapping

import numpy as np
import pandas as pd

from ...planning.closed_form import split_capacity
from ...serving.validation import verdict
from .style import pct2, sig3

__all__ = ["fit_table", "trap_table", "trap_verdict", "validation_tables", "plan_table", "kinds_table", "short_name",
           "validation_verdict", "guess_verdict", "ratio_verdict", "sig3", "zero_terms_note"]


def fit_table(cal, width: int = 60) -> pd.DataFrame:
    """Print what ``cal`` (a :class:`~splitlab.costmodel.Calibration`) was measured on and each fitted step form
    (seconds of one step) wrapped to ``width`` characters; return the fits' residuals: one row per fit,
    ``max |res| (%)``, ``rms res (%)`` (residual = predicted / measured - 1), ``R^2`` and ``points`` (int)."""
    meta = cal.meta
    print(f"{meta.get('model')} on {meta.get('device')}, {meta.get('dtype')}, clock: {meta.get('clock')}")
    for name, f in cal.fits.items():  # wrapped between terms, never inside one
        line = f"{name}: "
        for i, term in enumerate(f.formula().split(" + ")):
            piece = term if i == 0 else f" + {term}"
            if i and len(line) + len(piece) > width:
                print(line)
                line, piece = "  ", piece.lstrip()
            line += piece
        print(line)
    rows = {name: {"max |res| (%)": sig3(100 * f.max_abs_residual), "rms res (%)": sig3(100 * f.rms_residual),
                   "R^2": sig3(f.r2), "points": len(f.rows)} for name, f in cal.fits.items()}
    return pd.DataFrame.from_dict(rows, orient="index", dtype=object)


def trap_table(runs: Mapping[str, object], ttft_slo_s: float, tpot_slo_s: float) -> pd.DataFrame:
    """One column per run: TTFT, TTST (time to second token) and E2E P90 (s), TPOT P90 (ms), the mean output tokens of a
    request (over which its TPOT is averaged), output tokens/s, and the SLO attainment counted two ways (%): TTFT
    and TPOT only, and with the second-token bound TTFT SLO + TPOT SLO. Three significant digits."""
    cols = {}
    for name, res in runs.items():
        m = res.metrics(ttft_slo_s, tpot_slo_s)
        t = res.request_table()
        old = ((t.state == "finished") & (t.ttft_s <= ttft_slo_s) & ~(t.tpot_s > tpot_slo_s)).mean()
        out = np.mean([r.max_new_tokens for r in res.requests])
        cols[name] = {"TTFT P90 (s)": m["ttft_s"]["p90"], "TTST P90 (s)": m["ttst_s"]["p90"],
                      "TPOT P90 (ms)": 1e3 * m["tpot_s"]["p90"], "E2E P90 (s)": m["e2e_s"]["p90"],
                      "output tokens per request (mean)": out,
                      "output tokens/s": m["throughput_tokens_per_s"],
                      "attainment, TTFT and TPOT only (%)": 100 * old,
                      "attainment with the TTST bound (%)": 100 * m["slo_attainment"]}
    return pd.DataFrame({name: pd.Series({k: sig3(v) for k, v in col.items()}, dtype=object)
                         for name, col in cols.items()})


def trap_verdict(table: pd.DataFrame) -> str:
    """Sentences on a :func:`trap_table` of one colocated and one split run (the split's column is the one named
    xPyD; its first token sent by the prefill worker, ``first_token_on="prefill"``: DistServe's convention): the
    split's TTFT P90 against the colocated one, the attainment each reaches counted by TTFT and TPOT
    alone, their tokens/s and E2E P90, and the attainment once the second-token bound counts.

    Raises:
        ValueError: the table has not exactly one split column and one other.
    """
    split = [c for c in table.columns if "P+" in str(c)]
    other = [c for c in table.columns if c not in split]
    if len(split) != 1 or len(other) != 1:
        raise ValueError(f"a trap table compares one split and one colocated run, got columns {list(table.columns)}")
    s, c = table[split[0]], table[other[0]]

    def num(v) -> str:  # three significant digits, thousands as 8,630
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"

    def than(key, more, less, unit=""):  # the split's value against the colocated one's: a word and both numbers
        word = more if s[key] > c[key] else less if s[key] < c[key] else "the same"
        return f"{word} ({num(s[key])}{unit} against {num(c[key])}{unit})"

    ttft_old, ttst = "attainment, TTFT and TPOT only (%)", "attainment with the TTST bound (%)"
    return (f"The split's prefill worker answers every first token as soon as the prompt is prefilled, before a "
            f"decode worker has a place for the request in its batch: its TTFT P90 is {s['TTFT P90 (s)']:.3g} s "
            f"against {c['TTFT P90 (s)']:.3g} s on {other[0]}. Then the request waits for a decode slot, and that "
            f"wait is averaged into a TPOT over all of its output tokens ({s['output tokens per request (mean)']:.3g} "
            f"on average). Counted by TTFT and TPOT alone, {split[0]} meets the SLOs for {s[ttft_old]:.3g}% of "
            f"requests against {c[ttft_old]:.3g}%, while its output tokens/s are "
            f"{than('output tokens/s', 'more', 'fewer')}"
            f" and its E2E P90 is {than('E2E P90 (s)', 'longer', 'shorter', ' s')}. With the second-token bound, "
            f"{split[0]} reaches {s[ttst]:.3g}% against {c[ttst]:.3g}%.")


def short_name(c) -> str:
    """A candidate's name in a few characters ("4 coloc.", "4 chunked", "3P+1D")."""
    if c.layout == "disaggregated":
        return c.name
    return f"{c.workers} {'chunked' if c.policy == 'chunked' else 'coloc.'}"


def plan_table(plan, top: int = 5) -> pd.DataFrame:
    """The ``top`` candidates of ``plan`` (a :class:`splitlab.planner.Plan`), then the best colocated
    prefill-first, the best chunked and the best split where they rank lower (rows in rank order), so that every
    kind the page compares is in the table. Index: :func:`short_name` (with the chunk size where several were
    tried); columns
    ``#`` (the rank, 1 = best), ``goodput (req/s per worker)`` (simulated), ``first guess (req/s per worker)``
    (closed form), ``cost per 1M tokens`` (at the plan's price per worker-hour) and ``binds`` (the binding SLO,
    "TTFT"); three significant digits; headers that wrap between words, so that the table fits the 380 px column
    of a 412 px phone. It first prints ``plan.batch_line`` (wrapped at 60 columns): the decode batch bound every
    layout ran with (the KV budget, the requests it holds, a cap and which binds).

    Raises:
        ValueError: ``top`` is not a positive integer.
    """
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise ValueError(f"top must be a positive integer, got {top!r}")
    if plan.batch_line:
        print(textwrap.fill(plan.batch_line, 60, break_on_hyphens=False))
    ranked = list(enumerate(plan.candidates, 1))
    shown = ranked[:top]
    for kind in (("colocated", "prefill-first"), ("colocated", "chunked"), ("disaggregated", "prefill-first")):
        best = next(((i, c) for i, c in ranked if (c.layout, c.policy) == kind), None)
        if best is not None and best not in shown:
            shown.append(best)
    chunks = len({c.chunk_tokens for c in plan.candidates if c.policy == "chunked"})
    name = lambda c: f"{short_name(c)} {c.chunk_tokens}" if c.policy == "chunked" and chunks > 1 else short_name(c)
    shown = sorted(shown, key=lambda ic: ic[0])  # by rank: the kinds added below the top in their order
    cols = {"#": [i for i, _ in shown],
            "goodput (req/s per worker)": [sig3(c.goodput_rps_per_worker) for _, c in shown],
            "first guess (req/s per worker)": [sig3(c.first_guess_rps_per_worker) for _, c in shown],
            "cost per 1M tokens": [sig3(c.cost_per_million_tokens) for _, c in shown],
            "binds": [c.binding_slo.upper() for _, c in shown]}  # by column: from_dict by row made 6 of sig3's 6.0
    return pd.DataFrame(cols, index=pd.Index([name(c) for _, c in shown], name="layout"), dtype=object)


_CONTENDER = {"colocated prefill-first": "coloc.", "colocated chunked": "chunked"}


def validation_tables(table: pd.DataFrame) -> dict:
    """A :func:`splitlab.serving.validate` ``table`` as one narrow table per workload (a 412 px phone's column):
    rows (contender, metric) with short names ("coloc.", "chunked", "split"; "TTFT P50"), columns
    ``emul. (ms)``, ``sim. (ms)`` (three significant digits), ``error`` (simulated / emulated - 1) and, with
    repeated emulated runs, ``spread`` (how far those runs disagreed), as percentages of two (:func:`.style.pct2`:
    "-50%", "0.19%"). The workload's name heads the
    index. Returns ``{workload: DataFrame}`` in the table's order.

    Raises:
        ValueError: ``table`` lacks a column a validation table has.
    """
    need = {"workload", "contender", "metric", "emulated_s", "simulated_s", "error"}
    if not need <= set(table.columns):
        raise ValueError(f"not a validation table: missing {sorted(need - set(table.columns))}")
    spread = "emulated_spread" in table and table.emulated_spread.notna().any()
    out = {}
    for workload, t in table.groupby("workload", sort=False):
        cols = {"emul. (ms)": [sig3(1e3 * v) for v in t.emulated_s],
                "sim. (ms)": [sig3(1e3 * v) for v in t.simulated_s], "error": [pct2(v, signed=True) for v in t.error]}
        if spread:
            cols["spread"] = [pct2(v) for v in t.emulated_spread]
        index = pd.MultiIndex.from_arrays(
            [t.contender.map(lambda c: _CONTENDER.get(c, c)), t.metric.map(lambda m: m.upper().replace("_", " "))],
            names=[workload, ""])
        out[workload] = pd.DataFrame(cols, index=index, dtype=object)
    return out


def kinds_table(plans: Mapping[str, object], caps: Mapping[str, float] | None = None) -> pd.DataFrame:
    """One column per plan (name -> :class:`splitlab.planner.Plan`): its best split and best colocated layout,
    each with its goodput per worker (req/s) and binding SLO, and ``caps`` (name -> req/s per worker, optional):
    a bound on a colocated worker's goodput shown beside it. Three significant digits."""
    cols = {}
    for name, p in plans.items():
        s, c = p.best_of("disaggregated"), p.best_of("colocated")
        col = {"best split": s.name, "split goodput (req/s per worker)": sig3(s.goodput_rps_per_worker),
               "split binding SLO": s.binding_slo, "best colocated": short_name(c),
               "colocated goodput (req/s per worker)": sig3(c.goodput_rps_per_worker),
               "colocated binding SLO": c.binding_slo}
        if caps is not None:
            col["colocated cap (req/s per worker)"] = sig3(caps[name])
        cols[name] = col
    return pd.DataFrame({name: pd.Series(col, dtype=object) for name, col in cols.items()})


def _share(n: int, total: int) -> str:
    """'all 24', 'none of the 24', '9 of the 24'."""
    return f"all {total}" if n == total else f"none of the {total}" if n == 0 else f"{n} of the {total}"


def validation_verdict(table: pd.DataFrame, tolerance: float = 0.15) -> str:
    """A sentence on a :func:`splitlab.serving.validate` table (columns ``error`` = simulated / emulated - 1 and
    ``abs_error``): the goal, how many values miss it, the largest error, and on which side the misses fall."""
    v = verdict(table, tolerance)  # serving.validation's counts
    n, miss = v["values"], v["values"] - v["within"]
    text = (f"The goal is {tolerance:.0%} on every value; {_share(miss, n)} printed values "
            f"{'miss' if miss != 1 else 'misses'} it (largest error {v['largest']:.1%})")
    if miss:
        low = int(((table.abs_error > tolerance) & (table.error < 0)).sum())
        text += (f"; in {low} of the {miss} misses the simulator is faster than the emulated run (a negative "
                 f"error), in {miss - low} slower")
    text += "."
    if "emulated_spread" in table and table.emulated_spread.notna().any():  # repeated emulated runs
        text += (f" Two emulated runs of the very same requests disagreed with each other by {v['spread_median']:.0%}"
                 f" (median) and up to {v['spread_max']:.0%}; {_share(v['within_spread'], n)} errors are no larger"
                 " than that disagreement: the check cannot be sharper than the machine it runs on.")
    if "in_run_error" in table:  # validate(..., in_run=True): simulated on the runs' own step times
        text += (f" Simulated again on a cost model fitted to the steps those emulated runs measured (the speed the"
                 f" device had while they ran), {_share(v['in_run_within'], n)} values are within {tolerance:.0%}"
                 f" (largest error {v['in_run_largest']:.1%}): that is the simulator's own error, the rest of the"
                 " first error was the machine's drift.")
    return text


def guess_verdict(plan, reasons: bool = True) -> str:
    """A sentence comparing each candidate's simulated goodput with its closed-form first guess: how many are
    below, above and equal, and by how much (goodput / guess - 1); with ``reasons``, a sentence on why for each
    side that occurs."""
    pairs = [(c.goodput_rps_per_worker, c.first_guess_rps_per_worker) for c in plan.candidates
             if c.first_guess_rps_per_worker > 0]
    n = len(pairs)
    if not n:
        return "The closed form gives no first guess above zero here."
    rel = np.array([g / f - 1 for g, f in pairs])
    below, above = rel < -1e-9, rel > 1e-9
    parts = []
    if below.any():
        lo, hi = -rel[below].max(), -rel[below].min()
        by = f"{lo:.0%} to {hi:.0%}" if f"{lo:.0%}" != f"{hi:.0%}" else f"{hi:.0%} each"  # not "15% to 15%"
        parts.append(f"{int(below.sum())} are below it (by {by})" if below.sum() > 1 else
                     f"1 is below it (by {hi:.0%})")
    if above.any():
        parts.append(f"{int(above.sum())} above it (by up to {rel[above].max():.0%})" if above.sum() > 1 else
                     f"1 above it (by {rel[above].max():.0%})")
    equal = n - int(below.sum()) - int(above.sum())
    if equal:
        parts.append(f"{equal} equal to it (each search starts at the guess: there the guess passed, and every "
                     f"rate tried above it, down to {plan.candidates[0].result.tolerance:.0%} above, failed)")
    if below.all():
        parts = [f"all {n} are below it (by {-rel.max():.0%} to {-rel.min():.0%})"]
    text = f"Against the closed-form first guess, of the {n} simulated goodputs " + ", ".join(parts) + "."
    if not reasons:
        return text
    cands = [c for c in plan.candidates if c.first_guess_rps_per_worker > 0]
    up = {c.layout for c, r in zip(cands, rel) if r > 1e-9}
    if below.any():
        text += (" Below the guess: queueing, which the closed form ignores, costs part of the SLOs (a prompt"
                 " waits for a busy prefill worker, a request for a decode slot).")
    if "disaggregated" in up:
        text += (" Above it, for a split: a run lasts 20 SLOs of arrivals, and a pool a little over its capacity"
                 " can take longer than that to build a queue that breaks an SLO.")
    if "colocated" in up:
        text += (" Above it, for colocated workers: their formula (stalls, Little's law, an M/D/1 queue) is an"
                 " estimate, not a bound.")
    return text


def ratio_verdict(plan) -> str:
    """A sentence on the splits of ``plan`` for each total of workers: whether the best simulated split is the
    one the closed form picks, ``min(x mu_p, y mu_d) / (x + y)`` with the plan's ``first_guess``."""
    g = plan.first_guess
    splits = [c for c in plan.candidates if c.layout == "disaggregated"]
    sizes = sorted({c.workers for c in splits})
    same = []
    for n in sizes:
        mine = [c for c in splits if c.workers == n]
        sim = max(mine, key=lambda c: (c.goodput_rps_per_worker, -c.prefill_workers)).prefill_workers
        guess = max(range(1, n), key=lambda x: split_capacity(g["prefill_rps"], g["decode_rps"], x, n - x))
        same.append((n, sim, guess))
    hits = [s for s in same if s[1] == s[2]]
    text = (f"For {_share(len(hits), len(same))} cluster sizes the best simulated split is the one the closed "
            f"form picks")
    misses = [f"with {n} workers the simulation's best is {sim}P+{n - sim}D, the closed form's {guess}P+{n - guess}D"
              for n, sim, guess in same if sim != guess]
    return text + (f" ({'; '.join(misses)})." if misses else ".")


def zero_terms_note(calibration) -> str:
    """A sentence on the terms of ``calibration``'s fits that came out 0 s (non-negative least squares puts a term
    at zero when the measurements cannot tell it from the others: an unstable fit, whose steps the other terms
    absorb); "" when every term is above zero."""
    zero = {name: [t for t, c in zip(f.terms, f.coef) if c == 0] for name, f in calibration.fits.items()}
    zero = {name: terms for name, terms in zero.items() if terms}
    if not zero:
        return ""
    said = "; ".join(f"{name}: {', '.join('the constant' if t == '1' else t for t in terms)}"
                     for name, terms in zero.items())
    return (f"Some fitted terms came out 0 s ({said}): these measurements cannot tell that term from the others, "
            "so the fit is unstable there, and another calibration (chapter 6's, or this one run again) can put the "
            "same cost in a different term. The other terms absorb it: the predictions stay within the residuals "
            "above, but no single coefficient should be read as that term's true cost.")

