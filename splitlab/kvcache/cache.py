"""KVCache: splitlab's own record of a batch's keys and values, and the bridge to transformers' Cache.

Layout, per layer ``i``: ``keys[i]`` is ``[batch, kv_heads_i, n_i, k_dim_i]`` and ``values[i]`` is
``[batch, kv_heads_i, n_i, v_dim_i]`` (MLA: one latent "head", keys the ``kv_lora_rank`` latent, values the RoPE
key). Sequences of different lengths share one tensor by left padding: ``attention_mask`` is ``[batch, seq]``
with 1 for a real token and 0 for a pad slot, so row ``b`` holds ``lengths[b]`` real tokens at its right end.

Per-layer lengths: a full-attention layer holds every column of that grid (``n_i = seq``); a sliding-window layer
of window ``W`` (``windows[i]``) holds only the last ``n_i = min(seq, W - 1)`` columns, what the next token can
still attend to. The mask always keeps all ``seq`` columns (positions and full layers need them). Because left
padding is contiguous, column distance equals position distance in every row, so one width per layer serves the
whole batch. Every cache carries the ``model_id`` of the model that made it; caches of different models never mix.

Only this part touches transformers' Cache classes (:mod:`splitlab.kvcache.bridge`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache

from ..common.model_id import with_dtype
from .bridge import UnsupportedLayerError, build_dynamic_cache, read_layers

__all__ = ["KVCache", "CacheMismatchError"]


class CacheMismatchError(ValueError):
    """Caches (or a cache and a model) that do not belong together: different model, dtype or shape."""


def _left_pad(t: torch.Tensor, n: int, dim: int) -> torch.Tensor:
    if n <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = n
    return torch.cat([t.new_zeros(shape), t], dim=dim)


@dataclass
class KVCache:
    """Keys and values of a batch of sequences, one pair per layer.

    Attributes:
        keys, values: lists (one per layer) of tensors ``[batch, kv_heads, n_i, head_dim]`` (see the module doc:
            ``n_i`` is ``seq`` for a full-attention layer, ``min(seq, W - 1)`` for a sliding one).
        attention_mask: ``[batch, seq]`` int64, 1 = real token, 0 = left padding.
        model_id: identity of the model that made the cache (see ``LoadedModel.model_id``).
        windows: per layer, the sliding window ``W`` or None (full attention); None for all-full.
    """

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    attention_mask: torch.Tensor
    model_id: str
    windows: tuple[int | None, ...] | None = None
    # The DynamicCache this cache was read from, when splitlab built it and the forward only extended it: the
    # next to_transformers() hands it back instead of building another (a decode loop then reuses one object).
    _transformers: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.windows = (None,) * len(self.keys) if self.windows is None else tuple(self.windows)
        if len(self.windows) != len(self.keys) or len(self.values) != len(self.keys):
            raise CacheMismatchError(f"{len(self.keys)} key, {len(self.values)} value tensors and "
                                     f"{len(self.windows)} windows: one of each per layer")

    # --- sizes -----------------------------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        return len(self.keys)

    @property
    def batch_size(self) -> int:
        return self.attention_mask.shape[0]

    @property
    def seq_len(self) -> int:
        """Positions per row of the batch's grid (the longest row; shorter rows are left-padded). A sliding
        layer holds only the last ``min(seq_len, W - 1)`` of them (:meth:`layer_len`)."""
        return self.attention_mask.shape[1]

    @property
    def lengths(self) -> torch.Tensor:
        """``[batch]`` number of real tokens per row."""
        return self.attention_mask.sum(dim=1)

    def layer_len(self, i: int, seq: int | None = None) -> int:
        """Columns layer ``i`` holds when the grid has ``seq`` columns (default: this cache's)."""
        seq = self.seq_len if seq is None else seq
        w = self.windows[i]
        return seq if w is None else min(seq, w - 1)

    @property
    def layer_lengths(self) -> tuple[int, ...]:
        """Columns each layer's tensors hold."""
        return tuple(k.shape[2] for k in self.keys)

    @property
    def dtype(self) -> torch.dtype:
        return self.keys[0].dtype

    @property
    def device(self) -> torch.device:
        return self.keys[0].device

    @property
    def nbytes(self) -> int:
        """Exact bytes held by all key and value tensors (padding slots included; sliding layers at most their
        window)."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    @property
    def uniform(self) -> bool:
        """Every K and V tensor has one shape (no sliding layer cut below ``seq_len``, K as wide as V)."""
        shape = self.keys[0].shape
        return all(t.shape == shape for t in (*self.keys, *self.values))

    @property
    def shape(self) -> tuple[int, ...]:
        """``(layers, 2, batch, kv_heads, seq, head_dim)`` of a cache whose tensors all have one shape.

        Raises:
            ValueError: layers of different lengths (sliding windows) or K and V of different widths (MLA): use
                :attr:`layer_shapes`.
        """
        if not self.uniform:
            raise ValueError(f"this cache's layers differ in shape: {self.layer_shapes}; use layer_shapes")
        return (self.num_layers, 2, *self.keys[0].shape)

    @property
    def layer_shapes(self) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """``(K shape, V shape)`` per layer."""
        return [(tuple(k.shape), tuple(v.shape)) for k, v in zip(self.keys, self.values)]

    def check(self) -> None:
        """Raise :class:`CacheMismatchError` unless every layer holds the columns its kind keeps
        (:meth:`layer_len`) for every row of the mask, with K and V agreeing."""
        batch, seq = self.attention_mask.shape
        for i, (k, v) in enumerate(zip(self.keys, self.values)):
            n = self.layer_len(i, seq)
            if k.dim() != 4 or v.dim() != 4 or k.shape[:3] != v.shape[:3] or k.shape[0] != batch or k.shape[2] != n:
                kind = "full attention" if self.windows[i] is None else f"sliding window {self.windows[i]}"
                raise CacheMismatchError(
                    f"cache layer {i} ({kind}) holds K {tuple(k.shape)} and V {tuple(v.shape)}, but a mask of "
                    f"{batch} rows x {seq} positions needs [{batch}, heads, {n}, dim] for both")

    def __repr__(self) -> str:
        lens = self.layer_lengths
        held = f"seq={self.seq_len}" if len(set(lens)) == 1 and lens[0] == self.seq_len else \
            f"seq={self.seq_len} (layers hold {list(lens)})"
        k, v = self.keys[0], self.values[0]
        dims = f"head_dim={k.shape[3]}" if k.shape[3] == v.shape[3] else f"k_dim={k.shape[3]}, v_dim={v.shape[3]}"
        return (f"KVCache(layers={self.num_layers}, batch={self.batch_size}, kv_heads={k.shape[1]}, {held}, "
                f"{dims}, lengths={self.lengths.tolist()}, dtype={str(self.dtype).replace('torch.', '')}, "
                f"nbytes={self.nbytes:,}, model={self.model_id!r})")

    # --- copies ----------------------------------------------------------------------------------------
    def _like(self, keys, values, mask, model_id=None) -> "KVCache":
        return KVCache(keys, values, mask, self.model_id if model_id is None else model_id, self.windows)

    def clone(self) -> "KVCache":
        """Deep copy (new storage for every tensor)."""
        return self._like([k.clone() for k in self.keys], [v.clone() for v in self.values],
                          self.attention_mask.clone())

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None,
           non_blocking: bool = False) -> "KVCache":
        """Copy to another device and/or dtype. A dtype change also changes ``model_id``'s dtype field, so the
        cache is then only accepted by a model of that dtype."""
        kv = dict(device=device, dtype=dtype, non_blocking=non_blocking)
        model_id = self.model_id
        if dtype is not None and dtype != self.dtype:
            model_id = with_dtype(model_id, dtype)
        return self._like([k.to(**kv) for k in self.keys], [v.to(**kv) for v in self.values],
                          self.attention_mask.to(device=device or self.device), model_id)

    # --- batching --------------------------------------------------------------------------------------
    def select(self, rows: list[int] | torch.Tensor) -> "KVCache":
        """The cache of a subset of rows, with padding columns that every kept row has removed (a sliding layer
        keeps the last ``min(new seq, W - 1)`` columns).

        Raises:
            ValueError: no rows. IndexError: a row outside ``0..batch_size-1``.
        """
        idx = torch.as_tensor(rows, dtype=torch.long, device=self.attention_mask.device)
        if idx.numel() == 0:
            raise ValueError("select() needs at least one row")
        if int(idx.min()) < 0 or int(idx.max()) >= self.batch_size:
            raise IndexError(f"select() rows {idx.tolist()} outside 0..{self.batch_size - 1}")
        mask = self.attention_mask.index_select(0, idx)
        seq = int(mask.sum(dim=1).max())

        def cut(t: torch.Tensor, i: int) -> torch.Tensor:
            return t.index_select(0, idx.to(t.device))[:, :, t.shape[2] - self.layer_len(i, seq):]

        return self._like([cut(k, i) for i, k in enumerate(self.keys)],
                          [cut(v, i) for i, v in enumerate(self.values)], mask[:, self.seq_len - seq:])

    def split(self) -> list["KVCache"]:
        """One unpadded single-row cache per request."""
        return [self.select([b]) for b in range(self.batch_size)]

    @staticmethod
    def merge(caches: list["KVCache"]) -> "KVCache":
        """Stack caches of the same model into one batch, left-padding shorter ones (continuous batching); a
        sliding layer is padded only up to ``min(seq, W - 1)`` columns.

        Raises:
            CacheMismatchError: caches from different models, dtypes, devices, layer counts or windows.
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
            if c.windows != first.windows:
                raise CacheMismatchError(f"cannot batch caches with different layers: windows {first.windows} vs "
                                         f"{c.windows}")
        if len(caches) == 1:
            return first
        seq = max(c.seq_len for c in caches)

        def stack(tensors: str, i: int) -> torch.Tensor:
            n = first.layer_len(i, seq)
            return torch.cat([_left_pad(getattr(c, tensors)[i], n - c.layer_len(i), 2) for c in caches])

        keys = [stack("keys", i) for i in range(first.num_layers)]
        values = [stack("values", i) for i in range(first.num_layers)]
        mask = torch.cat([_left_pad(c.attention_mask, seq - c.seq_len, 1) for c in caches])
        return first._like(keys, values, mask)

    # --- transformers bridge ---------------------------------------------------------------------------
    def to_transformers(self) -> DynamicCache:
        """A transformers ``DynamicCache`` holding these tensors (not copies): plain layers, and sliding-window
        layers (``DynamicSlidingWindowLayer``, having seen ``seq_len`` tokens) where ``windows`` says. The
        model's forward appends by concatenation, so this KVCache's tensors are left unchanged."""
        cache, self._transformers = self._transformers, None  # hand it over at most once: the forward extends it
        if cache is not None and len(cache.layers) == self.num_layers and all(
                layer.keys is k and layer.values is v for layer, k, v in zip(cache.layers, self.keys, self.values)):
            return cache
        cache = build_dynamic_cache(self.keys, self.values, self.windows, self.seq_len)
        cache._splitlab_built = True  # layers holding a KVCache's tensors, nothing else
        return cache

    @classmethod
    def from_transformers(cls, cache: Any, attention_mask: torch.Tensor, model_id: str,
                          compact: bool = True) -> "KVCache":
        """Wrap a transformers cache (``DynamicCache`` of 4.57-5.x with full and sliding-window layers, the
        self-attention half of an ``EncoderDecoderCache``, or the legacy tuple of (k, v) pairs).

        A sliding layer's tensors right after a prefill are a view of the whole prompt's keys: with ``compact``
        they are copied to their own storage, so the cache really holds (and reports) only its window (off for
        a cache whose layers are views of one wire buffer on purpose).

        Raises:
            CacheMismatchError: a layer's length does not fit ``attention_mask`` (named per layer); a layer kind
                splitlab does not handle (linear attention, shared layers, ...).
        """
        try:
            keys, values, windows, seen = read_layers(cache)
        except UnsupportedLayerError as err:
            raise CacheMismatchError(str(err)) from None
        seq = attention_mask.shape[1]
        for i, w in enumerate(windows):
            if w is None:
                continue
            if seen[i] is not None and int(seen[i]) != seq:
                raise CacheMismatchError(f"cache layer {i} (sliding window {w}) has seen {int(seen[i])} tokens but "
                                         f"the mask holds {seq} positions")
            k, v = keys[i], values[i]
            if compact and k.untyped_storage().nbytes() > 2 * k.numel() * k.element_size():  # the whole prompt's
                keys[i], values[i] = k.clone(), v.clone()
                if hasattr(cache, "layers"):
                    cache.layers[i].keys, cache.layers[i].values = keys[i], values[i]
        if windows and windows[0] is None and keys[0].shape[2] != seq:
            raise CacheMismatchError(f"cache holds {keys[0].shape[2]} positions but the mask {seq}")
        wrapped = cls(keys, values, attention_mask, model_id, tuple(windows))
        wrapped.check()
        if getattr(cache, "_splitlab_built", False):
            wrapped._transformers = cache
        return wrapped
