"""Conditional disaggregation: a split whose decode workers prefill some requests themselves.

A request normally goes prefill worker -> KV transfer -> decode worker. Under conditional disaggregation the
router may send it straight to a decode worker, which prefills it in its own batch (the configuration's
``policy``: prefill-first by default, or chunked, as a colocated worker would) and decodes it there: no transfer,
but the prefill interrupts that worker's decodes. Dynamo's first disaggregated router decided per request: prefill
remotely when the prompt's length after the prefix-cache hit exceeds ``max_local_prefill_length`` and the prefill
queue holds fewer than ``max_prefill_queue_size`` requests, else locally (``PyDisaggregatedRouter``, defaults 1000
tokens and 2 requests); its design notes say that when "the prefill is short or the decode engine has a high
prefix cache hit, often it is more efficient to prefill locally in the decode engine" (Dynamo 0.2 docs:
docs.nvidia.com/dynamo/archive/0.2.0/architecture/disagg_serving.html). Its later router keeps a threshold on the
effective input length (dynamo issue #11514, PR #11723); llm-d's ``promptTokens`` gate runs shorter prompts
locally on the decode worker (llm-d-router PR #2335).

Here the same rule reads :class:`~.config.ServingConfig`: ``local_prefill_tokens`` (prompt tokens; splitlab has no
prefix cache in the serving path, so the effective length is the prompt) and ``local_prefill_queue`` (requests
waiting, not yet admitted, at the prefill worker the request would join: splitlab's prefill workers each keep
their own queue where Dynamo's share one). It enters as a router (:class:`ConditionalRouter`): the cluster,
the scheduler and the clocks are those of every run, and a decode worker that holds queued prompts plans its
steps as a colocated worker does.
"""
from __future__ import annotations

import math
from typing import Sequence

from .request import Request
from .prefix_router import PrefixRouter
from .router import Router, route
from .scheduler import Worker

__all__ = ["ConditionalRouter", "make_router", "prefills_locally", "local_share"]


def prefills_locally(cfg, r: Request, prefill_worker: Worker | None) -> bool:
    """Whether ``r`` prefills on a decode worker: its prompt has at most ``cfg.local_prefill_tokens`` tokens, or
    ``prefill_worker`` (where the router would send it; None when no prefill worker is left) has at least
    ``cfg.local_prefill_queue`` requests waiting. False when ``cfg`` is not conditional (the plain split)."""
    tokens, queue = cfg.local_prefill_tokens, cfg.local_prefill_queue
    if tokens is None and queue is None:
        return False
    if prefill_worker is None or (tokens is not None and r.prompt_len <= tokens):
        return True
    return queue is not None and len(prefill_worker.queue) >= queue


class ConditionalRouter(Router):
    """The cluster's :class:`~.router.Router`, which sends a new request to the least-loaded live decode worker
    (prompt tokens owed plus output tokens owed) when :func:`prefills_locally` says so, and otherwise to the
    prefill pool. When every prefill worker is lost, requests fall back to the decode workers."""

    def __init__(self, cfg, pool: Sequence[Worker], decoders: Sequence[Worker], indexed: bool = False):
        super().__init__(pool, decoders, indexed)
        self.cfg = cfg

    def first(self, t: float, r: Request | None = None) -> Worker | None:
        p = super().first(t, r)
        if r is None or not prefills_locally(self.cfg, r, p):
            return p
        d = self.indexes[1].least(t) if self.indexes else route(self.decoders, t)
        return p if d is None else d


def make_router(cfg, pool: Sequence[Worker], decoders: Sequence[Worker], indexed: bool = False) -> Router:
    """The router ``cfg`` asks for: a :class:`ConditionalRouter` for a conditional split, a
    :class:`~.prefix_router.PrefixRouter` under ``routing="prefix-aware"``, else the plain one."""
    if cfg.routing == "prefix-aware":
        return PrefixRouter(cfg, pool, decoders, indexed)
    if cfg.conditional:
        return ConditionalRouter(cfg, pool, decoders, indexed)
    return Router(pool, decoders, indexed)


def local_share(result) -> float:
    """The share of a run's prefilled requests whose prefill ran on the worker that decoded them (0 for a plain
    split, 1 when decode workers did every prefill), in [0, 1]; ``math.nan`` when no request was prefilled."""
    done = [r for r in result.requests if r.prefill_worker is not None and r.decode_worker is not None]
    if not done:
        return math.nan
    return sum(r.prefill_worker == r.decode_worker for r in done) / len(done)
