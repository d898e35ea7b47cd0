"""Batching policies: what one worker runs next, given its queue, its running requests and its KV memory.

Colocated workers (every worker prefills and decodes), after the taxonomy of Sarathi-Serve (Agrawal et al.,
OSDI'24, sec. 2-3):

- ``prefill-first`` (vLLM's default before chunking, Orca): whenever new requests can be admitted, run their
  prefill (several prompts per forward, up to ``max_prefill_tokens``); the running decodes wait, so their
  inter-token latency spikes while long prompts arrive.
- ``decode-first`` (FasterTransformer-style): run decode steps while any request is decoding; admit new
  prompts only when the batch has drained. Smooth ITL, long TTFT.
- ``chunked`` (Sarathi-Serve): every step has a token budget ``chunk_tokens``; each decoding request takes one
  token of it and the rest goes to prompt chunks (continuing partial prompts first, then new ones, FCFS).
  A chunk is prefilled on top of the cache of the chunks before it, which gives the same cache as a whole
  prefill (checked in the tests). The decode tokens ride along in the chunk's forward: the step is ONE forward
  (the emulated engine packs the rows into one sequence, attention per row, :mod:`splitlab.phases.fused`;
  cost models charge ``CostModel.hybrid_s``), or two passes where a model family cannot be packed
  (``Executor.hybrid_path`` says which).

Disaggregated pools: a ``prefill`` worker runs prefill-first on whole prompts and never decodes; a ``decode``
worker decodes every step, taking in received requests as places in its batch free up.

Admission is first-come first-served with head-of-line blocking: if the oldest waiting request does not fit in
memory (or the batch is full), younger ones wait behind it, so no request starves.

A :class:`Worker` keeps the work it still owes as running counts (:meth:`Worker.load`), so routing a request
costs the same whatever the length of the queues.
"""
from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import deque

from .config import ServingConfig
from .executor import DecodeBatch, Slot
from .nic import Nic
from .memory import KVMemory
from .request import Request, State


def steps_ended(w: "Worker", t: float, inclusive: bool) -> int:
    """Silent steps of ``w``'s decode stretch ended by ``t`` (:mod:`.fast`; ``inclusive``: one ending exactly at
    ``t`` counts, as the hand-offs of a dispatch come after every event of its time, while an arrival was queued
    before a step's end and comes first)."""
    return (bisect_right if inclusive else bisect_left)(w.ahead, t)

__all__ = ["StepPlan", "Worker", "Parked", "plan_step", "steps_ended"]


class Parked(deque):
    """Slots parked on a worker (joining a batch, waiting to leave, leaving), whose caches do not grow while they
    wait, with the KV bytes they hold as a running sum (:attr:`nbytes`, by ``size``: tokens -> bytes, taken once
    per slot when it parks): a worker's memory reads in O(1) however many wait (a walk of them on every event made
    an overloaded run quadratic)."""

    def __init__(self, size):
        super().__init__()
        self.size, self.nbytes = size, 0  # a slot keeps its bytes in Slot.parked (it is parked in one place at a time)

    def _park(self, s: Slot) -> None:
        b = s.parked = self.size(s.context)
        self.nbytes += b

    def append(self, s: Slot) -> None:
        deque.append(self, s)  # deque's own, without super()'s lookup (a hot path)
        self._park(s)

    def appendleft(self, s: Slot) -> None:
        deque.appendleft(self, s)
        self._park(s)

    def take(self, other: "Parked") -> Slot:
        """Move ``other``'s first slot to the end of this queue with the bytes it holds there (a parked cache does
        not grow: nothing is computed again), and return it."""
        s = deque.popleft(other)
        other.nbytes -= s.parked
        deque.append(self, s)
        self.nbytes += s.parked
        return s

    def popleft(self) -> Slot:
        s = deque.popleft(self)
        self.nbytes -= s.parked
        return s

    def remove(self, s: Slot) -> None:
        deque.remove(self, s)
        self.nbytes -= s.parked

    def clear(self) -> None:
        deque.clear(self)
        self.nbytes = 0


class StepPlan:
    """One step: a decode forward over ``decode`` (the whole batch) and/or prefill forwards over ``prefill``,
    the i-th getting its next ``prefill_tokens[i]`` tokens. ``admitted``: requests admitted by this plan from the
    queue; ``joined``: received slots it took into a decode worker's batch."""

    __slots__ = ("decode", "prefill", "prefill_tokens", "admitted", "joined")

    def __init__(self, decode: list[Slot] | None = None, prefill: list[Slot] | None = None,
                 prefill_tokens: list[int] | None = None, admitted: list[Slot] | None = None):
        self.decode = [] if decode is None else decode
        self.prefill = [] if prefill is None else prefill
        self.prefill_tokens = [] if prefill_tokens is None else prefill_tokens
        self.admitted = [] if admitted is None else admitted
        self.joined: list[Slot] = []

    def __repr__(self) -> str:
        return (f"StepPlan(decode={len(self.decode)}, prefill={len(self.prefill)}, "
                f"prefill_tokens={self.prefill_tokens}, admitted={len(self.admitted)})")

    @property
    def empty(self) -> bool:
        return not self.decode and not self.prefill


class Worker:
    """One worker's state. ``role`` is "colocated", "prefill" or "decode".

    Attributes:
        queue: routed requests not yet admitted (waiting for memory or a batch place).
        prefilling: admitted slots whose prompt is not fully cached yet.
        batch: the running decode batch.
        joining: (decode role) received slots waiting for a batch place.
        outbox: (prefill role) prefilled slots waiting for a decode worker with room.
        sending: (prefill role) slots whose cache is on a link; their bytes stay here until it arrives.
        incoming: (decode role) the same slots seen from the receiving end (they count in its load).
        busy: a step is running. alive: False once the worker was lost (it gets no more work).
        nic: its network interface (:class:`~.nic.Nic`): when its egress and ingress are free again.
        prompt_owed, output_owed: prompt tokens not yet prefilled and output tokens not yet generated here.
    """

    def __init__(self, name: str, role: str, memory: KVMemory, index: int = 0):
        self.name, self.role, self.memory, self.index = name, role, memory, index
        # workers plan their steps prefill pool first, in index order (one int: sorting compares no tuples)
        self.order = index + (1 << 32 if role == "decode" else 0)
        self.queue: deque[Request] = deque()
        self.prefilling: list[Slot] = []
        self.batch = DecodeBatch()
        self.joining, self.outbox, self.sending = (Parked(memory.bytes_for) for _ in range(3))
        self.incoming: list[Slot] = []
        self.busy = False
        self.alive = True
        self.nic = Nic()
        self.capped = 0  # steps planned while ServingConfig.batch_cap, not KV memory, kept a request waiting
        self.prompt_owed = 0
        self.output_owed = 0
        self.prefix_cache = None  # a PrefixCache when the run caches prefixes on this worker (.prefix_router)
        self.step = 0  # steps started, so that the end of a step the worker was lost in can be recognised
        # the simulator's fast path (.fast): decode step ends, lazy slots, a decode stretch's silent steps
        self.clock: list[float] = []
        self.registered = 0
        self.batch_ids: tuple[int, ...] | None = None  # the batch's request ids while it does not change
        self.context_base = 0
        self.finishing: dict[int, list[Slot]] = {}
        self.ahead: list[float] | None = None
        self.ahead_n = self.ahead_done = 0
        self.ahead_cum: list[int] | None = None  # tokens its stretch's first i silent steps decode (None: ahead_n each)
        self.credits: list[tuple[float, int]] = []  # (time, tokens): first tokens of joins spliced at that time
        self.spliced_s = -math.inf  # the latest join spliced into its stretch (.splice): no cut before it
        self.released: deque = deque()  # (arrival, slot) of caches spliced away from here, not yet freed
        self.wake_s = -math.inf  # when a wake for the first of them is scheduled (.splice.wake_at)
        self.ahead_start = self.ahead_end = 0.0

    def __repr__(self) -> str:
        return (f"Worker({self.name}, {self.role}, queue={len(self.queue)}, batch={len(self.batch.slots)}, "
                f"{'busy' if self.busy else 'idle'}{'' if self.alive else ', lost'})")

    def slots(self) -> list[Slot]:
        """Every request resident here (holding KV positions)."""
        return [*self.prefilling, *self.batch.slots, *self.joining, *self.outbox, *self.sending]

    def used_bytes(self) -> int:
        """KV bytes held right now by every resident request, in O(batch): parked slots as running sums, and the
        batch's slots in the fast path's lazy records (:mod:`.fast`) as its running sum of cached tokens."""
        slots, k = self.batch.slots, self.registered
        held = self.joining.nbytes + self.outbox.nbytes + self.sending.nbytes
        if k:
            held += (self.context_base + k * len(self.clock)) * self.memory.bytes_per_token
        if self.prefilling or len(slots) > k:
            held += self.memory.used_bytes([s.context for s in (*self.prefilling, *slots[k:])])
        return held

    def decoded(self, done: int, upto: int) -> int:
        """Output tokens its decode stretch's silent steps ``done + 1 .. upto`` make: ``ahead_n`` each, or, in a
        stretch a join was spliced into (:mod:`.splice`), read off ``ahead_cum``."""
        cum = self.ahead_cum
        return (upto - done) * self.ahead_n if cum is None else cum[upto] - cum[done]

    def credited(self, t: float) -> int:
        """First tokens of joins spliced into its stretch (:mod:`.splice`) still counted in its load at ``t``: they
        leave only once their step has ended."""
        return sum(k for when, k in self.credits if when >= t)

    def load(self, t: float = 0.0, inclusive: bool = False) -> int:
        """Work still owed at time ``t``, in tokens: prompt tokens not yet prefilled (not for decode workers) plus
        output tokens not yet generated (not for prefill workers). The router sends new work to the smallest.
        ``t`` and ``inclusive`` matter only inside a decode stretch (:mod:`.ahead`)."""
        if self.role == "prefill":
            return self.prompt_owed
        owed = self.output_owed
        if self.ahead is not None:
            owed -= self.decoded(self.ahead_done, steps_ended(self, t, inclusive))
            if self.credits:
                owed += self.credited(t)
        return self.prompt_owed + owed  # a decode worker owes prompt tokens only for local prefills

    def enqueue(self, r: Request, front: bool = False) -> None:
        """Take ``r`` into the queue (``front``: ahead of the others, for a request served again)."""
        (self.queue.appendleft if front else self.queue.append)(r)
        self.prompt_owed += r.prompt_len + max(0, len(r.output) - 1)  # a decode worker: a local prefill
        if self.role != "prefill":
            self.output_owed += r.max_new_tokens - len(r.output)

    def memory_need(self, r: Request) -> int:
        """KV positions admission reserves: the prompt (and replayed tokens) on a prefill worker, the largest
        cache the request will ever hold (prompt + max_new_tokens) elsewhere."""
        return r.prompt_len + max(0, len(r.output) - 1) if self.role == "prefill" else r.max_total_tokens


#: the plan of a worker with nothing to run (shared: an empty plan is never started, so never changed)
IDLE = StepPlan()


def _admit(w: Worker, cfg: ServingConfig, token_room: int, plan: StepPlan, limit: int | None = None) -> list[Slot]:
    """Admit waiting requests FCFS while memory, batch places and ``token_room`` prompt tokens last."""
    admitted: list[Slot] = []
    used = 0
    while w.queue and (limit is None or len(admitted) < limit):
        r = w.queue[0]
        need = w.memory_need(r)
        if w.role != "prefill" and len(w.prefilling) + len(w.batch.slots) >= cfg.batch_cap:
            w.capped += w.memory.can_reserve(need)  # the cap, not memory, keeps this request out
            break
        slot = Slot.admit(r)
        cache = w.prefix_cache  # a cached prefix is not prefilled again (.prefix_router); at least one token is
        chain = cache.chain(r.prompt) if cache is not None and not slot.replay else None  # hashed once, used twice
        hit = min(cache.match(r.prompt, chain), slot.prefill_len - 1) if chain is not None else 0
        if (admitted and used + slot.prefill_len - hit > token_room) or not w.memory.can_reserve(need):
            break
        w.queue.popleft()
        w.memory.reserve(r.id, need)
        if chain is not None:
            cache.lookup(r.prompt, limit=hit, chain=chain)  # counts the query, marks its blocks used
            slot.prefilled, r.cached_tokens = hit, hit
            w.prompt_owed -= hit
        r.state = State.PREFILLING
        w.prefilling.append(slot)
        admitted.append(slot)
        used += slot.prefill_len - hit
    plan.admitted.extend(admitted)
    return admitted


def plan_step(w: Worker, cfg: ServingConfig) -> StepPlan:
    """Decide ``w``'s next step (admitting requests into memory as a side effect); an empty plan means idle."""
    if not (w.queue or w.batch.slots or w.joining or w.prefilling):
        return IDLE  # nothing to run (the common case of a worker marked dirty by an event)
    plan = StepPlan()
    if w.role == "decode":
        while w.joining and len(w.batch.slots) < cfg.batch_cap:
            w.batch.slots.append(w.joining.popleft())
            plan.joined.append(w.batch.slots[-1])
        w.capped += bool(w.joining)  # received caches, their memory held, that the cap keeps out of the batch
        if not (w.queue or w.prefilling):  # else local prefills (.conditional): planned as a colocated worker's
            plan.decode = list(w.batch.slots)
            return plan
    if w.role == "prefill" or cfg.policy == "prefill-first" or (cfg.policy == "decode-first" and not w.batch.slots):
        new = _admit(w, cfg, cfg.max_prefill_tokens, plan) if w.queue else None
        if new:
            plan.prefill, plan.prefill_tokens = new, [s.prefill_len - s.prefilled for s in new]
        elif w.role != "prefill":
            plan.decode = list(w.batch.slots)
        return plan
    plan.decode = list(w.batch.slots)
    if cfg.policy == "decode-first":
        return plan
    # chunked: decodes take one token each, prompt chunks share the rest of the budget
    room = cfg.chunk_tokens - len(plan.decode)
    for s in w.prefilling:
        if room <= 0:
            break
        n = min(s.prefill_len - s.prefilled, room)
        plan.prefill.append(s)
        plan.prefill_tokens.append(n)
        room -= n
    while room > 0:
        new = _admit(w, cfg, 0, plan, limit=1)  # one at a time: each takes what is left of the budget
        if not new:
            break
        n = min(new[0].prefill_len - new[0].prefilled, room)
        plan.prefill.append(new[0])
        plan.prefill_tokens.append(n)
        room -= n
    return plan
