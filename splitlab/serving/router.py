"""Where work goes: the router picks the worker of a pool for each new request, and the decode worker for each
prefilled cache. Separate from the batching policy (:mod:`.scheduler`), which decides what a worker runs next.

- A new request goes to the live worker of its pool that owes the least work (prompt tokens still to prefill plus
  output tokens still to generate, :meth:`~.scheduler.Worker.load`; ties to the lowest index), as vidur's and
  vLLM's least-loaded routers balance tokens rather than request counts.
- A prefilled cache goes to the least-loaded live decode worker that has room for the request's whole cache
  (prompt + max_new_tokens). If none has room, it waits on the prefill worker: back-pressure, as DistServe's
  decode instances pull a cache only when they have memory for it.

:func:`route` and :func:`pick_decode` scan the pool (every back end). On the simulator's fast path (:mod:`.fast`)
a :class:`Router` asks a :class:`LoadIndex` per pool instead, which gives the same worker in about O(log W) per
request: the tests compare both runs decision for decision.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from typing import Callable, Sequence

from .scheduler import Worker, steps_ended

__all__ = ["route", "pick_decode", "LoadIndex", "Router"]


def route(pool: Sequence[Worker], t: float = 0.0) -> Worker | None:
    """The live worker of ``pool`` that owes the least work at ``t`` (an arrival), or None when none is left."""
    best, least = None, 0
    for w in pool:
        if w.alive:
            load = w.load(t) if w.ahead is not None or w.role != "colocated" else w.prompt_owed + w.output_owed
            if best is None or load < least:
                best, least = w, load
    return best


def pick_decode(decoders: Sequence[Worker], tokens: int, t: float = 0.0) -> Worker | None:
    """The least-loaded live decode worker that can reserve ``tokens`` KV positions now (``t``), or None."""
    best, least = None, 0
    for d in decoders:
        if d.alive and d.memory.can_reserve(tokens):
            load = d.load(t, inclusive=True)
            if best is None or load < least:
                best, least = d, load
    return best


class LoadIndex:
    """The loads of one pool's workers in a heap, so that the least-loaded worker costs O(log W), not O(W).

    A worker's load changes when work reaches or leaves it (the cluster calls :meth:`refresh` then) and, inside a
    decode stretch (:mod:`.fast`), falls at every silent step's end. The heap holds, per worker, a bound its load
    cannot go below until a given time: its load (outside a stretch), or its load once the next ``LOOKAHEAD``
    silent steps have ended (inside one; the bound is renewed when a query passes that time). A query takes the
    workers in the order of their bounds, computes the exact load of each at ``t``, and stops as soon as the next
    bound cannot beat the best exact load found: the worker a scan of the pool picks (least load, ties to the
    lowest index). Entries carry a version; older ones are skipped. Queries come in time order, as the event loop
    makes them.

    An entry is one int, ``(bound * W + index) << 32 | version``: heap order is the order of ``(bound, index)``
    (W workers, ``0 <= index < W``), compared as one int rather than as a tuple (a query's walk pops and pushes
    about 11 entries on 64 busy workers: the router's cost).
    """

    LOOKAHEAD = 16  # tokens
    BITS = 32  # an entry's version: its low bits
    MASK = (1 << BITS) - 1

    def __init__(self, pool: Sequence[Worker]):
        self.pool = list(pool)
        self.size = max(1, len(self.pool))
        self.version = [0] * len(self.pool)
        self.static = [0] * len(self.pool)
        self.stretch: list = [None] * len(self.pool)  # the decode stretch (Worker.ahead) each entry was keyed in
        self.current: list[int] = [i << self.BITS for i in range(len(self.pool))]
        self.heap: list[int] = []       # entries: (lower bound of the load, index, version) as one int
        self.expiry: list[tuple] = []   # (time until which the bound holds, index, version)
        self.stale: set[Worker] = set()  # workers whose load changed since the last query (see :meth:`refresh`)
        for w in self.pool:
            self.refresh(w)

    def refresh(self, w: Worker) -> None:
        """``w``'s load changed (or a decode stretch started or ended on it). The cluster adds such workers to
        :attr:`stale` instead, and the next query refreshes each of them once."""
        i = w.index
        if not w.alive:
            self.version[i] = self.version[i] % self.MASK + 1  # 1 .. MASK: never 0 again
            return
        # a decode worker owes prompt tokens only under conditional disaggregation (:mod:`.conditional`)
        static = w.prompt_owed if w.role == "prefill" else w.prompt_owed + w.output_owed
        if static == self.static[i] and w.ahead is self.stretch[i] and self.version[i]:
            return  # the same load and the same stretch (or none): its entry's bound still holds
        self.static[i], self.stretch[i] = static, w.ahead
        self._bound(w, w.ahead_done)

    def _bound(self, w: Worker, counted: int) -> None:
        """Key ``w`` by its load once ``counted + LOOKAHEAD`` steps of its stretch have ended."""
        i = w.index
        v = self.version[i] = self.version[i] % self.MASK + 1
        bound = self.static[i]
        if w.ahead is not None:
            upto = counted + max(1, self.LOOKAHEAD // w.ahead_n)
            if upto < len(w.ahead):
                heapq.heappush(self.expiry, (w.ahead[upto], i, v))
            else:
                upto = len(w.ahead)
            bound -= (upto - w.ahead_done) * w.ahead_n
        entry = self.current[i] = (bound * self.size + i) << self.BITS | v
        if len(self.heap) > 4 * len(self.pool) + 64:  # drop the stale entries now and then
            mask, version = self.MASK, self.version
            self.heap = [e for i, e in enumerate(self.current) if e & mask == version[i]]
            heapq.heapify(self.heap)
        else:
            heapq.heappush(self.heap, entry)

    def least(self, t: float, inclusive: bool = False, room: Callable[[Worker], bool] | None = None
              ) -> Worker | None:
        """The live worker with the least load at ``t`` (ties to the lowest index) for which ``room(worker)``
        holds, or None: the worker :func:`route` (``inclusive=False``) or :func:`pick_decode` would pick."""
        if self.stale:
            for w in self.stale:
                self.refresh(w)
            self.stale.clear()
        expiry, version, pool = self.expiry, self.version, self.pool
        while expiry and (expiry[0][0] < t or (inclusive and expiry[0][0] == t)):
            _, i, v = heapq.heappop(expiry)
            if v == version[i]:
                self._bound(pool[i], steps_ended(pool[i], t, inclusive))
        heap, pop, bits, mask, size = self.heap, heapq.heappop, self.BITS, self.MASK, self.size  # after the bounds
        while heap and heap[0] & mask != version[(heap[0] >> bits) % size]:
            pop(heap)
        if heap:  # the usual case: the top's bound is its exact load (no stretch), which no other load beats
            w = pool[(heap[0] >> bits) % size]
            if w.ahead is None and (room is None or room(w)):
                return w
        held, best, key = [], None, None  # key: the best (load, index) as load * W + index
        static, ended = self.static, bisect_right if inclusive else bisect_left
        while heap:
            e = heap[0]
            ordered = e >> bits  # bound * W + index
            i = ordered % size
            if e & mask != version[i]:
                pop(heap)
                continue
            if key is not None and ordered >= key:
                break
            held.append(pop(heap))
            w = pool[i]
            if room is not None and not room(w):
                continue
            ahead = w.ahead  # the load at t (Worker.load, inlined: this loop is the router's hot path)
            if ahead is not None:
                ordered = (static[i] - (ended(ahead, t) - w.ahead_done) * w.ahead_n) * size + i
            if key is None or ordered < key:
                best, key = w, ordered
        for e in held:
            heapq.heappush(heap, e)
        return best


class Router:
    """The cluster's router: :func:`route` and :func:`pick_decode` by a scan of the pool, or (``indexed``: the
    simulator's fast path) by one :class:`LoadIndex` per pool, which must hear of every worker whose load changed
    (:meth:`changed`)."""

    def __init__(self, pool: Sequence[Worker], decoders: Sequence[Worker], indexed: bool = False):
        self.pool, self.decoders = list(pool), list(decoders)
        self.indexes = (LoadIndex(pool), LoadIndex(decoders)) if indexed else None

    def changed(self, w: Worker) -> None:
        """``w``'s load changed, or a decode stretch began or ended on it."""
        if self.indexes:
            self.indexes[w.role == "decode"].stale.add(w)

    def first(self, t: float, r=None) -> Worker | None:
        """Where a new request ``r`` goes (the first pool's least-loaded live worker), or None; a
        :class:`~.conditional.ConditionalRouter` may send ``r`` to a decode worker instead."""
        return self.indexes[0].least(t) if self.indexes else route(self.pool, t)

    def decode(self, tokens: int, t: float) -> Worker | None:
        """Where a prefilled cache of a request of ``tokens`` positions goes, or None (no room now)."""
        if not self.indexes:
            return pick_decode(self.decoders, tokens, t)
        memory = self.decoders[0].memory
        if memory.budget_bytes is None:  # then every decode worker has room
            return self.indexes[1].least(t, True)
        if "bytes_for" in memory.__dict__:  # bytes not linear in tokens (sliding-window layers)
            return self.indexes[1].least(t, True, lambda d: d.memory.can_reserve(tokens))
        need = memory.bytes_for(tokens)  # KVMemory.can_reserve, its bytes computed once for every worker
        return self.indexes[1].least(t, True, lambda d: d.memory.reserved_bytes + need <= d.memory.capacity)
