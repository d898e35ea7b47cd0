"""A chunked layout's token budget from the TPOT SLO, as Sarathi-Serve picks it (Agrawal et al., OSDI 2024): the
most tokens a hybrid step may hold such that every step stays within the SLO on time between tokens, found by
profiling there and here by the cost model. A fixed budget (256) charges a chunked layout for stalls a tight TPOT
SLO cannot afford, or wastes steps a loose one could fill: the planner and the map search the budget ``"tpot"``
beside the fixed sizes they are given, each cell (each TPOT SLO) its own. Sarathi-Serve bounds every step (its
SLO is on the P99 time between tokens); splitlab judges a request's TPOT, the mean of its gaps, which a few longer
steps need not break: so the budget is one contender beside the fixed sizes, never the only one by default. It is
sized beside one decode row: a step beside many rows of long contexts (a GPU's large batches) takes longer, and
there a fixed size may serve more."""
from __future__ import annotations

import math
import numbers

from ..costmodel import CostModel

__all__ = ["TPOT", "tpot_budget", "step_s", "resolve_chunks", "tpot_budget_words"]

#: the entry of a ``chunk_tokens`` list that stands for :func:`tpot_budget`'s budget
TPOT = "tpot"


def tpot_budget(cost: CostModel, tpot_slo_s: float, prompt_tokens: int, decode_rows: int = 1, least: int = 2,
                most: int | None = None) -> int:
    """The largest token budget ``B`` (tokens per step, decode rows included, as ``ServingConfig.chunk_tokens``)
    in ``least .. most`` whose hybrid step fits the TPOT SLO, ``step_s(cost, B, prompt_tokens, decode_rows) <=
    tpot_slo_s`` (:func:`step_s`: a prompt's dearest chunk beside the decode rows); ``least`` when no budget fits
    (:func:`tpot_budget_words` says so). Bisection (the step grows with its tokens): about ``log2(most)``
    cost-model calls.

    Args:
        cost: the cost model. tpot_slo_s: the TPOT SLO (s). prompt_tokens: the prompt's length and the decode
            rows' context (tokens).
        decode_rows: rows of the step sized for (1: a chunk beside one running stream; more rows leave the chunk
            fewer of the budget's tokens and add their attention).
        least, most: the range of budgets (most None: the cost model's ``max_context``); ``least`` must exceed
            ``decode_rows`` (a step holds every row and at least one prompt token).

    Raises:
        ValueError: a TPOT SLO that is not a finite number > 0; prompt_tokens, decode_rows, least or most not
            integers >= 1; least <= decode_rows; most < least."""
    most = cost.max_context if most is None else most
    if isinstance(tpot_slo_s, bool) or not isinstance(tpot_slo_s, numbers.Real) or not (
            math.isfinite(tpot_slo_s) and tpot_slo_s > 0):
        raise ValueError(f"tpot_slo_s must be a finite number of seconds > 0, got {tpot_slo_s!r}")
    for name, v in (("prompt_tokens", prompt_tokens), ("decode_rows", decode_rows), ("least", least),
                    ("most", most)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if least <= decode_rows:
        raise ValueError(f"least ({least}) must exceed decode_rows ({decode_rows}): a step holds every decode row "
                         f"and at least one prompt token")
    if most < least:
        raise ValueError(f"most ({most}) is below least ({least}): no budget to choose from")

    def fits(budget: int) -> bool:
        return step_s(cost, budget, prompt_tokens, decode_rows) <= tpot_slo_s  # False for NaN

    if not fits(least):
        return least
    lo, hi = least, most  # fits(lo); the answer lies in lo..hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def step_s(cost: CostModel, budget: int, prompt_tokens: int, decode_rows: int = 1) -> float:
    """Seconds of the hybrid step :func:`tpot_budget` sizes (``cost.hybrid_s``: one fused forward, or two passes
    where ``cost.hybrid_path`` says its engine cannot fuse): ``c = budget - decode_rows`` prompt tokens, the last
    ``c`` of an ``n``-token prompt (its dearest chunk, attending to all the prompt before it: ``n^2 - (n - c)^2``
    squares), or whole prompts where ``c`` exceeds one (``c x n`` squares), beside ``decode_rows`` decode rows of
    ``n`` cached tokens each (``n = prompt_tokens``)."""
    n, chunk = prompt_tokens, budget - decode_rows
    squares = n * n - (n - chunk) ** 2 if chunk <= n else chunk * n
    return cost.hybrid_s(chunk, squares, 0, decode_rows, decode_rows * n)


def resolve_chunks(chunk_tokens, cost: CostModel, tpot_slo_s: float, prompt_tokens: int,
                   max_batch: int | None) -> tuple[tuple[int, ...], int | None]:
    """``chunk_tokens`` with its :data:`TPOT` entry (if any) replaced by :func:`tpot_budget`'s budget at this SLO
    and prompt (above ``max_batch``, as every chunk size), each size once: ``(sizes, budget)``, the budget None
    where there was no such entry. The sizes keep their order; the budget takes the entry's place (dropped if a
    fixed size equals it)."""
    if TPOT not in chunk_tokens:
        return tuple(chunk_tokens), None
    budget = tpot_budget(cost, tpot_slo_s, prompt_tokens, least=(max_batch or 1) + 1,
                         most=max((max_batch or 1) + 1, cost.max_context))
    return tuple(dict.fromkeys(budget if c == TPOT else c for c in chunk_tokens)), budget


def tpot_budget_words(cost: CostModel, budget: int | None, tpot_slo_s: float, prompt_tokens: int) -> str:
    """What a search's ``"tpot"`` chunk size came to (at ``prompt_tokens``), as a clause for its batch line ('' for
    none): the largest budget whose step fits, or the smallest allowed where none does."""
    if budget is None:
        return ""
    step = step_s(cost, budget, prompt_tokens)
    if not step <= tpot_slo_s:  # NaN too
        return (f"; the 'tpot' chunk size is {budget} tokens, the smallest allowed: no budget's hybrid step fits the "
                f"TPOT SLO ({tpot_slo_s * 1e3:.3g} ms; this one takes {step * 1e3:.3g} ms)")
    return (f"; the 'tpot' chunk size is {budget} tokens, the largest budget whose hybrid step fits the TPOT SLO "
            f"({tpot_slo_s * 1e3:.3g} ms) beside one decode row, at {prompt_tokens}-token prompts")
