"""Sentences computed from maps (:mod:`splitlab.planning.split_map`) for chapter 7: what a slower KV link takes from
the split (:func:`link_words`), what a cluster of more workers changes (:func:`workers_words`), and what the rule of
thumb read off one row says about GPU cases beside their own cells (:func:`rule_words`). Each says only what the
numbers it is given show: a cell that stops being the split's is said to go to colocated serving or to a tie."""
from __future__ import annotations

import math
import statistics

from ...serving import CostModelExecutor
from .split_map_stream import fused_row_s, fused_row_words  # noqa: F401 (chapter 7 reads them here)
from .style import and_list, fmt2, fmt3, gb_per_s, pct2

__all__ = ["link_words", "workers_words", "rule_words", "other_rule_words", "fused_row_words", "fused_row_s"]


def _same_axes(a, b) -> None:
    if (a.prompt_tokens, a.tpot_steps) != (b.prompt_tokens, b.tpot_steps):
        raise ValueError("the maps have different axes: make them with one split_map_grid(s) call")


def _at(gbps) -> str:
    """'at 12.5 GB/s', or 'on the cost model's link' for None (a grid may give it in any place)."""
    return "on the cost model's link" if gbps is None else f"at {gb_per_s(gbps)}"


def _where(cells) -> str:
    """'118 and 384 tokens at 1.5 steps; 1,024 at 10 steps' (cells grouped by TPOT SLO row)."""
    rows: dict = {}
    for c in cells:
        rows.setdefault(c.tpot_steps, []).append(f"{c.prompt_tokens:,}")
    return "; ".join(f"{and_list(v)}{' tokens' if i == 0 else ''} at {k:g} steps"
                     for i, (k, v) in enumerate(rows.items()))


def link_words(maps: dict, cost) -> str:
    """What slower links between the pools take from the split, from :func:`~splitlab.teach.widgets.split_map.
    split_map_grid`'s ``maps`` ({link GB/s or None: map}, the first the reference; the others called slower only
    where each cache crosses them slower): for each other link, how many of
    the cells the split wins on the reference it keeps, and where the others go (colocated serving or a tie); then
    how long the longest prompt's cache takes to cross each link (``cost``: the maps' cost model, None the built-in
    one; its ``kv_bytes_per_token`` and, for the link None, ``transfer_s``) beside that prompt's prefill.

    Raises:
        ValueError: fewer than two maps, maps of different axes, or ``cost`` not the maps' cost model."""
    links = list(maps)
    if len(links) < 2:
        raise ValueError("link_words compares links: give at least two maps")
    ref = maps[links[0]]
    cost = CostModelExecutor(None).cost if cost is None else cost  # None was an AttributeError
    if getattr(cost, "source", ref.cost_source) != ref.cost_source:  # its caches and prefill said of the maps
        raise ValueError(f"cost is not the maps' cost model: {cost.source!r} against the maps' {ref.cost_source!r}")
    won = [i for i, c in enumerate(ref.cells) if c.winner == "split"]
    parts = []
    for gbps in links[1:]:
        m = maps[gbps]
        _same_axes(ref, m)
        if not won:  # no cell to lose: what the link takes from the split's goodput, and which ties it ends
            parts.append(_goodput_lost(ref, m, gbps))
            continue
        lost = [m.cells[i] for i in won if m.cells[i].winner != "split"]
        text = f"{_at(gbps)} it keeps {len(won) - len(lost)} of the {len(won)} cells it wins on its own link"
        if lost:
            colo, tie = [c for c in lost if c.winner != "tie"], [c for c in lost if c.winner == "tie"]
            goes = [f"{len(g)} to {what}: {_where(g)}" for g, what in ((colo, "colocated serving"), (tie, "a tie"))
                    if g]
            text += f" ({', and '.join(goes)})"
        parts.append(text)
    n = max(ref.prompt_tokens)
    nbytes = cost.kv_bytes_per_token * n
    seconds = [cost.transfer_s(nbytes) if g is None else nbytes / (g * 1e9) for g in links]
    cross = [f"{fmt2(1e3 * s)} ms {_at(g)}" for s, g in zip(seconds, links)]
    slower = all(s > seconds[0] for s in seconds[1:])  # else 'a slower link' of a faster one (10 GB/s after 1)
    head = "" if won else ("The split wins no cell on its own link, so a slower one can only widen its losses: "
                           if slower else "The split wins no cell on its own link: ")
    return (f"{head}{'On' if not head else 'on'} {'a slower' if slower else 'another'} KV link between the pools, "
            f"{'; '.join(parts)}. The longest prompt's cache "
            f"({_size(nbytes)}, {n:,} tokens) crosses in {and_list(cross)}, against a prefill of "
            f"{1e3 * cost.prefill_s(n):.3g} ms.")


def _size(nbytes: float) -> str:
    """'2 MiB', '0.98 GiB': two significant digits, in GiB from 1 GiB up (no '1e+03 MiB')."""
    return f"{fmt2(nbytes / 2 ** 30)} GiB" if nbytes >= 2 ** 30 else f"{fmt2(nbytes / 2 ** 20)} MiB"


def _goodput_lost(ref, m, gbps: float) -> str:
    """'at 3.125 GB/s its best split serves 0% to 31% less (the most at 8,000 tokens, 5 steps; 1 of its 2 ties goes
    to colocated serving: 64 tokens at 1.5 steps)': the split's goodput on map ``m`` against ``ref``, cell by cell,
    where it served something on ``ref``, and the ties of ``ref`` that ``m`` gives to colocated serving."""
    change = [(b.goodput["split"] / a.goodput["split"] - 1, b) for a, b in zip(ref.cells, m.cells)
              if a.goodput["split"] > 0]
    if not change:
        return f"{_at(gbps)} the split still serves no cell within the SLOs"
    worst, cell = min(change, key=lambda x: x[0])
    best = max(x for x, _ in change)
    if worst >= 0:
        return f"{_at(gbps)} its best split serves as much in every cell"
    span = f"{pct2(-worst)}" if math.isclose(best, worst, abs_tol=5e-3) else (
        f"{pct2(max(-best, 0))} to {pct2(-worst)}")
    ties = [i for i, c in enumerate(ref.cells) if c.winner == "tie"]
    ended = [m.cells[i] for i in ties if m.cells[i].winner != "tie"]
    which = (f"its {'tie goes' if len(ties) == 1 else f'{len(ties)} ties go'}" if len(ended) == len(ties) else
             f"{len(ended)} of its {len(ties)} ties {'goes' if len(ended) == 1 else 'go'}")
    gone = f"; {which} to colocated serving: {_where(ended)}" if ended else ""
    return (f"{_at(gbps)} its best split serves {span} less (the most at {cell.prompt_tokens:,} tokens, "
            f"{cell.tpot_steps:g} steps{gone})")


_KIND_WORDS = {"tie": "a tie", "split": "the split", "prefill-first": "colocated prefill-first",
               "chunked": "colocated chunked", "none": "no layout"}


def _ratio(name: str) -> tuple[int, int]:
    x, y = name.split("P+")
    return int(x), int(y.rstrip("D"))


def workers_words(small, large) -> str:
    """What a cluster of ``large.workers`` changes against ``small.workers`` on the same axes (two maps of one
    link): the cells each kind wins on both, the cells that change hands and to whom, the median change of the best
    split's and the best colocated layout's goodput per worker, and how many of the larger cluster's best splits
    use a prefill:decode ratio the smaller one cannot make.

    Raises:
        ValueError: maps of different axes, of one cluster size, or ``small`` the larger."""
    _same_axes(small, large)
    if small.workers == large.workers:
        raise ValueError(f"both maps are of {small.workers} workers: give two cluster sizes")
    if small.workers > large.workers:  # 'From 8 workers to 4', 8's ratios judged by what 4 can make
        raise ValueError(f"small must be the map of fewer workers, got {small.workers} then {large.workers}")
    a, b, n = small.counts(), large.counts(), len(small.cells)
    labels = (("split", "the split"), ("prefill-first", "colocated prefill-first"), ("chunked", "colocated chunked"),
              ("tie", "ties"), ("none", "no layout"))
    won = and_list([f"{label} {b[k]} ({a[k]})" for k, label in labels if a[k] or b[k]])
    moved = [(s, g) for s, g in zip(small.cells, large.cells) if s.winner != g.winner]
    to = {w: sum(g.winner == w for _, g in moved) for w in dict.fromkeys(g.winner for _, g in moved)}
    hands = (f"{len(moved)} of the {n} cells change hands ("
             + and_list([f"{k} to {_KIND_WORDS.get(w, w)}" for w, k in to.items()]) + ")" if moved else
             f"none of the {n} cells changes hands")

    def median_change(kinds) -> str:
        ratios = [max(g.goodput[k] for k in kinds) / max(s.goodput[k] for k in kinds) - 1
                  for s, g in zip(small.cells, large.cells) if max(s.goodput[k] for k in kinds) > 0]
        return pct2(statistics.median(ratios), signed=True) if ratios else "n/a"

    def reachable(name: str) -> bool:  # the same ratio with at most small.workers workers
        x, y = _ratio(name)
        g = math.gcd(x, y)
        return (x + y) // g <= small.workers
    new = [g.names["split"] for g in large.cells if not reachable(g.names["split"])]
    examples = and_list(list(dict.fromkeys(new))[:3]) if new else ""
    return (f"On {large.workers} workers (the menu above the map) against {small.workers}, the cells won: {won}; "
            f"{hands}. From {small.workers} workers to {large.workers}, the best split's goodput per worker changes "
            f"by a median {median_change(('split',))} over the cells, the best colocated layout's by "
            f"{median_change(('prefill-first', 'chunked'))}; "
            + (f"{len(new)} of the {n} best splits on {large.workers} workers use a prefill:decode ratio "
               f"{small.workers} workers cannot make ({examples})." if new else
               f"every best split on {large.workers} workers uses a ratio {small.workers} workers can make."))


def rule_words(rows, row) -> str:
    """Chapter 7's sentence on the rule applied to GPU cases: ``row``, one row of
    :func:`splitlab.planning.rule_of_thumb.split_threshold` (its words), then each case of ``rows``
    (:func:`~splitlab.planning.rule_of_thumb.apply_rule` with ``check=True``): its prefill in decode steps and what
    the row says there, then the cases whose own cell (simulated on their roofline) disagrees, and those where the
    rule makes no claim; the cases where a layout finished no request (``unfinished``: there the own cell's verdict
    is about memory); and, for apply_rule's rows, the first case's roofline bounds at full efficiency (chapter 5's)
    beside the ones the table charges. ValueError: ``rows`` without the ``agrees`` column (made without
    ``check=True``), or with no case."""
    if "agrees" not in rows:
        raise ValueError("rows has no 'agrees' column: make it with apply_rule(..., check=True)")
    if rows.empty:  # was 'Read at each case's prefill cost (...): . ... disagrees in 0 of 0 cases'
        raise ValueError("rows has no case: give apply_rule at least one (model, GPU, dtype, prompt tokens)")
    cases = [(f"{r['model']}{f' ({d})' if (d := r.get('dtype')) else ''} at {r['prompt tokens']:,} tokens", r)
             for _, r in rows.iterrows()]
    said = "; ".join(f"{name} ({r['prefill (decode steps)']:.3g} steps), {r['rule says']}" for name, r in cases)
    differ = [(name, r) for name, r in cases if r["agrees"] is False]
    silent = [name for name, r in cases if r["agrees"] is None]
    text = (f"On this device's map, {row.rule}. Read at each case's prefill cost (the verdict of the columns on "
            f"either side): {said}. ")
    if len(silent) == len(cases):  # was 'disagrees in 0 of 0 cases where the rule makes a claim'
        return text + "The rule makes no claim on any of these cases (near its threshold or outside the map's columns)."
    text += (f"Each case's own cell, simulated on its roofline, disagrees in {len(differ)} of "
             f"{len(cases) - len(silent)} cases where the rule makes a claim")
    text += (": " + "; ".join(f"{name}, {r['own map says']}" for name, r in differ) if differ else "")
    text += f" ({len(silent)} where it makes none: {and_list(silent)})." if silent else "."
    if differ:
        text += (" The rule counts the prefill in decode steps and leaves out what a chunk costs (the chunk "
                 "column): a rule read off one device carries to another only where a chunk stalls a stream about "
                 "as long on both.")
    alone = [(name, r) for name, r in cases if r.get("unfinished")]
    for name, r in alone:  # was 'chunked' for Llama-3-70B fp8 at 8k, whose split and prefill-first finished nothing
        text += (f" For {name}, {and_list([KINDS.get(k, k) for k in r['unfinished'].split(', ')])} finished no "
                 f"request: {r['own map says']} "
                 f"there says which layout fits such a request in memory, not which serves it better.")
    return text + _bounds_note(rows)


#: a map's kinds as a sentence names them
KINDS = {"split": "the split", "prefill-first": "prefill-first", "chunked": "chunked"}


def _bounds_note(rows) -> str:
    """The first row's prefill and decode step at the roofline's full efficiency (the bounds chapter 5 prints)
    beside the ones the table charges (the cost model's default efficiencies), in decode steps."""
    from ...costmodel import roofline_cost_model
    from ...costmodel.analytic import COMPUTE_EFFICIENCY, MEMORY_EFFICIENCY

    r = rows.iloc[0]
    if any(k not in r for k in ("GPU", "dtype", "prefill (ms)", "decode step (ms)")):
        return ""  # not apply_rule's rows: no roofline to bound
    bound = roofline_cost_model(r["model"], r["GPU"], r["dtype"], compute_efficiency=1.0, memory_efficiency=1.0)
    p, d = bound.prefill_s(int(r["prompt tokens"])), bound.decode_s(1, int(r["prompt tokens"]))
    return (f" Chapter 5 prints the roofline's bounds at full efficiency: for {r['model']} ({r['dtype']}) at "
            f"{r['prompt tokens']:,} tokens a prefill of at least {fmt3(p * 1e3)} ms against a decode step of at "
            f"least {fmt3(d * 1e3)} ms, {fmt3(p / d)} steps; the table charges the cost model's default "
            f"efficiencies ({COMPUTE_EFFICIENCY:.0%} of peak compute, {MEMORY_EFFICIENCY:.0%} of memory bandwidth): "
            f"{fmt3(r['prefill (ms)'])} and {fmt3(r['decode step (ms)'])} ms, "
            f"{fmt3(r['prefill (decode steps)'])} steps.")


def other_rule_words(rows, other, row, name: str) -> str:
    """The rule read off another map (``other``: :func:`~splitlab.planning.rule_of_thumb.apply_rule`'s rows of the
    same cases on that map, ``row``: its :func:`~splitlab.planning.rule_of_thumb.split_threshold` row, ``name``: the
    map in words, "the H100 map") against each case's own cell (``rows``: the same cases with ``check=True``).
    ValueError: ``rows`` without ``own map says`` (made without ``check=True``), other cases than ``other``'s, no
    case, ``other`` without ``rule says``; TypeError: ``rows``/``other`` not DataFrames, ``row`` without a str ``rule``
    (a DataFrame of split_threshold's rows: pick one), ``name`` not a str."""
    import pandas as pd
    key = ["model", "dtype", "prompt tokens"]
    for arg, v, need in (("rows", rows, key), ("other", other, key + ["rule says"])):
        if not isinstance(v, pd.DataFrame):
            raise TypeError(f"{arg} must be a DataFrame of apply_rule's rows, got {type(v).__name__}")
        if [c for c in need if c not in v]:
            raise ValueError(f"{arg} has no column(s) {[c for c in need if c not in v]}: make it with apply_rule")
    if not isinstance(getattr(row, "rule", None), str) or not isinstance(name, str):
        raise TypeError(f"row must be one split_threshold row (its 'rule' a str) and name a str, got "
                        f"{type(row).__name__} and {type(name).__name__}")
    if "own map says" not in rows:
        raise ValueError("rows has no 'own map says' column: make it with apply_rule(..., check=True)")
    if rows.empty:
        raise ValueError("rows has no case: give apply_rule at least one")
    if rows[key].values.tolist() != other[key].values.tolist():
        raise ValueError("rows and other must be the same cases in the same order (apply_rule on one rows list)")
    from ...planning.rule_of_thumb import agrees
    said = [agrees(o, own) for o, own in zip(other["rule says"], rows["own map says"])]
    claims = [s for s in said if s is not None]
    cases = "; ".join(f"{m} ({d}) at {t:,} tokens, {o}" for m, d, t, o in zip(
        other["model"], other["dtype"], other["prompt tokens"], other["rule says"]))
    text = f"Read off {name} instead, {row.rule}. There it says: {cases}. "
    if not claims:
        return text + "It makes no claim on any of these cases."
    return text + (f"Each case's own cell agrees in {sum(claims)} of the {len(claims)} cases where it makes a claim"
                   + (f" ({len(said) - len(claims)} where it makes none)." if len(claims) < len(said) else ".")
                   + (f" Read off {name}, the rule holds on every case it makes a claim on." if all(claims) else ""))
