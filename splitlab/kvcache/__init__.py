"""The KV cache: splitlab's own record of a batch's keys and values (:class:`KVCache`, with per-layer lengths
for sliding-window layers), and the one bridge to transformers' Cache classes (:mod:`.bridge`)."""
from .bridge import UnsupportedLayerError, cache_kwarg, empty_dynamic_cache, output_cache
from .cache import CacheMismatchError, KVCache

__all__ = ["KVCache", "CacheMismatchError", "UnsupportedLayerError", "cache_kwarg", "output_cache",
           "empty_dynamic_cache"]
