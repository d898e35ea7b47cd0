"""The emulated back end: every batch runs on the real model, on this one device, and its measured, synchronised
seconds advance the virtual clock of the worker it belongs to.

Bookkeeping (merging and selecting batch caches) is timed separately in ``overhead_s`` and not charged to any
worker: a paged-attention server does not copy caches to batch them.
"""
from __future__ import annotations

import time

import torch

from ..kvcache import KVCache
from ..phases.engine import decode_step, forward_logits, generate, prefill as engine_prefill
from ..phases.fused import fused_unsupported, hybrid_forward
from ..phases.hardware import device_memory_bytes
from ..phases.models import LoadedModel, require_loaded
from ..phases.sampling import Sampler
from ..sizing import RequestKVBytes, activation_bytes_per_token, kv_budget_bytes, kv_bytes_per_token
from ..transfer.copy import copy_cache
from ..transfer.header import check, pack
from .executor import DecodeBatch, DecodeResult, Executor, PrefillResult, Slot, StepOutcome, TransferResult

__all__ = ["ModelExecutor", "derive_kv_budget", "reference_tokens"]


def derive_kv_budget(lm=None, fraction: float = 0.9, memory_bytes: int | None = None) -> int:
    """A worker's KV budget: ``fraction`` x device memory minus the model's weights (bytes).

    Device memory is ``memory_bytes`` if given, else the GPU's total memory (CUDA) or this machine's RAM (CPU,
    from ``os.sysconf``). Emulated workers each pretend to own such a device.

    Raises:
        ValueError: the weights alone exceed the budget, or fraction is outside (0, 1].
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if memory_bytes is None:
        memory_bytes = device_memory_bytes(lm.device if lm is not None else torch.device("cpu"))
    return kv_budget_bytes(memory_bytes, lm.weight_bytes if lm is not None else 0, 0, fraction)


class ModelExecutor(Executor):
    """Runs every batch on the real model and reports its measured, synchronised seconds.

    Args:
        lm: the model (shared by every emulated worker: they take turns on the one device).
        warm: run one throw-away request first, so that one-time costs do not land on the first worker.
    """

    name = "emulated"

    def __init__(self, lm: LoadedModel, warm: bool = True):
        require_loaded(lm, "ModelExecutor")
        self.lm = lm
        self.kv_bytes_per_token = int(kv_bytes_per_token(lm.geometry, lm.dtype))
        # a model with sliding-window layers: a request's bytes stop growing in those layers at W - 1 positions
        per_request = RequestKVBytes.of(lm.geometry, lm.dtype)
        self.kv_bytes_fn = None if per_request.linear else per_request
        self.max_context = lm.max_context
        self.kv_layers = lm.geometry.layers  # what a layer-wise transfer streams (.nic)
        self.vocab_size = lm.vocab_size
        self.weight_bytes = lm.weight_bytes
        self.activation_bytes_per_token = activation_bytes_per_token(lm.config, lm.dtype)
        self.memory_bytes = device_memory_bytes(lm.device)
        self.overhead_s = 0.0
        #: why this model's hybrid steps run in two passes (None: one fused forward, see :attr:`hybrid_path`)
        self.fused_unsupported = fused_unsupported(lm)
        self.hybrid_path = "two-pass" if self.fused_unsupported else "fused"
        if warm:
            from ..phases.profiling import warm_up
            warm_up(lm, prompt_tokens=min(256, lm.max_context // 2))

    def kv_bytes(self, tokens: int) -> int:
        """KV bytes of ``tokens`` cached positions of one request (sliding layers at most their window)."""
        return tokens * self.kv_bytes_per_token if self.kv_bytes_fn is None else self.kv_bytes_fn(tokens)

    def _pick(self, slot: Slot, logits_row: torch.Tensor) -> int:
        """The next token of ``slot``'s request: greedy, or drawn for its output position (the same draw on any
        worker, in any batch: :class:`splitlab.phases.sampling.Sampler`)."""
        if slot.request.sampling is None or slot.request.sampling.greedy:
            return int(logits_row.argmax())
        if slot.sampler is None:
            slot.sampler = Sampler(slot.request.sampling, self.lm.device)
        return int(slot.sampler(logits_row[None], index=len(slot.request.output))[0])

    def prefill(self, slots: list[Slot], n_tokens: list[int]) -> PrefillResult:
        """Whole prompts starting from scratch go through one batched, left-padded forward; chunks (or
        continuations) run one forward per slot on top of its cache. Seconds are summed over forwards."""
        whole = all(s.prefilled == 0 and n == s.prefill_len for s, n in zip(slots, n_tokens))
        firsts: list[int | None] = []
        if whole:
            out = engine_prefill(self.lm, [s.prefill_ids for s in slots])
            seconds, caches = out.seconds, (out.cache.split() if len(slots) > 1 else [out.cache])
            for i, (s, c) in enumerate(zip(slots, caches)):
                s.cache, s.prefilled = c, s.prefill_len
                firsts.append(self._pick(s, out.logits[i]))
            return PrefillResult(seconds, caches, firsts)
        seconds = 0.0
        for s, n in zip(slots, n_tokens):
            ids = torch.tensor([s.prefill_ids[s.prefilled:s.prefilled + n]], device=self.lm.device)
            mask = torch.ones(1, s.prefilled + n, dtype=torch.long, device=self.lm.device)
            logits, s.cache, sec = forward_logits(self.lm, ids, mask, s.cache)
            s.prefilled += n
            seconds += sec
            firsts.append(self._pick(s, logits[0]) if s.prefilled == s.prefill_len else None)
        return PrefillResult(seconds, [s.cache for s in slots], firsts)

    def hybrid(self, batch: DecodeBatch, slots: list[Slot], n_tokens: list[int]) -> StepOutcome:
        """A hybrid step as one real forward (:func:`splitlab.phases.fused.hybrid_forward`): the batch's decode
        rows and the slots' next chunks packed into one sequence, each row attending only to its own cache."""
        cache = self._batch_cache(batch)
        t0 = time.perf_counter()
        chunks = [(s.cache, s.prefill_ids[s.prefilled:s.prefilled + n]) for s, n in zip(slots, n_tokens)]
        out = hybrid_forward(self.lm, cache, [s.last_token for s in batch.slots], chunks)
        batch.state = (list(batch.slots), out.decode_cache)
        tokens = [self._pick(s, out.decode_logits[i]) for i, s in enumerate(batch.slots)]
        firsts: list[int | None] = []
        for i, (s, n) in enumerate(zip(slots, n_tokens)):
            s.cache, s.prefilled = out.chunk_caches[i], s.prefilled + n
            firsts.append(self._pick(s, out.chunk_logits[i]) if s.prefilled == s.prefill_len else None)
        self.overhead_s += time.perf_counter() - t0 - out.seconds  # packing and unpacking, not the forward
        return StepOutcome.fused_step(out.seconds, len(batch.slots), sum(n_tokens), tokens, firsts)

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


def reference_tokens(lm: LoadedModel, requests) -> dict[int, list[int]]:
    """Each request's tokens when it runs alone through :func:`splitlab.generate` (the correctness baseline)."""
    return {r.id: generate(lm, [r.prompt], max_new_tokens=r.max_new_tokens, sampling=r.sampling).tokens[0]
            for r in requests}
