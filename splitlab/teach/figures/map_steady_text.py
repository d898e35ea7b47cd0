"""Chapter 7's steady-state check of the map in a table and words (:mod:`.map_steady`'s cells): per region, where
its cell sat, the rate against both goodputs, what the real model's runs found beside the simulator's, and whether
the live winner matches the map's; and how a recorded cell reads on today's map (:func:`today_words`)."""
from __future__ import annotations

import statistics

import pandas as pd

from ...planning.map_result import lead_text
from .map_steady import MIN_MARGIN, NO_TEST, SteadyCell
from .map_steady_place import PILOT_LIFETIMES, _positive
from .map_steady_checks import check_cells, run_lines  # noqa: F401 (chapter 7 reads run_lines here)
from .map_steady_tie_read import cell_ladder
from .map_steady_slo import mean_tpot_words, qualifiers
from .map_steady_tie_words import ladder_words
from .map_steady_tie_sitting_read import cell_sitting
from .map_steady_tie_sitting_words import narrow, pilot_words, reading_words, sitting_label, sitting_words
from .pools_live import short_name as _short
from .pools_live_args import ordered_maps
from .pools_live_words import TIE_GAP, TIE_LOADED, even
from .style import and_list, fmt3

__all__ = ["SAID", "TITLES", "SHORT_REGIONS", "steady_table", "steady_words", "today_words", "record_summary",
           "probe_words", "run_lines", "mean_tpot_words"]


#: a region as the table's index names it (short: the table fits a 412 px phone)
SHORT_REGIONS = {"split": "split", "prefill-first": "pf-first", "chunked": "chunked", "tie": "tie"}


def steady_table(cells: dict) -> pd.DataFrame:
    """One row per region (``cells``: {region: SteadyCell}): the cell (prompt tokens, TPOT SLO in decode steps, a slow
    link's GB/s, a cluster other than the first cell's), each layout's mean attainment live (simulated on the same
    requests, in brackets, on the model rescaled by the runs' own steps where the record has it: ``in_run``; %), the
    live gap (points: of the means as printed) and its 95% interval and the verdict; a tie served in a sitting: "-"
    for the one rate's numbers, which do not make its verdict, and its sitting's verdict
    (:func:`~.map_steady_tie_sitting_words.sitting_label`); the layouts and the runs are :func:`steady_words`'.
    Narrow enough for a 412 px phone (the last live table was not). TypeError: ``cells`` not a dict of SteadyCells;
    ValueError: a cell's runs of another length than its seeds (:meth:`SteadyCell.frame`)."""
    check_cells(cells, "steady_table")
    rows, first = {}, next(iter(cells.values()), None)
    for region, c in cells.items():
        g = c.gap()
        mean = c.frame().mean()
        pmean = (pd.DataFrame(c.extra["in_run"], index=c.seeds) if "in_run" in c.extra else c.frame("predicted")).mean()
        link = "" if c.link_gbps is None else f", {c.link_gbps:g} GB/s"
        size = "" if c.workers == first.workers else f", {c.workers} workers"
        one = cell_sitting(c) is None  # a tie served in a sitting: its verdict is not the one rate's run
        rows[SHORT_REGIONS.get(region, region)] = {
            "cell": f"{c.map_prompt_tokens:,} tok, {c.tpot_steps:g} st{link}{size}",
            "winner (%)": f"{mean[c.winner]:.0f} ({pmean[c.winner]:.0f})" if one else "-",
            "2nd (%)": f"{mean[c.rival]:.0f} ({pmean[c.rival]:.0f})" if one else "-",  # the runner-up: a phone
            "gap (pp)": (f"{_pct(mean[c.winner]) - _pct(mean[c.rival]):+d} ({g['ci_low']:+.0f} to "
                         f"{g['ci_high']:+.0f})") if one else "-",
            "live": c.outcome() if one else sitting_label(c)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("region")


def _pct(x: float) -> int:
    """A mean as the table prints it; the gap is taken on these (of the unrounded means it read +90 beside 92 and 3)."""
    return int(f"{x:.0f}")


TITLES = {"split": "The split", "prefill-first": "Colocated prefill-first", "chunked": "Colocated chunked",
          "tie": "A tie"}


def _count(requests: list) -> str:
    return f"{min(requests)}" if min(requests) == max(requests) else f"{min(requests)} to {max(requests)}"


def _bar(c: SteadyCell, mean) -> str:
    """Where the two layouts' mean attainment fell against the goodput bar (90%): the map's claim in one run."""
    win, rival = mean[c.winner] >= 90, mean[c.rival] >= 90
    if c.region == "tie":
        return ("Both stayed at 90% or more: at this rate neither is loaded enough to part them." if win and rival
                else "")
    below = sum(v < 90 for v in c.measured[c.winner])
    knee = ("" if not below else f" The winner fell below 90% on {below} of the {len(c.seeds)} seeds, though: this "
            f"rate sits near its knee, where its own goodput lies.")
    return {(True, False): "The winner kept the 90% bar on average and the runner-up fell below it: on the real "
                           "model the two goodputs lie on either side of this rate, in the map's order." + knee,
            (True, True): "Both kept the 90% bar on average: on the real model this rate is below both goodputs, so "
                          "the run shows which serves more here, not their goodputs' order.",
            (False, False): "Both fell below the 90% bar on average: on the real model this rate is at or past both "
                            "goodputs, so the run shows which serves more here, not their goodputs' order.",
            (False, True): "The runner-up kept the 90% bar and the winner did not: the order reversed."}[(win, rival)]


def _against(c: SteadyCell, gw: float, gr: float) -> str:
    """The rate against the two goodputs, in words: between them, or a tie's share of their geometric mean."""
    middle = (gw * gr) ** 0.5
    if c.region == "tie" and middle > 0 and c.rate_per_worker < 0.99 * middle:
        return f"{c.rate_per_worker / middle:.2f} of the geometric mean of the goodputs {fmt3(gw)} and {fmt3(gr)}"
    return f"between the goodputs {fmt3(gw)} and {fmt3(gr)}"


def _verdict_words(c: SteadyCell, g: dict, verdict: str) -> str:
    """The verdict as the end of a sentence ("so ..."): the live winner against the map's, or a tie shown or not."""
    if verdict == "does not match" and c.region == "tie":
        ahead = _short(c.winner if g["mean"] > 0 else c.rival)
        return f"the live runs part the two, {ahead} ahead, where the map has a tie."
    if verdict == "no test":
        return (f"the runs are no test of the map's order: both layouts kept less than {NO_TEST:.0f}% on average, far "
                f"past both goodputs on the real model.")
    return "the live winner " + {"matches": "matches the map's.", "does not match": "does not match the map's.",
                                 "leads": "leads as in the map, outside the runs' spread.",
                                 "undecided": _undecided(c, g),
                                 "matches: a tie": f"ties, as the map says (the 90% interval lies within "
                                                   f"±{TIE_GAP:g} points)."}[verdict]


def _undecided(c: SteadyCell, g: dict) -> str:
    """An undecided verdict in words: a lead the interval does not clear, or a tie the runs neither show nor part."""
    if c.region != "tie":
        return "is undecided: the interval holds zero."
    interval = f"the gap's 90% interval ({g['eq_low']:+.0f} to {g['eq_high']:+.0f} points)"
    if even(g):  # within the tie's band, but no layout loaded: at such a rate any two layouts tie
        return (f"is undecided: the runs do not part the two and {interval} lies within ±{TIE_GAP:g} points, but "
                f"both layouts kept {TIE_LOADED:g}% or more on average: at a rate neither is loaded by, any two "
                f"layouts tie.")
    return (f"is undecided: the runs do not part the two, but {interval} reaches past the ±{TIE_GAP:g} a tie allows"
            + ("." if float(c.frame().mean().min()) < TIE_LOADED else ", and both layouts were nearly idle."))


def _range(values) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}x to {hi:.2f}x"


def _models(c: SteadyCell) -> str:
    """What the simulator predicted: on the model the probe placed, and (where the record has it) on that model
    rescaled by each layout's own live steps, beside the steps' ratios."""
    p = c.frame("predicted").mean()
    text = f"On the model the {_placer(c)} placed, the simulator predicted {p[c.winner]:.0f}% and {p[c.rival]:.0f}%."
    steps, again = c.extra.get("steps"), c.extra.get("in_run")
    if steps and again:
        i = pd.DataFrame(again, index=c.seeds)[[c.winner, c.rival]].mean()
        decode = [v["decode"] for v in steps.values() if "decode" in v]
        text += (f" The live decode steps ran {_range(decode)} that model's; rescaled by each layout's own steps, it "
                 f"predicts {i[c.winner]:.0f}% and {i[c.rival]:.0f}%.")
    return text


def _margin(c: SteadyCell) -> str:
    """The map's margin of the cell, with a word where it is below the check's :data:`~.map_steady.MIN_MARGIN` (a
    region with no wider cell: :func:`~.map_steady.pick_cells` took its widest)."""
    lead = f" (the runner-up's shortfall; the map labels the winner's lead, {lead_text(c.margin)})"
    if c.region == "tie" or c.margin >= MIN_MARGIN:
        return f"{c.margin:.0%}{lead}"
    return f"{c.margin:.1%}{lead}, below the {MIN_MARGIN:.0%} the check asks for: the region's widest"


def _placer(c: SteadyCell) -> str:
    """What placed the cell last: its pilot (:mod:`.map_steady_place`), or the probe alone (records before pilots)."""
    return "pilot" if "pilot" in c.extra else "probe"


def steady_words(cells: dict) -> str:
    """A sentence per region: where its cell sits, the rate against the two goodputs, what the runs found and
    whether the live winner matches the map's. Errors: :func:`steady_table`'s."""
    check_cells(cells, "steady_words")
    out, first = [], next(iter(cells.values()), None)
    for region, c in cells.items():
        g, mean = c.gap(), c.frame().mean()
        gw, gr = c.goodput_now[c.winner], c.goodput_now[c.rival]
        link = ("" if c.link_gbps is None else f" on a {c.link_gbps:g} GB/s KV link") + (
            "" if c.workers == first.workers else f", {c.workers} workers")
        verdict, served = c.outcome(), "" if c.prompt_tokens == c.map_prompt_tokens else f" on the map, " \
                                                                                        f"{c.prompt_tokens} served"
        held = (f"{_short(c.winner)} kept {mean[c.winner]:.0f}% of its requests within the SLOs and "
                f"{_short(c.rival)} {mean[c.rival]:.0f}%")
        out.append(
            f"**{TITLES.get(region, region)}** ({c.map_prompt_tokens}-token prompts{served}, {c.prefill_steps:.3g} "
            f"decode steps of prefill, TPOT {c.tpot_steps:g} steps{link}; the map's margin {_margin(c)}): at "
            f"{c.rate_per_worker:.3g} requests/s per worker, {_against(c, gw, gr)} searched again "
            f"at the {_placer(c)}'s speed, runs of {_count(c.requests)} requests ({c.lifetimes:.0f} request "
            f"lifetimes of arrivals) over {len(c.seeds)} seeds: {held}. The gap's 95% interval runs from "
            f"{g['ci_low']:+.0f} to {g['ci_high']:+.0f} points" + "".join(_tail(c, g, verdict, mean)))
    return "\n\n".join(out)


def _tail(c: SteadyCell, g: dict, verdict: str, mean) -> list:
    """The rest of a region's sentences: the verdict, the bar and the models; a tie served in a sitting: the one
    rate's bar, models and SLO caveat, then a paragraph of the sitting (``sitting_words``, ``reading_words``), then
    one of what its ladder taught (``pilot_words``: :mod:`.map_steady_tie_sitting_words`); a tie served on a ladder
    of rates alone: the one rate's bar, the ladder (:func:`~.map_steady_tie_words.ladder_words`), the models."""
    bar, caveat = _bar(c, mean) if verdict != "no test" else "", mean_tpot_words(c)
    if cell_sitting(c) is not None:
        pilot = pilot_words(c)  # three paragraphs: the one rate, the sitting, the ladder before it
        return [". "] + [f"{x} " for x in (bar, _models(c), caveat) if x] + [
            "\n\n" + sitting_words(c), reading_words(c)] + (["\n\n" + pilot] if pilot else [])
    if cell_ladder(c) is not None:
        return [". "] + [f"{x} " for x in (bar, ladder_words(c)) if x] + [_models(c)] + (
            [f" {caveat}"] if caveat else [])
    return [f", so {_verdict_words(c, g, verdict)}"] + [f" {x}" for x in (bar, _models(c), caveat) if x]


def today_words(cells: dict, maps: dict) -> str:
    """A sentence on where each recorded cell (``cells``: {region: SteadyCell}, of :func:`~.map_steady.load_record`)
    falls on today's maps (``maps``: {link GB/s or None: map} of the same cluster size): the cell of the same TPOT SLO
    and link whose prefill cost in decode steps is nearest, and the kind that wins it today. A record is of one
    calibration: another machine, or this one another day, can draw the borders elsewhere. ValueError: a record of
    another cluster size than the maps', no cell, those of :func:`~.pools_live_args.ordered_maps` (not a dict of maps,
    none); TypeError: ``cells`` not a dict of SteadyCells."""
    check_cells(cells, "today_words")
    ordered_maps(maps)
    if not cells:
        raise ValueError("today_words: cells is empty: no region was served")
    out = []
    for region, c in cells.items():
        m = maps.get(None if c.link_gbps is None else c.link_gbps)
        if m is None:
            link = "the cost model's own link" if c.link_gbps is None else f"a {c.link_gbps:g} GB/s link"
            out.append(f"today's maps have no map on {link} for the {region} cell")
            continue
        if m.workers != c.workers:
            raise ValueError(f"the record's cells are of {c.workers} workers, the maps of {m.workers}")
        row = [x for x in m.cells if x.tpot_steps == c.tpot_steps]
        if not row:
            out.append(f"today's map has no row at a TPOT SLO of {c.tpot_steps:g} steps for the {region} cell")
            continue
        near = min(row, key=lambda x: abs(x.prefill_steps / c.prefill_steps - 1))
        now = "a tie" if near.winner == "tie" else near.winner
        out.append(f"the {region} cell ({c.prefill_steps:.3g} steps of prefill, TPOT {c.tpot_steps:g}) sits "
                   f"nearest today's {near.prompt_tokens}-token cell ({near.prefill_steps:.3g} steps), which "
                   + (("the map again calls a tie" if region == "tie" else "the same kind wins")
                      if near.winner == c.region else f"goes to {now}"))
    return "On this machine's map today, " + "; ".join(out) + "."


#: each verdict as the summary says it, in the order it lists them
SAID = {"matches": "showed their map's goodput order", "matches: a tie": "tied as their map says",
        "leads": "led as in their map, at or past a goodput", "undecided": "undecided",
        "does not match": "did not match", "no test": "no test (both far past their goodputs)"}


def record_summary(cells: dict) -> str:
    """The records' verdicts in a clause: "of the 5 cells served live, colocated prefill-first and colocated chunked
    showed their map's goodput order; the split led as in their map, at or past a goodput; a tie did not match; pf-first
    (8) no test (both far past their goodputs)". ValueError: no cell; TypeError: not a dict of cells."""
    check_cells(cells, "record_summary")
    if not cells:
        raise ValueError("cells is empty: no region was served")
    said: dict = {}
    for region, c in cells.items():
        name = TITLES[region].lower() if region in TITLES else f"{TITLES.get(c.region, c.region).lower()} on " \
                                                                f"{c.workers} workers"
        q = [x for x in (qualifiers(c), "in one sitting, narrowly" if cell_sitting(c) is not None and narrow(
            c.extra["sitting"]) else "") if x]
        said.setdefault(c.outcome(), []).append(name + (f" ({'; '.join(q)})" if q else ""))
    parts = [f"{and_list(said[k])} {SAID[k]}" for k in SAID if k in said]
    return f"of the {len(cells)} cells served live, " + "; ".join(parts)


def probe_words(cells: dict) -> str:
    """How the cells were placed and how well: where they had a pilot (:mod:`.map_steady_place`), how far its decode
    steps moved the probe's model; then how the runs' live decode steps ran against the model that placed each cell,
    over every layout's runs of ``cells`` (their ``extra["steps"]``): the range and median, and what a one-sided miss
    does to the rate; "" where the records keep no steps. TypeError: not a dict of cells; ValueError naming the cell:
    ``extra["steps"]`` not {layout: {step kind: ratio}}, ``extra["pilot"]`` without a decode ratio, a ratio not a
    finite number > 0 (NaN read "ran nanx")."""
    check_cells(cells, "probe_words")
    ratios, flown = [], []
    for c in cells.values():
        steps = c.extra.get("steps", {})
        if not isinstance(steps, dict) or not all(isinstance(v, dict) for v in steps.values()):
            raise ValueError(f"probe_words: the {c.region!r} cell's extra['steps'] must be {{layout: {{step kind: "
                             f"ratio}}}}, got {steps!r:.80}")
        who = f"probe_words: the {c.region!r} cell's"
        ratios += [_positive(f"{who} decode steps", v["decode"]) for v in steps.values() if "decode" in v]
        if "pilot" in c.extra:
            pilot = c.extra["pilot"]
            flown.append(_positive(f"{who} pilot's decode", pilot.get("decode") if isinstance(pilot, dict) else pilot))
    ratios.sort()
    if not ratios:
        return ""
    placers = {_placer(c) for c in cells.values()}
    placer = placers.pop() if len(placers) == 1 else "probe or pilot"
    head = ("" if not flown else
            f"Each cell{'' if len(flown) == len(cells) else ' with a pilot'} was placed twice: by a probe (six "
            f"requests on one idle worker), then by a pilot serving it on both layouts for {PILOT_LIFETIMES} request "
            f"lifetimes at the probe's rate, whose decode steps ran {_range(flown)} the probe's model; the cell was "
            f"placed again on the model rescaled by the pilot's steps. ")
    mid = statistics.median(ratios)
    side = ("slower" if ratios[0] > 1 else "faster" if ratios[-1] < 1 else None)
    runs = f"the {len(ratios)} layouts' runs" if len(ratios) > 1 else "the one layout's runs"
    text = head + (f"Over {runs} of these records the live decode steps ran {_range(ratios)} "
                   f"the model each {placer} placed (median {mid:.2f}x)")
    if side is None:  # both ways only where one ran faster and one slower; at 1.00x on one side, none that way
        return text + (f": the {placer}'s aim missed both ways." if ratios[0] < 1 < ratios[-1] else
                       f": none {'faster' if ratios[0] == 1 else 'slower'} than that model." if ratios[0] != ratios[-1]
                       else f": the {placer}'s aim was exact.")
    return text + (f": every one {side} than that model. An aim that misses one way moves every cell the same way: "
                   f"with decode steps slower, each was served nearer its winner's goodput, or past it, than the "
                   f"middle of the two goodputs it aimed at." if side == "slower" else
                   f": every one {side} than that model, so each cell was served below the middle it aimed at.")

