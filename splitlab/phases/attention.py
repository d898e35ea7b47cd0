"""Which attention implementation a model class can run, and the one ``load_model`` picks.

transformers runs attention through one of several implementations; each model class says which it supports
with class flags (``_supports_sdpa``, ``_supports_flash_attn``, ``_supports_flex_attn``). ``"eager"`` (transformers'
own Python attention: ``softmax(Q K^T x scaling + mask) V``) works for every class; ``"sdpa"`` (PyTorch's fused
``scaled_dot_product_attention``) is faster and is what splitlab picks when the class supports it. A few classes
do not (Gemma 2, GPT-OSS and BLOOM in transformers 5.x): they run eager. Both give the same logits to rounding.
"""
from __future__ import annotations

from typing import Any

__all__ = ["supported_attention", "choose_attention", "causal_lm_class", "attention_for", "unusable"]

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


def attention_for(config: Any, asked: str | None, name: str, model_cls: type | None = None) -> str | None:
    """Check that splitlab handles ``config``'s kind of model (and, for a model object, that its class
    ``model_cls`` is the family's causal LM), and choose its attention implementation.

    Raises:
        ModelLoadError: a kind splitlab does not serve (:func:`~.layout.unsupported_reason`), no causal-LM class,
            a model object of another head (masked LM, classifier), or an implementation the class does not
            support.
    """
    import transformers

    from .layout import unsupported_reason
    from .tokenizer import ModelLoadError
    why = unsupported_reason(config)
    if why is not None:
        raise ModelLoadError(f"splitlab cannot serve {name!r}: {why}")
    causal = causal_lm_class(config)
    if causal is None and getattr(config, "model_type", None) in transformers.CONFIG_MAPPING:
        raise ModelLoadError(f"{name!r} ({config.model_type}) is not a causal LM: transformers has no "
                             f"AutoModelForCausalLM class for it")
    if model_cls is not None and causal is not None and not issubclass(model_cls, causal):
        raise ModelLoadError(f"{model_cls.__name__} is not a causal LM (next-token prediction): the causal LM of "
                             f"{config.model_type} is {causal.__name__}; load it with "
                             f"transformers.AutoModelForCausalLM")
    try:
        return choose_attention(causal if model_cls is None else model_cls, asked)
    except ValueError as err:
        raise ModelLoadError(f"cannot load {name!r}: {err}") from None


def unusable(name: str, asked: str | None, model_cls: type | None, err: BaseException) -> Exception:
    """The ModelLoadError for an implementation transformers refused or could not import (an unknown name, or
    flash attention without its package), naming those the class supports."""
    from .tokenizer import ModelLoadError
    text = " ".join(str(err).split())[:300]
    choices = ", ".join(supported_attention(model_cls)) if model_cls is not None else "sdpa, eager"
    return ModelLoadError(f"cannot load {name!r} with attn_implementation={asked!r} ({type(err).__name__}: {text}); "
                          f"it supports {choices} (leave it None to get sdpa where supported, else eager)")
