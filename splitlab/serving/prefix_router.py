"""Prefix caching in the serving path, and a router that sends a request to the worker holding its prefix.

**The caches.** With ``ServingConfig.prefix_cache_tokens`` every worker that prefills (colocated workers, or the
prefill pool of a split) keeps a :class:`~.prefix.PrefixCache` (:attr:`Worker.prefix_cache`): the whole blocks of
the prompts it prefilled, up to a capacity in tokens, least recently used evicted first. When the worker admits a
request, the prompt's longest cached prefix counts as already prefilled (the slot starts at that many tokens, at
most the prompt less one token, which must be computed for the first output token), so the prefill computes only
the uncached tokens, attending to the cached ones: a cost model charges the forward of ``n`` new tokens after
``p`` cached ones (:func:`~.executor.prefill_forwards`, as for a chunk). The request records
``Request.cached_tokens``. When its prefill ends, its prompt's blocks go into that worker's cache. This is vLLM's
automatic prefix caching and SGLang's RadixAttention seen from the scheduler (:mod:`.prefix`). Simplifications,
stated: the cache is held apart from the KV budget (vLLM keeps it in the free blocks of the KV pool), a request
still reserves its whole cache, and several prompts with cached prefixes in one prefill step are charged one
forward each (a continuation, like chunks). The real-model back ends (emulated, distributed) would need the cached
keys and values themselves; the serving path keeps only block hashes, so they refuse a prefix cache.

**The router.** :class:`PrefixRouter` (``routing="prefix-aware"``) sends a new request to the live worker of the
first pool whose cache holds its longest prefix, among the workers that owe at most ``prefix_balance_tokens``
tokens more than the least-loaded one (load permitting): the rule of Ray Serve's ``PrefixCacheAffinityRouter``,
which routes by prefix only while the queue lengths differ by less than an imbalance threshold and by load
otherwise (docs.ray.io, serve/llm/prefix-aware-request-router), and of SGLang's cache-aware router (SMG), which
"switches between cache affinity and load-based routing based on real-time worker state". Dynamo's KV router
weighs the same two things as one cost, the prefill tokens left after the overlap (input tokens - overlap blocks x
block size) plus the active load (docs.nvidia.com/dynamo, router design). Among equal matches the least-loaded
worker wins (then the lowest index); when no worker holds any of the prompt, the one holding the fewest cached
tokens (splitlab's choice: a new prefix starts where it evicts least), then the least-loaded. ``routing=
"least-loaded"`` with a prefix cache is the plain router: hits come only by chance.
"""
from __future__ import annotations

import math
from typing import Sequence

from .prefix import PrefixCache
from .request import Request
from .router import Router
from .scheduler import Worker

__all__ = ["PrefixRouter", "attach_prefix_caches", "check_prefix_backend", "prefix_stats"]


def attach_prefix_caches(cfg, pool: Sequence[Worker]) -> None:
    """Give every worker of ``pool`` (those that prefill) an empty :class:`~.prefix.PrefixCache` when ``cfg`` asks
    for prefix caching (``prefix_cache_tokens``); else leave them without one."""
    tokens = cfg.prefix_cache_tokens
    if tokens is None:
        return
    capacity = None if tokens == math.inf else max(1, int(tokens) // cfg.prefix_block_tokens)
    for w in pool:
        w.prefix_cache = PrefixCache(cfg.prefix_block_tokens, capacity)


def check_prefix_backend(cfg, backend) -> None:
    """Refuse a prefix cache on a back end that runs a real model.

    Raises:
        ValueError: ``cfg.prefix_cache_tokens`` is set and ``backend`` is not a cost model (emulated, distributed):
            their prefill would need the cached keys and values, which the serving path does not keep."""
    if cfg.prefix_cache_tokens is not None and not hasattr(backend, "cost"):
        raise ValueError(f"prefix_cache_tokens (and routing='prefix-aware') run on the simulated back end only: the "
                         f"{getattr(backend, 'name', type(backend).__name__)} back end runs a real model, whose "
                         f"prefill would need the cached prefix's keys and values, and the serving path keeps only "
                         f"block hashes (serving.prefix.prefill_cached shows the real thing on one worker)")


class PrefixRouter(Router):
    """The cluster's :class:`~.router.Router` under ``routing="prefix-aware"`` (see the module docstring): the
    first pool's worker with the longest cached prefix of the request, load permitting; prefilled caches go to the
    decode pool as :class:`~.router.Router` sends them."""

    def __init__(self, cfg, pool: Sequence[Worker], decoders: Sequence[Worker], indexed: bool = False):
        super().__init__(pool, decoders, indexed)
        self.balance = cfg.prefix_balance_tokens

    def first(self, t: float, r: Request | None = None) -> Worker | None:
        least = super().first(t, r)
        if r is None or least is None:
            return least
        bound = least.load(t) + self.balance
        chain = least.prefix_cache.chain(r.prompt)
        best, key = None, None
        for w in self.pool:
            if not w.alive:
                continue
            load = w.load(t)
            if load > bound:
                continue
            hit = w.prefix_cache.match(r.prompt, chain)
            k = (-hit, w.prefix_cache.cached_tokens if hit == 0 else 0, load, w.index)
            if key is None or k < key:
                best, key = w, k
        return best


def prefix_stats(result) -> dict:
    """A run's prefix-cache hits: ``prefix_hit_rate`` (prompt tokens found cached / prompt tokens of the requests
    prefilled, in [0, 1]), ``prefix_hit_requests`` (the share of them that found any), ``cached_tokens`` (in all)
    and ``prefilled_requests``; ``math.nan`` rates when no request was prefilled."""
    done = [r for r in result.requests if r.prefill_end_s is not None]
    cached = sum(r.cached_tokens for r in done)
    prompt = sum(r.prompt_len for r in done)
    return dict(prefix_hit_rate=cached / prompt if prompt else math.nan,
                prefix_hit_requests=sum(r.cached_tokens > 0 for r in done) / len(done) if done else math.nan,
                cached_tokens=cached, prefilled_requests=len(done))
