"""The simulated back end: an executor that predicts step times with a :class:`~splitlab.costmodel.CostModel`
instead of running a model. It lets scheduler tests and large what-if runs go without a model (and without
torch); it emits token id 0."""
from __future__ import annotations

from ..costmodel import CostModel
from .executor import DecodeBatch, DecodeResult, Executor, PrefillResult, Slot, TransferResult

__all__ = ["CostModelExecutor"]


class CostModelExecutor(Executor):
    """An :class:`~.executors.Executor` whose seconds come from a :class:`CostModel`; no tensors, token id 0.

    ``prefill`` charges one forward for a batch of whole prompts (``n`` = their total tokens) and one forward
    per slot for chunks, like :class:`~.executors.ModelExecutor`.
    """

    def __init__(self, cost: CostModel | None = None):
        self.cost = cost or CostModel()
        self.kv_bytes_per_token = self.cost.kv_bytes_per_token
        self.max_context = self.cost.max_context
        self.overhead_s = 0.0

    def prefill(self, slots: list[Slot], n_tokens: list[int]) -> PrefillResult:
        whole = all(s.prefilled == 0 and n == s.request.prompt_len for s, n in zip(slots, n_tokens))
        seconds = self.cost.prefill_s(sum(n_tokens)) if whole else sum(self.cost.prefill_s(n) for n in n_tokens)
        firsts = []
        for s, n in zip(slots, n_tokens):
            s.prefilled += n
            firsts.append(0 if s.prefilled == s.request.prompt_len else None)
        return PrefillResult(seconds, [None] * len(slots), firsts)

    def decode(self, batch: DecodeBatch) -> DecodeResult:
        n = len(batch.slots)
        return DecodeResult(self.cost.decode_s(n, sum(s.context for s in batch.slots)), [0] * n)

    def transfer(self, slot: Slot, mode: str = "whole") -> TransferResult:
        nbytes = slot.context * self.kv_bytes_per_token
        return TransferResult(self.cost.transfer_s(nbytes), nbytes, "cost-model")
