"""A linear cost model of one worker, and an executor that predicts step times with it instead of running a model.

- prefill of ``n`` new prompt tokens (one forward): ``prefill_base_s + prefill_per_token_s * n``
- one decode step of ``B`` sequences holding ``C`` cached tokens in all: ``decode_base_s + decode_per_seq_s * B
  + decode_per_token_s * C`` (weights are read once per step; each sequence reads its own KV).
- a KV transfer of ``b`` bytes: ``transfer_base_s + b / transfer_bytes_per_s``

Defaults are round numbers of the tiny model on a 2-thread laptop CPU (DESIGN.md section 5: prefill 512 tokens
~39 ms, decode ~3.3 ms/token); :meth:`CostModel.fit` refits them from :mod:`splitlab.profiling` measurements.
The executor lets scheduler tests and large what-if runs go without a model; it emits token id 0.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .executors import DecodeBatch, DecodeResult, Executor, PrefillResult, Slot, TransferResult

__all__ = ["CostModel", "CostModelExecutor"]


@dataclass(frozen=True)
class CostModel:
    """Coefficients in seconds (per token / per sequence / per byte as named); ``kv_bytes_per_token`` and
    ``max_context`` describe the modeled model (defaults: the tiny preset, float32)."""

    prefill_base_s: float = 2e-3
    prefill_per_token_s: float = 7e-5
    decode_base_s: float = 3e-3
    decode_per_seq_s: float = 2e-4
    decode_per_token_s: float = 5e-8
    transfer_base_s: float = 1e-4
    transfer_bytes_per_s: float = 2e9
    kv_bytes_per_token: int = 2048
    max_context: int = 2048

    def prefill_s(self, tokens: int) -> float:
        return self.prefill_base_s + self.prefill_per_token_s * tokens

    def decode_s(self, batch: int, context_tokens: int) -> float:
        return self.decode_base_s + self.decode_per_seq_s * batch + self.decode_per_token_s * context_tokens

    def transfer_s(self, nbytes: int) -> float:
        return self.transfer_base_s + nbytes / self.transfer_bytes_per_s

    def fit(self, prefill_df, decode_df) -> "CostModel":
        """A copy with prefill and decode coefficients fitted (least squares, clipped at 0) to measurements:
        ``prefill_df`` with columns prompt_tokens, batch, prefill_s (:func:`splitlab.profiling.measure_prefill`)
        and ``decode_df`` with batch, context, step_s (:func:`splitlab.profiling.measure_decode`)."""
        xp = np.c_[np.ones(len(prefill_df)), prefill_df["prompt_tokens"] * prefill_df["batch"]]
        a, b = np.clip(np.linalg.lstsq(xp, prefill_df["prefill_s"], rcond=None)[0], 0, None)
        xd = np.c_[np.ones(len(decode_df)), decode_df["batch"], decode_df["batch"] * decode_df["context"]]
        c, d, e = np.clip(np.linalg.lstsq(xd, decode_df["step_s"], rcond=None)[0], 0, None)
        return replace(self, prefill_base_s=float(a), prefill_per_token_s=float(b), decode_base_s=float(c),
                       decode_per_seq_s=float(d), decode_per_token_s=float(e))


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
