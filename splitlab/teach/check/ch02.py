"""Chapter 2 (the KV cache): its exercise checkers."""
from __future__ import annotations

from typing import Any

from ... import sizing
from .verdict import verdict

__all__ = ['kv_bytes_per_token', 'max_tokens_in_memory']


def kv_bytes_per_token(answer: Any, model: str, dtype: str = "fp16") -> bool:
    """Ch. 2: KV bytes per token of a published model or preset, in ``dtype`` (formula in splitlab.sizing)."""
    expected = sizing.kv_bytes_per_token(sizing.resolve_config(model), dtype)
    return verdict(answer, expected, 0.001, f"KV bytes per token of {model} in {dtype}",
                   "2 (K and V) x layers x KV heads x head_dim x bytes per element; use the KV heads, not the "
                   "query heads.")


def max_tokens_in_memory(answer: Any, model: str, gpu: str, dtype: str = "fp16") -> bool:
    """Ch. 2: how many tokens of KV cache fit on ``gpu`` after the fp16/bf16 weights of ``model``."""
    cfg = sizing.resolve_config(model)
    free = sizing.GPUS[gpu]["memory_bytes"] - cfg["n_params"] * sizing.dtype_bytes(dtype)
    expected = max(0.0, free) // sizing.kv_bytes_per_token(cfg, dtype)
    return verdict(answer, expected, 0.02, f"the tokens of {model} KV cache that fit on a {gpu}",
                   "(GPU memory - parameters x bytes per parameter) / KV bytes per token.")

