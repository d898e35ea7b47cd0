"""A simulated split whose two pools run on different hardware: prefill workers charged by one cost model, decode
workers by another (Splitwise's H100 prefill + A100 decode, ISCA'24; DistServe's per-phase parallelism, OSDI'24).

In a split every prefill worker only prefills (and hands its caches off) and every decode worker only decodes, so
one executor that charges prefill forwards and hand-offs by the prefill pool's cost model and decode steps by the
decode pool's charges each worker by its own pool; the cluster, router and scheduler are unchanged. A colocated
worker would be charged by both, so :class:`PoolCostExecutor` is for a disaggregated :class:`~.config.ServingConfig`
only; a hybrid step (the chunked policy, colocated) raises.
"""
from __future__ import annotations

from ..costmodel import CostModel
from ..sizing.budget import MEMORY_UTILIZATION
from .executor import DecodeBatch, Slot, StepOutcome
from .simulated import CostModelExecutor

__all__ = ["PoolCostExecutor"]


class PoolCostExecutor(CostModelExecutor):
    """A :class:`~.simulated.CostModelExecutor` for a split across two pools: prefill forwards and hand-offs cost
    ``prefill`` (its ``transfer_*`` fields are the hand-off: the link, and any re-shard between the pools' TP
    degrees), decode steps cost ``decode``. ``cost`` is ``prefill``; ``decode_cost`` the other.

    Both pools serve one model: the KV bytes per token must agree. ``max_context`` is the smaller of the two. The
    cluster has one KV budget for every worker; "auto" is the DECODE pool's (90% of its devices' memory - the
    weights), where a cache lives for its whole output. A prefill worker only holds caches until they are handed
    off; where its pool has less room than that (e.g. TP2 prefill, TP4 decode), the simulation lets it park more
    than it could: optimistic for the prefill side, stated here.

    Raises:
        TypeError, ValueError: a cost model the simulator refuses (:func:`~.simulated.check_cost`), or pools whose
            KV bytes per token differ (two models, or two dtypes).
    """

    name = "simulated (two pools)"

    def __init__(self, prefill: CostModel, decode: CostModel):
        super().__init__(prefill)
        self.decode_pool = CostModelExecutor(decode)
        self.decode_cost = self.decode_pool.cost
        if self.decode_cost.kv_bytes_per_token != self.cost.kv_bytes_per_token:
            raise ValueError(f"the prefill and decode pools must serve one model: KV bytes per token "
                             f"{self.cost.kv_bytes_per_token:,} ({self.cost.source}) and "
                             f"{self.decode_cost.kv_bytes_per_token:,} ({self.decode_cost.source}) differ")
        self.max_context = min(self.max_context, self.decode_pool.max_context)

    def auto_kv_budget(self, utilization: float = MEMORY_UTILIZATION, forward_tokens: int = 0) -> int:
        """The decode pool's "auto" budget (class docstring; :meth:`Executor.auto_kv_budget`)."""
        return self.decode_pool.auto_kv_budget(utilization, forward_tokens)

    def decode_seconds(self, batch_size: int, context_tokens: int) -> float:
        return self.decode_pool.decode_seconds(batch_size, context_tokens)

    def decode_run_seconds(self, batch_size: int, context_tokens: int, steps: int) -> list[float]:
        return self.decode_pool.decode_run_seconds(batch_size, context_tokens, steps)

    def hybrid_outcome(self, slots: list[Slot], n_tokens: list[int], decode_batch: int,
                       decode_context_tokens: int) -> StepOutcome:
        raise ValueError("a PoolCostExecutor charges a split's two pools; a hybrid step (decode rows and prompt "
                         "chunks on one worker) belongs to a colocated layout: simulate it with one cost model")

    def hybrid(self, batch: DecodeBatch, slots: list[Slot], n_tokens: list[int]) -> StepOutcome:
        return self.hybrid_outcome(slots, n_tokens, len(batch.slots), 0)
