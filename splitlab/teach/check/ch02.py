"""Chapter 2 (the KV cache): its exercise checkers."""
from __future__ import annotations

from typing import Any

from ... import sizing
from .verdict import verdict

__all__ = ['kv_bytes_per_token', 'max_tokens_in_memory', 'padding_waste', 'mla_equivalent_kv_heads']


def kv_bytes_per_token(answer: Any, model: str, dtype: str = "fp16") -> bool:
    """Ch. 2: KV bytes per token of a published model or preset, in ``dtype`` (formula in splitlab.sizing)."""
    expected = sizing.kv_bytes_per_token(sizing.resolve_config(model), dtype)
    return verdict(answer, expected, 0.001, f"KV bytes per token of {model} in {dtype}",
                   "2 (K and V) x layers x KV heads x head_dim x bytes per element; use the KV heads, not the "
                   "query heads.")


def max_tokens_in_memory(answer: Any, model: str, gpu: str, dtype: str = "fp16") -> bool:
    """Ch. 2: how many tokens of KV cache fit on ``gpu`` after the fp16/bf16 weights of ``model``."""
    cfg = sizing.resolve_config(model)
    free = sizing.tables.gpu_spec(gpu)["memory_bytes"] - cfg["n_params"] * sizing.dtype_bytes(dtype)
    expected = max(0.0, free) // sizing.kv_bytes_per_token(cfg, dtype)
    return verdict(answer, expected, 0.02, f"the tokens of {model} KV cache that fit on a {gpu}",
                   "(GPU memory - parameters x bytes per parameter) / KV bytes per token.")



def padding_waste(answer: Any, cache: Any) -> bool:
    """Ch. 2 experiment: the share (0..1) of a batch's KV bytes held by left-padding slots, checked against the
    reader's own ``cache`` (a :class:`splitlab.KVCache`): padded slots / all slots of its attention mask, which is
    the share of bytes because every slot of every layer holds the same bytes."""
    mask = cache.attention_mask
    expected = float((mask == 0).sum()) / mask.numel()
    return verdict(answer, expected, 0.01, "the share of the cache that is padding",
                   "every row is as long as the longest; 1 - (sum of the lengths) / (rows x longest).")


def mla_equivalent_kv_heads(answer: Any, kv_lora_rank: int = 512, qk_rope_head_dim: int = 64,
                            head_dim: int = 128) -> bool:
    """Ch. 2: how many GQA KV heads of ``head_dim`` (a key and a value each) cache as many elements per layer and
    token as MLA's latent plus RoPE key: (kv_lora_rank + qk_rope_head_dim) / (2 x head_dim) (DeepSeek-V2 paper:
    "equivalent to GQA with only 2.25 groups" for its 512 + 64 and head_dim 128)."""
    return verdict(answer, (kv_lora_rank + qk_rope_head_dim) / (2 * head_dim), 0.01,
                   "the KV heads that hold as much as MLA's cache",
                   "a GQA KV head caches head_dim key and head_dim value elements; MLA caches one latent and one "
                   "RoPE key per layer.")
