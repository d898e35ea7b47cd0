"""Chapter 7's table and paragraph of its live check of the map (:mod:`.pools_live`): per region, where its cell
sat when served, the rate and what the rescaled simulator predicted there, how long the burst of arrivals lasted,
each seed's attainment, the gap's mean and 95% interval, and the verdict of :mod:`.pools_live_words`.

- :func:`live_table`: one row per region (its cell, and its KV link where that is one of the slider's slower ones),
  each seed's attainment and the gap's mean and interval;
- :func:`live_words`: the page's paragraph, one computed sentence per region (and one for a region with no cell).
"""
from __future__ import annotations

import pandas as pd

from .pools_live_words import (LEAD_FLOOR, TIE_CEILING, TIE_FLOOR, TIE_GAP, TIE_LOADED, gap_interval,
                               live_outcome)
from .pools_live_args import REGIONS, check_lives, check_map
from .split_tables import short_name
from .style import fmt3, gb_per_s, pct2

__all__ = ["live_table", "live_words"]

_REGION_WORDS = {"split": "the split", "prefill-first": "colocated prefill-first", "chunked": "colocated chunked",
                 "tie": "a tie"}


def _gap(g: dict) -> str:
    return f"{g['mean']:+.0f} ({g['ci_low']:+.0f} to {g['ci_high']:+.0f})"


def live_table(lives: dict) -> pd.DataFrame:
    """One row per region of ``lives`` ({kind: :class:`~.pools_live.LiveCell`}): ``cell`` (the map's prompt, TPOT steps,
    and the KV link where the cell's map names one), ``leader (%)`` and ``runner-up (%)`` (the map's winner and
    runner-up, short names, each seed's attainment; for a tie, the leader and the other family's best: so "leader",
    not "winner"), ``gap (pp)`` (the mean paired gap leader - runner-up and its 95% interval, :func:`gap_interval`)
    and ``live`` (:func:`live_outcome`).

    Raises:
        TypeError, ValueError: ``lives`` not such a dict (:func:`~.pools_live_args.check_lives`)."""
    check_lives(lives)
    rows = {}
    for kind, lc in lives.items():
        att = lc.runs.attainment if lc.runs is not None else {lc.winner: (), lc.rival: ()}
        g = gap_interval(att, lc.winner, lc.rival) if lc.runs is not None else None
        rows[kind] = {"cell": f"{lc.cell.prompt_tokens} tok, {lc.cell.tpot_steps:g} st{_link(lc, ', ')}",
                      **{col: f"{short_name(name)}: " + ("/".join(f"{v:.0f}" for v in att[name]) or "not served")
                         for col, name in (("leader (%)", lc.winner), ("runner-up (%)", lc.rival))},
                      "gap (pp)": _gap(g) if g else "-", "live": live_outcome(lc)}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "region"
    return out


def _link(lc, lead: str) -> str:
    """``lead`` and the KV link ``lc`` was served on where its map names one (a slider's slower link), else ""."""
    return "" if lc.link_bytes_per_s is None else f"{lead}{gb_per_s(lc.link_bytes_per_s / 1e9)}"


def _pct(values) -> str:
    return " / ".join(f"{v:.0f}" for v in values) + "%"


def _leader(lc) -> str:
    """The layout ahead of the other by the mean paired gap of ``lc``'s runs."""
    return lc.winner if gap_interval(lc.runs.attainment, lc.winner, lc.rival)["mean"] > 0 else lc.rival


def _undecided_tie(lc) -> str:
    """Why a tie's live runs are "undecided" (:func:`live_outcome`): no layout loaded, or a 90% interval wider than
    +-:data:`TIE_GAP`."""
    g, att = gap_interval(lc.runs.attainment, lc.winner, lc.rival), lc.runs.attainment
    low = float(att[[lc.winner, lc.rival]].mean().min())
    if low >= TIE_LOADED:
        return (f"both layouts met the SLOs for {low:.0f}% or more of their requests on average: runs that load "
                f"neither cannot show a tie")
    return (f"{short_name(_leader(lc))} led by {abs(g['mean']):.0f} points on average, and the gap's 90% interval "
            f"({g['eq_low']:+.0f} to {g['eq_high']:+.0f} points) is not within ±{TIE_GAP:.0f}: these runs neither "
            f"confirm the map's tie nor tell the two apart")


def _burst(lc, m) -> str:
    """How long the runs' arrivals last, in request lifetimes (the TTFT SLO and a TPOT SLO per later token)."""
    span_s = lc.runs.n_requests / lc.rate_per_s
    life_s = lc.ttft_slo_s + (m.output_tokens - 1) * lc.tpot_slo_s
    return (f"Each seed's {lc.runs.n_requests} requests arrive over about {fmt3(1e3 * span_s)} ms, "
            f"{fmt3(span_s / life_s)} request lifetimes (the TTFT SLO and {m.output_tokens - 1} TPOT SLOs): a burst "
            f"on idle workers, so the runs check the order the simulator predicts for such a burst, not a goodput.")


def _drifted(lc) -> str:
    """A sentence where the runs' own steps strayed from the probe's by more than the drift the rate allowed for."""
    ran, out = lc.steps["measured / predicted"], []
    for kind in ("prefill", "decode"):
        if kind in ran.index and lc.probe.get(kind):
            r = ran[kind] / lc.probe[kind]
            if not 1 / lc.drift <= r <= lc.drift:
                out.append(f"{kind} steps {r:.2f}x")
    return (f" The runs' {' and '.join(out)} the probed speed, past the {lc.drift - 1:.0%} the rate was chosen for: "
            f"the cell sat off its map coordinates while served." if out else "")


def _on_link_words(lc) -> str:
    """What a cell served on a slider's slower link confirms."""
    if lc.link_bytes_per_s is None:
        return ""
    return (f" On this link each cache is charged its bytes over {_link(lc, '')} (not a measured transfer), so the "
            f"split's loss is the link's arithmetic; the runs confirm that colocated serving beats the split there "
            f"and that {short_name(lc.winner)} serves the cell, not how chunked and prefill-first compare.")


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
                       + (f"load both layouts (the less served at {TIE_FLOOR:.0f}% to {TIE_CEILING:.0f}%) and put the "
                          f"gap's 90% interval within ±{TIE_GAP:.0f} points" if kind == "tie" else
                          f"start the 95% interval of {short_name(lc.winner)}'s lead over {short_name(lc.rival)} at "
                          f"least {LEAD_FLOOR:.0f} points above zero")
                       + ", so the cell was not served: it stays unconfirmed live.")
            continue
        ran = lc.steps["measured / predicted"]
        during = ", ".join(f"{k} {ran[k]:.2f}x" for k in ran.index)
        pred = lc.predicted[lc.rate_per_s]
        predicted = (f"predicted the less served layout at {pred:.0f}% of its requests within the SLOs (the rule takes "
                     f"{TIE_FLOOR:.0f}% to {TIE_CEILING:.0f}%) and the gap's 90% interval within ±{TIE_GAP:.0f} "
                     f"points" if kind == "tie" else f"predicted the gap's 95% interval to start at {pred:+.0f} points "
                     f"or more")
        outcome = {"matches": "the live winner matches the map's",
                   "matches: a tie": "the live runs match the map's: a tie",
                   "does not match": ("the live runs tell apart what the map calls a tie" if kind == "tie" else
                                      "the live winner is not the map's"),
                   "undecided": "these runs leave the map's winner unconfirmed" if kind != "tie" else
                   _undecided_tie(lc)}[live_outcome(lc)]
        per = lc.rate_per_s / m.workers
        times = {n: per / c.goodput[k] for k, n in ((c.leader, lc.winner), (c.runner_up, lc.rival)) if c.goodput[k] > 0}
        past = ", ".join(f"{fmt3(x)}x {short_name(n)}'s" for n, x in times.items())
        why = (": past both, where a short run from idle workers can tell them apart" if kind != "tie" and
               len(times) == 2 and min(times.values()) > 1 else "")
        out.append(f"{head} (the runs' own steps then: {during}); at {per:.3g} requests/s per worker "
                   f"({past or 'no'} goodput on the map{why}) the rescaled simulator {predicted} (decode steps "
                   f"{lc.drift - 1:.0%} slower or faster). {_burst(lc, m)} "
                   f"{_runs_words(lc)} So {outcome}.{_drifted(lc)}{_on_link_words(lc)}")
    return "\n\n".join(out)
