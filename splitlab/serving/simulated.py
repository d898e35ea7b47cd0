"""The simulated back end: an executor that predicts step times with a :class:`~splitlab.costmodel.CostModel`
instead of running a model. It lets scheduler tests and large what-if runs go without a model (and without
torch); it emits token id 0."""
from __future__ import annotations

import math
import numbers
from dataclasses import fields
from itertools import repeat
from operator import add, mul

from ..costmodel import CostModel
from .executor import (DecodeBatch, DecodeResult, Executor, PrefillResult, Slot, StepOutcome, TransferResult,
                       hybrid_terms, prefill_forwards)
from .nic import DEFAULT_KV_LAYERS

__all__ = ["CostModelExecutor", "check_cost"]


#: the longest step a simulator runs on (s): a cost model predicting more is out of scale, not a slow device
DAY_S = 86_400.0
#: the shortest prefill or decode step that takes time at all (s): less is out of scale, not a fast device
NANOSECOND = 1e-9
#: the most step seconds a simulator keeps in its tables (:meth:`CostModelExecutor.decode_run_seconds`): 32 MB
RUN_TABLE_ENTRIES = 1 << 20
#: the CostModel fields that say how its engine runs a hybrid step, not numbers (``CostModel.__post_init__``)
_HYBRID = ("hybrid_path", "two_pass_reason")


def check_cost(cost) -> CostModel:
    """``cost`` if a simulator can run on it, else an error naming the field: every coefficient a finite number
    >= 0, a positive link bandwidth (inf: a free link), a prefill or a decode step that takes time (both free
    would make every latency 0 and every throughput infinite; one free phase is an idealisation tests use), no step
    of 2,048 tokens longer than a day (:data:`DAY_S`: a coefficient out of scale), a prefill or decode step that
    takes time taking at least :data:`NANOSECOND`, a positive KV size per token and a positive whole context.

    Raises:
        TypeError: not a CostModel, or a field that is not a number. ValueError: a field out of range.
    """
    if not isinstance(cost, CostModel):
        raise TypeError(f"the simulated back end needs a splitlab.costmodel.CostModel, got {type(cost).__name__}")
    if not isinstance(cost.padded_prefill, bool):
        raise TypeError(f"CostModel.padded_prefill must be True or False, got {cost.padded_prefill!r}")
    if not isinstance(cost.source, str):
        raise TypeError(f"CostModel.source must be a string, got {cost.source!r}")
    CostModel.__post_init__(cost)  # hybrid_path and two_pass_reason (a dataclasses.replace checks them too)
    for f in fields(cost):
        value = getattr(cost, f.name)
        if f.name in ("padded_prefill", "source", *_HYBRID) or (f.name == "memory_bytes" and value is None):
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"CostModel.{f.name} must be a number, got {value!r}")
        if math.isnan(value) or value < 0 or (math.isinf(value) and f.name != "transfer_bytes_per_s"):
            raise ValueError(f"CostModel.{f.name} must be a finite number >= 0, got {value!r}"
                             + (" (transfer_bytes_per_s may be inf: a free link)" if math.isinf(value) else ""))
    for name in ("transfer_bytes_per_s", "kv_bytes_per_token", "max_context"):
        if not getattr(cost, name) > 0:
            raise ValueError(f"CostModel.{name} must be > 0, got {getattr(cost, name)!r}")
    if not float(cost.max_context).is_integer():
        raise ValueError(f"CostModel.max_context must be a whole number of tokens, got {cost.max_context!r}")
    n = min(int(cost.max_context), 2048)  # not the whole context: a 128k-token prefill on a CPU may take hours
    for what, seconds in ((f"prefill of {n:,} tokens", cost.prefill_s(n)),
                          (f"decode step at {n:,} cached tokens", cost.decode_s(1, n)),
                          ("KV transfer of one token", cost.transfer_s(cost.kv_bytes_per_token))):
        if not seconds <= DAY_S:  # decode_base_s = 1e300 printed TTFTs of 300 digits
            raise ValueError(f"this CostModel predicts a {what} of {seconds:.3g} s, longer than a day: a coefficient "
                             f"is out of scale (they are seconds: {cost.source})")
        if 0 < seconds < NANOSECOND and not what.startswith("KV"):  # 1e-300 s overflowed the goodput search's steps
            raise ValueError(f"this CostModel predicts a {what} of {seconds:.3g} s, less than a nanosecond: a "
                             f"coefficient is out of scale (they are seconds: {cost.source}; 0 makes a phase free)")
    if cost.prefill_s(1) <= 0 and cost.decode_s(1, 1) <= 0:
        raise ValueError("this CostModel predicts a prefill and a decode step of 0 s (every latency 0, every "
                         "throughput infinite): give prefill_base_s or prefill_per_token_s, or decode_base_s, "
                         "decode_per_seq_s or decode_per_token_s, a value > 0")
    return cost


class CostModelExecutor(Executor):
    """An :class:`~.executors.Executor` whose seconds come from a :class:`CostModel`; no tensors, token id 0.

    ``prefill`` charges one forward for a batch of whole prompts (``n`` = their total tokens) and one forward
    per slot for chunks, like :class:`~.executors.ModelExecutor`; a hybrid step (decode rows + chunks) is
    charged as the cost model's engine runs it (:attr:`hybrid_path`, ``CostModel.hybrid_path``): one fused
    forward, ``CostModel.hybrid_s``, or two passes, the decode step and then the chunks' prefill forwards, as
    :func:`~.executor.run_step` runs them on a model that cannot fuse.
    ``kv_layers``: the layers a layer-wise transfer streams (the cost model's ``layers`` where it has them, as the
    roofline one does; else :data:`.nic.DEFAULT_KV_LAYERS`).
    """

    name = "simulated"

    def __init__(self, cost: CostModel | None = None):
        self.cost = check_cost(CostModel() if cost is None else cost)
        self.kv_bytes_per_token = self.cost.kv_bytes_per_token
        self.max_context = self.cost.max_context
        self.memory_bytes = self.cost.memory_bytes  # None: the stated CPU memory ("auto" budget)
        self.weight_bytes = int(self.cost.weight_bytes)
        self.activation_bytes_per_token = self.cost.activation_bytes_per_token
        self.overhead_s = 0.0
        self.padded_prefill = self.cost.padded_prefill
        self.kv_layers = int(getattr(self.cost, "layers", 0) or DEFAULT_KV_LAYERS)
        self._linear = type(self.cost).decode_s is CostModel.decode_s  # _seconds may inline it
        self._runs: dict[int, list[float]] = {}  # batch size -> decode_seconds of each context (decode_run_seconds)
        self._entries = 0

    @property
    def hybrid_path(self) -> str:
        """How this simulator runs a hybrid step: its cost model's ``hybrid_path`` ("fused" or "two-pass")."""
        return self.cost.hybrid_path

    def prefill_seconds(self, slots: list[Slot], n_tokens: list[int]) -> float:
        """Predicted seconds of the prefill forward(s) :meth:`prefill` charges (slots are not changed): the cost
        model's ``prefill_s`` of each forward of :func:`~.executor.prefill_forwards`."""
        if len(slots) == 1 and slots[0].prefilled == 0 and n_tokens[0] == slots[0].prefill_len:
            return self.cost.prefill_s(n_tokens[0])  # one whole prompt (the usual step): prefill_forwards' one term
        return sum(self.cost.prefill_s(*f) for f in prefill_forwards(slots, n_tokens, self.cost.padded_prefill))

    def prefill(self, slots: list[Slot], n_tokens: list[int]) -> PrefillResult:
        seconds = self.prefill_seconds(slots, n_tokens)
        firsts = []
        for s, n in zip(slots, n_tokens):
            s.prefilled += n
            firsts.append(0 if s.prefilled == s.prefill_len else None)
        return PrefillResult(seconds, [None] * len(slots), firsts)

    def hybrid_seconds(self, decode_batch: int, decode_context_tokens: int, slots: list[Slot],
                       n_tokens: list[int]) -> float:
        """Predicted seconds of one fused hybrid forward (slots are not changed): ``decode_batch`` decode rows
        holding ``decode_context_tokens`` cached tokens in all and the next ``n_tokens[i]`` prompt tokens of
        ``slots[i]``, ``CostModel.hybrid_s`` of their :func:`~.executor.hybrid_terms`."""
        return self.cost.hybrid_s(**hybrid_terms(decode_batch, decode_context_tokens, slots, n_tokens))

    def hybrid_outcome(self, slots: list[Slot], n_tokens: list[int], decode_batch: int,
                       decode_context_tokens: int) -> StepOutcome:
        """One fused hybrid step (:meth:`hybrid_seconds`); the slots' prefills advance. Only where
        :attr:`hybrid_path` is "fused": a two-pass step is a decode step and a prefill call."""
        seconds = self.hybrid_seconds(decode_batch, decode_context_tokens, slots, n_tokens)
        firsts = self.prefill(slots, n_tokens).first_tokens
        return StepOutcome.fused_step(seconds, decode_batch, sum(n_tokens), [0] * decode_batch, firsts)

    def hybrid(self, batch: DecodeBatch, slots: list[Slot], n_tokens: list[int]) -> StepOutcome:
        return self.hybrid_outcome(slots, n_tokens, len(batch.slots), sum(s.context for s in batch.slots))

    def decode_seconds(self, batch_size: int, context_tokens: int) -> float:
        """Predicted seconds of one decode step of ``batch_size`` sequences holding ``context_tokens`` in all."""
        return self.cost.decode_s(batch_size, context_tokens)

    def decode_run_seconds(self, batch_size: int, context_tokens: int, steps: int) -> list[float]:
        """Predicted seconds of ``steps`` decode steps in a row (each adds ``batch_size`` cached tokens), as a list
        of floats equal to ``decode_seconds`` step by step. A step's seconds depend only on its batch and cached
        tokens, so they are computed once, into a table per batch size of every context up to the largest asked
        (:data:`RUN_TABLE_ENTRIES` entries in all), and a run is a slice of it (a decode stretch, :mod:`.fast`)."""
        stop = context_tokens + steps * batch_size
        table = self._runs.get(batch_size)
        if table is None or len(table) < stop:
            grow = max(stop, 2 * len(table or ())) - len(table or ())
            if batch_size < 1 or self._entries + grow > RUN_TABLE_ENTRIES:
                return self._seconds(batch_size, range(context_tokens, stop, batch_size) if batch_size else
                                     repeat(context_tokens, steps))
            table = self._runs.setdefault(batch_size, [])
            table += self._seconds(batch_size, range(len(table), len(table) + grow))
            self._entries += grow
        return table[context_tokens:stop:batch_size]

    def _seconds(self, batch_size: int, contexts) -> list[float]:
        """``decode_seconds(batch_size, c)`` for each ``c`` of ``contexts``; a linear cost model's in C (map)."""
        c = self.cost
        if not self._linear:
            return [c.decode_s(batch_size, x) for x in contexts]
        base = c.decode_base_s + c.decode_per_seq_s * batch_size + (c.decode_batched_s if batch_size > 1 else 0.0)
        return list(map(add, repeat(base), map(mul, repeat(c.decode_per_token_s), contexts)))  # as decode_s does

    def decode(self, batch: DecodeBatch) -> DecodeResult:
        n = len(batch.slots)
        return DecodeResult(self.decode_seconds(n, sum(s.context for s in batch.slots)), [0] * n)

    def transfer(self, slot: Slot, mode: str = "whole") -> TransferResult:
        nbytes = slot.context * self.kv_bytes_per_token
        return TransferResult(self.cost.transfer_s(nbytes), nbytes, "cost-model")
