"""The rule of thumb read off a map (:mod:`.split_map`), and applied to GPUs the map was not drawn on.

Along one row of a map (one TPOT SLO, in lone decode steps) the winner changes as the prefill grows: colocated
while a prefill costs a few decode steps (its stall of the running streams is short), the split once it costs
many. :func:`split_threshold` reads, per row, the first column from which the split wins outright (by more than
the map's tie tolerance) and the column before it: the threshold lies between their prefill costs, and is quoted
as their geometric mean. :func:`apply_rule` takes those thresholds to rows of (model, GPU, prompt length) on the
analytic roofline (:func:`splitlab.costmodel.roofline_cost_model`): each row's prefill in decode steps against the
threshold at a TPOT SLO; with ``check=True`` it also draws that one cell of the row's own map, so the rule's word
can be compared with a simulation of that GPU.
"""
from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from .defaults import TPOT_STEPS
from .map_result import SplitMap

__all__ = ["split_threshold", "apply_rule", "BOOK_ROWS"]

#: the book's GPU rows: Llama-3-8B (bf16) and Llama-3-70B (fp8: 70 GB, the only dtype whose weights fit one
#: 80 GB H100 with room for a cache; chapter 5 sizes its cache in fp8 too) on an H100 at 2k and 8k prompts
BOOK_ROWS = (("Llama-3-8B", "H100", "bf16", 2048), ("Llama-3-8B", "H100", "bf16", 8192),
             ("Llama-3-70B", "H100", "fp8", 2048), ("Llama-3-70B", "H100", "fp8", 8192))


def split_threshold(m) -> pd.DataFrame:
    """Per row of the map ``m`` (a :class:`~splitlab.planning.split_map.SplitMap`): the prefill cost in decode
    steps above which the split wins.

    Returns a DataFrame, one row per TPOT SLO (``tpot_steps``), with ``threshold_steps`` (the geometric mean of
    ``above_steps``, the last column the split does not win, and ``from_steps``, the first it wins from; NaN
    and inf: ``from_steps`` is the map's first column, so the threshold is at most that; inf: the split wins
    no column), ``from_prompt_tokens``, ``monotone`` (the split wins every column from there on) and ``rule``
    (the row in words). TypeError: ``m`` not a SplitMap."""
    if not isinstance(m, SplitMap):  # was an AttributeError on m.tpot_steps
        raise TypeError(f"m must be a SplitMap (what split_map.split_map returns), got {type(m).__name__}")
    rows = []
    for i, k in enumerate(m.tpot_steps):
        cells = sorted(m.cells[i * len(m.prompt_tokens):(i + 1) * len(m.prompt_tokens)], key=lambda c: c.prefill_steps)
        wins = [c.winner == "split" for c in cells]
        last_not = max((j for j, w in enumerate(wins) if not w), default=-1)
        first = last_not + 1 if last_not + 1 < len(cells) else next((j for j, w in enumerate(wins) if w), None)
        top = cells[-1].prefill_steps
        if first is None:
            rows.append(dict(tpot_steps=k, threshold_steps=math.inf, above_steps=top, from_steps=math.inf,
                             from_prompt_tokens=None, monotone=True,
                             rule=f"at a TPOT SLO of {k:g} decode steps the split wins nowhere up to a prefill of "
                                  f"{top:.3g} decode steps"))
            continue
        hi = cells[first].prefill_steps
        lo = cells[first - 1].prefill_steps if first > 0 else math.nan
        monotone = all(wins[first:])
        threshold = math.sqrt(lo * hi) if first > 0 else hi
        bound = (f"more than about {threshold:.2g} decode steps (between {lo:.3g} and {hi:.3g})" if first > 0 else
                 f"{hi:.3g} decode steps or more (the map's first column)")
        rule = (f"at a TPOT SLO of {k:g} decode steps the split wins once a prefill costs {bound}" if monotone else
                f"at a TPOT SLO of {k:g} decode steps the split wins {sum(wins[first:])} of the "
                f"{len(cells) - first} columns from a prefill of {hi:.3g} decode steps on, but not the longest prompt "
                f"({cells[-1].prompt_tokens} tokens, {top:.3g} decode steps: {cells[-1].winner})")
        rows.append(dict(tpot_steps=k, threshold_steps=threshold, above_steps=lo, from_steps=hi,
                         from_prompt_tokens=cells[first].prompt_tokens, monotone=monotone, rule=rule))
    return pd.DataFrame(rows)


def _row_check(cost, m, prompt: int, tpot_steps: float) -> str:
    """The winner of the one cell (prompt, TPOT SLO) of the row's own map, same cluster and settings as ``m``."""
    from .split_map import split_map
    cell = split_map(cost, m.workers, [prompt], [tpot_steps], output_tokens=m.output_tokens,
                     ttft_prefills=m.ttft_prefills, tie_tolerance=m.tie_tolerance, chunk_tokens=m.chunk_tokens,
                     max_batch=m.max_batch, seed=m.seed, progress=False).cells[0]
    return cell.winner if cell.winner != "tie" else "tie (" + ", ".join(cell.tied) + ")"


def apply_rule(m, rows: Sequence[tuple] = BOOK_ROWS, tpot_steps: float | None = None,
               check: bool = False) -> pd.DataFrame:
    """The rule of ``m`` (:func:`split_threshold`) applied to ``rows``, each (model, GPU, dtype, prompt tokens) on
    the analytic roofline (:func:`~splitlab.costmodel.roofline_cost_model`, its default efficiencies).

    Args:
        m: the map the rule is read from. tpot_steps: the TPOT SLO (lone decode steps, a row of ``m``); None:
            chapter 6's 2.5 if the map has it, else the map's tightest.
        check: also simulate each row's own cell (same cluster, answers and SLO rules as ``m``; a prompt that
            leaves no room for the answer in the context is cut to the context less the answer): column
            ``own map says``.

    Returns a DataFrame, one row per row: model, GPU, dtype, prompt tokens, prefill (ms), decode step (ms, lone,
    at that context), prefill in decode steps, one step of the map's chunk size beside a decode row in decode
    steps (what the rule leaves out: where it is near 1, chunks ride free and the colocated chunked layout holds
    the TPOT SLO that the split was for), the TPOT SLO (steps), the threshold (steps) and ``rule says``
    ("split", "colocated", "near the threshold" between the columns that bracket it, or outside the map's
    columns: below its first, or beyond its last where the split wins none).

    Raises:
        ValueError: ``tpot_steps`` not a row of ``m``; rows that are not (model, GPU, dtype, tokens) or name an
            unknown model or GPU, or weights that do not fit (from ``roofline_cost_model``).
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
        p, d, steps = cost.prefill_s(prompt), cost.decode_s(1, prompt), prefill_steps(cost, prompt)
        says = ("split" if steps >= t.from_steps else "below the map's columns" if math.isnan(t.above_steps) else
                "colocated" if steps <= t.above_steps else "beyond the map's columns" if math.isinf(t.from_steps)
                else "near the threshold")
        rec = {"model": model, "GPU": gpu, "dtype": dtype, "prompt tokens": prompt, "prefill (ms)": p * 1e3,
               "decode step (ms)": d * 1e3, "prefill (decode steps)": steps,
               f"{first}-token chunk (decode steps)": chunk_steps(cost, first, prompt) if first != TPOT else
               step_s(cost, resolve_chunks((TPOT,), cost, tpot_steps * d, prompt, m.max_batch)[1], prompt) / d,
               "TPOT SLO (steps)": tpot_steps,
               "threshold (steps)": t.threshold_steps, "rule says": says}
        if check:
            rec["own map says"] = _row_check(cost, m, min(prompt, cost.max_context - m.output_tokens), tpot_steps)
        out.append(rec)
    return pd.DataFrame(out)
