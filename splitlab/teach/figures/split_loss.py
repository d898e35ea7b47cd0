"""Chapter 6's words about where the split loses, computed from the map (:mod:`splitlab.planning.split_map`), the
planner's ranking and the live runs (:mod:`.split_seeds`).

- :func:`cell_note`: which cells of the map go to a colocated layout, the one where the split falls furthest
  behind and why (the SLO that holds the split back), what the chapter's TPOT row says of the shortest prompts;
  or, where the map has no colocated region, that it has none.
- :func:`takeaway`: the loss in one sentence: the planner's goodputs and the live attainment over seeds.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from .pools_live import split_pools
from .split_seeds import paired_gaps
from .split_tables import short_name

__all__ = ["cell_note", "takeaway"]

_VERDICT = {"split": "go to the split", "tie": "are a tie between the split and colocated",
            "colocated": "go to a colocated layout", "none": "meet the SLOs on no layout"}


def _colocated(cell) -> str:
    """The better colocated kind of a map cell."""
    return max(("prefill-first", "chunked"), key=lambda k: cell.goodput[k])


def _workers(n: int, what: str) -> str:
    return f"{n} {what} worker{'' if n == 1 else 's'}"


def _why(cell, workers: int) -> str:
    """Why the split falls behind in ``cell``: the SLO that binds it, in words."""
    x, y = split_pools(cell.names["split"]) or (0, 0)
    kind, binds = _colocated(cell), cell.binding["split"]
    if binds == "ttft":
        return (f"The split is held back there by its TTFT SLO: its {_workers(x, 'prefill')} "
                f"take{'s' if x == 1 else ''} every prompt, "
                f"where all {workers} colocated workers prefill, and a TPOT SLO of {cell.tpot_steps:g} decode steps "
                f"lets a colocated stream sit out the prefills ({short_name(cell.names[kind])} is held back by its "
                f"{cell.binding[kind].upper()} SLO).")
    if binds == "tpot":
        return (f"The split is held back there by its TPOT SLO: its {_workers(y, 'decode')} "
                f"carr{'ies' if y == 1 else 'y'} every stream, "
                f"where all {workers} colocated workers decode.")
    return f"The split is held back there by its {binds.upper()} SLO."


def _shortest(m, tpot_steps: float) -> str:
    """What the row ``tpot_steps`` of the map says of its shortest prompt ("" if the map has no such row)."""
    row = [c for c in m.cells if c.tpot_steps == tpot_steps]
    if not row:
        return ""
    c = min(row, key=lambda c: c.prompt_tokens)
    where = f"({c.prompt_tokens} tokens, {c.prefill_steps:.3g} decode steps a prefill)"
    if c.verdict == "colocated":
        return (f"At this chapter's TPOT SLO of {tpot_steps:g} decode steps the shortest prompts {where} already "
                f"{_VERDICT[c.verdict]}.")
    return (f"At this chapter's TPOT SLO of {tpot_steps:g} decode steps even the shortest prompts {where} "
            f"{_VERDICT[c.verdict]}: a cheap prefill alone does not make the split lose here.")


def cell_note(m, cell, lost: Sequence, workload: str, workload_steps: float, tpot_steps: float = 2.5) -> str:
    """The map's answer to "where does the split lose?" in a paragraph: ``lost`` (the cells of the map ``m`` a
    colocated layout wins), ``cell`` (the one where the split falls furthest behind; with no ``lost``, the one
    where it comes nearest to losing), why, what the row ``tpot_steps`` says of the shortest prompts, and which
    ``workload`` (its prefill costing ``workload_steps`` decode steps) the page serves next."""
    kind = _colocated(cell)
    gc, gs = cell.goodput[kind], cell.goodput["split"]
    where = (f"{cell.prompt_tokens}-token prompts ({cell.prefill_steps:.3g} decode steps a prefill) with a TPOT SLO "
             f"of {cell.tpot_steps:g} decode steps")
    rival = short_name(cell.names[kind])
    if lost:
        cells = ", ".join(f"{c.prompt_tokens} tokens at {c.tpot_steps:g} steps" for c in lost)
        head = (f"**Where the map puts the loss.** {len(lost)} of the map's {len(m.cells)} cells "
                f"{'goes' if len(lost) == 1 else 'go'} to a colocated layout by more than the tie tolerance "
                f"({m.tie_tolerance:.0%}): {cells}. The split falls furthest behind at {where}: {rival} serves "
                f"{gc:.3g} requests/s per worker, the best split, {cell.names['split']}, {gs:.3g}, "
                f"{1 - gs / gc:.0%} less. {_why(cell, m.workers)}")
        tail = (f"The `{workload}` prompts ({workload_steps:.3g} decode steps a prefill) lie nearest that column: "
                f"below, the planner ranks every layout for them at that TPOT SLO, and the real model serves them.")
    else:
        head = (f"**No loss on this map.** None of its {len(m.cells)} cells goes to a colocated layout by more than "
                f"the tie tolerance ({m.tie_tolerance:.0%}): on this calibration the split wins or ties everywhere, "
                f"so this page shows no loss. The split comes nearest to losing at {where}: {rival} serves "
                f"{gc:.3g} requests/s per worker against {gs:.3g} for {cell.names['split']}.")
        tail = (f"Below, the planner ranks the `{workload}` prompts ({workload_steps:.3g} decode steps a prefill, "
                f"nearest that column) at that TPOT SLO, and the real model serves them: a near thing, not a loss "
                f"the map predicts.")
    return " ".join(s for s in (head, _shortest(m, tpot_steps), tail) if s)


def takeaway(lost: Sequence, cell, workload: str, workload_steps: float, split, colocated,
             attainment: pd.DataFrame) -> str:
    """The loss in one sentence: the planner's goodput of its best ``colocated`` layout and of ``split`` (plan
    candidates) for ``workload`` at the TPOT SLO of the map's ``cell``, and each one's live SLO attainment
    (``attainment``: % per seed, columns their names), with whether the seeds agree.

    Raises:
        KeyError: ``split.name`` or ``colocated.name`` not a column of ``attainment``; those of
            :func:`.split_seeds.paired_gaps` (no seeds, a NaN seed)."""
    for arg, c in (("split", split), ("colocated", colocated)):
        if c.name not in attainment:
            raise KeyError(f"{arg}.name={c.name!r} is not a column of attainment; its columns: {list(attainment)}")
    gc, gs = colocated.goodput_rps_per_worker, split.goodput_rps_per_worker
    planned = (f"{short_name(colocated.name)} served {gc:.3g} requests/s per worker, "
               f"{'ahead of' if gc > gs else 'behind'} {gs:.3g} for {split.name}")
    g = paired_gaps(attainment, split.name, colocated.name)
    seeds = ("the colocated layout ahead in every seed" if g["decisive"] and g["leader"] == colocated.name else
             "the split ahead in every seed" if g["decisive"] else
             "one seed: no spread to judge its gap against" if g["seeds"] < 2 else "a gap within the runs' own spread")
    live = (f"live, {attainment[colocated.name].mean():.0f}% of the colocated requests met both SLOs on average "
            f"against {attainment[split.name].mean():.0f}% on the split ({seeds})")
    prompts = f"`{workload}` prompts of {workload_steps:.3g} decode steps"
    if not lost:
        return (f"The map has no colocated region on this device: where the split came nearest to losing (a TPOT "
                f"SLO of {cell.tpot_steps:g} decode steps, {prompts}), {planned}; {live}.")
    if gc > gs:
        return (f"With a TPOT SLO of {cell.tpot_steps:g} decode steps, in the map's colocated region, {prompts} "
                f"turn the order: {planned}; {live}.")
    return (f"In the map's colocated region (a TPOT SLO of {cell.tpot_steps:g} decode steps) the planner did not "
            f"rank colocated first for {prompts}: {planned}; {live}.")
