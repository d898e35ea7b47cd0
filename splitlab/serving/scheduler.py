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
  prefill (checked in the tests). Here the decode forward and the chunk forward(s) run one after the other
  within the step (transformers cannot fuse them into one ragged batch), and the step takes their sum.

Disaggregated pools: a ``prefill`` worker runs prefill-first on whole prompts and never decodes; a ``decode``
worker decodes every step, taking in received requests as places in its batch free up.

Admission is first-come first-served with head-of-line blocking: if the oldest waiting request does not fit in
memory (or the batch is full), younger ones wait behind it, so no request starves.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .executor import DecodeBatch, Slot
from .memory import KVMemory
from .request import Request, State

__all__ = ["POLICIES", "SchedulerConfig", "StepPlan", "Worker", "plan_step"]

POLICIES = ("prefill-first", "decode-first", "chunked")


@dataclass(frozen=True)
class SchedulerConfig:
    """Batching limits of every worker.

    Attributes:
        policy: one of :data:`POLICIES` (colocated workers only).
        max_batch: most requests resident on a worker at once (decoding, or admitted and prefilling).
        max_prefill_tokens: most prompt tokens in one prefill forward (at least one prompt always goes).
        chunk_tokens: ``chunked`` only: token budget per step (decode tokens + prompt-chunk tokens); must exceed
            ``max_batch`` so that prompts always progress.
    """

    policy: str = "prefill-first"
    max_batch: int = 16
    max_prefill_tokens: int = 2048
    chunk_tokens: int = 256

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; choose one of {POLICIES}")
        if self.max_batch < 1 or self.max_prefill_tokens < 1:
            raise ValueError("max_batch and max_prefill_tokens must be >= 1")
        if self.policy == "chunked" and self.chunk_tokens <= self.max_batch:
            raise ValueError(f"chunk_tokens ({self.chunk_tokens}) must exceed max_batch ({self.max_batch}): "
                             f"a full decode batch would leave no budget for prompts")


@dataclass
class StepPlan:
    """One step: a decode forward over ``decode`` (the whole batch) and/or prefill forwards over ``prefill``,
    the i-th getting its next ``prefill_tokens[i]`` prompt tokens."""

    decode: list[Slot] = field(default_factory=list)
    prefill: list[Slot] = field(default_factory=list)
    prefill_tokens: list[int] = field(default_factory=list)

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
        busy_until: end of the running step, or None when idle.
    """

    def __init__(self, name: str, role: str, memory: KVMemory):
        self.name, self.role, self.memory = name, role, memory
        self.queue: deque[Request] = deque()
        self.prefilling: list[Slot] = []
        self.batch = DecodeBatch()
        self.joining: deque[Slot] = deque()
        self.outbox: deque[Slot] = deque()
        self.sending: list[Slot] = []
        self.incoming: list[Slot] = []
        self.busy_until: float | None = None

    def slots(self) -> list[Slot]:
        return [*self.prefilling, *self.batch.slots, *self.joining, *self.outbox, *self.sending]

    def used_tokens(self) -> int:
        """KV positions held right now by every resident request."""
        return sum(s.context for s in self.slots())

    def load(self) -> int:
        """Work still owed, in tokens: prompt tokens not yet prefilled (not for decode workers) plus output
        tokens not yet generated (not for prefill workers). The router sends new work to the smallest."""
        prompt = sum(r.prompt_len for r in self.queue) + sum(s.request.prompt_len - s.prefilled
                                                             for s in self.prefilling)
        out = sum(r.max_new_tokens for r in self.queue) + sum(s.request.max_new_tokens - len(s.request.output)
                                                              for s in [*self.slots(), *self.incoming])
        return {"prefill": prompt, "decode": out}.get(self.role, prompt + out)


def _admit(w: Worker, cfg: SchedulerConfig, token_room: int) -> list[Slot]:
    """Admit waiting requests FCFS while memory, batch places and ``token_room`` prompt tokens last."""
    admitted: list[Slot] = []
    used = 0
    while w.queue:
        r = w.queue[0]
        need = r.prompt_len if w.role == "prefill" else r.max_total_tokens
        resident = len(w.prefilling) + len(w.batch.slots)
        if w.role != "prefill" and resident >= cfg.max_batch:
            break
        if (admitted and used + r.prompt_len > token_room) or not w.memory.can_reserve(need):
            break
        w.queue.popleft()
        w.memory.reserve(r.id, need)
        r.state = State.PREFILLING
        slot = Slot(r)
        w.prefilling.append(slot)
        admitted.append(slot)
        used += r.prompt_len
    return admitted


def plan_step(w: Worker, cfg: SchedulerConfig) -> StepPlan:
    """Decide ``w``'s next step (admitting requests into memory as a side effect); an empty plan means idle."""
    if w.role == "decode":
        while w.joining and len(w.batch.slots) < cfg.max_batch:
            w.batch.slots.append(w.joining.popleft())
        return StepPlan(decode=list(w.batch.slots))
    if w.role == "prefill" or cfg.policy == "prefill-first" or (cfg.policy == "decode-first" and not w.batch.slots):
        new = _admit(w, cfg, cfg.max_prefill_tokens)
        if new:
            return StepPlan(prefill=new, prefill_tokens=[s.request.prompt_len for s in new])
        return StepPlan(decode=list(w.batch.slots)) if w.role != "prefill" else StepPlan()
    if cfg.policy == "decode-first":
        return StepPlan(decode=list(w.batch.slots))
    # chunked: decodes take one token each, prompt chunks share the rest of the budget
    plan = StepPlan(decode=list(w.batch.slots))
    room = cfg.chunk_tokens - len(plan.decode)
    for s in w.prefilling:
        if room <= 0:
            break
        n = min(s.request.prompt_len - s.prefilled, room)
        plan.prefill.append(s)
        plan.prefill_tokens.append(n)
        room -= n
    while room > 0:
        new = _admit(w, cfg, 0)  # one at a time: each takes what is left of the budget
        if not new:
            break
        n = min(new[0].request.prompt_len, room)
        plan.prefill.append(new[0])
        plan.prefill_tokens.append(n)
        room -= n
    return plan
