"""Executors run (or predict) the batches a scheduler chooses; the scheduler never knows which.

Interface (:class:`Executor`):
- ``prefill(slots, n_tokens) -> PrefillResult(seconds, caches, first_tokens)``: run the next ``n_tokens[i]``
  prompt tokens of each slot (a whole prompt, or one chunk of it). ``first_tokens[i]`` is the first output
  token when that call completed the prompt, else None.
- ``decode(batch) -> DecodeResult(seconds, tokens)``: one decode step for every slot of a :class:`DecodeBatch`
  (one new token each). Slots may join and leave between steps (continuous batching).
- ``transfer(slot) -> TransferResult(seconds, nbytes, method)``: hand the slot's cache to a decode worker.
- ``kv_bytes_per_token``, ``max_context`` and ``vocab_size`` (None: any id) for admission control.

:class:`ModelExecutor` (the "emulated" mode of DESIGN.md section 2) runs the real model through
:mod:`splitlab.engine` and returns the MEASURED, synchronised forward time; :class:`~.cost_model.CostModelExecutor`
predicts the time instead. Bookkeeping (merging and selecting batch caches) is timed separately in
``overhead_s`` and not charged to any worker: a paged-attention server does not copy caches to batch them.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import torch

from ..engine import forward_logits, prefill as engine_prefill, decode_step
from ..kv_cache import KVCache
from ..models import LoadedModel
from ..sampling import Sampler
from ..transfer import copy_cache, check, pack
from .request import Request

__all__ = ["Slot", "DecodeBatch", "PrefillResult", "DecodeResult", "TransferResult", "Executor", "ModelExecutor"]


@dataclass
class Slot:
    """A request resident on one worker. ``cache`` is executor-owned (a KVCache, or None for cost models);
    ``prefilled`` counts prompt tokens already in the cache; ``last_token`` is the latest output token."""

    request: Request
    cache: Any = None
    prefilled: int = 0
    last_token: int | None = None
    sampler: Any = None

    @property
    def context(self) -> int:
        """Tokens whose K/V are cached: prefilled prompt + every output token but the latest."""
        return self.prefilled + max(0, len(self.request.output) - 1)


@dataclass
class DecodeBatch:
    """The running decode batch of a worker: its slots in order, and ``state``, private to the executor
    (:class:`ModelExecutor`: the slots of the last step and their merged cache)."""

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


class Executor(ABC):
    """What a worker calls to get work done; see the module docstring for the contract."""

    kv_bytes_per_token: int
    max_context: int
    vocab_size: int | None = None
    overhead_s: float = 0.0

    @abstractmethod
    def prefill(self, slots: list[Slot], n_tokens: list[int]) -> PrefillResult: ...

    @abstractmethod
    def decode(self, batch: DecodeBatch) -> DecodeResult: ...

    @abstractmethod
    def transfer(self, slot: Slot, mode: str = "whole") -> TransferResult: ...


class ModelExecutor(Executor):
    """Runs every batch on the real model and reports its measured, synchronised seconds.

    Args:
        lm: the model (shared by every emulated worker: they take turns on the one device).
        warm: run one throw-away request first, so that one-time costs do not land on the first worker.
    """

    def __init__(self, lm: LoadedModel, warm: bool = True):
        self.lm = lm
        g = lm.geometry
        self.kv_bytes_per_token = 2 * g.layers * g.kv_heads * g.head_dim * torch.empty(0, dtype=lm.dtype).element_size()
        self.max_context = lm.max_context
        self.vocab_size = lm.vocab_size
        self.overhead_s = 0.0
        if warm:
            from ..profiling import warm_up
            warm_up(lm, prompt_tokens=min(256, lm.max_context // 2))

    def _pick(self, slot: Slot, logits_row: torch.Tensor) -> int:
        if slot.request.sampling is None or slot.request.sampling.greedy:
            return int(logits_row.argmax())
        if slot.sampler is None:
            slot.sampler = Sampler(slot.request.sampling, self.lm.device)
        return int(slot.sampler(logits_row[None])[0])

    def prefill(self, slots: list[Slot], n_tokens: list[int]) -> PrefillResult:
        """Whole prompts starting from scratch go through one batched, left-padded forward; chunks (or
        continuations) run one forward per slot on top of its cache. Seconds are summed over forwards."""
        whole = all(s.prefilled == 0 and n == s.request.prompt_len for s, n in zip(slots, n_tokens))
        firsts: list[int | None] = []
        if whole:
            out = engine_prefill(self.lm, [s.request.prompt for s in slots])
            seconds, caches = out.seconds, (out.cache.split() if len(slots) > 1 else [out.cache])
            for i, (s, c) in enumerate(zip(slots, caches)):
                s.cache, s.prefilled = c, s.request.prompt_len
                firsts.append(self._pick(s, out.logits[i]))
            return PrefillResult(seconds, caches, firsts)
        seconds = 0.0
        for s, n in zip(slots, n_tokens):
            ids = torch.tensor([s.request.prompt[s.prefilled:s.prefilled + n]], device=self.lm.device)
            mask = torch.ones(1, s.prefilled + n, dtype=torch.long, device=self.lm.device)
            logits, s.cache, sec = forward_logits(self.lm, ids, mask, s.cache)
            s.prefilled += n
            seconds += sec
            firsts.append(self._pick(s, logits[0]) if s.prefilled == s.request.prompt_len else None)
        return PrefillResult(seconds, [s.cache for s in slots], firsts)

    def _batch_cache(self, batch: DecodeBatch) -> KVCache:
        """The batch's merged cache in slot order: rows of departed slots dropped, new slots' caches appended.

        Rows are matched to slots by the Slot objects themselves, not by request id: a slot that joins later with
        an id seen before (the same ids in the next run of a reused decode worker) brings its own cache.
        """
        old_slots, merged = batch.state if batch.state is not None else ([], None)
        if len(old_slots) == len(batch.slots) and all(a is b for a, b in zip(old_slots, batch.slots)):
            return merged
        t0 = time.perf_counter()
        row = {id(s): i for i, s in enumerate(old_slots)}  # old_slots are alive (held by state): ids are unique
        keep = [row[id(s)] for s in batch.slots if id(s) in row]
        parts = [merged.select(keep)] if keep and merged is not None else []
        order = [id(s) for s in batch.slots if id(s) in row]
        for s in batch.slots:
            if id(s) not in row:
                parts.append(s.cache)
                order.append(id(s))
                s.cache = None  # the batch owns it now
        merged = KVCache.merge(parts)
        want = [id(s) for s in batch.slots]
        if order != want:  # keep rows in slot order
            merged = merged.select([order.index(i) for i in want])
        self.overhead_s += time.perf_counter() - t0
        return merged

    def decode(self, batch: DecodeBatch) -> DecodeResult:
        """One decode step of the whole batch on its merged (left-padded) cache; measured forward seconds."""
        cache = self._batch_cache(batch)
        out = decode_step(self.lm, cache, [s.last_token for s in batch.slots])
        batch.state = (list(batch.slots), out.cache)
        if all(s.request.sampling is None or s.request.sampling.greedy for s in batch.slots):
            tokens = out.logits.argmax(-1).tolist()
        else:
            tokens = [self._pick(s, out.logits[i]) for i, s in enumerate(batch.slots)]
        return DecodeResult(out.seconds, tokens)

    def transfer(self, slot: Slot, mode: str = "whole") -> TransferResult:
        """Pack the slot's cache with its header, check it as the receiver would, and copy it for real
        (same device: a clone). The slot then holds the received copy."""
        packet = pack(slot.cache, [slot.last_token], [slot.request.id])
        check(packet.header, self.lm, packet.cache)
        slot.cache, stats = copy_cache(packet.cache, self.lm.device, mode=mode)
        return TransferResult(stats.seconds, stats.nbytes, stats.method)
