"""Chapter 1 (two phases): its exercise checkers."""
from __future__ import annotations

from typing import Any

from .verdict import say, verdict

__all__ = ['forward_passes', 'recompute_tokens', 'tpot', 'prompt_doubling']


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


def tpot(answer: Any, ttft_s: float, e2e_s: float, output_tokens: int) -> bool:
    """Ch. 1: the TPOT (s) of one request, (E2E - TTFT) / (n - 1) (the definition of serving/metrics.py).

    Raises:
        ValueError: fewer than two output tokens, or E2E before TTFT.
    """
    if output_tokens < 2 or e2e_s < ttft_s:
        raise ValueError(f"TPOT needs >= 2 output tokens and E2E >= TTFT, got n={output_tokens}, "
                         f"TTFT={ttft_s}, E2E={e2e_s}")
    return verdict(answer, (e2e_s - ttft_s) / (output_tokens - 1), 0.01, "the request's TPOT in seconds",
                   "the time after the first token, shared by the n - 1 gaps that follow it.")


def _ttft_tpot(gen: Any) -> tuple[float, float]:
    t = list(gen.token_time_s)
    if len(t) < 2:
        raise ValueError("each run needs at least two output tokens")
    return t[0], (t[-1] - t[0]) / (len(t) - 1)


def prompt_doubling(ttft_ratio: Any, tpot_ratio: Any, before: Any, after: Any, rel_tol: float = 0.35) -> bool:
    """Ch. 1 experiment: the reader's predicted ratios TTFT(after)/TTFT(before) and TPOT(after)/TPOT(before) for
    two :func:`splitlab.generate` results whose prompts differ, checked against the ratios measured in those
    very runs, within ``rel_tol`` (timings vary by a few percent from run to run). The measured ratios are printed
    once both predictions are given."""
    if ttft_ratio is None or tpot_ratio is None:
        say("Not answered yet: set both predicted ratios, then run the cell again.")
        return False
    (ttft0, tpot0), (ttft1, tpot1) = _ttft_tpot(before), _ttft_tpot(after)
    ok = [verdict(ttft_ratio, ttft1 / ttft0, rel_tol, "the measured TTFT ratio",
                  "the prefill's FLOPs, about 2 x parameters x prompt tokens, set TTFT."),
          verdict(tpot_ratio, tpot1 / tpot0, rel_tol, "the measured TPOT ratio",
                  "a decode step reads every weight once, whatever the prompt; the cache it reads is a small part.")]
    say(f"measured: TTFT {ttft0 * 1e3:.3g} -> {ttft1 * 1e3:.3g} ms, TPOT {tpot0 * 1e3:.3g} -> {tpot1 * 1e3:.3g} ms")
    return all(ok)
