"""What chapter 7's live check of the map found (a :class:`~.pools_live.LiveCell` per region), judged by an
interval: the mean paired gap (:func:`~.split_seeds.paired_gaps`, each seed's requests served by both layouts) and
its 95% confidence interval over the seeds (Student's t: :func:`gap_interval`). With three seeds an interval that
excludes zero also has every seed's gap on one side of zero (chapter 6's rule), and more: a lead of one request in
one seed and fifty in the others no longer passes.

- :func:`gap_interval`: the mean paired gap and its 95% interval;
- :func:`rate_score`, :func:`pick_rate`: the same judgement on simulated runs, to choose the rate a cell is served
  at;
- :func:`even`: a tie shown by an equivalence test (the gap's 90% interval within +-:data:`TIE_GAP` points);
- :func:`live_outcome`: "matches", "does not match" or "undecided" (the map's winner against its runner-up), and
  for a cell the map calls a tie "matches: a tie", "undecided" or "does not match".

The table and the page's paragraph of them are :mod:`.pools_live_text`'s.
"""
from __future__ import annotations

import math

import pandas as pd

from .pools_live_args import REGIONS, check_cell, check_runs, check_scores
from .split_seeds import T975, paired_gaps, t_interval

__all__ = ["REGIONS", "T975", "TIE_FLOOR", "TIE_CEILING", "TIE_LOADED", "TIE_GAP", "LEAD_FLOOR", "T95", "even",
           "gap_interval", "rate_score", "pick_rate", "live_outcome"]

#: the 95% quantile of Student's t with 1 .. 10 degrees of freedom (the table of :data:`~.split_seeds.T975`): a
#: two-sided 90% interval's half-width, the interval of an equivalence test by two one-sided tests at 5% each
#: (Schuirmann, 1987)
T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812)


def gap_interval(attainment: pd.DataFrame, a: str, b: str) -> dict:
    """``a``'s lead over ``b`` in SLO attainment (points; ``attainment`` in %, one row per seed, as
    :func:`~.split_seeds.paired_gaps` reads it) with its 95% confidence interval over the seeds: :func:`paired_gaps`'
    keys and ``ci_low``, ``ci_high`` (mean -/+ t x sd / sqrt(seeds), t of :data:`T975`; beyond 11 seeds the 10
    degrees of freedom's, a little wider than the true one; clipped to +-100 points, the widest a gap in attainment
    can be), ``excludes_zero`` (the interval lies on one side of zero: its leader leads outside the runs' own
    spread), and ``eq_low``, ``eq_high``: the 90% interval (t of :data:`T95`), which an equivalence test reads
    (:func:`even`). One seed has no spread: its intervals are unbounded.

    Raises:
        TypeError: ``attainment`` not a DataFrame. ValueError: an attainment not finite (inf made the interval NaN
        in silence); those of :func:`~.split_seeds.paired_gaps`."""
    if not isinstance(attainment, pd.DataFrame):
        raise TypeError(f"attainment must be a DataFrame (one row per seed, one column per layout, in %), got "
                        f"{type(attainment).__name__}")
    g = paired_gaps(attainment, a, b)
    if not all(math.isfinite(x) for x in g["gaps"]):
        raise ValueError(f"attainment of {a!r} and {b!r} must be finite percentages, got gaps {g['gaps']}")
    low, high = t_interval(g["gaps"], T95)  # the 95% interval is paired_gaps' (ci_low, ci_high)
    return dict(g, eq_low=low, eq_high=high, excludes_zero=g["decisive"])


def rate_score(cell, runs: dict) -> float:
    """The score of one rate from its simulated paired runs ``runs`` ({drift factor: PairedRuns}): for a cell one
    kind wins, the lowest end of the gap's 95% interval (:func:`gap_interval`) over the drifts (> 0: the winner's
    lead predicted outside the runs' spread whatever the drift); for a tie, the lowest attainment of either layout
    over the drifts where every drift shows a tie (:func:`even`: the gap's 90% interval within +-:data:`TIE_GAP`
    points), else NaN (a tie is judged where both layouts are loaded: at 100% each the gap is zero whatever the
    layouts; ch07 once served a tie where the simulator itself had one layout at 100% and the other at 42-79%).

    Raises:
        ValueError: ``runs`` not a non-empty dict of PairedRuns each with the two layouts' columns (an empty one was
        'min() arg is an empty sequence'); those of :func:`gap_interval`."""
    check_cell(cell)
    check_runs(runs)
    gaps = [gap_interval(r.attainment, *r.attainment.columns[:2]) for r in runs.values()]
    if cell.winner != "tie":
        return min(g["ci_low"] for g in gaps)
    if not all(even(g) for g in gaps):
        return float("nan")
    return min(float(r.attainment.mean().min()) for r in runs.values())


#: a tie's mean paired gap in attainment (points) may be at most this far from zero: with three seeds an interval
#: holds zero for gaps of 50 points, which no one calls even
TIE_GAP = 10.0


def even(g: dict) -> bool:
    """Whether the paired gap ``g`` (:func:`gap_interval`) shows a tie: its 90% interval lies within +-:data:`TIE_GAP`
    points, an equivalence test by two one-sided tests at 5% each (Schuirmann, 1987). An interval that merely holds
    zero is no tie: three seeds leave one 50 points wide (ch07 once took gaps of 0, -54 and -50 for a tie), and
    gaps of 0, -100 and +100 average to zero."""
    return -TIE_GAP <= g["eq_low"] and g["eq_high"] <= TIE_GAP


#: a tie is served at the most loaded rate where the simulator predicts both layouts at least this share (%) of
#: their requests within the SLOs (below it both collapse, and a gap of zero says as little as at 100%)
TIE_FLOOR = 50.0

#: ... and at most this share (%) for the lower of the two: the goodput's bar, past which a layout is loaded (ch07
#: once served a tie at 99%, where any two layouts tie)
TIE_CEILING = 90.0

#: a tie matches live only where a layout met the SLOs for less than this share (%) on average: both at 100% in every
#: seed is a gap of 0 whatever the layouts (ch07 once "matched" a tie at 100/100)
TIE_LOADED = 95.0


#: a lead is served only where its predicted 95% interval starts at least this far above zero (points): the live runs
#: drift past the three speeds the score covers, and ch07 found cells served at +6 and +8 undecided live
LEAD_FLOOR = 10.0


def pick_rate(cell, scores: pd.Series) -> float | None:
    """The rate to serve of ``scores`` (:func:`rate_score` per rate): the highest score, if at least
    :data:`LEAD_FLOOR` (a tie: the lowest attainment from :data:`TIE_FLOOR` to :data:`TIE_CEILING`); None where no rate
    qualifies (a lead not predicted that far outside the spread at any rate, or no loaded tie).

    Raises:
        TypeError: ``scores`` not a pandas Series. ValueError: a rate (its index) not a finite number > 0, a score
        not a number or +inf (a NaN score is no score); a cell no layout wins and no tie."""
    check_cell(cell)
    check_scores(scores)
    if cell.winner != "tie":
        return float(scores.idxmax()) if scores.max() >= LEAD_FLOOR else None
    ok = scores[(scores >= TIE_FLOOR) & (scores <= TIE_CEILING)]
    return float(ok.idxmin()) if len(ok) else None


def live_outcome(live) -> str:
    """"matches" (the map's winner led its runner-up: the 95% interval of the mean paired gap, :func:`gap_interval`,
    lies above zero), "does not match" (below zero) or "undecided" (the interval holds zero, or nothing was
    served); for a cell the map calls a tie, "does not match" (the 95% interval excludes zero: the live runs tell
    the two apart), "matches: a tie" (:func:`even`: the 90% interval within +-:data:`TIE_GAP` points, and a layout
    loaded: its mean attainment below :data:`TIE_LOADED`) or "undecided" (neither: with few seeds the interval is
    wide, and two idle layouts tie whatever they are).

    Raises:
        TypeError: ``live`` not a LiveCell; ValueError: those of :func:`gap_interval`."""
    if not all(hasattr(live, a) for a in ("cell", "winner", "rival", "runs")):
        raise TypeError(f"live must be a LiveCell (live_cell's, a value of live_regions'), got {type(live).__name__}")
    if live.runs is None:
        return "undecided"
    g = gap_interval(live.runs.attainment, live.winner, live.rival)
    if live.cell.winner == "tie":
        loaded = float(live.runs.attainment[[live.winner, live.rival]].mean().min()) < TIE_LOADED
        return "does not match" if g["excludes_zero"] else "matches: a tie" if even(g) and loaded else "undecided"
    return "undecided" if not g["excludes_zero"] else "matches" if g["ci_low"] > 0 else "does not match"
