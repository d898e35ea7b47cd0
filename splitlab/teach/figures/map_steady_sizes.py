"""Chapter 7's steady-state check on two cluster sizes (:mod:`.map_steady`'s records of 4 and 8 workers): whether a
region's live result holds on both, so that a loss of the split is not the coarse prefill:decode ratios of the
smaller cluster (:func:`sizes_words`), and the losses that hold, in a sentence for a takeaway (:func:`lasting_words`);
a slow link's transfer against the prefill (:func:`.map_steady_link.moved_words`); chapter 6's short live loss
against the records' steady state (:func:`burst_words`).
"""
from __future__ import annotations

import math

import pandas as pd

from .map_steady import SteadyCell
from .map_steady_checks import check_cells
from .map_steady_link import _busy, _moved, moved_words
from .map_steady_place import _positive
from .map_steady_slo import qualifiers
from .map_steady_text import TITLES, _short
from .pools_live_args import whole
from .pools_live import split_pools
from .style import and_list, fmt2, fmt3

__all__ = ["sizes_words", "lasting_words", "moved_words", "burst_words", "margin_words"]


def _both(small: dict, large: dict, who: str) -> list:
    """[(region, small cell, large cell, shown)] for the regions served on both records (fewer workers first);
    ``shown``: both verdicts "matches" or "leads" (a tie's: both "matches: a tie"). Errors: :func:`sizes_words`'."""
    check_cells(small, who, "small")
    check_cells(large, who, "large")
    out = []
    for r in [r for r in small if r in large]:
        a, b = small[r], large[r]
        for name, c in (("small", a), ("large", b)):
            if c.region != r:
                raise ValueError(f"{who}: {name}[{r!r}] must be the {r!r} cell, got a {c.region!r} cell")
        if a.workers >= b.workers:
            raise ValueError(f"small must be the record of fewer workers, got {a.workers} then {b.workers}")
        out.append((r, a, b, all(c.outcome() in (("matches: a tie",) if r == "tie" else ("matches", "leads"))
                                 for c in (a, b))))
    return out


def _link(c: SteadyCell) -> str:
    return "" if c.link_gbps is None else f", a {c.link_gbps:g} GB/s link"


def _where(c: SteadyCell) -> str:
    """The cell's coordinates on the map: "355-token prompts, TPOT 10 steps" (and a slow link)."""
    return f"{c.map_prompt_tokens}-token prompts, TPOT {c.tpot_steps:g} steps{_link(c)}" + (
        ", under a mean-TPOT SLO" if c.region != "tie" and "mean-TPOT" in qualifiers(c) else "")


def sizes_words(small: dict, large: dict) -> str:
    """Whether a region's live result holds on two cluster sizes (``small`` and ``large``: {region: SteadyCell} of
    two records, fewer workers first): per region served on both, each size's cell, attainments and verdict, and
    what that says of pool granularity: a colocated win shown on both sizes (each "matches" or "leads", the same
    kind ahead) is a loss the larger cluster's finer prefill:decode ratios do not remove; a tie shown on both is
    said so. "" when no region was served on both. ValueError: ``small`` not of fewer workers than ``large``, a cell
    under another region's key; TypeError naming ``small`` or ``large``: not dicts of cells."""
    out = []
    for r, a, b, shown in _both(small, large, "sizes_words"):
        said = [f"on {c.workers} workers ({_where(c)}{moved_words(c)}) {_short(c.winner)} kept {mean[c.winner]:.0f}% "
                f"against "
                f"{mean[c.rival]:.0f}% for {_short(c.rival)}, {c.outcome()}"
                for c, mean in ((a, a.frame().mean()), (b, b.frame().mean()))]
        end = ("a loss of the split on both sizes, live, so not the coarse ratios of the smaller cluster"
               if shown and r in ("prefill-first", "chunked") else "a tie on both sizes, live" if shown and r == "tie"
               else "the split ahead on both sizes, live" if shown else "not shown live on both sizes")
        out.append(f"{TITLES.get(r, r)}: " + "; ".join(said) + f": {end}")
    return ". ".join(out) + ("." if out else "")


def lasting_words(small: dict, large: dict, counts: tuple | None = None, today=None) -> str:
    """The split's live losses that hold on both cluster sizes (:func:`sizes_words`' reading), in one sentence for a
    takeaway, with both sizes' attainments and the cells' coordinates (each size's where the records served
    different cells); a loss served on a slow link said so, with how busy each of the split's prefill workers' links
    was (:func:`moved_words`' arithmetic) and, given ``counts`` (the two records' ``counts``, fewer workers first:
    {link GB/s as a string, "None" for the cost model's own: {kind: cells won}}), the cells that kind won on the
    maps' own link, and given ``today`` (a map drawn today on the own link, as chapter 6 draws it: a
    :func:`splitlab.planning.split_map.split_map` result) its wins beside them; a slow link's loss is said to be the
    link's at that cell only where neither record's map gives that kind a cell on the own link. "" when there is none.
    Errors: :func:`sizes_words`'; ValueError: ``counts`` not two records' counts with the own link's wins of that
    kind; TypeError: ``today`` not a map (its ``counts()``, ``cells`` and ``workers``)."""
    if today is not None and not all(hasattr(today, k) for k in ("counts", "cells", "workers")):
        raise TypeError(f"lasting_words: today must be a map (split_map's result), got {type(today).__name__}")
    out, slow = [], []
    if counts is not None and not (isinstance(counts, (tuple, list)) and len(counts) == 2 and all(
            isinstance(n, dict) and isinstance(n.get("None"), dict) and sum(n["None"].values()) > 0
            and all(whole(v) and v >= 0 for v in n["None"].values()) for n in counts)):
        raise ValueError(f"lasting_words: counts must be the two records' counts ({{'None': {{kind: cells}}}}, cells "
                         f"won on the own link, at least one), got {counts!r:.200}")
    for r, a, b, shown in _both(small, large, "lasting_words"):
        if shown and r in ("prefill-first", "chunked"):
            ma, mb = a.frame().mean(), b.frame().mean()
            cells = (f"cell ({_where(a)}) on both {a.workers} and {b.workers} workers" if _where(a) == _where(b) else
                     f"cells on {a.workers} workers ({_where(a)}) and on {b.workers} workers ({_where(b)})")
            out.append(f"the {TITLES[r].lower()} {cells} (colocated kept "
                       f"{ma[a.winner]:.0f}% and {mb[b.winner]:.0f}% of its requests within the SLOs, the split "
                       f"{ma[a.rival]:.0f}% and {mb[b.rival]:.0f}%)")
            if a.link_gbps is not None or b.link_gbps is not None:
                slow.append((r, a, b))
    if not out:
        return ""
    return ("Served live in steady state (chapter 7's records), the split lost " + and_list(out) + ": "
            + (and_list([_slow(r, a, b, counts, today) + _twin(a, small) for r, a, b in slow]) + ", and" if slow
               else "a loss")
            + " the finer ratios of more workers do not remove" + (" it." if slow else "."))


def _slow(region: str, a: SteadyCell, b: SteadyCell, counts, today=None) -> str:
    """A loss served on a slow link in words: the link, each size's prefill links' load and the own link's wins."""
    links = [f"{_positive(f'the {c.region!r} cell link_gbps', c.link_gbps):g} GB/s link on {c.workers} workers"
             if c.link_gbps is not None else f"the cost model's own link on {c.workers} workers" for c in (a, b)]
    links = [links[0].split(" on ")[0]] if a.link_gbps == b.link_gbps else links
    busy = [(c.workers, _busy(c, m[2])) for c in (a, b) if (m := _moved(c, "lasting_words")) is not None]
    busy = [f"{fmt2(p[1])}% on {w} workers" for w, p in busy if p is not None]
    text = f"a loss on {' and '.join(('a ' if 'GB/s' in x else '') + x for x in links)}" + (
        "" if not busy else f", which kept each of the split's prefill workers' links busy {and_list(busy)}")
    if counts is None:
        return text
    if not all(region in n["None"] for n in counts):
        raise ValueError(f"lasting_words: counts must hold the {region!r} cells won on the own link, got "
                         f"{counts!r:.200}")
    won = [f"{n['None'][region]} of {sum(n['None'].values())} cells on {c.workers} workers"
           for n, c in zip(counts, (a, b))]
    drawn = ("" if today is None else f" (this page's map, drawn today on {today.workers} workers: "
             f"{today.counts().get(region, 0)} of {len(today.cells)})")
    return (f"{text}; on the records' maps' own link {TITLES[region].lower()} wins {' and '.join(won)}{drawn}"
            + (", so at this cell the slow link makes that loss" if all(n["None"][region] == 0 for n in counts)
               and None not in (a.link_gbps, b.link_gbps) else ""))


def _twin(c: SteadyCell, cells: dict) -> str:
    """The same map cell as the slow link's ``c`` served on the cost model's own link in the same record
    (``cells``), in words: the split's attainment there against over the slow link; "" when the record has none."""
    split = c.winner if split_pools(c.winner) else c.rival
    twin = next((x for x in cells.values() if x is not c and x.link_gbps is None and split in (x.winner, x.rival)
                 and (x.map_prompt_tokens, x.tpot_steps) == (c.map_prompt_tokens, c.tpot_steps)), None)
    if twin is None:
        return ""
    return (f" (the same map cell on the cost model's own link, the record's {twin.region} cell, served with "
            f"{twin.prompt_tokens}-token prompts at {twin.rate_per_worker:.3g} requests/s per worker, kept {split} at "
            f"{twin.frame().mean()[split]:.0f}%; over the slow link, with {c.prompt_tokens}-token prompts at "
            f"{c.rate_per_worker:.3g}, {c.frame().mean()[split]:.0f}%"
            + ("; the own link's runs carried at least as heavy a load" if twin.prompt_tokens >= c.prompt_tokens
               and twin.rate_per_worker >= c.rate_per_worker else "") + ")")


def burst_words(requests, ttft_slo_s: float, tpot_slo_s: float, cells: dict) -> str:
    """Chapter 6's live loss (``requests``: one seed's served :class:`~splitlab.serving.Request` objects) against a
    steady state: how long its arrivals span against the time a request may take within its SLOs (seconds: TTFT SLO
    + (mean answer tokens - 1) x TPOT SLO), and each colocated win the record ``cells`` ({region: SteadyCell}) shows
    live ("matches" or "leads"), with its attainments over the record's request lifetimes of arrivals.

    Raises:
        ValueError: fewer than 2 requests; SLOs not finite numbers > 0; an arrival not finite >= 0, an answer not
            of >= 1 tokens; a cell under another region's key. TypeError: ``cells`` not a dict of cells, ``requests``
            not Requests."""
    import math
    import numbers

    from ...serving.goodput_runs import lifetime_s
    check_cells(cells, "burst_words")
    for r, c in cells.items():
        if c.region != r:  # a split cell under "chunked" was said a colocated win
            raise ValueError(f"burst_words: cells[{r!r}] must be the {r!r} cell, got a {c.region!r} cell")
    requests = list(requests) if hasattr(requests, "__iter__") and not isinstance(requests, (str, dict)) else None
    if requests is None or not all(hasattr(r, "arrival_s") and hasattr(r, "max_new_tokens") for r in requests):
        raise TypeError("burst_words: requests must be a list of served Requests (arrival_s, max_new_tokens)")
    if len(requests) < 2:
        raise ValueError(f"burst_words needs at least 2 requests, got {len(requests)}")
    for name, v in (("ttft_slo_s", ttft_slo_s), ("tpot_slo_s", tpot_slo_s)):
        _positive(f"burst_words: {name} (s)", v)
    bad = [r for r in requests if not isinstance(r.arrival_s, numbers.Real) or isinstance(r.arrival_s, bool)
           or not 0 <= r.arrival_s < math.inf or not whole(r.max_new_tokens) or r.max_new_tokens < 1]
    if bad:  # a NaN arrival was dropped by max() in silence, an answer of -100 tokens made a lifetime of -4.55 s
        raise ValueError(f"burst_words: each request needs an arrival_s finite >= 0 (s) and max_new_tokens >= 1, got "
                         f"{bad[0].arrival_s!r} and {bad[0].max_new_tokens!r}")
    arrivals = [r.arrival_s for r in requests]
    span = max(arrivals) - min(arrivals)
    answers = sum(r.max_new_tokens for r in requests) / len(requests)
    life = lifetime_s(requests, ttft_slo_s, tpot_slo_s)  # the unit of a goodput run's length
    within = (f"a request may take within its SLOs (the TTFT SLO, then {fmt3(answers - 1)} more tokens at the TPOT "
              f"SLO: {fmt3(answers)} answer tokens on average)")
    if span < life:
        text = (f"The first seed's {len(requests)} requests arrive within {fmt3(span)} s, {fmt2(100 * span / life)}% "
                f"of the {fmt3(life)} s {within}: they all overlap, so the runs test how each layout absorbs them, "
                f"not the rate it sustains.")
    else:
        text = (f"The first seed's {len(requests)} requests arrive over {fmt2(span / life)} times the {fmt3(life)} s "
                f"{within}" + (", fewer lifetimes than a goodput run's 20, in which queues have time to build."
                               if span < 20 * life else "."))
    said = None
    for c in [c for r, c in cells.items() if r in ("prefill-first", "chunked") and c.outcome() in ("matches", "leads")]:
        m, run = c.frame().mean(), (round(c.lifetimes), c.workers)
        head = (" At" if run == said else f" In steady state, at other cells of the map (chapter 7's record: "
                                          f"{run[0]} request lifetimes of arrivals on {c.workers} workers), at")
        text += (f"{head} the {TITLES[c.region].lower()} cell ({_where(c)}) {_short(c.winner)} kept "
                 f"{m[c.winner]:.0f}% of its requests within the SLOs on average over {len(c.seeds)} seeds and "
                 f"{_short(c.rival)} {m[c.rival]:.0f}%.")
        said = run
    return text


def margin_words(check, cells: dict) -> str:
    """What the live runs of ``cells`` ({name: SteadyCell}) check of the map: each cell's order at one rate, not its
    margin, a ratio of two simulated goodputs, beside the simulator's own error on the validation table ``check``
    (:func:`splitlab.serving.validate` with ``in_run=True``: its largest error on the cost model refitted to the
    runs' steps), and where a tie's ladder measured both goodputs live, their ratio against the simulated one.
    ValueError: a table without the in-run column or a number in it, no cell, a margin not a share; those of
    :func:`splitlab.serving.validation.verdict`."""
    from ...serving.validation import verdict
    from .map_steady_tie_sitting_read import cell_sitting
    from .map_steady_tie_sitting_words import sitting_goodput_words
    check_cells(cells, "margin_words")
    if not cells:
        raise ValueError("margin_words: cells is empty: no cell was served")
    for c in cells.values():
        if not (isinstance(c.margin, (int, float)) and not isinstance(c.margin, bool) and 0 <= c.margin <= 1):
            raise ValueError(f"margin_words: the {c.region!r} cell's margin must be a share in [0, 1], got "
                             f"{c.margin!r}")
    if isinstance(check, pd.DataFrame) and "in_run_error" in check and not pd.to_numeric(
            check["in_run_error"], errors="coerce").notna().any():
        raise ValueError("margin_words: the table's in_run_error holds no number: nothing was simulated in run")
    v = verdict(check)
    if "in_run_largest" not in v:
        raise ValueError("margin_words needs a validation table simulated in run (validate(..., in_run=True))")
    err = v["in_run_largest"]
    text = (f"These runs check each region's order at one rate, not the map's margins, each a ratio of two simulated "
            f"goodputs. The simulator's own error on the check at the top of this page (refitted to the runs' steps) "
            f"reached {err:.1%} on one latency percentile ({v['in_run_where']}), on the check's short runs: a "
            f"latency percentile is not a goodput, and the check's errors differ from layout to layout.")
    return text + "".join(sitting_goodput_words(c) if cell_sitting(c) is not None else _goodput_error(c)
                          for c in cells.values())


def _goodput_error(c: SteadyCell) -> str:
    """Where a cell's goodputs were measured live (a tie's ladder, :mod:`.map_steady_tie`): each against its
    simulated goodput, and the two goodputs' ratio live (its bracket's extremes) against simulated, per set of seeds
    served apart where seeds were added later (:func:`~.map_steady_tie_read.seed_sets`: a machine's speed moves
    both goodputs, not their ratio); "" for a cell without a ladder."""
    from .map_steady_tie_read import brackets, cell_ladder, seed_sets
    from .map_steady_tie_words import span
    ladder = cell_ladder(c)
    if ladder is None:
        return ""
    gm, said, ratios = ladder["geomean_per_worker"], [], []
    for label, sub in (seed_sets(c) or {"": ladder}).items():
        b = brackets(sub)
        live = {n: tuple(x * gm / _positive(f"the tie's goodput_now[{n!r}]", c.goodput_now[n]) for x in b[n])
                for n in (c.winner, c.rival)}
        said.append((f"{label} seeds: " if label else "") + and_list(
            [f"{_short(n)} {span(lo, hi)} its simulated {fmt3(c.goodput_now[n])}/s" for n, (lo, hi) in
             live.items()]))
        (lw, hw), (lr, hr) = b[c.winner], b[c.rival]
        ratios.append((f"for {label} seeds " if label else "") + (
            f"between {lw / hr:.2f} and {hw / lr:.2f}" if 0 < min(lw, lr) and max(hw, hr) < math.inf else
            "unbounded (a bracket left open)"))
    return (f" Only the tie's ladder measured goodputs live: {'; '.join(said)} per worker; the ratio of the two, "
            f"{_short(c.winner)} over {_short(c.rival)}, lies live (on the means over the seeds) "
            f"{'; '.join(ratios)}, simulated {c.goodput_now[c.winner] / c.goodput_now[c.rival]:.2f}.")
