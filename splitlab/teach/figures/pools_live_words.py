"""What chapter 7's live check of the map found (a :class:`~.pools_live.LiveCell` per region), by chapter 6's
paired rule (:func:`~.split_seeds.paired_gaps`: a verdict holds only where one layout led on every seed, the range
of the paired gaps excluding zero).

- :func:`live_outcome`: "matches", "does not match" or "undecided" (the map's winner against its runner-up);
- :func:`live_table`: one row per region, each seed's attainment and the range of the paired gaps;
- :func:`live_words`: the page's paragraph, one computed sentence per region (and one for a region with no cell).
"""
from __future__ import annotations

import pandas as pd

from .split_seeds import paired_gaps, paired_verdict
from .split_tables import short_name

__all__ = ["REGIONS", "live_outcome", "live_table", "live_words"]

#: the map's regions: the kinds a cell's winner may be, in the order the page serves them
REGIONS = ("split", "prefill-first", "chunked")
_REGION_WORDS = {"split": "the split", "prefill-first": "colocated prefill-first", "chunked": "colocated chunked"}


def live_outcome(live) -> str:
    """"matches" (the map's winner led its runner-up on every seed: outside the runs' own spread, chapter 6's
    rule), "does not match" (the runner-up led on every seed) or "undecided" (the seeds disagree or tie, or
    nothing was served: the simulator predicted no gap on runs this short)."""
    if live.runs is None:
        return "undecided"
    g = paired_gaps(live.runs.attainment, live.winner, live.rival)
    return "undecided" if not g["decisive"] else "matches" if g["leader"] == live.winner else "does not match"


def live_table(lives: dict) -> pd.DataFrame:
    """One row per region of ``lives`` ({kind: :class:`~.pools_live.LiveCell`}): ``cell`` (the map's prompt, TPOT
    steps), ``winner (%)`` and ``runner-up (%)`` (the map's, short names, each seed's attainment), ``gap (pp)``
    (the range of the paired gaps winner - runner-up over the seeds) and ``live`` (:func:`live_outcome`)."""
    rows = {}
    for kind, lc in lives.items():
        att = lc.runs.attainment if lc.runs is not None else {lc.winner: (), lc.rival: ()}
        g = paired_gaps(att, lc.winner, lc.rival) if lc.runs is not None else None
        rows[kind] = {"cell": f"{lc.cell.prompt_tokens} tok, {lc.cell.tpot_steps:g} st",
                      **{col: f"{short_name(name)}: " + ("/".join(f"{v:.0f}" for v in att[name]) or "not served")
                         for col, name in (("winner (%)", lc.winner), ("runner-up (%)", lc.rival))},
                      "gap (pp)": f"{g['low']:+.0f} to {g['high']:+.0f}" if g else "-", "live": live_outcome(lc)}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "region"
    return out


def live_words(lives: dict, m) -> str:
    """Chapter 7's paragraph on ``lives`` ({kind: :class:`~.pools_live.LiveCell`} of the map ``m``): per region,
    where its cell sat when served (the probe's ratios, the prompt that put it there, the live runs' own step
    ratios), the rate and the rescaled simulator's predicted gap there, :func:`~.split_seeds.paired_verdict`, and
    whether the live winner matches the map's; a region the map gives no cell, said."""
    out = []
    for kind in REGIONS:
        if kind not in lives:
            out.append(f"The map gives {_REGION_WORDS[kind]} no cell it wins alone here, so that region goes "
                       f"unconfirmed live.")
            continue
        lc = lives[kind]
        c, p = lc.cell, lc.probe
        there = (f"put the cell back at {c.prefill_steps:.2g} steps" if abs(lc.prefill_steps / c.prefill_steps - 1)
                 < 0.05 else f"cost {lc.prefill_steps:.2g} steps, as near as a prompt gets")
        head = (f"**{_REGION_WORDS[kind].capitalize()}** ({c.prompt_tokens}-token prompts, TPOT {c.tpot_steps:g} "
                f"steps: {c.prefill_steps:.2g} decode steps of prefill): the probe timed prefills at "
                f"{p['prefill']:.2f}x and decode steps at {p['decode']:.2f}x the cost model, so "
                f"{lc.prompt_tokens}-token prompts {there}")
        if lc.runs is None:
            out.append(f"{head}. There the rescaled simulator predicted no gap between {short_name(lc.winner)} and "
                       f"{short_name(lc.rival)} on runs this short at any rate tried (with decode steps "
                       f"{lc.drift - 1:.0%} slower or faster), so these short runs cannot confirm the cell and it was "
                       f"not served: its winner stays unconfirmed live.")
            continue
        ran = lc.steps["measured / predicted"]
        during = ", ".join(f"{k} {ran[k]:.2f}x" for k in ran.index)
        outcome = {"matches": "the live winner matches the map's",
                   "does not match": "the live winner is not the map's",
                   "undecided": "these runs leave the map's winner unconfirmed"}[live_outcome(lc)]
        out.append(f"{head} (the runs' own steps then: {during}); at {lc.rate_per_s / m.workers:.3g} requests/s per "
                   f"worker the rescaled simulator predicted a gap of {lc.predicted[lc.rate_per_s]:+.0f} points or "
                   f"more. {paired_verdict(lc.runs.attainment, lc.winner, lc.rival, lc.runs.n_requests)} So "
                   f"{outcome}.")
    return "\n\n".join(out)
