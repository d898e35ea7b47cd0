"""Do two KV caches of the same prompt make the same tokens? Greedy decoding from each, compared token by token.

Used for a cache that was changed on purpose (quantized, :mod:`splitlab.kvcache.quant`) or moved (a transfer):
a decode worker that receives it should produce the tokens the original cache produces. Two measures:

- *free-running*: each cache decodes greedily on its own; tokens are compared position by position, so one early
  difference usually changes everything after it (``first_difference`` says where);
- *teacher-forced*: both caches are fed the reference tokens, and at every step their greedy choices are
  compared (``step_agreement``): how often the changed cache alone flips the next token.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..kvcache import KVCache
from .engine import decode_step
from .models import LoadedModel

__all__ = ["greedy_from", "token_agreement"]


def greedy_from(lm: LoadedModel, cache: KVCache, first_tokens: Sequence[int], n_tokens: int) -> list[list[int]]:
    """Greedy tokens per row after ``cache``, starting with ``first_tokens`` (one per row, counted among the
    ``n_tokens``): ``n_tokens - 1`` decode steps.

    Raises:
        ValueError: n_tokens < 1; and every error of :func:`splitlab.decode_step`.
    """
    if n_tokens < 1:
        raise ValueError(f"n_tokens must be >= 1, got {n_tokens}")
    tokens = torch.as_tensor(list(first_tokens), dtype=torch.long)
    out = [[int(t)] for t in tokens]
    for _ in range(n_tokens - 1):
        step = decode_step(lm, cache, tokens)
        cache, tokens = step.cache, step.logits.argmax(-1)
        for row, t in zip(out, tokens.tolist()):
            row.append(int(t))
    return out


def token_agreement(lm: LoadedModel, reference: KVCache, other: KVCache, first_tokens: Sequence[int],
                    n_tokens: int) -> dict:
    """Compare greedy decoding from ``reference`` and from ``other`` (same rows, same model).

    Returns ``{"reference": tokens per row, "other": tokens per row, "equal_share": share of positions with the
    same token (free-running), "identical_rows": rows whose tokens all agree, "first_difference": per row the
    first position that differs (None if none), "step_agreement": share of teacher-forced steps whose next token
    agrees}``.

    Raises:
        ValueError: caches of different batch sizes; and every error of :func:`greedy_from`.
    """
    if reference.batch_size != other.batch_size:
        raise ValueError(f"caches of {reference.batch_size} and {other.batch_size} rows")
    ref = greedy_from(lm, reference, first_tokens, n_tokens)
    alt = greedy_from(lm, other, first_tokens, n_tokens)
    pairs = [(a, b) for r, o in zip(ref, alt) for a, b in zip(r, o)]
    firsts = [next((i for i, (a, b) in enumerate(zip(r, o)) if a != b), None) for r, o in zip(ref, alt)]
    # teacher-forced: feed both the reference tokens, compare each step's choice
    agree = steps = 0
    ca, cb = reference, other
    for i in range(n_tokens - 1):
        fed = torch.tensor([r[i] for r in ref], dtype=torch.long)
        sa, sb = decode_step(lm, ca, fed), decode_step(lm, cb, fed)
        ca, cb = sa.cache, sb.cache
        agree += int((sa.logits.argmax(-1) == sb.logits.argmax(-1)).sum())
        steps += len(ref)
    return dict(reference=ref, other=alt, equal_share=sum(a == b for a, b in pairs) / len(pairs),
                identical_rows=sum(f is None for f in firsts), first_difference=firsts,
                step_agreement=agree / steps if steps else 1.0)
