"""The arguments of :class:`~.cache.KVCache`'s methods, checked before any tensor is touched: the rows to select,
the caches to merge, the device and dtype to copy to, and a cache's own layers and windows. A wrong one is a
clear error naming it (never a row silently truncated from 1.5 to 1, or a traceback from inside torch)."""
from __future__ import annotations

import numbers
from typing import Any

import torch

from ..common import dtypes

__all__ = ["row_index", "cache_list", "target", "window_problem"]


def row_index(rows: Any, device: torch.device) -> torch.Tensor:
    """``rows`` (a list of ints, an int, or an integer tensor) as a 1-D long tensor.

    Raises:
        TypeError: rows that are not integers (a float would be truncated; a bool mask read as rows 0 and 1).
    """
    if isinstance(rows, torch.Tensor):
        if rows.dtype == torch.bool or rows.dtype.is_floating_point or rows.dtype.is_complex:
            raise TypeError(f"select() takes row indices (integers), got a {rows.dtype} tensor"
                            + (": for a mask use rows=mask.nonzero().flatten()" if rows.dtype == torch.bool else ""))
        return rows.to(device=device, dtype=torch.long).reshape(-1)
    items = [rows] if isinstance(rows, numbers.Number) else rows
    try:
        items = list(items)
    except TypeError:
        raise TypeError(f"select() takes a list of row indices, got {type(rows).__name__}") from None
    bad = [r for r in items if isinstance(r, bool) or not isinstance(r, numbers.Integral)]
    if bad:
        raise TypeError(f"select() takes integer row indices, got {bad[0]!r}")
    return torch.tensor([int(r) for r in items], dtype=torch.long, device=device)


def cache_list(caches: Any, kind: type) -> list:
    """``caches`` (any iterable of ``kind``) as a list. Raises TypeError for anything else."""
    if isinstance(caches, kind):
        raise TypeError("merge() takes a list of caches: KVCache.merge([a, b])")
    try:
        items = list(caches)
    except TypeError:
        raise TypeError(f"merge() takes a list of KVCaches, got {type(caches).__name__}") from None
    bad = [c for c in items if not isinstance(c, kind)]
    if bad:
        raise TypeError(f"merge() takes KVCaches, got a {type(bad[0]).__name__} among them")
    return items


def target(device: Any, dtype: Any) -> tuple[torch.device | None, torch.dtype | None]:
    """``(device, dtype)`` for :meth:`KVCache.to` (names allowed: "cuda:0", "bf16").

    Raises:
        ValueError: an unknown device or dtype name, or a dtype a cache cannot have (not floating point).
    """
    if device is not None:
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"unknown device {device!r}: use cpu, cuda, cuda:N or mps") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {str(device)!r} asked for, but torch sees no CUDA GPU here")
    if dtype is not None:
        dtype = dtype if isinstance(dtype, torch.dtype) else dtypes.torch_dtype(dtype, dtypes.WIRE_DTYPES)
        if not dtype.is_floating_point:
            raise ValueError(f"a KV cache holds floating-point keys and values, not {dtype}")
    return device, dtype


def window_problem(windows: tuple, layers: int) -> str | None:
    """Why a cache of ``layers`` layers with these ``windows`` cannot exist (None: it can): it needs at least one
    layer, and each window is None or an integer >= 2 (a sliding layer keeps ``W - 1`` positions)."""
    if layers < 1:
        return "a KV cache needs at least one layer"
    bad = [w for w in windows if w is not None and (isinstance(w, bool) or not isinstance(w, numbers.Integral)
                                                   or w < 2)]
    if bad:
        return f"windows must be None (full attention) or a sliding window >= 2 per layer, got {bad[0]!r}"
    return None
