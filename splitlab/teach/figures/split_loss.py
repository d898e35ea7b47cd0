"""Chapter 6's words about where the split loses, computed from the map (:mod:`splitlab.planning.split_map`), the
planner's ranking and the live runs (:mod:`.split_seeds`): where the map puts the loss and why (:func:`cell_note`),
whether it is the coarse ratios of a few workers (:func:`granularity_note`), the loss in one sentence
(:func:`takeaway`), the live runs against the planner (:func:`live_note`) and the exercise's answer under a loose
TPOT SLO (:func:`loose_note`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ...serving.metrics import slo_misses
from .map_steady_slo import stall_of
from .pools_live import split_pools
from .pools_live_args import whole
from .split_seeds import paired_gaps, paired_verdict
from .style import fmt3, pct2
from .split_granularity import _ahead, _colocated, _finer, _margin, granularity_note
from .split_tables import short_name

__all__ = ["cell_note", "granularity_note", "takeaway", "live_note", "loose_note"]  # granularity_note: re-exported

_VERDICT = {"split": "go to the split", "tie": "are a tie between the split and colocated",
            "colocated": "go to a colocated layout", "none": "meet the SLOs on no layout"}


def _workers(n: int, what: str) -> str:
    return f"{n} {what} worker{'' if n == 1 else 's'}"


def _why(cell, workers: int) -> str:
    """Why the split falls behind in ``cell``: the SLO that binds it, in words."""
    x, y = split_pools(cell.names["split"]) or (0, 0)
    kind, binds = _colocated(cell), cell.binding["split"]
    if binds == "ttft":
        return (f"The split is held back there by its TTFT SLO: a request's first token waits for its prefill pool "
                f"({_workers(x, 'prefill')}), its cache's transfer and a slot in its decode pool "
                f"({_workers(y, 'decode')}; either pool can be the one that queues), where all {workers} colocated "
                f"workers prefill, and a TPOT SLO of {cell.tpot_steps:g} decode steps lets a colocated stream sit out "
                f"the prefills ({short_name(cell.names[kind])} is held back by its {cell.binding[kind].upper()} SLO).")
    if binds == "tpot":
        return (f"The split is held back there by its TPOT SLO: its {_workers(y, 'decode')} "
                f"carr{'ies' if y == 1 else 'y'} every stream, "
                f"where all {workers} colocated workers decode.")
    return f"The split is held back there by its {binds.upper()} SLO."


def _on_mean(cell, kind: str) -> str:
    """Where the colocated ``kind`` of the map ``cell`` stalls its streams for longer than the TPOT SLO (a whole
    prefill: prefill-first, or chunked with the prompt in one chunk, :func:`.map_steady_slo.stall_of`): its lead
    holds under a TPOT SLO judged on each request's mean; "" otherwise."""
    stall = stall_of(kind, cell.names.get(kind, ""), cell.prompt_tokens, cell.prefill_steps)
    if stall is None or not stall > cell.tpot_steps:
        return ""
    return (f" That lead holds under a TPOT SLO judged on each request's mean: each prefill stalls the "
            f"{short_name(cell.names[kind])} streams beside it for {cell.prefill_steps:.3g} decode steps or more, past "
            f"the {cell.tpot_steps:g}-step SLO, which a bound on each inter-token gap would count.")


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
                f"({pct2(m.tie_tolerance)}): {cells}. The split falls furthest behind at {where}: {rival} serves "
                f"{gc:.4g} requests/s per worker, the best split, {cell.names['split']}, {gs:.4g}, "
                f"{1 - gs / gc:.0%} less" + (f" ({rival} serves {gc / gs - 1:.0%} more). " if gs > 0 else ". ")
                + _why(cell, m.workers) + _on_mean(cell, kind))
        tail = (f"Of this chapter's workloads, the `{workload}` prompts ({workload_steps:.3g} decode steps a prefill) "
                f"lie nearest that column's {cell.prefill_steps:.3g}: below, the planner ranks every layout for them "
                f"at that TPOT SLO, and the real model serves them.")
    else:
        head = (f"**No loss on this map.** None of its {len(m.cells)} cells goes to a colocated layout by more than "
                f"the tie tolerance ({pct2(m.tie_tolerance)}): on this calibration the split wins or ties everywhere, "
                f"so this page shows no loss. The split comes nearest to losing at {where}: {rival} serves "
                f"{gc:.3g} requests/s per worker against {gs:.3g} for {cell.names['split']}.")
        tail = (f"Below, the planner ranks the `{workload}` prompts ({workload_steps:.3g} decode steps a prefill, "
                f"of this chapter's workloads the nearest that column's {cell.prefill_steps:.3g}) at that TPOT SLO, "
                f"and the real model serves them: a near thing, not a loss the map predicts.")
    return " ".join(s for s in (head, _shortest(m, tpot_steps), tail) if s)


def takeaway(lost: Sequence, cell, workload: str, workload_steps: float, split, colocated,
             attainment: pd.DataFrame, tie_tolerance: float | None = None, big=None,
             big_lifetimes: float | None = None) -> str:
    """The loss in one sentence: the planner's goodput of its best ``colocated`` layout and of ``split`` (plan
    candidates) for ``workload`` at the TPOT SLO of the map's ``cell``, and each one's live SLO attainment
    (``attainment``: % per seed, columns their names), with whether the seeds agree; a planner's lead within
    ``tie_tolerance`` (the map's, a share) is said to be a tie by the map's rule. With ``big`` (the same cell on a
    map of more workers, as :func:`granularity_note` reads it) and a loss, a second sentence says what the finer
    ratios there make of it (with :func:`granularity_note`'s caveat where ``big_lifetimes`` is below 20).

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
    lead = sorted((-g["ci_high"], -g["ci_low"]) if g["leader"] == colocated.name else (g["ci_low"], g["ci_high"]))
    ci = f"95% interval over {g['seeds']} seeds"
    seeds = (f"the colocated layout ahead by {lead[0]:.0f} to {lead[1]:.0f} points, its {ci}" if g["decisive"] and
             g["leader"] == colocated.name else
             f"the split ahead by {lead[0]:.0f} to {lead[1]:.0f} points, its {ci}" if g["decisive"] else
             "one seed: no spread to judge its gap against" if g["seeds"] < 2 else
             f"a gap within the runs' own spread: its {ci}, {g['ci_low']:+.0f} to {g['ci_high']:+.0f} points for the "
             f"split, holds zero")
    live = (f"live, {attainment[colocated.name].mean():.0f}% of the colocated requests met both SLOs on average "
            f"against {attainment[split.name].mean():.0f}% on the split ({seeds})")
    prompts = f"`{workload}` prompts of {workload_steps:.3g} decode steps"
    if not lost:
        return (f"The map has no colocated region on this device: where the split came nearest to losing (a TPOT "
                f"SLO of {cell.tpot_steps:g} decode steps, {prompts}), {planned}; {live}.")
    margin = _margin(gc, gs)
    finer = "" if big is None else " " + _finer(cell, big, big_lifetimes, tie_tolerance)
    if gc > gs and tie_tolerance is not None and margin <= tie_tolerance:
        return (f"With a TPOT SLO of {cell.tpot_steps:g} decode steps, the row of the map's furthest colocated win, "
                f"the planner puts {prompts} at a tie: {planned}, {_ahead(gc, gs)}, within the map's "
                f"{pct2(tie_tolerance)} tie tolerance; {live}.{finer}")
    if gc > gs:
        return (f"With a TPOT SLO of {cell.tpot_steps:g} decode steps, the row of the map's furthest colocated win, "
                f"{prompts} turn the order: {planned} (the split {pct2(margin)} less); {live}.{finer}")
    return (f"In the row of the map's furthest colocated win (a TPOT SLO of {cell.tpot_steps:g} decode steps) the "
            f"planner did not rank colocated first for {prompts}: {planned}; {live}.{finer}")


def live_note(runs, split, colocated, planner_first: str, ttft_slo_s: float, tpot_slo_s: float,
              n_requests: int, tie_tolerance: float | None = None, map_cell=None,
              map_answer_tokens: int | None = None) -> str:
    """The live runs of the loss in a paragraph: the paired verdict over seeds (:func:`.split_seeds.paired_verdict`)
    against the planner's ranking (``planner_first``: the name it ranked first), how busy the split's prefill and
    decode pools and the colocated workers were in the first seed, and each layout's misses by SLO
    (:func:`splitlab.serving.metrics.slo_misses`). ``runs``: :func:`.split_seeds.paired_runs` of ``split`` and
    ``colocated`` (plan candidates); SLOs in seconds. A ranking within ``tie_tolerance`` (the map's, a share) is
    said to be a tie by the map's rule. ``map_cell``: the map's cell of the loss (its ``Cell``), whose requests
    answer ``map_answer_tokens`` each (its map's ``output_tokens``): where TPOT bound the split there and the runs'
    misses are TTFT, the two are set side by side.

    Raises:
        KeyError: a candidate's name not among the runs' layouts. ValueError: ``map_cell`` without
            ``map_answer_tokens`` or the reverse, either not as described."""
    binding = getattr(map_cell, "binding", None)
    given = whole(map_answer_tokens) and map_answer_tokens >= 1 and isinstance(binding, dict) and "split" in binding
    if (map_cell is None) != (map_answer_tokens is None) or map_cell is not None and not given:
        raise ValueError(f"live_note: map_cell (a map Cell, its binding holding 'split') and map_answer_tokens (a "
                         f"whole number >= 1) go together, got {map_cell!r:.80} and {map_answer_tokens!r}")
    sp, co = split.name, colocated.name
    g = paired_gaps(runs.attainment, sp, co)
    busy = {n: r.worker_table()["utilization"] for n, r in runs.first.results.items()}
    missed = {n: slo_misses(r.requests, ttft_slo_s, tpot_slo_s) for n, r in runs.first.results.items()}
    pool = {k: np.mean([u for w, u in busy[sp].items() if w.startswith(k) and "->" not in w]) for k in "PD"}
    agree = g["decisive"] and (g["leader"] == co) == (colocated.goodput_rps_per_worker > split.goodput_rps_per_worker)
    judged = ("The live verdict agrees with" if agree else "These runs do not confirm" if not g["decisive"] else
              "The live verdict goes against")
    ms, mc = missed[sp], missed[co]
    gs, gc = split.goodput_rps_per_worker, colocated.goodput_rps_per_worker
    margin = _margin(gs, gc)
    tie = (f", {_ahead(gs, gc)}: within the map's {pct2(tie_tolerance)} tie tolerance, a tie by its rule"
           if tie_tolerance is not None and margin <= tie_tolerance else "")
    text = (f"{paired_verdict(runs.attainment, sp, co, n_requests)} {judged} the planner's ranking "
            f"({short_name(planner_first)} first{tie}). In the first seed the split's prefill "
            f"{'worker was' if split.prefill_workers == 1 else 'workers were'} busy {pool['P']:.0%} of the time on "
            f"average, its decode {'worker' if split.decode_workers == 1 else 'workers'} {pool['D']:.0%}: the "
            f"{'decode' if pool['D'] > pool['P'] else 'prefill'} pool was the busier, while the colocated workers "
            f"were busy {', '.join(f'{u:.0%}' for w, u in busy[co].items() if '->' not in w)}, every one doing both "
            f"kinds of work. The first seed's misses: {ms['ttft']} TTFT, {ms['ttst']} TTST and {ms['tpot']} TPOT on "
            f"the split, {mc['ttft']}, {mc['ttst']} and {mc['tpot']} colocated.")
    if ms["ttft"] > ms["ttst"] + ms["tpot"]:
        text += (" Most of the split's misses are TTFT: a prompt first queues at its prefill workers, and its first "
                 "token leaves from a decode worker when that worker admits the request, so a busy decode pool "
                 "delays it too.")
        if map_cell is not None and map_cell.binding["split"] == "tpot":
            answers = [r.max_new_tokens for r in runs.first.results[sp].requests]
            text += (f" The map's cell above found TPOT binding the split instead: its requests each answer "
                     f"{map_answer_tokens} tokens, these {fmt3(sum(answers) / len(answers))} on average, and a "
                     f"shorter answer frees its decode slot sooner.")
    return text


def loose_note(loose, workload: str, workload_steps: float, loose_steps: float, loss: str, loss_steps: float,
               loss_tpot_steps: float, colocated, split) -> str:
    """The answer to chapter 6's exercise on a loose TPOT SLO: in the plan ``loose`` (``workload``'s prompts of
    ``workload_steps`` decode steps, a TPOT SLO of ``loose_steps`` decode steps) who serves more per worker, the
    best split or the best colocated layout (a tie within the search's tolerance), each with its binding SLO, and
    the loss above for comparison (``loss``'s prompts of ``loss_steps`` decode steps at ``loss_tpot_steps``;
    ``colocated`` and ``split``: its plan's candidates)."""
    ls, lc = loose.best_of("disaggregated"), loose.best_of("colocated")
    gap, tol = lc.goodput_rps_per_worker / ls.goodput_rps_per_worker - 1, loose.best.result.tolerance
    ahead = 1 / (1 + gap)  # the split's goodput over colocated's
    lead = (f"the two tie (within the searches' {tol:.0%})" if abs(gap) <= tol else f"colocated serves {gap:.0%} more"
            if gap > 0 else f"the split still serves {ahead - 1:.0%} more" if ahead < 2 else
            f"the split still serves {fmt3(ahead)}x as much")
    moral = ("Loosening the TPOT SLO takes away what the split removes, the stalls; vLLM's documentation says the "
             "same: the split does not raise throughput, it lets TTFT and ITL be tuned separately." if gap > tol else
             "A loose TPOT SLO is not enough on its own here: each layout's binding SLO (in brackets) says what "
             "holds it back.")
    return (f"With room for {loose_steps:.0f} decode steps of stall, a colocated stream can sit out the prefills of "
            f"its worker. On `{workload}` prompts ({workload_steps:.3g} decode steps a prefill), in your run {lead}: "
            f"{short_name(lc.name)}: {fmt3(lc.goodput_rps_per_worker)} requests/s per worker "
            f"({lc.binding_slo.upper()} binds), {ls.name}: {fmt3(ls.goodput_rps_per_worker)} "
            f"({ls.binding_slo.upper()} binds). Above, on `{loss}` prompts ({loss_steps:.3g} decode steps) with a TPOT "
            f"SLO of {loss_tpot_steps:g} decode steps, the planner had {short_name(colocated.name)} at "
            f"{colocated.goodput_rps_per_worker:.3g} and {split.name} at {split.goodput_rps_per_worker:.3g}. {moral} "
            "`loose.table()` has every layout.")
