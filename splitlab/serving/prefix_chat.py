"""Prefix caching on a real chat template (chapter 8, on trained weights): questions asked under one system
prompt share the template's first tokens (the system turn), which :class:`~splitlab.serving.prefix.PrefixCache`
keeps in whole blocks; each later question prefills only what follows them.

Every prompt is prefilled twice: cold (a full prefill, nothing cached) and warm (on the shared prefix cached by
the questions before it; the first question fills the cache). The warm prefill must pick the same first token,
and its logits differ from the cold one's only by rounding.
"""
from __future__ import annotations

import numbers
from typing import Iterable, Sequence

import pandas as pd

from ..phases.models import LoadedModel, require_loaded
from .prefix import PrefixCache, prefill_cached

__all__ = ["chat_prefix_reuse", "shared_prefix_tokens"]


def shared_prefix_tokens(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the token prefix that every prompt starts with.

    Raises:
        TypeError: ``prompts`` not a list of token id lists (a string, a list of ints). ValueError: no prompts."""
    def listlike(x) -> bool:  # lists, tuples, arrays; not a string ("abc" answered 0) nor an int
        return not isinstance(x, str) and hasattr(x, "__len__") and hasattr(x, "__getitem__")
    if not listlike(prompts) or not all(listlike(p) for p in prompts):
        raise TypeError(f"prompts must be a list of token id lists, got {prompts!r:.60}")
    if len(prompts) == 0:
        raise ValueError("shared_prefix_tokens needs at least one prompt")
    first, n = list(prompts[0]), len(prompts[0])
    for p in prompts[1:]:
        n = next((i for i, (a, b) in enumerate(zip(first[:n], p)) if a != b), min(n, len(p)))
    return n


def chat_prefix_reuse(lm: LoadedModel, questions: Sequence[str], system: str | None = None, block_tokens: int = 16,
                      repeats: int = 1) -> pd.DataFrame:
    """Questions in ``lm``'s chat template under one system prompt, prefilled cold and on the cached prefix.

    Args:
        questions: user messages, at least two (the first fills the cache).
        system: the system prompt (None: the template's default, if it has one).
        block_tokens: tokens per cached block (only whole blocks are reused).
        repeats: timed prefills of each kind per question; the fastest counts.

    Returns:
        One row per question: ``prompt_tokens``, ``shared_tokens`` (the prefix all the prompts share),
        ``cached_tokens`` and ``computed_tokens`` of the warm prefill, ``cold_s`` and ``warm_s`` (forward
        seconds), ``same_token`` (the warm prefill's first token is the cold one's) and ``logit_err`` (largest
        absolute logit difference).

    Raises:
        TypeError: ``lm`` is not a LoadedModel, ``questions`` a string or holding a non-string. ValueError: fewer
            than two questions, repeats or block_tokens not an integer >= 1, a model without a chat template, and
            every error of :func:`prefill_cached` and :meth:`~splitlab.phases.loaded.LoadedModel.encode_chat`.
    """
    require_loaded(lm, "chat_prefix_reuse()")
    if isinstance(questions, Iterable) and not isinstance(questions, str):
        questions = list(questions)  # a generator had no len(); None was "'NoneType' object is not iterable"
    if not isinstance(questions, list) or not all(isinstance(q, str) for q in questions):  # a string: each character
        raise TypeError(f"questions must be a list of user messages (str, at least two), got {questions!r:.60}")
    if len(questions) < 2:
        raise ValueError("chat_prefix_reuse needs at least two questions: the first fills the cache")
    for name, value in (("repeats", repeats), ("block_tokens", block_tokens)):  # block_tokens=1.5 ran as 1
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    prompts = [lm.encode_chat(q, system) for q in questions]
    shared = shared_prefix_tokens(prompts)
    cache, rows = PrefixCache(block_tokens), []
    for prompt in prompts:
        cold = min((prefill_cached(lm, PrefixCache(block_tokens), prompt, store=False) for _ in range(repeats)),
                   key=lambda r: r.seconds)
        warm = min((prefill_cached(lm, cache, prompt, store=False) for _ in range(repeats)), key=lambda r: r.seconds)
        if not rows:  # the first question fills the cache
            prefill_cached(lm, cache, prompt, store=True)
        rows.append(dict(prompt_tokens=len(prompt), shared_tokens=shared, cached_tokens=warm.cached_tokens,
                         computed_tokens=warm.computed_tokens, cold_s=cold.seconds, warm_s=warm.seconds,
                         same_token=bool((cold.logits.argmax(-1) == warm.logits.argmax(-1)).all()),
                         logit_err=float((cold.logits.float() - warm.logits.float()).abs().max())))
    return pd.DataFrame(rows)
