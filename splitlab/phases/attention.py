"""Which attention implementation a model class can run, and the one ``load_model`` picks.

transformers runs attention through one of several implementations; each model class says which it supports
with class flags (``_supports_sdpa``, ``_supports_flash_attn``, ``_supports_flex_attn``). ``"eager"`` (transformers'
own Python attention: ``softmax(Q K^T x scaling + mask) V``) works for every class; ``"sdpa"`` (PyTorch's fused
``scaled_dot_product_attention``) is faster and is what splitlab picks when the class supports it. A few classes
do not (Gemma 2, GPT-OSS and BLOOM in transformers 5.x): they run eager. Both give the same logits to rounding.
"""
from __future__ import annotations

from typing import Any

__all__ = ["supported_attention", "choose_attention", "causal_lm_class"]

#: implementation name -> the class flags that allow it (any of them; 4.x spelled flash as _supports_flash_attn_2)
_FLAGS = {"sdpa": ("_supports_sdpa",), "flash_attention_2": ("_supports_flash_attn", "_supports_flash_attn_2"),
          "flash_attention_3": ("_supports_flash_attn", "_supports_flash_attn_3"),
          "flex_attention": ("_supports_flex_attn",)}


def causal_lm_class(config: Any) -> type | None:
    """The ``AutoModelForCausalLM`` class for ``config``, or None when transformers maps none (remote code)."""
    import transformers
    mapping = transformers.AutoModelForCausalLM._model_mapping
    try:
        return mapping[type(config)]
    except KeyError:
        return None


def supported_attention(model_cls: type) -> list[str]:
    """The implementations ``model_cls`` supports, sdpa first when it does, eager always (last)."""
    names = [name for name, flags in _FLAGS.items() if any(getattr(model_cls, f, False) for f in flags)]
    return names + ["eager"]


def choose_attention(model_cls: type | None, asked: str | None) -> str | None:
    """The implementation to load ``model_cls`` with: ``asked`` when the class supports it, else (``asked`` None)
    sdpa where the class supports it, otherwise eager. None when the class is unknown (transformers decides).

    Raises:
        ValueError: ``asked`` names an implementation the class does not support; the message lists those it does.
    """
    if asked is not None and not isinstance(asked, str):
        raise ValueError(f"attn_implementation must be a name such as 'sdpa' or 'eager', got {asked!r}")
    if model_cls is None:
        return asked
    supported = supported_attention(model_cls)
    if asked is None:
        return "sdpa" if "sdpa" in supported else "eager"
    if (asked in _FLAGS or asked == "eager") and asked not in supported:
        raise ValueError(f"{model_cls.__name__} does not support attn_implementation={asked!r}; it supports "
                         f"{', '.join(supported)} (leave it None to get sdpa where supported, else eager)")
    return asked
