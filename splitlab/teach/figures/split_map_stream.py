"""What one more stream costs a colocated chunked worker against a decode worker (:func:`fused_row_s`,
:func:`fused_row_words`): a decode row in a fused hybrid step beside a chunk, against the same row in a decode step;
the rule of thumb's third number (chapter 7)."""
from __future__ import annotations

import numbers

from .style import fmt2

__all__ = ["fused_row_s", "fused_row_words"]


def fused_row_s(cost, context_tokens: int, batch: int = 8, chunk_tokens: int = 256) -> tuple:
    """(s one more decode row of ``context_tokens`` cached tokens adds to a fused hybrid step beside a
    ``chunk_tokens`` chunk and ``batch`` rows, s it adds to a decode step of the same rows) on ``cost``
    (:meth:`splitlab.costmodel.CostModel.fused_hybrid_s`, ``decode_s``). ValueError: a context, batch or chunk that
    is not a whole number >= 1."""
    for name, v in (("context_tokens", context_tokens), ("batch", batch), ("chunk_tokens", chunk_tokens)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {v!r}")

    def fused(b: int) -> float:
        return cost.fused_hybrid_s(chunk_tokens, chunk_tokens ** 2, 0, b, b * context_tokens)

    return (fused(batch + 1) - fused(batch),
            cost.decode_s(batch + 1, (batch + 1) * context_tokens) - cost.decode_s(batch, batch * context_tokens))


def fused_row_words(cost, context_tokens: int, batch: int = 8, chunk_tokens: int = 256, contexts=None) -> str:
    """What one more decode row adds to a fused hybrid step (a ``chunk_tokens`` chunk beside ``batch`` rows of
    ``context_tokens`` cached tokens each) against what it adds to a decode step of the same rows, on ``cost``
    (:meth:`splitlab.costmodel.CostModel.fused_hybrid_s`, ``decode_s``), in words that follow the two numbers: a
    fused row dearer by more than 10% is this engine's extra, which a chunked worker pays for its streams;
    ``contexts`` (cached tokens: the map's prompts), the same ratio's range over them. Errors: :func:`fused_row_s`'
    (for every context of ``contexts`` too)."""
    row_f, row_d = fused_row_s(cost, context_tokens, batch, chunk_tokens)
    return _fused_row_said(cost, context_tokens, batch, chunk_tokens, row_f, row_d) + _over(cost, contexts, batch,
                                                                                          chunk_tokens)


def _over(cost, contexts, batch: int, chunk_tokens: int) -> str:
    """The ratio of :func:`fused_row_s`' two costs over ``contexts`` (cached tokens), in a sentence; "" for None."""
    if contexts is None:
        return ""
    whole = [int(n) if isinstance(n, numbers.Integral) and not isinstance(n, bool) else n for n in contexts]
    got = sorted((n, *fused_row_s(cost, n, batch, chunk_tokens)) for n in whole)  # numpy's ints too; 2.5 refused
    ratios = [(n, f / d) for n, f, d in got if d > 0]
    if not ratios:
        return ""
    lo, hi = min(r for _, r in ratios), max(r for _, r in ratios)
    at = max(ratios, key=lambda t: t[1])[0]
    return (f" Over the map's prompts of {got[0][0]:,} to {got[-1][0]:,} cached tokens that ratio runs "
            f"{fmt2(lo)}x to {fmt2(hi)}x, the most at {at:,} tokens.")


def _fused_row_said(cost, context_tokens: int, batch: int, chunk_tokens: int, row_f: float, row_d: float) -> str:
    """:func:`fused_row_words`' sentence at one context."""
    said = (f"one more decode row of {context_tokens:,} cached tokens adds {fmt2(row_f * 1e6)} us to a fused step "
            f"beside a {chunk_tokens}-token chunk and {batch} rows, against {fmt2(row_d * 1e6)} us to a decode step")
    if row_d > 0 and row_f < 0.9 * row_d:
        why = ("the roofline charges a step the larger of its compute and its memory time, so the row's cache read "
               "hides under the chunk's compute: a perfect overlap, which real kernels only approach, and which "
               "favours chunked prefill" if "roofline" in str(getattr(cost, "source", "")) else
               "its token rides in the chunk's pass")
        return (f"On this cost model {said} ({fmt2(row_f / row_d)}x): a stream costs a chunked worker less than a "
                f"decode worker; {why}.")
    if row_d <= 0 or row_f <= 1.1 * row_d:
        return f"On this cost model {said}: a stream costs a chunked worker about what it costs a decode worker."
    return (f"On this cost model {said} ({fmt2(row_f / row_d)}x): this engine's fused forward runs each row's "
            "attention as a call of its own, without the variable-length kernel a GPU engine uses, so a chunked worker "
            "pays more for its streams here than a production engine would: part of the split's lead over chunked "
            "prefill on this device's map is this engine's.")
