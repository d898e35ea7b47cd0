"""The identity stamped on every KV cache: caches of different identities never mix.

``name|model_type|L<layers>|H<heads>|KV<kv heads>|D<head_dim>|dtype``; a preset built from a seed other than 0 is
named ``name@seed<seed>``, since other random weights make another model, and trained weights dequantized from a
quantized file ``name@<file>``. This module is the one place that writes or edits the string.
"""
from __future__ import annotations

from .dtypes import name_of

__all__ = ["format_model_id", "with_dtype", "dtype_of"]


def format_model_id(name: str, model_type: str, layers: int, heads: int, kv_heads: int, head_dim: int, dtype,
                    seed: int | None = None, dequantized_from: str | None = None) -> str:
    """The identity of a model; ``seed`` (random-weight presets only) other than 0/None is added to the name, and
    so is ``dequantized_from``, the quantized file trained weights came from."""
    name = f"{name}@seed{seed}" if seed else name
    name = f"{name}@{dequantized_from}" if dequantized_from else name
    return f"{name}|{model_type}|L{layers}|H{heads}|KV{kv_heads}|D{head_dim}|{name_of(dtype)}"


def with_dtype(model_id: str, dtype) -> str:
    """The same identity with another dtype (a cache cast to ``dtype`` only fits a model of that dtype)."""
    return "|".join(model_id.split("|")[:-1] + [name_of(dtype)])


def dtype_of(model_id: str) -> str:
    """The dtype field of an identity."""
    return model_id.rsplit("|", 1)[-1]
