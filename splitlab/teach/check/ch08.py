"""Chapter 8 (what the split is not): its exercise checkers."""
from __future__ import annotations

from typing import Any

from .verdict import verdict

__all__ = ["paged_waste_share", "quantized_kv_bytes", "speculative_tpot"]


def paged_waste_share(answer: Any, result, block_tokens: int, bytes_per_position: int = 1,
                      worker: str | None = None) -> bool:
    """Ch. 8 (experiment): the share of paged KV memory that is waste (held but not written), averaged over a
    served run ``result`` with blocks of ``block_tokens`` positions, on one ``worker`` (None: all of them together)
    (:func:`splitlab.serving.paged.memory_schemes` and :func:`~splitlab.serving.paged.waste_summary` of the
    reader's own run)."""
    from ...serving.paged import memory_schemes, waste_summary

    schemes = memory_schemes(result, block_tokens, bytes_per_position)
    if worker is not None:
        schemes = schemes[schemes.worker == worker]
    expected = float(waste_summary(schemes).loc["paged", "waste_share"])
    return verdict(answer, expected, 0.02, f"the waste share of {block_tokens}-token blocks in this run",
                   "replay the run with paged.memory_schemes(result, block_tokens, ...) and read the 'paged' row "
                   "of paged.waste_summary: its waste_share column.")


def quantized_kv_bytes(answer: Any, model: str, prompt_tokens: int) -> bool:
    """Ch. 8: bytes of one ``prompt_tokens`` cache of ``model`` (a published model or preset) quantized to int8 the
    KIVI way (:func:`splitlab.kvcache.quant.quantize`): per layer and KV head, int8 keys and values (1 byte per
    element), one float16 scale per key channel (head_dim of them) and one float16 scale per value token."""
    from ... import sizing

    g = sizing.kv_geometry(sizing.resolve_config(model))
    per_layer = g.kv_heads * (2 * prompt_tokens * g.head_dim + 2 * g.head_dim + 2 * prompt_tokens)
    expected = g.layers * per_layer
    return verdict(answer, expected, 0.001, f"the int8 KV bytes of {prompt_tokens} tokens of {model}",
                   "per layer and KV head: T x head_dim bytes of keys + T x head_dim of values + head_dim key "
                   "scales x 2 bytes + T value scales x 2 bytes.")


def speculative_tpot(answer: Any, alpha: float, k: int, draft_s_per_step: float, verify_s: float) -> bool:
    """Ch. 8: the time per output token (s) that speculative decoding predicts with ``k`` proposals per step,
    acceptance ``alpha``, ``draft_s_per_step`` seconds of drafting and ``verify_s`` seconds of verifying per
    step: (draft + verify) / E[tokens], E = (1 - alpha^(k+1)) / (1 - alpha) (Leviathan et al. 2023)."""
    from ...phases.speculative import expected_tokens_per_step

    expected = (draft_s_per_step + verify_s) / expected_tokens_per_step(alpha, k)
    return verdict(answer, expected, 0.02, f"the predicted TPOT at k = {k} (s)",
                   "one step costs the draft's proposals plus one verify forward and yields E[tokens] = "
                   "(1 - alpha**(k+1)) / (1 - alpha) tokens; divide.")
