"""What chapter 7's live check of the map found (a :class:`~.pools_live.LiveCell` per region), judged by an
interval: the mean paired gap (:func:`~.split_seeds.paired_gaps`, each seed's requests served by both layouts) and
its 95% confidence interval over the seeds (Student's t: :func:`gap_interval`). With three seeds an interval that
excludes zero also has every seed's gap on one side of zero (chapter 6's rule), and more: a lead of one request in
one seed and fifty in the others no longer passes.

- :func:`gap_interval`: the mean paired gap and its 95% interval;
- :func:`rate_score`, :func:`pick_rate`: the same judgement on simulated runs, to choose the rate a cell is served
  at;
- :func:`live_outcome`: "matches", "does not match" or "undecided" (the map's winner against its runner-up), and
  for a cell the map calls a tie "matches: a tie" (the interval holds zero) or "does not match";
- :func:`live_table`: one row per region (its cell, and its KV link where that is one of the slider's slower ones),
  each seed's attainment and the gap's mean and interval;
- :func:`live_words`: the page's paragraph, one computed sentence per region (and one for a region with no cell).
"""
from __future__ import annotations

import math

import pandas as pd

from .pools_live_args import REGIONS, check_cell, check_lives, check_map, check_runs, check_scores
from .split_seeds import paired_gaps
from .split_tables import short_name
from .style import fmt3, pct2

__all__ = ["REGIONS", "T975", "TIE_FLOOR", "TIE_CEILING", "TIE_GAP", "LEAD_FLOOR", "even", "gap_interval", "rate_score",
           "pick_rate", "live_outcome", "live_table", "live_words"]

_REGION_WORDS = {"split": "the split", "prefill-first": "colocated prefill-first", "chunked": "colocated chunked",
                 "tie": "a tie"}

#: the 97.5% quantile of Student's t with 1 .. 10 degrees of freedom (any table of it, e.g. NIST/SEMATECH
#: e-Handbook of Statistical Methods, 1.3.6.7.2): a two-sided 95% interval's half-width in standard errors
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def gap_interval(attainment: pd.DataFrame, a: str, b: str) -> dict:
    """``a``'s lead over ``b`` in SLO attainment (points; ``attainment`` in %, one row per seed, as
    :func:`~.split_seeds.paired_gaps` reads it) with its 95% confidence interval over the seeds: :func:`paired_gaps`'
    keys and ``ci_low``, ``ci_high`` (mean -/+ t x sd / sqrt(seeds), t of :data:`T975`; beyond 11 seeds the 10
    degrees of freedom's, a little wider than the true one), ``excludes_zero`` (the interval lies on one side of
    zero: its leader leads outside the runs' own spread). One seed has no spread: its interval is unbounded.

    Raises:
        TypeError: ``attainment`` not a DataFrame. ValueError: an attainment not finite (inf made the interval NaN
        in silence); those of :func:`~.split_seeds.paired_gaps`."""
    if not isinstance(attainment, pd.DataFrame):
        raise TypeError(f"attainment must be a DataFrame (one row per seed, one column per layout, in %), got "
                        f"{type(attainment).__name__}")
    g = paired_gaps(attainment, a, b)
    if not all(math.isfinite(x) for x in g["gaps"]):
        raise ValueError(f"attainment of {a!r} and {b!r} must be finite percentages, got gaps {g['gaps']}")
    n = g["seeds"]
    if n < 2:
        half = math.inf
    else:
        sd = math.sqrt(sum((x - g["mean"]) ** 2 for x in g["gaps"]) / (n - 1))
        half = T975[min(n - 1, len(T975)) - 1] * sd / math.sqrt(n)
    low, high = g["mean"] - half, g["mean"] + half
    return dict(g, ci_low=low, ci_high=high, excludes_zero=bool(low > 0 or high < 0))


def rate_score(cell, runs: dict) -> float:
    """The score of one rate from its simulated paired runs ``runs`` ({drift factor: PairedRuns}): for a cell one
    kind wins, the lowest end of the gap's 95% interval (:func:`gap_interval`) over the drifts (> 0: the winner's
    lead predicted outside the runs' spread whatever the drift); for a tie, the lowest attainment of either layout
    over the drifts where every drift is :func:`even` (its interval holds zero, its seeds do not all lean one way
    and its mean gap is within :data:`TIE_GAP` points), else NaN (a tie is judged where both layouts are loaded: at
    100% each the gap is zero whatever the layouts; a rate where one layout leads in every simulated seed is no
    tie's rate, however wide three seeds leave the interval: ch07 once served a tie where the simulator itself had
    one layout at 100% and the other at 42-79%, and then one where it had a gap of 0, -54 and -50 points: a seed
    both layouts served whole hid the lean of the other two).

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
    """Whether the paired gap ``g`` (:func:`gap_interval`) reads as a tie: its 95% interval holds zero, its seeds do
    not all lean one way and its mean is within :data:`TIE_GAP` points of zero."""
    return not (g["excludes_zero"] or g["decisive"]) and abs(g["mean"]) <= TIE_GAP


#: a tie is served at the most loaded rate where the simulator predicts both layouts at least this share (%) of
#: their requests within the SLOs (below it both collapse, and a gap of zero says as little as at 100%)
TIE_FLOOR = 50.0

#: ... and at most this share (%) for the lower of the two: the goodput's bar, past which a layout is loaded (ch07
#: once served a tie at 99%, where any two layouts tie)
TIE_CEILING = 90.0


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
    served); for a cell the map calls a tie, "matches: a tie" (:func:`even`: the interval holds zero, the seeds do
    not all lean one way and the mean gap is within :data:`TIE_GAP` points), "undecided" (it holds zero, but one
    layout led in every seed or by more than :data:`TIE_GAP` points on average: with few seeds the interval is
    wide) or "does not match" (the interval excludes zero: the live runs tell the two apart).

    Raises:
        TypeError: ``live`` not a LiveCell; ValueError: those of :func:`gap_interval`."""
    if not all(hasattr(live, a) for a in ("cell", "winner", "rival", "runs")):
        raise TypeError(f"live must be a LiveCell (live_cell's, a value of live_regions'), got {type(live).__name__}")
    if live.runs is None:
        return "undecided"
    g = gap_interval(live.runs.attainment, live.winner, live.rival)
    if live.cell.winner == "tie":
        return "does not match" if g["excludes_zero"] else "matches: a tie" if even(g) else "undecided"
    return "undecided" if not g["excludes_zero"] else "matches" if g["ci_low"] > 0 else "does not match"


def _gap(g: dict) -> str:
    return f"{g['mean']:+.0f} ({g['ci_low']:+.0f} to {g['ci_high']:+.0f})"


def live_table(lives: dict) -> pd.DataFrame:
    """One row per region of ``lives`` ({kind: :class:`~.pools_live.LiveCell`}): ``cell`` (the map's prompt, TPOT steps,
    and the KV link where the cell's map names one), ``winner (%)`` and ``runner-up (%)`` (the map's, short names,
    each seed's attainment; for a tie, the leader and the other family's best), ``gap (pp)`` (the mean paired gap
    winner - runner-up and its 95% interval, :func:`gap_interval`) and ``live`` (:func:`live_outcome`).

    Raises:
        TypeError, ValueError: ``lives`` not such a dict (:func:`~.pools_live_args.check_lives`)."""
    check_lives(lives)
    rows = {}
    for kind, lc in lives.items():
        att = lc.runs.attainment if lc.runs is not None else {lc.winner: (), lc.rival: ()}
        g = gap_interval(att, lc.winner, lc.rival) if lc.runs is not None else None
        rows[kind] = {"cell": f"{lc.cell.prompt_tokens} tok, {lc.cell.tpot_steps:g} st{_link(lc, ', ')}",
                      **{col: f"{short_name(name)}: " + ("/".join(f"{v:.0f}" for v in att[name]) or "not served")
                         for col, name in (("winner (%)", lc.winner), ("runner-up (%)", lc.rival))},
                      "gap (pp)": _gap(g) if g else "-", "live": live_outcome(lc)}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "region"
    return out


def _link(lc, lead: str) -> str:
    """``lead`` and the KV link ``lc`` was served on where its map names one (a slider's slower link), else ""."""
    return "" if lc.link_bytes_per_s is None else f"{lead}{fmt3(lc.link_bytes_per_s / 1e9)} GB/s"


def _pct(values) -> str:
    return " / ".join(f"{v:.0f}" for v in values) + "%"


def _leader(lc) -> str:
    """The layout ahead of the other by the mean paired gap of ``lc``'s runs."""
    return lc.winner if gap_interval(lc.runs.attainment, lc.winner, lc.rival)["mean"] > 0 else lc.rival


def _lean(lc) -> str:
    """How a tie's live runs leaned (:func:`live_outcome` "undecided"): in every seed, or by a mean gap past
    :data:`TIE_GAP`."""
    g = gap_interval(lc.runs.attainment, lc.winner, lc.rival)
    return ("in every seed" if g["decisive"] else
            f"by {abs(g['mean']):.0f} points on average, more than the {TIE_GAP:.0f} a tie allows")


def _runs_words(lc) -> str:
    """Each seed's attainment of both layouts, the paired gaps' range, their mean and its 95% interval."""
    att, k = lc.runs.attainment, len(lc.runs.attainment)
    g = gap_interval(att, lc.winner, lc.rival)
    w, r = short_name(lc.winner), short_name(lc.rival)
    return (f"Over {k} seed{'' if k == 1 else 's'} of {lc.runs.n_requests} requests each, {w} met both SLOs for "
            f"{_pct(att[lc.winner])} of them and {r} for {_pct(att[lc.rival])}: the gap {w} - {r} ranged from "
            f"{g['low']:+.0f} to {g['high']:+.0f} points, mean {g['mean']:+.0f}, whose 95% interval over the seeds "
            f"(Student's t) runs from {g['ci_low']:+.0f} to {g['ci_high']:+.0f} points and "
            f"{'excludes' if g['excludes_zero'] else 'holds'} zero.")


def live_words(lives: dict, m) -> str:
    """Chapter 7's paragraph on ``lives`` ({kind: :class:`~.pools_live.LiveCell`} of the map ``m``): per region,
    where its cell sat when served (the probe's ratios, the prompt that put it there, the live runs' own step
    ratios), the rate and what the rescaled simulator predicted there, each seed's attainment, the gap's mean and
    95% interval, and whether the live winner matches the map's (for a tie, whether the runs tell the two apart); a
    region the map gives no cell, said.

    Raises:
        TypeError, ValueError: ``lives`` not such a dict, ``m`` not a map or one of another cluster size than the
        cells were served on (:func:`~.pools_live_args.check_lives`)."""
    check_map(m)
    check_lives(lives, m)
    out = []
    for kind in REGIONS:
        if kind not in lives:
            out.append(f"The map gives {_REGION_WORDS[kind]} no cell it wins alone here, on any of the links searched, "
                       f"so that region goes unconfirmed live." if kind != "tie" else
                       "The map has no tie here, on any of the links searched, so none was served.")
            continue
        lc = lives[kind]
        c, p = lc.cell, lc.probe
        there = (f"put the cell back at {c.prefill_steps:.2g} steps" if abs(lc.prefill_steps / c.prefill_steps - 1)
                 < 0.05 else f"cost {lc.prefill_steps:.2g} steps, as near as a prompt gets")
        tied = (f"{short_name(lc.winner)} and {short_name(lc.rival)} within {pct2(m.tie_tolerance)} in goodput on the "
                f"map; " if kind == "tie" else "")
        on = (f"; on the slider's {_link(lc, '')} KV link, where the map's own link gives this region no cell a short "
              f"run tells apart" if lc.link_bytes_per_s is not None else "")
        head = (f"**{_REGION_WORDS[kind].capitalize()}** ({tied}{c.prompt_tokens}-token prompts, TPOT {c.tpot_steps:g} "
                f"steps: {c.prefill_steps:.2g} decode steps of prefill{on}): the probe timed prefills at "
                f"{p['prefill']:.2f}x and decode steps at {p['decode']:.2f}x the cost model, so "
                f"{lc.prompt_tokens}-token prompts {there}")
        if lc.runs is None:
            out.append(f"{head}. There the rescaled simulator found no rate, of those tried (with decode steps "
                       f"{lc.drift - 1:.0%} slower or faster), where runs this short "
                       + (f"load both layouts (the lower at {TIE_FLOOR:.0f}% to {TIE_CEILING:.0f}%) and leave their "
                          f"gap even (its interval holding zero, its mean within {TIE_GAP:.0f} points)"
                          if kind == "tie" else
                          f"put {short_name(lc.winner)}'s lead over {short_name(lc.rival)} at least {LEAD_FLOOR:.0f} "
                          f"points outside their spread")
                       + ", so the cell was not served: it stays unconfirmed live.")
            continue
        ran = lc.steps["measured / predicted"]
        during = ", ".join(f"{k} {ran[k]:.2f}x" for k in ran.index)
        pred = lc.predicted[lc.rate_per_s]
        predicted = (f"predicted both layouts at {pred:.0f}% or more of their requests within the SLOs and their "
                     f"gap even (its interval holding zero, its mean within {TIE_GAP:.0f} points)" if kind == "tie" else
                     f"predicted the gap's interval to start at {pred:+.0f} points or more")
        outcome = {"matches": "the live winner matches the map's",
                   "matches: a tie": "the live runs match the map's: a tie",
                   "does not match": ("the live runs tell apart what the map calls a tie" if kind == "tie" else
                                      "the live winner is not the map's"),
                   "undecided": "these runs leave the map's winner unconfirmed" if kind != "tie" else
                   f"{short_name(_leader(lc))} led {_lean(lc)}, though the interval holds zero: these runs neither "
                   "confirm the map's tie nor tell the two apart"}[live_outcome(lc)]
        per = lc.rate_per_s / m.workers
        times = {n: per / c.goodput[k] for k, n in ((c.leader, lc.winner), (c.runner_up, lc.rival)) if c.goodput[k] > 0}
        past = ", ".join(f"{fmt3(x)}x {short_name(n)}'s" for n, x in times.items())
        why = (": past both, where a short run from idle workers can tell them apart" if kind != "tie" and
               len(times) == 2 and min(times.values()) > 1 else "")
        out.append(f"{head} (the runs' own steps then: {during}); at {per:.3g} requests/s per worker "
                   f"({past or 'no'} goodput on the map{why}) the rescaled simulator {predicted} (decode steps "
                   f"{lc.drift - 1:.0%} slower or faster). "
                   f"{_runs_words(lc)} So {outcome}.")
    return "\n\n".join(out)
