"""Speculative decoding measured on real text (chapter 8, on trained weights): prompt-lookup drafting
(:class:`~splitlab.phases.speculative.NgramDraft`) against plain decoding of the same prompts, on the same clock.

Plain decoding here is :func:`~splitlab.phases.speculative.speculative_generate` with ``k = 0``: one target forward
per token through the very code and timer of the speculative runs, so the speed-up compares like with like. Step
times are the measured forward passes (and the draft's lookups), not the wall clock between tokens: the TPOT of
a run is ``(sum of verify steps + sum of draft work) / (tokens - 1)``.

Prompt lookup pays off where the answer repeats the prompt (rewriting, extracting, quoting, code edits); on random
weights the target's tokens rarely repeat anything, so acceptance is measured on a trained model
(``load_model("smollm2-135m-instruct")``).
"""
from __future__ import annotations

import numbers
from typing import Iterable, Sequence

import pandas as pd

from .inputs import as_token_batch
from .models import LoadedModel, require_loaded
from .speculative import NgramDraft, SpeculativeResult, speculative_generate

__all__ = ["prompt_lookup_runs", "step_tpot_s"]


def step_tpot_s(run: SpeculativeResult) -> float:
    """Seconds per output token from the measured steps: (verify forwards + draft work) / (tokens - 1)."""
    if len(run.tokens) < 2:
        raise ValueError("a run of one token has no time per output token")
    return (sum(run.verify_s) + sum(run.draft_s)) / (len(run.tokens) - 1)


def prompt_lookup_runs(lm: LoadedModel, prompts: Sequence[Sequence[int]], ks: Sequence[int] = (2, 4),
                       n_tokens: int = 24, max_n: int = 3) -> pd.DataFrame:
    """For each prompt: plain decoding (``k`` 0), then prompt-lookup speculative decoding with each ``k``.

    Args:
        prompts: token id lists (e.g. ``lm.encode_chat("Repeat this sentence: ...")``), at least one.
        ks: proposals per verify step to try (each >= 1).
        n_tokens: greedy tokens per run (>= 2).
        max_n: longest n-gram the draft looks up.

    Returns:
        One row per (prompt, k): ``prompt`` (index), ``k``, ``tokens``, ``steps`` (target forwards after the
        prefill), ``proposed``, ``accepted``, ``acceptance`` (alpha: accepted / tried), ``tokens_per_step``,
        ``predicted_tokens_per_step`` (Leviathan et al.'s E[tokens] at that alpha), ``verify_s`` and ``draft_s``
        (seconds of one verify forward and of one step's lookup, means over the steps), ``tpot_s`` (from measured
        steps, :func:`step_tpot_s`), ``speedup`` (the prompt's plain ``tpot_s`` / this one) and ``same_tokens``
        (equal to plain decoding's: they must be, the target chooses every token).

    Raises:
        TypeError: ``lm`` is not a LoadedModel, ``ks`` not a list. ValueError: no prompts, a k < 1, n_tokens < 2,
            max_n < 1, and every error of :func:`speculative_generate` and
            :func:`~splitlab.phases.inputs.as_token_batch`.
    """
    require_loaded(lm, "prompt_lookup_runs()")
    if not isinstance(ks, Iterable):  # ks=4 or None: "'int' object is not iterable"
        raise TypeError(f"ks must be a list of integers >= 1 (proposals per verify step), e.g. [2, 4], got {ks!r}")
    if isinstance(ks, str) or any(isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1 for k in ks):
        raise ValueError(f"every k must be an integer >= 1 (k = 0 is the plain run, always made), got {ks!r}")
    for name, value, low in (("n_tokens", n_tokens, 2), ("max_n", max_n, 1)):  # max_n=1.5 was a TypeError
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    prompts = as_token_batch(lm, prompts, int(n_tokens))  # text, ids, arrays; checked against the context
    rows = []
    for i, prompt in enumerate(prompts):
        plain = speculative_generate(lm, NgramDraft(max_n), prompt, n_tokens, k=0)
        base = step_tpot_s(plain)
        for k in [0, *ks]:
            run = plain if k == 0 else speculative_generate(lm, NgramDraft(max_n), prompt, n_tokens, k=k)
            tpot = step_tpot_s(run)
            rows.append(dict(prompt=i, k=k, tokens=len(run.tokens), steps=run.steps, proposed=sum(run.proposed),
                             accepted=sum(run.accepted), acceptance=run.acceptance_rate,
                             tokens_per_step=run.tokens_per_step,
                             predicted_tokens_per_step=run.predicted_tokens_per_step,
                             verify_s=sum(run.verify_s) / run.steps, draft_s=sum(run.draft_s) / run.steps, tpot_s=tpot,
                             speedup=base / tpot, same_tokens=run.tokens == plain.tokens))
    return pd.DataFrame(rows)
