"""Chapter 1 (two phases): its exercise checkers."""
from __future__ import annotations

from typing import Any

from .verdict import verdict

__all__ = ['forward_passes', 'recompute_tokens']


def forward_passes(answer: Any, new_tokens: int) -> bool:
    """Ch. 1: forward passes to generate ``new_tokens`` tokens with a KV cache (1 prefill + new_tokens-1 decodes)."""
    return verdict(answer, new_tokens, 0, f"the forward passes for {new_tokens} new tokens",
                   "prefill makes the first token; each decode step makes one more.")


def recompute_tokens(answer: Any, prompt_tokens: int, new_tokens: int) -> bool:
    """Ch. 1: tokens pushed through the model to generate ``new_tokens`` tokens WITHOUT a KV cache.

    Token k (k = 1..N) needs a forward pass over the prompt plus the k-1 tokens already generated:
    sum_{k=1..N} (T + k - 1) = N*T + N*(N-1)/2.
    """
    n, t = new_tokens, prompt_tokens
    return verdict(answer, n * t + n * (n - 1) // 2, 0, "the tokens processed without a cache",
                   "each new token re-reads the prompt and every token generated before it.")

