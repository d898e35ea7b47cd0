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
from bisect import bisect_left, bisect_right, insort
from typing import Callable, Sequence

from .scheduler import Worker

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
    """The loads of one pool's workers in a sorted list, so that the least-loaded worker costs about O(log W) plus
    the few workers near the least load, not O(W).

    A worker's load changes when work reaches or leaves it (the cluster calls :meth:`refresh` then) and, inside a
    decode stretch (:mod:`.fast`), falls at every silent step's end. :attr:`keys` holds, per live worker, a bound its
    load cannot go below until a given time: its load (outside a stretch), or its load once the silent steps of the
    next ``LOOKAHEAD`` tokens, or of half its distance above the least bound if more, have ended (inside one; the
    bound is renewed when a query passes that time: a worker far from the least load, which no query reads, less
    often). A query reads the workers in the order of their bounds, computes the exact load of each at ``t``, and
    stops as soon as the next bound cannot beat the best exact load found: the worker a scan of the pool picks
    (least load, ties to the lowest index). Queries come in time order, as the event loop makes them.

    A key is one int, ``bound * W + index``: sorted order is the order of ``(bound, index)`` (W workers,
    ``0 <= index < W``). The list holds exactly one key per live worker, replaced in place (a bisection and a
    ``memmove`` of at most W pointers): a query walks it with no pops and pushes and no stale entries to skip (a
    heap with lazy deletion cost about 12 pops and pushes per query on 48 busy workers, the router's main cost).
    """

    LOOKAHEAD = 16  # tokens

    def __init__(self, pool: Sequence[Worker]):
        self.pool = list(pool)
        self.size = max(1, len(self.pool))
        self.version = [0] * len(self.pool)  # of each worker's bound: an expiry of an older bound is ignored
        self.static = [0] * len(self.pool)
        self.stretch: list = [None] * len(self.pool)  # the decode stretch (Worker.ahead) each key was made in
        self.current: list = [None] * len(self.pool)  # each worker's key in :attr:`keys` (None: not in it)
        self.keys: list[int] = []       # sorted: (lower bound of the load) * W + index, one per live worker
        self.expiry: list[tuple] = []   # (time until which the bound holds, index, version)
        self.stale: set[Worker] = set()  # workers whose load changed since the last query (see :meth:`refresh`)
        for w in self.pool:
            self.refresh(w)

    def refresh(self, w: Worker) -> None:
        """``w``'s load changed (or a decode stretch started or ended on it). The cluster adds such workers to
        :attr:`stale` instead, and the next query refreshes each of them once."""
        i = w.index
        if not w.alive:
            self.version[i] += 1  # its pending expiry is ignored
            self._remove(i)
            return
        # a decode worker owes prompt tokens only under conditional disaggregation (:mod:`.conditional`)
        static = w.prompt_owed if w.role == "prefill" else w.prompt_owed + w.output_owed
        if static == self.static[i] and w.ahead is self.stretch[i] and self.current[i] is not None:
            return  # the same load and the same stretch (or none): its key's bound still holds
        self.static[i], self.stretch[i] = static, w.ahead
        self._bound(w, w.ahead_done)

    def _bound(self, w: Worker, counted: int) -> None:
        """Key ``w`` by its load once ``counted + LOOKAHEAD`` tokens of its stretch's steps have ended."""
        i = w.index
        v = self.version[i] = self.version[i] + 1
        bound = self.static[i]
        ahead = w.ahead
        if ahead is not None:  # a lookahead of half its distance above the least bound, at least LOOKAHEAD
            n, keys, done, cum = w.ahead_n, self.keys, w.ahead_done, w.ahead_cum  # Worker.decoded, inlined
            far = bound - ((counted - done) * n if cum is None else cum[counted] - cum[done])
            far -= keys[0] // self.size if keys else bound
            least = self.LOOKAHEAD
            upto = counted + max(1, (far // 2 if far > 2 * least else least) // n)
            if upto < len(ahead):
                heapq.heappush(self.expiry, (ahead[upto], i, v))
            else:
                upto = len(ahead)
            # spliced joins' first tokens (Worker.credits) only raise the load
            bound -= (upto - done) * n if cum is None else cum[upto] - cum[done]
        key, old = bound * self.size + i, self.current[i]  # its key in place of its old one
        if old != key:
            keys = self.keys
            if old is not None:
                del keys[bisect_left(keys, old)]
            insort(keys, key)
            self.current[i] = key

    def _remove(self, i: int) -> None:
        """Take worker ``i``'s key out of :attr:`keys` (a lost worker; :meth:`_bound` places the keys of live ones)."""
        old = self.current[i]
        if old is not None:
            del self.keys[bisect_left(self.keys, old)]
            self.current[i] = None

    def least(self, t: float, inclusive: bool = False, room: Callable[[Worker], bool] | None = None,
              need: int | None = None) -> Worker | None:
        """The live worker with the least load at ``t`` (ties to the lowest index) for which ``room(worker)``
        holds and whose KV memory has ``need`` bytes free (None: either check off), or None: the worker
        :func:`route` (``inclusive=False``) or :func:`pick_decode` would pick."""
        if self.stale:
            for w in self.stale:
                self.refresh(w)
            self.stale.clear()
        expiry, version, pool = self.expiry, self.version, self.pool
        ended = bisect_right if inclusive else bisect_left  # steps_ended, inlined
        while expiry and (expiry[0][0] < t or (inclusive and expiry[0][0] == t)):
            _, i, v = heapq.heappop(expiry)
            if v == version[i]:
                w = pool[i]
                self._bound(w, ended(w.ahead, t))
        keys, size = self.keys, self.size
        if not keys:
            return None
        w = pool[keys[0] % size]
        if w.ahead is None and (room is None or room(w)) and (
                need is None or w.memory.reserved_bytes + need <= w.memory.capacity):
            return w  # the usual case: the first bound is its exact load (no stretch), which no other load beats
        best, key = None, None  # key: the best (load, index) as load * W + index
        static = self.static
        for ordered in keys:
            if key is not None and ordered >= key:
                break
            i = ordered % size
            w = pool[i]
            if room is not None and not room(w):
                continue
            if need is not None and w.memory.reserved_bytes + need > w.memory.capacity:  # KVMemory.can_reserve
                continue
            ahead = w.ahead  # the load at t (Worker.load, inlined: this loop is the router's hot path)
            if ahead is not None:
                cum = w.ahead_cum
                if cum is None:
                    ordered = (static[i] - (ended(ahead, t) - w.ahead_done) * w.ahead_n) * size + i
                else:  # spliced (.splice)
                    load = static[i] - (cum[ended(ahead, t)] - cum[w.ahead_done])
                    ordered = (load + w.credited(t) if w.credits else load) * size + i
            if key is None or ordered < key:
                best, key = w, ordered
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
        # KVMemory.can_reserve, its bytes computed once for every worker
        return self.indexes[1].least(t, True, need=memory.bytes_for(tokens))
