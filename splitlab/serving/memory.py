"""KV-cache memory of one worker: a byte budget, reservations for admitted requests, and a log over time.

Admission reserves a request's *largest* cache up front (prompt + max_new_tokens positions on a colocated or
decode worker; the prompt only on a prefill worker), so an admitted request can always finish: no preemption,
no out-of-memory. A request that does not fit now waits; one that could never fit is rejected with the reason.
(vLLM instead grows caches page by page and preempts when memory runs out; reserving up front is the simpler
policy of Orca-style servers and keeps every run reproducible. It holds fewer requests than vLLM's paged cache
would for the same budget, which admits on the blocks a request holds now.)

The budget bounds a worker's batch: with ``ServingConfig.max_batch`` None (the default) a worker admits while
its reservations fit, so its batch is what its KV budget holds (the "auto" budget: a share of the device's memory
less weights and activations, :func:`splitlab.sizing.kv_budget_bytes`). A ``max_batch`` below that binds first:
a colocated worker stops admitting, a decode worker parks received caches in ``joining`` (their memory reserved,
not decoding); :func:`cap_note` says so in the run's notes.

Bytes are logical: tokens x ``bytes_per_token`` (2 x layers x kv_heads x head_dim x bytes per element), as a
paged allocator would hold, not the padded tensors of an emulated batch; for a model with sliding-window layers,
the exact bytes of one request's cache (``kv_bytes``: each windowed layer at most ``W - 1`` positions).
"""
from __future__ import annotations

import math

__all__ = ["KVMemory", "cap_note"]


class KVMemory:
    """Reservations against a byte budget (``budget_bytes=None`` means unlimited).

    Args:
        budget_bytes: the budget, or None for unlimited.
        bytes_per_token: KV bytes of one cached position of one request.
        kv_bytes: optional function tokens -> bytes of one request's cache, where bytes do not grow linearly
            (a model whose sliding-window layers keep at most their window); default tokens x bytes_per_token.
        trace: keep the log of :meth:`record` (off for large simulations).

    Attributes:
        reserved: bytes reserved per request id; ``reserved_bytes`` their total (kept as a running sum).
        log: ``(time_s, used_bytes, reserved_bytes)`` samples, appended by :meth:`record`.
    """

    def __init__(self, budget_bytes: int | None, bytes_per_token: int, kv_bytes=None, trace: bool = True):
        if budget_bytes is not None and budget_bytes <= 0:
            raise ValueError(f"KV budget must be > 0 bytes (or None for unlimited), got {budget_bytes}")
        if bytes_per_token <= 0:
            raise ValueError(f"bytes_per_token must be > 0, got {bytes_per_token}")
        self.budget_bytes = budget_bytes
        self.bytes_per_token = bytes_per_token
        self.capacity = math.inf if budget_bytes is None else budget_bytes
        self.reserved: dict[int, int] = {}
        self.reserved_bytes = 0
        self.log: list[tuple[float, int, int]] = []
        self.trace = trace
        if kv_bytes is not None:
            self.bytes_for = kv_bytes

    def bytes_for(self, tokens: int) -> int:
        """KV bytes of ``tokens`` cached positions of one request."""
        return tokens * self.bytes_per_token

    def never_fits(self, tokens: int) -> str | None:
        """Why ``tokens`` positions can never fit this budget, or None if they can."""
        need = self.bytes_for(tokens)
        if need > self.capacity:
            how = (f"{tokens} tokens x {self.bytes_per_token:,} bytes/token" if "bytes_for" not in self.__dict__
                   else f"{tokens} tokens; sliding-window layers hold at most their window")
            return f"needs {need:,} bytes of KV cache ({how}) but a worker's KV budget is {self.budget_bytes:,} bytes"
        return None

    def sure_tokens(self) -> float:
        """The most positions one request may hold that surely fit an empty budget (inf: unlimited; 0 where bytes
        are not linear in tokens, so that :meth:`never_fits` is always asked)."""
        if "bytes_for" in self.__dict__:
            return 0
        return self.capacity if self.budget_bytes is None else self.capacity // self.bytes_per_token

    def can_reserve(self, tokens: int) -> bool:
        return self.reserved_bytes + self.bytes_for(tokens) <= self.capacity

    def reserve(self, request_id: int, tokens: int) -> None:
        """Reserve ``tokens`` positions for a request. Raises MemoryError if they do not fit now."""
        need = self.bytes_for(tokens)
        if self.reserved_bytes + need > self.capacity:
            raise MemoryError(f"request {request_id}: {need:,} bytes do not fit "
                              f"({self.reserved_bytes:,} of {self.budget_bytes:,} reserved)")
        self.reserved[request_id] = self.reserved.get(request_id, 0) + need
        self.reserved_bytes += need

    def release(self, request_id: int) -> None:
        self.reserved_bytes -= self.reserved.pop(request_id, 0)

    def used_bytes(self, contexts) -> int:
        """Bytes held by requests caching ``contexts`` positions each."""
        if "bytes_for" in self.__dict__:  # per-request sizes that are not linear in tokens
            return sum(self.bytes_for(c) for c in contexts)
        return self.bytes_per_token * sum(contexts)

    def record(self, time_s: float, used_bytes: int) -> None:
        """Log the bytes held at ``time_s`` and the bytes reserved (not again when nothing changed since the last
        entry: the log samples changes, and so it is the same whether a decode stretch's steps were one event or
        many, :mod:`.fast`)."""
        if self.trace:
            entry = (float(time_s), used_bytes, self.reserved_bytes)
            if not self.log or self.log[-1] != entry:
                self.log.append(entry)


def cap_note(config, capped: dict) -> list[str]:
    """The note of a run in which the batch cap, not KV memory, kept requests waiting (empty list if it never did):
    ``capped`` maps a worker's name to the steps at which that happened (``Worker.capped``)."""
    if not capped:
        return []
    why = "max_batch" if config.max_batch else "max_batch None: chunk_tokens - 1 under chunked"
    return [f"the batch cap of {config.batch_cap} requests per worker ({why}) kept requests waiting that KV memory "
            f"had room for: " + ", ".join(f"{name} at {n} steps" for name, n in capped.items())]
