"""The decode batch a worker can hold, stated: what its KV budget holds and the cap in force.

A worker's batch is bounded by its KV memory (``KVMemory`` reserves each request's largest cache, prompt +
output, on admission; the "auto" budget is a share of the device's memory less the weights and activations, as
vLLM sizes it: :func:`splitlab.sizing.kv_budget_bytes`) and, optionally, by ``ServingConfig.max_batch``. The
planner states both (:class:`BatchBound`: a line of its summary, a key of its JSON), so that no ranking depends
on a cap nobody sees; a cap below what memory holds binds, and says so.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..common.numbers import fmt3
from ..serving import ServingConfig
from ..sizing import requests_in_budget

__all__ = ["BatchBound", "batch_bound", "chunked_cap_words"]


@dataclass(frozen=True)
class BatchBound:
    """The batch bound of a worker of ``config`` on a device.

    Attributes:
        max_batch: the cap given (``ServingConfig.max_batch``; None: none).
        cap: the cap in force (``ServingConfig.batch_cap``: ``max_batch``, ``chunk_tokens - 1`` under chunked with
            none, else inf).
        kv_budget_bytes: the worker's KV budget ("auto" resolved; None: unlimited).
        request_bytes: KV bytes a request reserves, averaged over the request set (its prompt + output tokens).
        kv_requests: requests of that size the budget holds at once (floor; inf: unlimited).
        memory_utilization: the share of the device's memory the budget was sized from.
        tp: devices of a worker (tensor parallelism): a worker of ``tp`` > 1 is one TP group, one instance.
        given: the budget was ``kv_budget_bytes`` given in bytes, not the "auto" share of memory.
    """

    max_batch: int | None
    cap: float
    kv_budget_bytes: int | None
    request_bytes: float
    kv_requests: float
    memory_utilization: float
    tp: int = 1
    given: bool = False

    @property
    def batch(self) -> float:
        """The most requests a worker holds: ``min(cap, kv_requests)``."""
        return min(self.cap, self.kv_requests)

    @property
    def binds(self) -> str:
        """What bounds the batch: "max_batch" (a cap given, below what KV memory holds), "chunk_tokens - 1" (no
        cap given: a chunked worker's own, one decode row less than its chunk budget, below what KV memory holds)
        or "KV memory"."""
        if self.cap >= self.kv_requests:
            return "KV memory"
        return "max_batch" if self.max_batch is not None else "chunk_tokens - 1"

    def line(self) -> str:
        """One sentence: the budget, the requests it holds, the cap and which binds; per worker, or per TP group
        (one instance of ``tp`` devices, whose budget is their memory together)."""
        unit, whose = (("worker", "its memory") if self.tp == 1 else
                       (f"TP{self.tp} group", f"its {self.tp} devices' memory"))
        budget = ("unlimited KV memory" if self.kv_budget_bytes is None else
                  f"KV budget {fmt3(self.kv_budget_bytes / 2 ** 30)} GiB per {unit} " + (
                      "(kv_budget_bytes, as given)" if self.given else  # was called 0.9 of its memory
                      f"({self.memory_utilization:g} of {whose} less weights and activations)"))
        held = "" if math.isinf(self.kv_requests) else (
            f", {self.kv_requests:,.0f} requests of {fmt3(self.request_bytes / 2 ** 20)} MiB (mean prompt + output)")
        cap = "no cap" if self.max_batch is None else f"max_batch {self.max_batch}"
        if self.binds != "KV memory":
            per = "worker" if self.tp == 1 else "TP group"
            cap = cap if self.binds == "max_batch" else "no cap, but a chunked layout's own (chunk_tokens - 1)"
            return f"decode batch: {budget}{held}; {cap} binds: at most {self.cap:,.0f} requests per {per}"
        return f"decode batch: {budget}{held}; {cap}: KV memory bounds the batch"

    def to_json(self) -> dict:
        inf = (lambda x: None if math.isinf(x) else x)  # noqa: E731 (JSON has no inf)
        return dict(max_batch=self.max_batch, cap=inf(self.cap), kv_budget_bytes=self.kv_budget_bytes,
                    request_bytes=self.request_bytes, kv_requests=inf(self.kv_requests), batch=inf(self.batch),
                    binds=self.binds, memory_utilization=self.memory_utilization, tp=self.tp)


def chunked_cap_words(chunk_tokens: Sequence[int], max_batch: int | None) -> str:
    """What caps a chunked worker's batch when no ``max_batch`` is given (``ServingConfig.batch_cap``: one decode
    row per token of a step's budget, so ``chunk_tokens - 1`` rows leave a prompt at least one token, as vLLM needs
    ``max_num_seqs <= max_num_batched_tokens``), in words, as a clause to append to a batch line ("; but ...");
    "" with a ``max_batch`` or no chunk sizes. A ``"tpot"`` entry (a map's per-cell budget) is named as such."""
    if max_batch is not None or not chunk_tokens:
        return ""
    sizes = ", ".join([f"{c - 1} with {c}-token chunks" for c in sorted({c for c in chunk_tokens if c != "tpot"})]
                      + ["one less than the TPOT budget with that budget"] * ("tpot" in chunk_tokens))
    return f"; but chunked layouts at most chunk_tokens - 1 requests per worker ({sizes})"


def batch_bound(executor, config: ServingConfig, prompt_tokens: Sequence[int],
                output_tokens: Sequence[int]) -> BatchBound:
    """The batch bound of a decode (or colocated) worker of ``config`` on ``executor``'s device, for requests of
    ``prompt_tokens[i]`` + ``output_tokens[i]`` tokens: the "auto" budget as a run resolves it
    (``executor.auto_kv_budget(config.memory_utilization, config.forward_tokens)``), divided by the mean KV
    bytes a request reserves (``executor.kv_bytes``). A worker of several devices (an analytic cost model's ``tp``)
    is stated per TP group.

    Raises:
        ValueError: no requests, a length that is not an integer number of tokens (prompts >= 1, outputs >= 0), or
            no room for a KV cache on the device.
    """
    for name, lengths, least in (("prompt_tokens", prompt_tokens, 1), ("output_tokens", output_tokens, 0)):
        if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__len__") or any(
                isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral) or n < least for n in lengths):
            raise ValueError(f"{name} must be a list of integer token counts >= {least}, got {lengths!r}")
    if len(prompt_tokens) == 0 or len(prompt_tokens) != len(output_tokens):
        raise ValueError("batch_bound needs one output length per prompt length, and at least one request")
    budget = config.kv_budget_bytes
    if budget == "auto":
        budget = executor.auto_kv_budget(config.memory_utilization, config.forward_tokens)
    request = float(np.mean([executor.kv_bytes(int(p) + int(o)) for p, o in zip(prompt_tokens, output_tokens)]))
    tp = int(getattr(getattr(executor, "cost", None), "tp", 1) or 1)
    return BatchBound(config.max_batch, config.batch_cap, budget, request, requests_in_budget(budget, request),
                      config.memory_utilization, tp, config.kv_budget_bytes != "auto")
