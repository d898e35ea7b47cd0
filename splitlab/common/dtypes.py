"""Element types by name: the one table of dtype names, their canonical spelling and their bytes per element.

torch-free, so that model-free code (``splitlab.sizing``, ``python -m splitlab kv-size``) can use it;
:func:`torch_dtype` imports torch only when asked for a torch dtype.
"""
from __future__ import annotations

from typing import Any

__all__ = ["ALIASES", "BYTES", "WEIGHT_DTYPES", "WIRE_DTYPES", "canonical", "element_bytes", "torch_dtype", "name_of"]

#: every accepted spelling -> the canonical name (torch's attribute name where torch has the type)
ALIASES = {"float32": "float32", "fp32": "float32", "float": "float32", "float16": "float16", "fp16": "float16",
           "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16", "float64": "float64", "fp64": "float64",
           "double": "float64", "float8": "float8_e4m3fn", "fp8": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn",
           "float8_e5m2": "float8_e5m2", "int8": "int8", "int4": "int4"}
#: canonical name -> bytes per element (int4 packs two elements per byte)
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1,
         "int4": 0.5}
#: canonical names that model weights may be loaded in
WEIGHT_DTYPES = ("float32", "float16", "bfloat16")
#: canonical names a KV cache may have on the wire between processes
WIRE_DTYPES = ("float32", "float16", "bfloat16", "float64")


def name_of(dtype: Any) -> str:
    """The name of a torch dtype or dtype name as written: ``torch.bfloat16`` -> ``"bfloat16"``."""
    return str(dtype).lower().replace("torch.", "")


def canonical(dtype: Any, allowed: tuple[str, ...] | None = None) -> str:
    """The canonical name of ``dtype`` (a name such as "bf16" or a torch dtype).

    Raises:
        ValueError: an unknown name, or one outside ``allowed`` (the message lists the choices).
    """
    name = ALIASES.get(name_of(dtype))
    choices = sorted(a for a, c in ALIASES.items() if allowed is None or c in allowed)
    if name is None or (allowed is not None and name not in allowed):
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {choices}")
    return name


def element_bytes(dtype: Any) -> float:
    """Bytes per element of ``dtype`` (a name or a torch dtype). Raises ValueError for an unknown one."""
    itemsize = getattr(dtype, "itemsize", None)
    if isinstance(itemsize, int) and not isinstance(dtype, str):  # a torch.dtype (or numpy's)
        return itemsize
    return BYTES[canonical(dtype)]


def torch_dtype(dtype: Any, allowed: tuple[str, ...] | None = None):
    """The torch dtype of ``dtype`` (name or torch dtype). Raises ValueError for one torch does not have."""
    import torch

    name = canonical(dtype, allowed)
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"dtype {dtype!r} has no torch type")
    return value
