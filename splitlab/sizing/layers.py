"""Which kind of KV cache each layer of a model keeps, read from its config (a dict or a transformers config).

Three kinds are sized here:

- **full attention**: every position, ``kv_heads x (head_dim of K + head_dim of V)`` elements each.
- **sliding window** of ``W`` (Mistral, Starcoder2, Phi-3; every other layer of Gemma 2, five of six in Gemma 3):
  the next token attends to itself and the ``W - 1`` positions before it, so a layer keeps at most ``W - 1``
  positions between steps, whatever the prompt's length (transformers' ``DynamicSlidingWindowLayer`` keeps
  exactly that; vLLM frees the blocks before ``computed - W + 1``, the same count rounded to whole blocks).
- **MLA** (multi-head latent attention, DeepSeek-V2/V3): one compressed latent of ``kv_lora_rank`` elements plus
  the decoupled RoPE key of ``qk_rope_head_dim`` per layer per token, shared by all heads, which an MLA engine
  caches (DeepSeek-AI 2024, DeepSeek-V2 sec. 2.1; vLLM and SGLang cache exactly this). Keys and values are
  re-derived from it by the up-projections at every step.

Which layers are windowed follows transformers' own rules: ``layer_types`` when the config has it; otherwise the
rule the family's config class applies (``sliding_window_pattern`` for Gemma 3 and Cohere 2, every other layer
for Gemma 2 and GPT-OSS, ``use_sliding_window`` and ``max_window_layers`` for Qwen), and for any other family
``sliding_window`` set means every layer (transformers' fallback in ``get_layer_types_and_kwargs``).

Anything else (chunked attention of Llama 4, linear attention or state-space layers, layers that reuse another
layer's cache) is refused with :class:`UnsupportedCacheError` naming it, never sized with a wrong formula.
Nothing here imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["LayerKV", "UnsupportedCacheError", "layer_windows", "mla_dims"]


class UnsupportedCacheError(ValueError):
    """A cache kind sizing does not model (named in the message)."""


@dataclass(frozen=True)
class LayerKV:
    """One layer's cache: ``kv_heads`` heads of ``k_dim`` key and ``v_dim`` value elements per cached position.

    ``window`` is the sliding window ``W`` of a windowed layer (it keeps at most ``W - 1`` positions), None for
    a layer that keeps everything. ``kind`` is "full", "sliding" or "mla" (MLA: one latent "head" whose keys are
    the ``kv_lora_rank`` latent and whose values are the ``qk_rope_head_dim`` RoPE key, as transformers 5 stores
    them).
    """

    kv_heads: int
    k_dim: int
    v_dim: int
    window: int | None = None
    kind: str = "full"

    @property
    def cap(self) -> int | None:
        """Most positions the layer keeps between steps (``window - 1``), None for no limit."""
        return None if self.window is None else self.window - 1

    def positions(self, tokens: int) -> int:
        """Positions the layer holds after ``tokens`` tokens: ``tokens``, or at most ``window - 1``."""
        return tokens if self.window is None else min(tokens, self.window - 1)

    @property
    def elements_per_position(self) -> int:
        """K and V elements one cached position takes in this layer: ``kv_heads x (k_dim + v_dim)``."""
        return self.kv_heads * (self.k_dim + self.v_dim)


def _get(cfg: Any, name: str, default: Any = None) -> Any:
    value = cfg.get(name) if isinstance(cfg, Mapping) else getattr(cfg, name, None)
    return default if value is None else value


#: Families whose config class turns ``sliding_window`` into a layer pattern: (i + 1) % P != 0 -> sliding.
_PATTERN = {"gemma2": 2, "gpt_oss": 2, "gemma3": 6, "gemma3_text": 6, "cohere2": 4, "olmo3": 4, "exaone4": 4}
#: Families with their own rule that is not modelled here when ``layer_types`` is missing.
_UNMODELLED = {"llama4": "chunked attention", "llama4_text": "chunked attention", "gemma3n": "KV sharing",
               "gemma3n_text": "KV sharing", "smollm3": "sliding layers chosen by no_rope_layers"}
_KINDS = {"full_attention": None, "sliding_attention": "sliding"}
_WHY = {"chunked_attention": "chunked attention (Llama 4) restarts its window at chunk boundaries",
        "linear_attention": "linear-attention layers keep a fixed-size state, not a KV cache",
        "mamba": "state-space (Mamba) layers keep a fixed-size state, not a KV cache",
        "conv": "convolution layers keep a fixed-size state, not a KV cache",
        "dummy": "the layer keeps no cache of its own (it reuses another layer's, or has no attention)"}


def _refuse(kind: str, where: str) -> UnsupportedCacheError:
    why = _WHY.get(kind, "splitlab sizes full-attention, sliding-window and MLA layers only")
    return UnsupportedCacheError(f"cannot size the KV cache: {where} has {kind!r} layers ({why})")


def layer_windows(config: Any, layers: int) -> list[int | None]:
    """Per layer, the sliding window ``W`` of a windowed layer or None for full attention (rules: module doc).

    Raises:
        UnsupportedCacheError: a layer kind other than full or sliding attention, a family whose rule is not
            modelled here, or sliding layers without a ``sliding_window``.
    """
    model_type = str(_get(config, "model_type", "this config"))
    window = _get(config, "sliding_window")
    types = _get(config, "layer_types")
    if types is None and _get(config, "kv_sharing_modes") is not None:
        raise _refuse("dummy", f"model_type {model_type!r}")
    if types is None:
        if _get(config, "attention_chunk_size") is not None:
            raise _refuse("chunked_attention", f"model_type {model_type!r}")
        if window is None or _get(config, "use_sliding_window", True) is False:
            return [None] * layers
        if model_type in _UNMODELLED:
            raise UnsupportedCacheError(f"cannot size the KV cache of model_type {model_type!r} without layer_types "
                                        f"({_UNMODELLED[model_type]}): give the config's layer_types")
        if model_type in _PATTERN:
            pattern = _get(config, "sliding_window_pattern", _PATTERN[model_type])
            if not isinstance(pattern, int) or isinstance(pattern, bool) or pattern < 1:
                raise UnsupportedCacheError(f"cannot size the KV cache of {model_type!r}: sliding_window_pattern "
                                            f"{pattern!r} is not a positive integer; give the config's layer_types")
            types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
        elif _get(config, "use_sliding_window") is True:  # Qwen2/Qwen3: windows from layer max_window_layers on
            first = int(_get(config, "max_window_layers", 0))
            types = ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
        else:  # transformers' fallback: sliding_window set -> every layer is windowed
            types = ["sliding_attention"] * layers
    types = list(types)
    if len(types) != layers:
        raise UnsupportedCacheError(f"layer_types has {len(types)} entries for {layers} layers")
    for kind in types:
        if kind not in _KINDS:
            raise _refuse(kind, f"model_type {model_type!r}")
    if "sliding_attention" in types and (window is None or not isinstance(window, int) or window < 2):
        raise UnsupportedCacheError(f"sliding_attention layers need a sliding_window of at least 2, got {window!r}")
    return [None if kind == "full_attention" else int(window) for kind in types]


def mla_dims(config: Any) -> tuple[int, int] | None:
    """``(kv_lora_rank, qk_rope_head_dim)`` of an MLA config (DeepSeek-V2/V3), None for other attention."""
    rank = _get(config, "kv_lora_rank")
    if rank is None:
        return None
    rope = _get(config, "qk_rope_head_dim")
    if rope is None:
        raise UnsupportedCacheError("an MLA config (kv_lora_rank set) needs qk_rope_head_dim to size its cache")
    return int(rank), int(rope)
