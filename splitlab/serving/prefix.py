"""Prefix caching: keep the KV cache of prompt prefixes that many requests share (a system prompt, a few-shot
preamble, a document), and prefill only what follows them.

:class:`PrefixCache` finds a prompt's longest cached prefix in whole blocks of ``block_tokens`` tokens, each
block named by a hash of itself and of every block before it (vLLM's automatic prefix caching; SGLang keeps the
same prefixes in a radix tree, RadixAttention: Zheng et al., "SGLang: Efficient Execution of Structured Language
Model Programs", NeurIPS 2024). :func:`prefill_cached` prefills a prompt on top of its cached prefix: the
forward reads only the uncached tokens, attending to the cached keys and values, and the cache it returns is
the one a full prefill builds (checked in the tests).

With the split, prefill compute is only saved where the prefill runs: the cache belongs on the prefill workers
(Mooncake keeps its KV pool beside the prefill instances and its scheduler sends a request to the one holding
the longest prefix: Qin et al., "Mooncake", FAST 2025; NVIDIA Dynamo's KV-aware router does the same).
:func:`route_prefix_aware` is that choice; :func:`simulate_routing` counts the prompt tokens each routing policy
makes a pool of prefill workers compute. In a serving run the same caches and choice are
``ServingConfig(prefix_cache_tokens=..., routing="prefix-aware")`` (:mod:`.prefix_router`).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

__all__ = ["PrefixCache", "CachedPrefill", "prefill_cached", "route_prefix_aware", "simulate_routing"]


def _prefix_of(cache, n: int):
    """The first ``n`` positions of a one-row cache (views)."""
    from ..kvcache import KVCache

    return KVCache([k[:, :, :n] for k in cache.keys], [v[:, :, :n] for v in cache.values],
                   cache.attention_mask[:, :n], cache.model_id)


class PrefixCache:
    """Cached prompt prefixes in whole blocks, evicted least recently used first.

    Args:
        block_tokens: tokens per block; only whole blocks are cached and matched.
        capacity_blocks: most blocks kept (None: unlimited). When full, the least recently used blocks go,
            deepest first, so that a kept block's whole chain stays reachable.

    Attributes:
        queries, hit_tokens, query_tokens: lookups so far, prompt tokens found cached, prompt tokens asked for.

    Raises:
        ValueError: block_tokens < 1 or capacity_blocks < 1.
    """

    def __init__(self, block_tokens: int = 16, capacity_blocks: int | None = None):
        if block_tokens < 1 or (capacity_blocks is not None and capacity_blocks < 1):
            raise ValueError(f"need block_tokens >= 1 and capacity_blocks >= 1 (or None), got {block_tokens}, "
                             f"{capacity_blocks}")
        self.block_tokens, self.capacity_blocks = int(block_tokens), capacity_blocks
        self._blocks: OrderedDict[int, tuple[object, int]] = OrderedDict()  # chain hash -> (cache, its tokens)
        self.queries = self.hit_tokens = self.query_tokens = 0

    def __len__(self) -> int:
        """Blocks held."""
        return len(self._blocks)

    def chain(self, prompt: Sequence[int]) -> list[int]:
        """The chain hash of every whole block of ``prompt`` (one per block; block i's covers blocks 0..i)."""
        return self._chain(prompt)

    @property
    def cached_tokens(self) -> int:
        """Tokens held (blocks x ``block_tokens``)."""
        return len(self._blocks) * self.block_tokens

    def _chain(self, prompt: Sequence[int]) -> list[int]:
        """The chain hash of every whole block of ``prompt``: block i's hash covers blocks 0..i."""
        out, h, B = [], 0, self.block_tokens
        for i in range(len(prompt) // B):
            h = hash((h, tuple(prompt[i * B:(i + 1) * B])))
            out.append(h)
        return out

    def match(self, prompt: Sequence[int], chain: Sequence[int] | None = None) -> int:
        """Tokens of ``prompt``'s longest cached prefix (a multiple of ``block_tokens``); counts nothing.
        ``chain``: the prompt's block hashes (:meth:`chain`) when the caller has them (a router asking every
        worker's cache about one prompt hashes it once)."""
        n = 0
        for h in self._chain(prompt) if chain is None else chain:
            if h not in self._blocks:
                break
            n += self.block_tokens
        return n

    def lookup(self, prompt: Sequence[int], limit: int | None = None, chain: Sequence[int] | None = None):
        """``(tokens, cache)``: the longest cached prefix of ``prompt`` (at most ``limit`` tokens) and its KV cache
        (None when nothing, or only token ids, are cached). Counts the query and marks its blocks used. ``chain``:
        the prompt's block hashes (:meth:`chain`) when the caller has them, as for :meth:`match`."""
        chain = self._chain(prompt) if chain is None else chain
        hits = []
        for h in chain:
            if h not in self._blocks:
                break
            hits.append(h)
        n = len(hits) * self.block_tokens
        if limit is not None:
            n = min(n, max(0, limit))
        for h in reversed(hits):  # deepest first, so the shallow blocks are the most recently used
            self._blocks.move_to_end(h)
        self.queries += 1
        self.hit_tokens += n
        self.query_tokens += len(prompt)
        if n == 0:
            return 0, None
        cache, _ = self._blocks[hits[-1]]
        return n, (None if cache is None else _prefix_of(cache, n))

    def insert(self, prompt: Sequence[int], cache=None) -> int:
        """Keep the whole blocks of ``prompt`` (with ``cache``, the prompt's one-row KV cache holding at least its
        whole blocks, or None to index token ids only). Returns the blocks added."""
        if cache is not None and (cache.batch_size != 1 or cache.seq_len < len(prompt) // self.block_tokens
                                  * self.block_tokens):
            raise ValueError(f"insert() takes the one-row cache of the prompt, got {cache!r}")
        added, chain = 0, self._chain(prompt)
        for i, h in enumerate(chain):
            if h not in self._blocks:
                added += 1
            if h not in self._blocks or (self._blocks[h][0] is None and cache is not None):
                self._blocks[h] = (cache, (i + 1) * self.block_tokens)
        for h in reversed(chain):  # deepest first: the shallow blocks end up the most recently used
            self._blocks.move_to_end(h)
        while self.capacity_blocks is not None and len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
        return added

    @property
    def hit_rate(self) -> float:
        """Share of the prompt tokens asked for that were found cached."""
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0


@dataclass
class CachedPrefill:
    """Result of :func:`prefill_cached`: the prompt's whole cache, the logits of its first output token
    ``[1, vocab]``, the forward's seconds, and how many prompt tokens came from the cache or were computed."""

    cache: object
    logits: object
    seconds: float
    cached_tokens: int
    computed_tokens: int


def prefill_cached(lm, prefix_cache: PrefixCache, prompt: Sequence[int], store: bool = True) -> CachedPrefill:
    """Prefill one prompt, reading only the tokens after its longest cached prefix (at least the last token is
    computed, for the logits of the next one), then (``store``) keep its blocks for later requests.

    Raises:
        ValueError: an empty prompt or one beyond the model's context.
    """
    import torch

    from ..phases.engine import forward_logits

    prompt = list(prompt)
    if not 1 <= len(prompt) <= lm.max_context:
        raise ValueError(f"prompt of {len(prompt)} tokens: need 1..{lm.max_context}")
    n, cached = prefix_cache.lookup(prompt, limit=len(prompt) - 1)
    if cached is not None and cached.model_id != lm.model_id:
        raise ValueError(f"the prefix cache holds KV of {cached.model_id!r}, not of {lm.model_id!r}")
    if cached is None:
        n = 0
    ids = torch.tensor([prompt[n:]], dtype=torch.long, device=lm.device)
    mask = torch.ones(1, len(prompt), dtype=torch.long, device=lm.device)
    logits, cache, seconds = forward_logits(lm, ids, mask, cached, padded=False)
    if store:
        prefix_cache.insert(prompt, cache)
    return CachedPrefill(cache, logits, seconds, n, len(prompt) - n)


def route_prefix_aware(prompt: Sequence[int], caches: Sequence[PrefixCache], loads: Sequence[float]) -> int:
    """The worker to prefill ``prompt``: the one whose cache holds its longest prefix; among equals, the least
    loaded (``loads``: e.g. prompt tokens each worker still has to compute)."""
    matches = [c.match(prompt) for c in caches]
    return min(range(len(caches)), key=lambda i: (-matches[i], loads[i], i))


def simulate_routing(prompts: Sequence[Sequence[int]], workers: int, policy: str = "prefix-aware",
                     block_tokens: int = 16, capacity_blocks: int | None = None):
    """Send ``prompts`` in order to ``workers`` prefill workers, each with its own :class:`PrefixCache` (token ids
    only), and count what each must compute.

    Args:
        policy: "round-robin" (the cache plays no part in the choice), "least-loaded" (fewest prompt tokens
            computed so far) or "prefix-aware" (:func:`route_prefix_aware`, loads = tokens computed so far).

    Returns:
        A DataFrame, one row per prompt: ``worker``, ``prompt_tokens``, ``cached_tokens``, ``computed_tokens``.

    Raises:
        ValueError: an unknown policy or workers < 1.
    """
    import pandas as pd

    if policy not in ("round-robin", "least-loaded", "prefix-aware"):
        raise ValueError(f"policy must be 'round-robin', 'least-loaded' or 'prefix-aware', got {policy!r}")
    if workers < 1:
        raise ValueError(f"need at least one worker, got {workers}")
    caches = [PrefixCache(block_tokens, capacity_blocks) for _ in range(workers)]
    computed = [0] * workers
    rows = []
    for i, prompt in enumerate(prompts):
        if policy == "round-robin":
            w = i % workers
        elif policy == "least-loaded":
            w = min(range(workers), key=lambda j: (computed[j], j))
        else:
            w = route_prefix_aware(prompt, caches, computed)
        n, _ = caches[w].lookup(prompt, limit=len(prompt) - 1)
        caches[w].insert(prompt)
        computed[w] += len(prompt) - n
        rows.append(dict(worker=w, prompt_tokens=len(prompt), cached_tokens=n, computed_tokens=len(prompt) - n))
    return pd.DataFrame(rows)
