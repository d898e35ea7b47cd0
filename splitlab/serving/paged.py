"""Paged KV memory: fixed-size blocks handed out as caches grow, against padded and reserved memory.

:class:`BlockAllocator` is the bookkeeping of vLLM's PagedAttention (Kwon et al., "Efficient Memory Management for
Large Language Model Serving with PagedAttention", SOSP 2023): the KV memory is a pool of blocks of
``block_tokens`` positions; a request holds a block table (the ids of its blocks, in order) and gets a new
block only when its last one is full, so at most ``block_tokens - 1`` positions of a request are ever unused,
whatever its final length. A request that needs a block when none is free raises :class:`OutOfBlocks` (vLLM
then preempts a request; here the caller decides).

:func:`memory_schemes` replays a served run (:class:`~splitlab.serving.ServingResult`) and samples, after every
event, the KV positions four schemes hold for the requests resident on each worker:

- ``used``: the positions actually cached (prompt + output tokens fed back so far): the floor;
- ``paged``: whole blocks, as the allocator of this module hands them out (replayed through it);
- ``reserved``: every admitted request's final size (prompt + max_new_tokens) reserved up front, as
  :class:`~splitlab.serving.KVMemory` (and Orca-style servers) do, so that an admitted request can always finish;
- ``padded``: the requests of a worker as one left-padded batch tensor, every row as long as the longest
  (what :meth:`splitlab.KVCache.merge` holds for a batch), with rows reserved at their final size: a static
  batch allocated once, as a padded ``[batch, max_len]`` cache is;
- ``max_context`` (when the model's context is given): every request reserves the whole context window, as a
  server that does not know the output length must (vLLM's paper, sec. 3, fig. 2: "Orca (Max)").

Waste = scheme - used. Positions convert to bytes with the model's KV bytes per position.
"""
from __future__ import annotations

import math
from collections import deque

__all__ = ["BlockAllocator", "OutOfBlocks", "memory_schemes", "waste_summary", "blocks_for"]


class OutOfBlocks(MemoryError):
    """No free block for a request that needs one."""


def blocks_for(tokens: int, block_tokens: int) -> int:
    """Blocks that hold ``tokens`` positions: ceil(tokens / block_tokens)."""
    return -(-int(tokens) // int(block_tokens))


class BlockAllocator:
    """A pool of ``num_blocks`` KV blocks of ``block_tokens`` positions (``num_blocks=None``: unlimited, for
    accounting only).

    Attributes:
        tables: request id -> block ids in order (the block table); ``tokens``: request id -> positions held.

    Raises:
        ValueError: block_tokens < 1 or num_blocks < 1.
    """

    def __init__(self, num_blocks: int | None = None, block_tokens: int = 16):
        if block_tokens < 1 or (num_blocks is not None and num_blocks < 1):
            raise ValueError(f"need block_tokens >= 1 and num_blocks >= 1 (or None), got {block_tokens}, {num_blocks}")
        self.block_tokens = int(block_tokens)
        self.num_blocks = num_blocks
        self._free: deque[int] = deque(range(num_blocks)) if num_blocks is not None else deque()
        self._next = 0 if num_blocks is None else num_blocks  # unlimited pools mint new ids
        self.tables: dict[int, list[int]] = {}
        self.tokens: dict[int, int] = {}
        self.peak_blocks = 0

    @property
    def used_blocks(self) -> int:
        return sum(len(t) for t in self.tables.values())

    @property
    def free_blocks(self) -> float:
        return math.inf if self.num_blocks is None else len(self._free)

    def _take(self, n: int) -> list[int]:
        if n > self.free_blocks:
            raise OutOfBlocks(f"need {n} more KV blocks of {self.block_tokens} positions, {self.free_blocks} free "
                              f"of {self.num_blocks}")
        if self.num_blocks is None:
            ids = list(range(self._next, self._next + n))
            self._next += n
        else:
            ids = [self._free.popleft() for _ in range(n)]
        return ids

    def allocate(self, request_id: int, tokens: int) -> list[int]:
        """A block table for a new request holding ``tokens`` positions (its prompt); returns it.

        Raises:
            ValueError: the request already holds blocks, or tokens < 1. OutOfBlocks: not enough free blocks
            (nothing is taken then).
        """
        if request_id in self.tables:
            raise ValueError(f"request {request_id} already holds {len(self.tables[request_id])} blocks")
        if tokens < 1:
            raise ValueError(f"a request holds at least one position, got {tokens}")
        self.tables[request_id] = self._take(blocks_for(tokens, self.block_tokens))
        self.tokens[request_id] = int(tokens)
        self.peak_blocks = max(self.peak_blocks, self.used_blocks)
        return self.tables[request_id]

    def append(self, request_id: int, tokens: int = 1) -> list[int]:
        """Grow a request by ``tokens`` positions; returns the blocks newly given to it (often none).

        Raises:
            KeyError: an unknown request. OutOfBlocks: its last block is full and none is free.
        """
        if request_id not in self.tables:
            raise KeyError(f"request {request_id} holds no blocks (allocate it first)")
        total = self.tokens[request_id] + int(tokens)
        new = self._take(blocks_for(total, self.block_tokens) - len(self.tables[request_id]))
        self.tables[request_id] += new
        self.tokens[request_id] = total
        self.peak_blocks = max(self.peak_blocks, self.used_blocks)
        return new

    def free(self, request_id: int) -> int:
        """Return a request's blocks to the pool; returns how many (0 for an unknown request)."""
        blocks = self.tables.pop(request_id, [])
        self.tokens.pop(request_id, None)
        if self.num_blocks is not None:
            self._free.extend(blocks)
        return len(blocks)

    def held_tokens(self) -> int:
        """Positions of every block handed out (used blocks x block_tokens)."""
        return self.used_blocks * self.block_tokens

    def waste_tokens(self) -> int:
        """Positions handed out but not (yet) written: the last block's empty tail of every request."""
        return self.held_tokens() - sum(self.tokens.values())


def _events(res):
    """(time, order, worker, request, kind, tokens) for every KV event of a run, in time order: a request's cache
    starts at its prefill with the prompt on the worker that prefilled it, grows by one position for every
    output token after the first (the token fed back), and leaves its worker when the request finishes or, on
    a split, when its transfer has arrived (it then starts again on the decode worker with its context). A
    chunked prompt counts whole from its first chunk."""
    ev = []
    for r in res.completed:
        n = len(r.token_times_s)
        split = r.decode_worker is not None and r.decode_worker != r.prefill_worker
        ev.append((r.prefill_start_s, 1, r.prefill_worker, r, "start", r.prompt_len))
        if split:
            ev.append((r.transfer_end_s, 0, r.prefill_worker, r, "end", 0))
            ev.append((r.transfer_end_s, 1, r.decode_worker, r, "start", r.prompt_len))
        worker = r.decode_worker or r.prefill_worker
        for t in r.token_times_s[1:n]:
            ev.append((t, 2, worker, r, "grow", 1))
        ev.append((r.finish_s, 3, worker, r, "end", 0))
    return sorted(ev, key=lambda e: (e[0], e[1], e[3].id))


def memory_schemes(res, block_tokens: int = 16, bytes_per_position: int = 1, max_context: int | None = None):
    """Replay ``res`` (a :class:`~splitlab.serving.ServingResult`; its completed requests) and sample, after every
    KV event, the positions (x ``bytes_per_position``) each scheme of the module docstring holds, per worker.

    Returns a DataFrame: ``time_s``, ``worker``, ``requests`` (resident), ``used``, ``paged``, ``reserved``,
    ``padded`` and, with ``max_context``, ``max_context`` (bytes). The paged column comes from a
    :class:`BlockAllocator` per worker, fed the same events.

    Raises:
        ValueError: block_tokens < 1.
    """
    import pandas as pd

    if block_tokens < 1:
        raise ValueError(f"block_tokens must be >= 1, got {block_tokens}")
    pools: dict[str, BlockAllocator] = {}
    resident: dict[str, dict[int, object]] = {}
    rows = []
    for t, _, worker, r, kind, n in _events(res):
        pool = pools.setdefault(worker, BlockAllocator(None, block_tokens))
        here = resident.setdefault(worker, {})
        if kind == "start":
            pool.allocate(r.id, n)
            here[r.id] = r
        elif kind == "grow":
            pool.append(r.id, n)
        else:
            pool.free(r.id)
            here.pop(r.id, None)
        used = sum(pool.tokens.values())
        finals = [q.max_total_tokens for q in here.values()]
        rows.append(dict(time_s=t, worker=worker, requests=len(here), used=used * bytes_per_position,
                         paged=pool.held_tokens() * bytes_per_position,
                         reserved=sum(finals) * bytes_per_position,
                         padded=len(finals) * max(finals, default=0) * bytes_per_position,
                         max_context=len(finals) * (max_context or 0) * bytes_per_position))
    out = pd.DataFrame(rows, columns=["time_s", "worker", "requests", "used", "paged", "reserved", "padded",
                                      "max_context"])
    return out if max_context else out.drop(columns="max_context")


def waste_summary(schemes) -> "object":
    """Per scheme, over a :func:`memory_schemes` table: ``mean_bytes``, the bytes held averaged over the run
    (every worker's samples weighted by how long they lasted, summed over workers), ``mean_waste_bytes`` (held -
    used), ``waste_share`` (waste / held) and ``peak_bytes`` (the most held at any moment, all workers together:
    the memory the run needed under that scheme). Returns a DataFrame indexed by scheme."""
    import pandas as pd

    schemes_ = [c for c in ("used", "paged", "reserved", "padded", "max_context") if c in schemes]
    if not len(schemes):
        return pd.DataFrame(0.0, index=schemes_, columns=["mean_bytes", "mean_waste_bytes", "waste_share",
                                                          "peak_bytes"])
    # every worker's value at every event time of the run (held until its next sample), summed over workers
    wide = {s: schemes.pivot_table(index="time_s", columns="worker", values=s, aggfunc="last").ffill().fillna(0.0)
            for s in schemes_}
    times = wide["used"].index.to_numpy()
    dt = pd.Series(times).diff().shift(-1).fillna(0.0).to_numpy()  # each moment lasts until the next event
    span = float(times[-1] - times[0]) or 1.0
    out = {}
    used = float((wide["used"].sum(axis=1).to_numpy() * dt).sum()) / span
    for s in schemes_:
        total = wide[s].sum(axis=1).to_numpy()
        mean = float((total * dt).sum()) / span
        out[s] = dict(mean_bytes=mean, mean_waste_bytes=mean - used,
                      waste_share=(mean - used) / mean if mean > 0 else 0.0, peak_bytes=float(total.max()))
    return pd.DataFrame(out).T
