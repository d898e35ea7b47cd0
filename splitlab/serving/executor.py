"""Executors run (or predict) the batches a scheduler chooses; the scheduler never knows which.

Interface (:class:`Executor`):
- ``prefill(slots, n_tokens) -> PrefillResult(seconds, caches, first_tokens)``: run the next ``n_tokens[i]``
  prompt tokens of each slot (a whole prompt, or one chunk of it). ``first_tokens[i]`` is the first output
  token when that call completed the prompt, else None.
- ``decode(batch) -> DecodeResult(seconds, tokens)``: one decode step for every slot of a :class:`DecodeBatch`
  (one new token each). Slots may join and leave between steps (continuous batching).
- ``transfer(slot) -> TransferResult(seconds, nbytes, method)``: hand the slot's cache to a decode worker.
- ``kv_bytes_per_token``, ``max_context`` and ``vocab_size`` (None: any id) for admission control.

:class:`~.emulated.ModelExecutor` (the emulated back end) runs the real model through :mod:`splitlab.phases.engine`
and returns the MEASURED, synchronised forward time; :class:`~.simulated.CostModelExecutor` (the simulated back
end) predicts the time instead. This module is torch-free: the simulator never imports a model.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from .request import Request

__all__ = ["Slot", "DecodeBatch", "PrefillResult", "DecodeResult", "TransferResult", "Executor"]


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
