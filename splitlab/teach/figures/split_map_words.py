"""Sentences computed from maps (:mod:`splitlab.planning.split_map`) for chapter 7: what a slower KV link takes from
the split (:func:`link_words`), and what the rule of
thumb read off one row says about GPU cases beside their own cells (:func:`rule_words`). Each says only what the
numbers it is given show: a cell that stops being the split's is said to go to colocated serving or to a tie."""
from __future__ import annotations

from .style import and_list, fmt2

__all__ = ["link_words", "rule_words"]


def _same_axes(a, b) -> None:
    if (a.prompt_tokens, a.tpot_steps) != (b.prompt_tokens, b.tpot_steps):
        raise ValueError("the maps have different axes: make them with one split_map_grid(s) call")


def _where(cells) -> str:
    """'118 and 384 tokens at 1.5 steps; 1,024 at 10 steps' (cells grouped by TPOT SLO row)."""
    rows: dict = {}
    for c in cells:
        rows.setdefault(c.tpot_steps, []).append(f"{c.prompt_tokens:,}")
    return "; ".join(f"{and_list(v)}{' tokens' if i == 0 else ''} at {k:g} steps"
                     for i, (k, v) in enumerate(rows.items()))


def link_words(maps: dict, cost) -> str:
    """What slower links between the pools take from the split, from :func:`~splitlab.teach.widgets.split_map.
    split_map_grid`'s ``maps`` ({link GB/s or None: map}, the first the reference): for each other link, how many of
    the cells the split wins on the reference it keeps, and where the others go (colocated serving or a tie); then
    how long the longest prompt's cache takes to cross each link (``cost``: the maps' cost model, its
    ``kv_bytes_per_token`` and, for the link None, ``transfer_s``) beside that prompt's prefill.

    Raises:
        ValueError: fewer than two maps, or maps of different axes."""
    links = list(maps)
    if len(links) < 2:
        raise ValueError("link_words compares links: give at least two maps")
    ref = maps[links[0]]
    won = [i for i, c in enumerate(ref.cells) if c.winner == "split"]
    parts = []
    for gbps in links[1:]:
        m = maps[gbps]
        _same_axes(ref, m)
        lost = [m.cells[i] for i in won if m.cells[i].winner != "split"]
        to_tie = sum(c.winner == "tie" for c in lost)
        text = f"at {gbps:g} GB/s it keeps {len(won) - len(lost)} of the {len(won)} cells it wins on its own link"
        if lost:
            goes = [f"{len(lost) - to_tie} to colocated serving" if len(lost) > to_tie else "",
                    f"{to_tie} to a tie" if to_tie else ""]
            text += f" ({and_list([g for g in goes if g])}: {_where(lost)})"
        parts.append(text)
    n = max(ref.prompt_tokens)
    nbytes = cost.kv_bytes_per_token * n
    cross = [f"{fmt2(1e3 * (cost.transfer_s(nbytes) if g is None else nbytes / (g * 1e9)))} ms"
             + (" on the cost model's link" if g is None else f" at {g:g} GB/s") for g in links]
    return (f"On a slower KV link between the pools, {'; '.join(parts)}. The longest prompt's cache "
            f"({nbytes / 2 ** 20:.2g} MiB, {n:,} tokens) crosses in {and_list(cross)}, against a prefill of "
            f"{1e3 * cost.prefill_s(n):.3g} ms.")


def rule_words(rows, row) -> str:
    """Chapter 7's sentence on the rule applied to GPU cases: ``row``, one row of
    :func:`splitlab.planning.rule_of_thumb.split_threshold` (its words), then each case of ``rows``
    (:func:`~splitlab.planning.rule_of_thumb.apply_rule` with ``check=True``): its prefill in decode steps and what
    the row says there, then the cases whose own cell (simulated on their roofline) disagrees, and those where the
    rule makes no claim. ValueError: ``rows`` without the ``agrees`` column (made without ``check=True``)."""
    if "agrees" not in rows:
        raise ValueError("rows has no 'agrees' column: make it with apply_rule(..., check=True)")
    cases = [(f"{r['model']} at {r['prompt tokens']:,} tokens", r) for _, r in rows.iterrows()]
    said = "; ".join(f"{name} ({r['prefill (decode steps)']:.3g} steps), {r['rule says']}" for name, r in cases)
    differ = [(name, r) for name, r in cases if r["agrees"] is False]
    silent = [name for name, r in cases if r["agrees"] is None]
    text = (f"On this device's map, {row.rule}. Read at each case's prefill cost (the verdict of the columns on "
            f"either side): {said}. Each case's own cell, simulated on its roofline, disagrees in {len(differ)} of "
            f"{len(cases) - len(silent)} cases where the rule makes a claim")
    text += (": " + "; ".join(f"{name}, {r['own map says']}" for name, r in differ) if differ else "")
    text += f" ({len(silent)} where it makes none: {and_list(silent)})." if silent else "."
    if differ:
        text += (" The rule counts the prefill in decode steps and leaves out what a chunk costs (the chunk "
                 "column): a rule read off one device carries to another only where a chunk stalls a stream about "
                 "as long on both.")
    return text
