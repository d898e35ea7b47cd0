"""KVCache: splitlab's own record of a batch's keys and values, and the bridge to transformers' Cache.

Layout, per layer ``i``: ``keys[i]`` and ``values[i]`` are ``[batch, kv_heads, seq, head_dim]``.
Sequences of different lengths share one tensor by left padding: ``attention_mask`` is ``[batch, seq]`` with
1 for a real token and 0 for a pad slot, so row ``b`` holds ``lengths[b]`` real tokens at its right end.
Every cache carries the ``model_id`` of the model that made it; caches of different models never mix.

This is the only module that touches transformers' Cache classes (their API changed between 4.57 and 5.x:
the forward keyword went from ``past_key_values`` to ``cache``; ``DynamicCache.layers[i].keys`` replaced
``key_cache``).
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache

from ..common.model_id import with_dtype

__all__ = ["KVCache", "CacheMismatchError", "cache_kwarg", "output_cache"]


class CacheMismatchError(ValueError):
    """Caches (or a cache and a model) that do not belong together: different model, dtype or shape."""


def cache_kwarg(model: Any) -> str:
    """Name of the forward() keyword that takes a cache: 'cache' (transformers >= 5.2x) or 'past_key_values'."""
    return _cache_kwarg_of(type(model))


@functools.lru_cache(maxsize=None)
def _cache_kwarg_of(model_cls: type) -> str:  # inspect.signature costs ~20 us: once per model class
    params = inspect.signature(model_cls.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def output_cache(output: Any) -> Any:
    """The cache object of a forward() output, whichever field name this transformers version uses."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


@dataclass
class KVCache:
    """Keys and values of a batch of sequences, one pair per layer.

    Attributes:
        keys, values: lists (one per layer) of tensors ``[batch, kv_heads, seq, head_dim]``.
        attention_mask: ``[batch, seq]`` int64, 1 = real token, 0 = left padding.
        model_id: identity of the model that made the cache (see ``LoadedModel.model_id``).
    """

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    attention_mask: torch.Tensor
    model_id: str
    # The DynamicCache this cache was read from, when splitlab built it and the forward only extended it: the
    # next to_transformers() hands it back instead of building another (a decode loop then reuses one object).
    _transformers: Any = field(default=None, init=False, repr=False, compare=False)

    # --- sizes -----------------------------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        return len(self.keys)

    @property
    def batch_size(self) -> int:
        return self.attention_mask.shape[0]

    @property
    def seq_len(self) -> int:
        """Positions held per row (the longest row; shorter rows are left-padded)."""
        return self.attention_mask.shape[1]

    @property
    def lengths(self) -> torch.Tensor:
        """``[batch]`` number of real tokens per row."""
        return self.attention_mask.sum(dim=1)

    @property
    def dtype(self) -> torch.dtype:
        return self.keys[0].dtype

    @property
    def device(self) -> torch.device:
        return self.keys[0].device

    @property
    def nbytes(self) -> int:
        """Exact bytes held by all key and value tensors (padding slots included)."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    @property
    def shape(self) -> tuple[int, ...]:
        """``(layers, 2, batch, kv_heads, seq, head_dim)``."""
        return (self.num_layers, 2, *self.keys[0].shape)

    def __repr__(self) -> str:
        return (f"KVCache(layers={self.num_layers}, batch={self.batch_size}, kv_heads={self.keys[0].shape[1]}, "
                f"seq={self.seq_len}, head_dim={self.keys[0].shape[3]}, lengths={self.lengths.tolist()}, "
                f"dtype={str(self.dtype).replace('torch.', '')}, nbytes={self.nbytes:,}, model={self.model_id!r})")

    # --- copies ----------------------------------------------------------------------------------------
    def clone(self) -> "KVCache":
        """Deep copy (new storage for every tensor)."""
        return KVCache([k.clone() for k in self.keys], [v.clone() for v in self.values],
                       self.attention_mask.clone(), self.model_id)

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None,
           non_blocking: bool = False) -> "KVCache":
        """Copy to another device and/or dtype. A dtype change also changes ``model_id``'s dtype field, so the
        cache is then only accepted by a model of that dtype."""
        kv = dict(device=device, dtype=dtype, non_blocking=non_blocking)
        model_id = self.model_id
        if dtype is not None and dtype != self.dtype:
            model_id = with_dtype(model_id, dtype)
        return KVCache([k.to(**kv) for k in self.keys], [v.to(**kv) for v in self.values],
                       self.attention_mask.to(device=device or self.device), model_id)

    # --- batching --------------------------------------------------------------------------------------
    def select(self, rows: list[int] | torch.Tensor) -> "KVCache":
        """The cache of a subset of rows, with padding columns that every kept row has removed.

        Raises:
            ValueError: no rows. IndexError: a row outside ``0..batch_size-1``.
        """
        idx = torch.as_tensor(rows, dtype=torch.long, device=self.attention_mask.device)
        if idx.numel() == 0:
            raise ValueError("select() needs at least one row")
        if int(idx.min()) < 0 or int(idx.max()) >= self.batch_size:
            raise IndexError(f"select() rows {idx.tolist()} outside 0..{self.batch_size - 1}")
        mask = self.attention_mask.index_select(0, idx)
        start = int(self.seq_len - mask.sum(dim=1).max())
        cut = lambda t: t.index_select(0, idx.to(t.device))[:, :, start:]  # noqa: E731
        return KVCache([cut(k) for k in self.keys], [cut(v) for v in self.values], mask[:, start:], self.model_id)

    def split(self) -> list["KVCache"]:
        """One unpadded single-row cache per request."""
        return [self.select([b]) for b in range(self.batch_size)]

    @staticmethod
    def merge(caches: list["KVCache"]) -> "KVCache":
        """Stack caches of the same model into one batch, left-padding shorter ones (continuous batching).

        Raises:
            CacheMismatchError: caches from different models, dtypes, devices or layer counts.
            ValueError: an empty list.
        """
        if not caches:
            raise ValueError("merge() needs at least one cache")
        first = caches[0]
        for c in caches[1:]:
            if c.model_id != first.model_id:
                raise CacheMismatchError(f"cannot batch caches of different models: {first.model_id!r} vs "
                                         f"{c.model_id!r}")
            if c.dtype != first.dtype or c.device != first.device:
                raise CacheMismatchError(f"cannot batch caches with different dtype/device: {first.dtype}@"
                                         f"{first.device} vs {c.dtype}@{c.device}")
        if len(caches) == 1:
            return first
        seq = max(c.seq_len for c in caches)

        def pad(t: torch.Tensor, n: int) -> torch.Tensor:  # left-pad the seq dimension (dim 2, or 1 for masks)
            dim = 2 if t.dim() == 4 else 1
            if n == 0:
                return t
            shape = list(t.shape)
            shape[dim] = n
            return torch.cat([t.new_zeros(shape), t], dim=dim)

        keys = [torch.cat([pad(c.keys[i], seq - c.seq_len) for c in caches]) for i in range(first.num_layers)]
        values = [torch.cat([pad(c.values[i], seq - c.seq_len) for c in caches]) for i in range(first.num_layers)]
        mask = torch.cat([pad(c.attention_mask, seq - c.seq_len) for c in caches])
        return KVCache(keys, values, mask, first.model_id)

    # --- transformers bridge ---------------------------------------------------------------------------
    def to_transformers(self) -> DynamicCache:
        """A transformers ``DynamicCache`` holding these tensors (not copies). The model's forward appends to
        it by concatenation, so this KVCache's tensors are left unchanged."""
        cache, self._transformers = self._transformers, None  # hand it over at most once: the forward extends it
        if cache is not None and len(cache.layers) == self.num_layers and all(
                layer.keys is k and layer.values is v for layer, k, v in zip(cache.layers, self.keys, self.values)):
            return cache
        # DynamicCache(pairs) would copy every tensor (it concatenates each onto an empty one): build the layers
        # from empty slices, then hand them the real tensors.
        cache = DynamicCache([(k[:, :, :0], v[:, :, :0]) for k, v in zip(self.keys, self.values)])
        for layer, k, v in zip(cache.layers, self.keys, self.values):
            layer.keys, layer.values = k, v
        cache._splitlab_built = True  # plain DynamicLayers holding a KVCache's tensors, nothing else
        return cache

    @classmethod
    def from_transformers(cls, cache: Any, attention_mask: torch.Tensor, model_id: str) -> "KVCache":
        """Wrap a transformers cache (``DynamicCache`` of 4.57-5.x, the self-attention half of an
        ``EncoderDecoderCache``, or the legacy tuple of (k, v) pairs).

        Raises:
            CacheMismatchError: the cache length differs from ``attention_mask``'s.
        """
        if hasattr(cache, "self_attention_cache"):  # EncoderDecoderCache (GPTBigCode in 4.57): decoder half
            cache = cache.self_attention_cache
        if hasattr(cache, "layers"):
            pairs = [(layer.keys, layer.values) for layer in cache.layers]
        elif hasattr(cache, "key_cache"):
            pairs = list(zip(cache.key_cache, cache.value_cache))
        else:
            pairs = [(k, v) for k, v in cache]
        keys, values = [p[0] for p in pairs], [p[1] for p in pairs]
        if keys[0].shape[2] != attention_mask.shape[1]:
            raise CacheMismatchError(f"cache holds {keys[0].shape[2]} positions but the mask {attention_mask.shape[1]}")
        wrapped = cls(keys, values, attention_mask, model_id)
        if getattr(cache, "_splitlab_built", False):
            wrapped._transformers = cache
        return wrapped
