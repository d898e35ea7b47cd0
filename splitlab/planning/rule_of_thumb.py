"""The rule of thumb read off a map (:mod:`.split_map`), and applied to GPUs the map was not drawn on.

Along one row of a map (one TPOT SLO, in lone decode steps) each column (a prefill cost in decode steps) has a
verdict: the split wins it (by more than the map's tie tolerance), loses it to a colocated layout, ties, or no
layout meets the SLOs. :func:`split_threshold` reads each row as it is, run by run ("the split loses at 1.8
decode steps and wins from 5.02 on"), and names a threshold only where the row has one: losses or ties, then only
wins. The threshold then lies between the two columns that bracket it, quoted as that bracket (the map has no
column in between, so no point inside it is measured). A row that wins, ties and wins again has no threshold, and
says so. :func:`apply_rule` takes a row to (model, GPU, prompt length) cases on the analytic roofline
(:func:`splitlab.costmodel.roofline_cost_model`): each case's prefill in decode steps read against the row's
columns, the verdict of the columns on either side of it; with ``check=True`` it also draws that one cell of the
case's own map, so the rule's word can be compared with a simulation of that GPU.
"""
from __future__ import annotations

import math
import numbers
from typing import Sequence

import pandas as pd

from .defaults import TPOT_STEPS
from .map_result import SplitMap

__all__ = ["split_threshold", "reading", "apply_rule", "order_words", "agrees", "BOOK_ROWS"]

#: the book's GPU rows: Llama-3-8B (bf16) and Llama-3-70B (fp8: 70 GB, the only dtype whose weights fit one
#: 80 GB H100 with room for a cache; chapter 5 sizes its cache in fp8 too) on an H100 at 2k and 8k prompts
BOOK_ROWS = (("Llama-3-8B", "H100", "bf16", 2048), ("Llama-3-8B", "H100", "bf16", 8192),
             ("Llama-3-70B", "H100", "fp8", 2048), ("Llama-3-70B", "H100", "fp8", 8192))

#: how far past an end column of the map (a share of its prefill cost) a case still reads as that column: the
#: columns are spaced geometrically, a few times apart, so 5% is a rounding of the axis, not an extrapolation
EDGE = 0.05

#: a column's verdict (:attr:`~.map_result.Cell.verdict`) as the split's verb in a row's words
VERBS = {"split": "wins", "colocated": "loses", "tie": "ties", "none": "meets the SLOs nowhere (nor does any layout)"}


def _steps(values: list[float]) -> str:
    """'at 1.8', 'at 1.8 and 5.02', 'from 1.8 to 38.7' (a run of three columns or more: its ends)."""
    text = [f"{v:.3g}" for v in values]
    return (f"at {text[0]}" if len(text) == 1 else f"at {text[0]} and {text[1]}" if len(text) == 2 else
            f"from {text[0]} to {text[-1]}")


def _runs(verdicts: list[str], steps: list[float]) -> list[tuple[str, list[float]]]:
    """Consecutive columns of one verdict: [(verdict, their prefill costs), ...] in column order."""
    runs: list[tuple[str, list[float]]] = []
    for v, s in zip(verdicts, steps):
        if runs and runs[-1][0] == v:
            runs[-1][1].append(s)
        else:
            runs.append((v, [s]))
    return runs


def _read_row(k: float, cells: list) -> dict:
    """One row of the map (cells in column order) read as :func:`split_threshold` documents."""
    verdicts, steps = [c.verdict for c in cells], [c.prefill_steps for c in cells]
    runs = _runs(verdicts, steps)
    # a threshold: losses and ties below it (in that order), only wins from it on
    order = {"colocated": 0, "tie": 1, "split": 2}
    monotone = all(v in order for v in verdicts) and all(order[a] <= order[b] for a, b in zip(verdicts, verdicts[1:]))
    wins = sum(v == "split" for v in verdicts)
    first_win = verdicts.index("split") if wins else None
    threshold = monotone and wins > 0 and first_win > 0
    parts = [f"{VERBS[v]} {_steps(s)}" for v, s in runs]
    said = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    head = f"at a TPOT SLO of {k:g} decode steps the split "
    if len(runs) == 1:
        v = runs[0][0]
        rule = head + f"{VERBS[v]} at every prefill of the map, {_steps(steps).split(' ', 1)[1]} decode steps"
    elif threshold:
        lo, hi = steps[first_win - 1], steps[first_win]
        rule = (head + f"{said} decode steps of prefill: its threshold lies between {lo:.3g} and {hi:.3g} decode "
                       f"steps, where the map has no column")
    elif monotone:  # losses, then ties: no win
        rule = head + f"{said} decode steps of prefill: it wins no column"
    else:
        rule = head + f"{said} decode steps of prefill: no single threshold"  # it wins on both sides
    return dict(tpot_steps=k, verdicts=tuple(verdicts), prefill_steps=tuple(steps), wins=wins, monotone=monotone,
                threshold=threshold,
                below_steps=steps[first_win - 1] if threshold else math.nan,
                from_steps=steps[first_win] if monotone and wins else math.nan,
                from_prompt_tokens=cells[first_win].prompt_tokens if monotone and wins else None, rule=rule)


def split_threshold(m) -> pd.DataFrame:
    """Per row of the map ``m`` (a :class:`~splitlab.planning.split_map.SplitMap`): where the split wins, loses
    and ties, and its threshold where the row has one.

    Returns a DataFrame, one row per TPOT SLO (``tpot_steps``, in the map's order), with ``verdicts`` and
    ``prefill_steps`` (each column's :attr:`~.map_result.Cell.verdict`, "split", "colocated", "tie" or "none",
    and its prefill cost in lone decode steps, cheapest first), ``wins`` (columns the split wins), ``monotone``
    (losses, then ties, then wins, in that order as the prefill grows, any of them absent), ``threshold`` (monotone
    with a win and a column before it that is not one), ``below_steps`` and ``from_steps`` (the columns that
    bracket the threshold: the last the split does not win and the first it wins; ``from_steps`` also where a
    monotone row wins every column, then the map's first; NaN where not defined), ``from_prompt_tokens`` (the
    prompt of ``from_steps``) and ``rule`` (the row in words: each run of one verdict with its prefill costs).
    TypeError: ``m`` not a SplitMap."""
    if not isinstance(m, SplitMap):  # was an AttributeError on m.tpot_steps
        raise TypeError(f"m must be a SplitMap (what split_map.split_map returns), got {type(m).__name__}")
    n = len(m.prompt_tokens)
    return pd.DataFrame([_read_row(k, sorted(m.cells[i * n:(i + 1) * n], key=lambda c: c.prefill_steps))
                         for i, k in enumerate(m.tpot_steps)])


def order_words(table: pd.DataFrame) -> str:
    """How the rows of :func:`split_threshold`'s ``table`` compare, tight TPOT SLO to loose, as a sentence: the
    columns the split wins in each, and whether a tighter SLO gives it more ("the tighter the TPOT SLO, the more
    columns the split wins"), more or as many, or not always. ValueError: an empty table. TypeError: not a DataFrame."""
    if not isinstance(table, pd.DataFrame):  # was an AttributeError on table.empty
        raise TypeError(f"table must be a DataFrame (split_threshold's rows of a map), got {type(table).__name__}")
    if table.empty:
        raise ValueError("table is empty: give split_threshold's rows of a map")
    rows = table.sort_values("tpot_steps")
    n, counts = len(rows.verdicts.iloc[0]), list(rows.wins)
    text = f"The split wins {counts[0]} of the {n} columns at a TPOT SLO of {rows.tpot_steps.iloc[0]:g} decode steps"
    if len(counts) == 1:
        return text + "."
    text += ", " + ", ".join(f"{w} at {k:g}" for k, w in zip(rows.tpot_steps[1:], counts[1:]))
    if all(a > b for a, b in zip(counts, counts[1:])):
        return text + ": the tighter the TPOT SLO, the more columns the split wins."
    if all(a >= b for a, b in zip(counts, counts[1:])):
        return text + ": the tighter the TPOT SLO, the more columns the split wins, or as many."
    return text + ": a tighter TPOT SLO does not always give the split more columns here."


def reading(row, steps: float) -> str:
    """What one row of :func:`split_threshold` says at a prefill of ``steps`` decode steps: a verdict ("split",
    "colocated", "tie", "none") where the columns on either side agree or ``steps`` is a column, "A or B" where they
    differ, "near the threshold" between the columns that bracket the row's threshold, and "below the map's
    columns" / "beyond the map's columns" outside them (unless the row's verdict there is monotone); within
    :data:`EDGE` of a column (relative), inside the map or outside an end, reads as that column (chapter 7's
    Llama-3-8B at 8k, 39.3 steps, was "beyond" a last column of 38.6; chapter 6's research prompts, 10.7 steps, were
    "near the threshold" beside a column of 10.8 the split wins by a third). ValueError: ``steps`` not a finite
    number > 0."""
    if isinstance(steps, bool) or not isinstance(steps, numbers.Real) or not (math.isfinite(steps) and steps > 0):
        raise ValueError(f"steps must be a finite number > 0 (a prefill cost in decode steps), got {steps!r}")
    cols, verdicts = row.prefill_steps, row.verdicts
    if cols[-1] < steps <= cols[-1] * (1 + EDGE):
        return verdicts[-1]
    if cols[0] * (1 - EDGE) <= steps < cols[0]:
        return verdicts[0]
    if steps < cols[0]:
        return "colocated" if row.monotone and verdicts[0] == "colocated" else "below the map's columns"
    if steps > cols[-1]:
        return "split" if row.monotone and verdicts[-1] == "split" else "beyond the map's columns"
    if steps in cols:
        return verdicts[cols.index(steps)]
    nearest = min(range(len(cols)), key=lambda i: abs(steps / cols[i] - 1))
    if abs(steps / cols[nearest] - 1) <= EDGE:  # within EDGE of a column inside the map too: that column's verdict
        return verdicts[nearest]
    j = max(i for i, c in enumerate(cols) if c < steps)
    a, b = verdicts[j], verdicts[j + 1]
    if a == b:
        return a
    return "near the threshold" if row.threshold and cols[j + 1] == row.from_steps else f"{a} or {b}"


def agrees(rule_says: str, own_says: str) -> bool | None:
    """Whether the rule's word on a case (:func:`apply_rule`'s ``rule says``) matches the winner of the case's own
    cell (``own map says``: a kind, "tie (...)" or "none"): True or False where the rule names a verdict or two,
    None where it makes no claim (near the threshold, or outside the map's columns). TypeError: a word not a str."""
    for name, v in (("rule_says", rule_says), ("own_says", own_says)):
        if not isinstance(v, str):  # was an AttributeError on None.startswith
            raise TypeError(f"{name} must be a str (apply_rule's 'rule says' or 'own map says'), got {v!r}")
    own = ("colocated" if own_says in ("prefill-first", "chunked") else "tie" if own_says.startswith("tie") else
           own_says)
    said = rule_says.split(" or ")
    if rule_says == "near the threshold" or not set(said) <= set(VERBS):
        return None
    return own in said


def _row_check(cost, m, prompt: int, tpot_steps: float) -> tuple[str, str]:
    """The winner of the one cell (prompt, TPOT SLO) of the row's own map, same cluster and settings as ``m``, and
    the layouts that finished no request there ("split, prefill-first": their goodput 0, their binding SLO
    "unfinished"; "" when none)."""
    from .split_map import split_map
    cell = split_map(cost, m.workers, [prompt], [tpot_steps], output_tokens=m.output_tokens,
                     ttft_prefills=m.ttft_prefills, tie_tolerance=m.tie_tolerance, chunk_tokens=m.chunk_tokens,
                     max_batch=m.max_batch, seed=m.seed, progress=False).cells[0]
    none = [k for k, g in cell.goodput.items() if g == 0 and cell.binding.get(k) == "unfinished"]
    return (cell.winner if cell.winner != "tie" else "tie (" + ", ".join(cell.tied) + ")"), ", ".join(none)


def apply_rule(m, rows: Sequence[tuple] = BOOK_ROWS, tpot_steps: float | None = None,
               check: bool = False) -> pd.DataFrame:
    """A row of the map ``m`` (:func:`split_threshold`) applied to ``rows``, each (model, GPU, dtype, prompt
    tokens) on the analytic roofline (:func:`~splitlab.costmodel.roofline_cost_model`, its default efficiencies).

    Args:
        m: the map the rule is read from. tpot_steps: the TPOT SLO (lone decode steps, a row of ``m``); None:
            chapter 6's 2.5 if the map has it, else the map's tightest.
        check: also simulate each row's own cell (same cluster, answers and SLO rules as ``m``; a prompt that
            leaves no room for the answer in the context is cut to the context less the answer): columns
            ``own map says``, ``unfinished`` (the layouts that finished no request there, as "split, prefill-first":
            a verdict beside them says which layout fits such a request, not which serves it better) and
            ``agrees`` (:func:`agrees`: True, False, or None where the rule makes no claim).

    Returns a DataFrame, one row per row: model, GPU, dtype, prompt tokens, prefill (ms), decode step (ms, lone,
    at that context), prefill in decode steps, one step of the map's chunk size beside a decode row in decode
    steps (what the rule leaves out: where it is near 1, chunks ride free and the colocated chunked layout holds
    the TPOT SLO that the split was for), the TPOT SLO (steps), ``threshold from (steps)`` and ``threshold to
    (steps)`` (the columns that bracket the row's threshold, NaN where it has none) and ``rule says``: the
    verdict of the map's columns on either side of the prefill ("split", "colocated", "tie", "none"), both where
    they differ ("tie or split"; "near the threshold" between the two that bracket a threshold), and outside the
    map's columns "below the map's columns" or "beyond the map's columns", except past an end of a monotone row
    that the split loses (below) or wins (beyond): "colocated" or "split" there.

    Raises:
        ValueError: ``tpot_steps`` not a row of ``m``; rows that are not (model, GPU, dtype, tokens) or name an
            unknown model or GPU, or weights that do not fit (from ``roofline_cost_model``); prompt tokens not an
            integer in 1 .. the model's context.
    """
    from ..costmodel import roofline_cost_model
    from .chunk_budget import TPOT, resolve_chunks, step_s
    from .split_map import chunk_steps, prefill_steps
    table = split_threshold(m).set_index("tpot_steps")
    first = m.chunk_tokens[0]
    if tpot_steps is None:
        tpot_steps = TPOT_STEPS if TPOT_STEPS in m.tpot_steps else m.tpot_steps[0]
    if tpot_steps not in m.tpot_steps:
        raise ValueError(f"tpot_steps {tpot_steps!r} is not a row of the map ({m.tpot_steps})")
    t = table.loc[tpot_steps]
    out = []
    for row in rows:
        if not (isinstance(row, (tuple, list)) and len(row) == 4):
            raise ValueError(f"each row must be (model, GPU, dtype, prompt tokens), got {row!r}")
        model, gpu, dtype, prompt = row
        cost = roofline_cost_model(model, gpu, dtype)
        if isinstance(prompt, bool) or not isinstance(prompt, numbers.Integral) or not 1 <= prompt <= cost.max_context:
            raise ValueError(f"prompt tokens must be an integer in 1 .. {cost.max_context} ({model}'s context), got "
                             f"{prompt!r} in {row!r}")  # 0, True, 2048.5 and 10**7 were read as prefill costs
        p, d, steps = cost.prefill_s(prompt), cost.decode_s(1, prompt), prefill_steps(cost, prompt)
        rec = {"model": model, "GPU": gpu, "dtype": dtype, "prompt tokens": prompt, "prefill (ms)": p * 1e3,
               "decode step (ms)": d * 1e3, "prefill (decode steps)": steps,
               f"{first}-token chunk (decode steps)": chunk_steps(cost, first, prompt) if first != TPOT else
               step_s(cost, resolve_chunks((TPOT,), cost, tpot_steps * d, prompt, m.max_batch)[1], prompt) / d,
               "TPOT SLO (steps)": tpot_steps, "threshold from (steps)": t.below_steps,
               "threshold to (steps)": t.from_steps if t.threshold else math.nan, "rule says": reading(t, steps)}
        if check:
            rec["own map says"], rec["unfinished"] = _row_check(cost, m, min(prompt, cost.max_context
                                                                             - m.output_tokens), tpot_steps)
            rec["agrees"] = agrees(rec["rule says"], rec["own map says"])
        out.append(rec)
    return pd.DataFrame(out)
