"""Where work goes: the router picks the worker of a pool for each new request, and the decode worker for each
prefilled cache. Separate from the batching policy (:mod:`.scheduler`), which decides what a worker runs next.

- A new request goes to the live worker of its pool that owes the least work (prompt tokens still to prefill plus
  output tokens still to generate, :meth:`~.scheduler.Worker.load`; ties to the lowest index), as vidur's and
  vLLM's least-loaded routers balance tokens rather than request counts.
- A prefilled cache goes to the least-loaded live decode worker that has room for the request's whole cache
  (prompt + max_new_tokens). If none has room, it waits on the prefill worker: back-pressure, as DistServe's
  decode instances pull a cache only when they have memory for it.
"""
from __future__ import annotations

from typing import Sequence

from .scheduler import Worker

__all__ = ["route", "pick_decode"]


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
