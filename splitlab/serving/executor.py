"""Executors run (or predict) the batches a scheduler chooses; the scheduler never knows which.

Interface (:class:`Executor`):
- ``prefill(slots, n_tokens) -> PrefillResult(seconds, caches, first_tokens)``: run the next ``n_tokens[i]``
  tokens of each slot's :attr:`Slot.prefill_ids` (a whole prompt, or one chunk of it). ``first_tokens[i]`` is the
  next output token when that call completed the prompt, else None.
- ``decode(batch) -> DecodeResult(seconds, tokens)``: one decode step for every slot of a :class:`DecodeBatch`
  (one new token each). Slots may join and leave between steps (continuous batching).
- ``transfer(slot, mode) -> TransferResult(seconds, nbytes, method)``: hand the slot's cache to a decode worker.
- ``kv_bytes_per_token``, ``max_context`` and ``vocab_size`` (None: any id) for admission control;
  ``memory_bytes`` (None: unknown), ``weight_bytes`` and ``activation_bytes_per_token`` for the "auto" KV budget.

- ``hybrid(batch, slots, n_tokens) -> StepOutcome``: a decode step and prompt chunks as ONE forward (chunked
  prefill), where ``hybrid_path`` is "fused"; else a hybrid step runs as the two calls above.

:func:`run_step` is what one worker does in one step (the decode forward, then the prefill forwards; or one fused
forward), the same whether the executor runs in this process (emulated, simulated) or in a worker process
(distributed).

:class:`~.emulated.ModelExecutor` (the emulated back end) runs the real model through :mod:`splitlab.phases.engine`
and returns the MEASURED, synchronised forward time; :class:`~.simulated.CostModelExecutor` (the simulated back
end) predicts the time instead. This module is torch-free: the simulator never imports a model.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from ..costmodel.model import hybrid_terms as cost_terms
from ..sizing.budget import CPU_MEMORY_BYTES, MEMORY_UTILIZATION, kv_budget_bytes
from .request import Request

__all__ = ["Slot", "DecodeBatch", "PrefillResult", "DecodeResult", "TransferResult", "StepOutcome", "Executor",
           "run_step", "prefill_forwards", "hybrid_terms"]


@dataclass(eq=False, slots=True)
class Slot:
    """A request resident on one worker.

    Attributes:
        request: the request.
        cache: executor-owned state (a KVCache, or None for cost models).
        prefilled: tokens of :attr:`prefill_ids` already in the cache.
        last_token: the latest output token (the next decode step's input).
        sampler: executor-owned sampling state.
        replay: output tokens prefilled again after a fault (a request served again elsewhere rebuilds the cache
            of its prompt and of every token it already emitted but the last; 0 for a fresh request).
        resumed: the request had emitted tokens before this slot, so finishing its prefill emits nothing new.
        transfer_id: the hand-off in flight, if any (a cancelled hand-off's arrival is ignored).
        joined, written: the simulator's lazy token records (:mod:`.fast`).
        parked: its KV bytes while it is parked on a worker (:class:`~.scheduler.Parked`).
    """

    request: Request
    cache: Any = None
    prefilled: int = 0
    last_token: int | None = None
    sampler: Any = None
    replay: int = 0
    resumed: bool = False
    transfer_id: int | None = None
    joined: int = 0
    written: int = 0
    parked: int = 0

    @classmethod
    def admit(cls, request: Request) -> "Slot":
        """The slot of a request admitted to a worker: a fresh one has emitted nothing; one served again after a
        fault replays every emitted token but the last, which is the next decode step's input."""
        if not request.output:
            return cls(request)
        return cls(request, replay=len(request.output) - 1, resumed=True, last_token=request.output[-1])

    @property
    def prefill_len(self) -> int:
        """Tokens the prefill of this slot covers: the prompt, plus the replayed outputs."""
        return len(self.request.prompt) + self.replay

    @property
    def prefill_ids(self) -> list[int]:
        r = self.request
        return r.prompt + r.output[:self.replay] if self.replay else r.prompt

    @property
    def context(self) -> int:
        """Tokens whose K/V are cached: what was prefilled + every output token since, but the latest."""
        n = len(self.request.output) - 1 - self.replay
        return self.prefilled + n if n > 0 else self.prefilled


@dataclass
class DecodeBatch:
    """The running decode batch of a worker: its slots in order, and ``state``, private to the executor
    (:class:`~.emulated.ModelExecutor`: the slots of the last step and their merged cache)."""

    slots: list[Slot] = field(default_factory=list)
    state: Any = None


@dataclass
class PrefillResult:
    seconds: float
    caches: list[Any]
    first_tokens: list[int | None]


@dataclass
class DecodeResult:
    seconds: float
    tokens: list[int]


@dataclass
class TransferResult:
    seconds: float
    nbytes: int
    method: str


@dataclass
class StepOutcome:
    """What one step did: seconds of its decode forward and of its prefill forwards, the decode tokens (one per
    decode slot, in order) and the first tokens of the prefills (None where a chunk left the prompt unfinished).

    ``fused``: a hybrid step ran (or was charged) as ONE forward over the decode rows and the chunks; its seconds
    are then split between ``decode_s`` and ``prefill_s`` in proportion to their tokens, only so that a timeline
    can show both (:meth:`fused_step`)."""

    decode_s: float = 0.0
    prefill_s: float = 0.0
    tokens: list[int] = field(default_factory=list)
    first_tokens: list[int | None] = field(default_factory=list)
    fused: bool = False

    @classmethod
    def fused_step(cls, seconds: float, decode_rows: int, chunk_tokens: int, tokens: list[int],
                   first_tokens: list[int | None]) -> "StepOutcome":
        """The outcome of one fused forward of ``seconds`` over ``decode_rows`` decode tokens and ``chunk_tokens``
        prompt tokens."""
        decode_s = seconds * decode_rows / (decode_rows + chunk_tokens)
        return cls(decode_s, seconds - decode_s, tokens, first_tokens, True)

    @property
    def seconds(self) -> float:
        return self.decode_s + self.prefill_s


class Executor(ABC):
    """What a worker calls to get work done; see the module docstring for the contract."""

    kv_bytes_per_token: int
    max_context: int
    vocab_size: int | None = None
    memory_bytes: int | None = None
    weight_bytes: int = 0
    #: activation bytes one token of a forward holds at its peak (:func:`splitlab.sizing.activation_bytes_per_token`)
    activation_bytes_per_token: float = 0.0
    overhead_s: float = 0.0
    name: str = "executor"
    #: a whole-prompt batch runs padded to its longest prompt (splitlab's engine does; see :func:`prefill_forwards`)
    padded_prefill: bool = True
    #: a list to record every step :func:`run_step` runs on this executor in (None: no record); see there
    step_log: list | None = None
    #: how a hybrid step (decode rows + prompt chunks, the chunked policy) runs: "fused" (one forward,
    #: :meth:`hybrid`) or "two-pass" (the decode forward, then the chunk forwards)
    hybrid_path: str = "two-pass"

    @abstractmethod
    def prefill(self, slots: list[Slot], n_tokens: list[int]) -> PrefillResult: ...

    @abstractmethod
    def decode(self, batch: DecodeBatch) -> DecodeResult: ...

    @abstractmethod
    def transfer(self, slot: Slot, mode: str = "whole") -> TransferResult: ...

    def hybrid(self, batch: DecodeBatch, slots: list[Slot], n_tokens: list[int]) -> StepOutcome:
        """One hybrid step as one forward (executors whose ``hybrid_path`` is "fused" implement it): a decode
        token for every slot of ``batch`` and the next ``n_tokens[i]`` prompt tokens of ``slots[i]``."""
        raise NotImplementedError(f"{type(self).__name__} runs hybrid steps in two passes")

    def kv_bytes(self, tokens: int) -> int:
        """KV bytes of ``tokens`` cached positions of one request."""
        return tokens * self.kv_bytes_per_token

    def auto_kv_budget(self, utilization: float = MEMORY_UTILIZATION, forward_tokens: int = 0) -> int:
        """The "auto" KV budget of a worker (bytes): ``utilization`` x device memory - weights - the activations
        of a forward of ``forward_tokens`` tokens (:func:`splitlab.sizing.kv_budget_bytes`, as vLLM sizes its
        cache); a device of unknown memory (``memory_bytes`` None: the built-in cost model) is given the stated
        :data:`splitlab.sizing.CPU_MEMORY_BYTES` (16 GiB).

        Raises:
            ValueError: nothing left for a KV cache, or a utilization outside (0, 1].
        """
        memory = CPU_MEMORY_BYTES if self.memory_bytes is None else self.memory_bytes
        return kv_budget_bytes(memory, self.weight_bytes, self.activation_bytes_per_token * forward_tokens,
                               utilization)


def prefill_forwards(slots: list[Slot], n_tokens: list[int], padded: bool) -> list[tuple[int, int, int]]:
    """The forwards one prefill call runs, each as the terms of ``CostModel.prefill_s``: ``(tokens, squares,
    masked_pairs)``. Call it before the prefill (it reads ``slot.prefilled``).

    Whole prompts from scratch run as one forward over the batch: padded to the longest (``padded``: squares and
    masked pairs of the padded rectangle; a batch of one, or of equal lengths, runs the causal kernel, no masked
    pairs) or ragged (a paged server). Chunks (or continuations) run one forward per slot, on top of its cached
    ``p`` tokens: ``(p + n)^2 - p^2`` squares and ``n x (p + n)`` pairs through a mask when ``p > 0``.
    """
    if all(s.prefilled == 0 and n == s.prefill_len for s, n in zip(slots, n_tokens)):
        if padded:
            longest, b = max(n_tokens), len(n_tokens)
            return [(b * longest, b * longest * longest,
                     0 if b == 1 or min(n_tokens) == longest else b * longest * longest)]
        return [(sum(n_tokens), sum(n * n for n in n_tokens), 0)]
    return [(n, (s.prefilled + n) ** 2 - s.prefilled ** 2, n * (s.prefilled + n) if s.prefilled else 0)
            for s, n in zip(slots, n_tokens)]


def hybrid_terms(decode_batch: int, decode_context_tokens: int, slots: list[Slot], n_tokens: list[int]) -> dict:
    """The arguments of ``CostModel.hybrid_s`` (:func:`splitlab.costmodel.model.hybrid_terms`) for one fused
    forward over ``decode_batch`` decode rows holding ``decode_context_tokens`` cached tokens in all and the next
    ``n_tokens[i]`` prompt tokens of ``slots[i]`` (call it before the step: it reads ``slot.prefilled``)."""
    return cost_terms(decode_batch, decode_context_tokens, [(s.prefilled, n) for s, n in zip(slots, n_tokens)])


def run_step(executor: Executor, batch: DecodeBatch, decode: list[Slot], prefill: list[Slot],
             prefill_tokens: list[int]) -> StepOutcome:
    """One worker step: a decode forward over ``decode`` (which is ``batch.slots``), then prefill forwards over
    ``prefill`` (the i-th slot's next ``prefill_tokens[i]`` tokens); the step lasts the sum of both. A hybrid
    step (both) on an executor whose ``hybrid_path`` is "fused" is one forward instead (:meth:`Executor.hybrid`,
    recorded as ``dict(kind="hybrid", **hybrid_terms(...), step_s)``).

    With a list as ``executor.step_log``, each decode forward is appended as ``dict(kind="decode", batch,
    context_tokens, batched, step_s)`` and each prefill call of one forward as ``dict(kind="prefill", tokens,
    squares, masked_pairs, prefill_s)``: the columns :func:`splitlab.costmodel.fit_decode` and ``fit_prefill``
    fit (a call of several chunk forwards reports only their sum, so it is not recorded). A hybrid step run in
    two passes is then recorded whole too, after them, as ``dict(kind="two-pass", **hybrid_terms(...), step_s)``
    (what a fused engine's step is compared with; the fits leave it out).
    """
    log = executor.step_log
    hybrid = bool(decode and prefill)
    if hybrid and log is not None:
        terms = hybrid_terms(len(decode), sum(s.context for s in decode), prefill, prefill_tokens)
    if hybrid and executor.hybrid_path == "fused":
        out = executor.hybrid(batch, prefill, prefill_tokens)
        if log is not None:
            log.append(dict(kind="hybrid", **terms, step_s=out.seconds))
        return out
    out = StepOutcome()
    if decode:
        context = sum(s.context for s in decode) if log is not None else 0
        res = executor.decode(batch)
        out.decode_s, out.tokens = res.seconds, res.tokens
        if log is not None:
            log.append(dict(kind="decode", batch=len(decode), context_tokens=context, batched=int(len(decode) > 1),
                            step_s=res.seconds))
    if prefill:
        forwards = prefill_forwards(prefill, prefill_tokens, executor.padded_prefill) if log is not None else ()
        res = executor.prefill(prefill, prefill_tokens)
        out.prefill_s, out.first_tokens = res.seconds, res.first_tokens
        if len(forwards) == 1:
            tokens, squares, masked = forwards[0]
            log.append(dict(kind="prefill", tokens=tokens, squares=squares, masked_pairs=masked,
                            prefill_s=res.seconds))
    if hybrid and log is not None:
        log.append(dict(kind="two-pass", **terms, step_s=out.seconds))
    return out
