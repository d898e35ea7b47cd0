"""The one bridge to transformers' Cache classes: the forward keyword, the output field, reading a cache's layers
(full attention or sliding window) and building a ``DynamicCache`` that holds given tensors.

Their API changed between 4.57 and 5.x: the forward keyword went from ``past_key_values`` to ``cache`` (the old
name is still accepted until 5.40); ``DynamicCache.layers[i].keys`` replaced ``key_cache``; sliding layers are
``DynamicSlidingWindowLayer`` objects (``is_sliding``, ``sliding_window`` = W, ``cumulative_length`` = tokens
seen), which keep the last ``W - 1`` positions: the new token is the window's W-th.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any

import torch
from transformers import DynamicCache

__all__ = ["cache_kwarg", "output_cache", "read_layers", "build_dynamic_cache", "empty_dynamic_cache",
           "UnsupportedLayerError"]


class UnsupportedLayerError(TypeError):
    """A cache layer splitlab cannot hold: not full attention and not a sliding window (linear attention,
    state-space layers, layers that share another layer's cache, ...)."""


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


def _window(layer: Any) -> int | None:
    if not getattr(layer, "is_sliding", False):
        return None
    window = getattr(layer, "sliding_window", None)
    if isinstance(window, torch.Tensor):
        window = int(window.item())
    if not isinstance(window, int) or window < 2:
        raise UnsupportedLayerError(f"a sliding cache layer ({type(layer).__name__}) without a usable "
                                    f"sliding_window ({window!r})")
    return window


def read_layers(cache: Any) -> tuple[list[torch.Tensor], list[torch.Tensor], list[int | None], list[int | None]]:
    """``(keys, values, windows, tokens seen)`` per layer of a transformers cache (``DynamicCache`` of 4.57-5.x,
    the self-attention half of an ``EncoderDecoderCache``, or the legacy tuple of (k, v) pairs). ``windows[i]``
    is the sliding window W of a windowed layer (None: full attention); ``tokens seen`` its
    ``cumulative_length`` (None for full layers, whose length is their tensors').

    Raises:
        UnsupportedLayerError: a layer that holds no key/value tensors of its own.
    """
    if hasattr(cache, "self_attention_cache"):  # EncoderDecoderCache (GPTBigCode in 4.57): decoder half
        cache = cache.self_attention_cache
    if hasattr(cache, "layers"):
        keys, values, windows, seen = [], [], [], []
        for i, layer in enumerate(cache.layers):
            k, v = getattr(layer, "keys", None), getattr(layer, "values", None)
            if not isinstance(k, torch.Tensor) or not isinstance(v, torch.Tensor) or k.dim() != 4:
                raise UnsupportedLayerError(
                    f"cache layer {i} is a {type(layer).__name__} holding no [batch, heads, seq, dim] keys and "
                    f"values: splitlab handles full-attention and sliding-window KV layers only")
            w = _window(layer)
            keys.append(k)
            values.append(v)
            windows.append(w)
            seen.append(getattr(layer, "cumulative_length", None) if w is not None else None)
        return keys, values, windows, seen
    if hasattr(cache, "key_cache"):
        pairs = list(zip(cache.key_cache, cache.value_cache))
    else:
        pairs = [(k, v) for k, v, *_ in cache]
    return [p[0] for p in pairs], [p[1] for p in pairs], [None] * len(pairs), [None] * len(pairs)


def _layer(window: int | None):
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer
    return DynamicLayer() if window is None else DynamicSlidingWindowLayer(sliding_window=window)


def build_dynamic_cache(keys: list[torch.Tensor], values: list[torch.Tensor], windows: tuple[int | None, ...],
                        seq_len: int) -> DynamicCache:
    """A ``DynamicCache`` whose layer i holds ``keys[i]``/``values[i]`` themselves (no copy): a plain layer where
    ``windows[i]`` is None, else a sliding layer of that window that has seen ``seq_len`` tokens."""
    if all(w is None for w in windows):
        # DynamicCache(pairs) would copy every tensor (it concatenates each onto an empty one): build the layers
        # from empty slices, then hand them the real tensors.
        cache = DynamicCache([(k[:, :, :0], v[:, :, :0]) for k, v in zip(keys, values)])
        for layer, k, v in zip(cache.layers, keys, values):
            layer.keys, layer.values = k, v
        return cache
    cache = DynamicCache()
    layers = []
    for k, v, w in zip(keys, values, windows):
        layer = _layer(w)
        layer.update(k[:, :, :0], v[:, :, :0])  # initialises dtype and device (4.57 and 5.x alike)
        layer.keys, layer.values = k, v
        if w is not None:
            layer.cumulative_length = seq_len
        layers.append(layer)
    cache.layers = layers
    return cache


def empty_dynamic_cache(windows: tuple[int | None, ...]) -> DynamicCache:
    """An empty ``DynamicCache`` with one layer per entry of ``windows`` (plain, or sliding of that window), for a
    forward that should fill layers of the right kinds (e.g. a prefill writing into a wire buffer)."""
    cache = DynamicCache()
    cache.layers = [_layer(w) for w in windows]
    return cache
