"""The KV cache: splitlab's own record of a batch's keys and values (:class:`KVCache`), and the one bridge to
transformers' Cache classes."""
from .cache import CacheMismatchError, KVCache, cache_kwarg, output_cache

__all__ = ["KVCache", "CacheMismatchError", "cache_kwarg", "output_cache"]
