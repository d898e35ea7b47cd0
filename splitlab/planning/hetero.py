"""Which hardware and which tensor parallelism for each pool? :func:`plan_pools` ranks, up to a number of DEVICES,
colocated clusters on each pool's GPU (prefill-first, and chunked prefill at each of ``chunk_tokens``, Sarathi-Serve's
and vLLM's default colocated scheduler) and every split xPyD across the two GPUs, for every pair of TP degrees
(DistServe picks each phase's parallelism separately, OSDI'24; Splitwise each phase's hardware, ISCA'24), by cost
per million output tokens and by output tokens per joule (:mod:`.pools`).

    import splitlab as sl
    p = sl.planning.hetero.plan_pools("Llama-3-8B", "H100", "A100-80GB", tps=(1, 2), max_devices=4)
    p.table("cost"), p.table("power")   # one row per candidate, cheapest or most frugal first

Each candidate is a goodput search (:func:`splitlab.serving.goodput`) on one seeded request set, a split on a
:class:`~splitlab.serving.PoolCostExecutor` (each pool charged by its own analytic cost model, the hand-off by
:func:`.pools.handoff`, re-shard of a TP mismatch included). A worker is a group of ``tp`` devices: the goodput is
also given per device, the price per device-hour.

A worker's decode batch is bounded by its own KV memory unless ``max_batch`` caps it (the default: no cap): a TP
``t`` worker of a GPU with ``M`` bytes holds ``utilization x t x M - weights - activations`` bytes of cache (the
weights are split over its devices, so the ``t`` shards sum to the whole; :func:`splitlab.sizing.kv_budget_bytes`),
a colocated worker its GPU's, a split's decode worker the decode GPU's. Each pool's bound is stated
(:meth:`PoolPlan.batch_lines`, a candidate's ``batch``), so no ranking rests on a cap nobody sees.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..common.progress import show_progress
from ..serving import CostModelExecutor, PoolCostExecutor, ServingConfig, goodput, workload_requests
from ..sizing.budget import MEMORY_UTILIZATION
from .batch import batch_bound
from .closed_form import colocated_capacity, decode_capacity, prefill_capacity, split_capacity
from .defaults import choose_defaults
from .options import chunk_sizes
from .planner import CLOSED_FORM_BATCH, PLAN_EXTEND
from .pools import NoPool, cluster_costs, handoff, pool_costs

__all__ = ["plan_pools", "PoolPlan", "PoolCandidate", "MAX_DEVICES", "CHUNK_TOKENS", "NoPool", "batch_cell"]

#: most devices :func:`plan_pools` searches (every xPyD split of every TP pair up to it is a goodput search)
MAX_DEVICES = 16
#: the chunked colocated clusters' token budgets per step by default (one of those `plan --chunk-tokens` tries)
CHUNK_TOKENS = (512,)
RANKS = {"cost": ("cost_per_million_tokens", 1), "power": ("tokens_per_joule", -1)}


@dataclass
class PoolCandidate:
    """One cluster tried: ``name`` ("2P(H100)+2D(A100-80GB TP2)", "4 colocated (H100)"), its workers, the
    goodput search's result, :func:`.pools.cluster_costs` (``costs``) and, for a split, the hand-off
    (``handoff``: :func:`.pools.handoff`'s info, ``reshard_bytes_per_request``, the mean bytes re-sharded, and
    ``prefill_kv_room_requests``: mean prompts' caches a prefill worker's own memory holds; the simulation
    grants it the decode pool's budget, :class:`~splitlab.serving.PoolCostExecutor`, so below a few it is
    optimistic for that candidate) and ``batch``: the decode batch bound of its decode (or colocated) workers
    (:class:`.batch.BatchBound`'s JSON with its ``line`` and ``pool``, the pool's name)."""

    name: str
    layout: str
    pools: list
    goodput_rps: float
    costs: dict
    binding_slo: str
    handoff: dict | None = None
    result: object = field(repr=False, default=None)
    batch: dict | None = None

    @property
    def outcome(self) -> str:
        return getattr(self.result, "outcome", "found")

    @property
    def reason(self) -> str:
        return getattr(self.result, "reason", "")

    def to_json(self) -> dict:
        costs = {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in self.costs.items()}
        pools = [dict(role=role, gpu=p.gpu, tp=p.tp, workers=w, device_price_per_hour=p.device_price_per_hour,
                      price_source=p.price_source, device_power_w=p.device_power_w) for role, p, w in self.pools]
        return dict(name=self.name, layout=self.layout, pools=pools, goodput_rps=self.goodput_rps, **costs,
                    binding_slo=self.binding_slo, outcome=self.outcome, reason=self.reason, handoff=self.handoff,
                    batch=self.batch)


@dataclass
class PoolPlan:
    """What :func:`plan_pools` found: ``candidates`` (cheapest per million tokens first), the SLOs, the request
    set's means and the cost models' sources; ``chosen``: SLOs chosen for the caller (None if both given);
    ``batches``: each pool's decode batch bound (pool name -> :class:`.batch.BatchBound`'s JSON and ``line``)."""

    candidates: list[PoolCandidate]
    ttft_slo_s: float
    tpot_slo_s: float
    max_devices: int
    mean_prompt_tokens: float
    mean_output_tokens: float
    sources: dict
    chosen: dict | None = None
    batches: dict = field(default_factory=dict)

    def batch_lines(self) -> list[str]:
        """One sentence per pool: the decode batch bound its workers ran with (the KV budget of the pool's GPU and
        TP, the requests it holds, the cap and which binds)."""
        return [f"{name}: {b['line']}" for name, b in self.batches.items()]

    def ranked(self, by: str = "cost") -> list[PoolCandidate]:
        """Candidates best first ``by`` "cost" (cost per million output tokens: iso-cost) or "power" (output
        tokens per joule: iso-power). Raises ValueError for another ``by``."""
        if by not in RANKS:
            raise ValueError(f"rank by 'cost' or 'power', got {by!r}")
        key, sign = RANKS[by]
        return sorted(self.candidates, key=lambda c: (c.goodput_rps <= 0, sign * c.costs[key], c.name))

    def table(self, by: str = "cost") -> pd.DataFrame:
        """One row per candidate, best first ``by`` (:meth:`ranked`): devices, goodput (requests/s, in all and per
        device), price per hour, cost per million output tokens, output tokens per joule, the binding SLO, and for
        a split the hand-off: device links used at once and the share of the cache re-sharded, and the decode
        batch bound (requests per decode or colocated worker: its KV memory's, or the cap where one binds)."""
        rows = [{"cluster": c.name, "devices": c.costs["devices"], "goodput (req/s)": c.goodput_rps,
                 "goodput per device": c.costs["rps_per_device"], "price per hour": c.costs["price_per_hour"],
                 "cost per 1M tokens": c.costs["cost_per_million_tokens"], "tokens per J": c.costs["tokens_per_joule"],
                 "binding SLO": c.binding_slo, "batch bound": batch_cell(c.batch),
                 "hand-off lanes": c.handoff["lanes"] if c.handoff else None,
                 "re-sharded": c.handoff["moved_share"] if c.handoff else None} for c in self.ranked(by)]
        return pd.DataFrame(rows).set_index("cluster")

    def to_json(self) -> dict:
        return dict(by_cost=[c.to_json() for c in self.ranked("cost")],
                    by_power=[c.name for c in self.ranked("power")], ttft_slo_s=self.ttft_slo_s,
                    tpot_slo_s=self.tpot_slo_s, max_devices=self.max_devices,
                    mean_prompt_tokens=self.mean_prompt_tokens, mean_output_tokens=self.mean_output_tokens,
                    cost_sources=self.sources, chosen=self.chosen, batches=self.batches)


def _check_tps(tps, max_devices) -> tuple[int, ...]:
    tps = tuple(tps)
    if not tps or any(isinstance(t, bool) or not isinstance(t, int) or t < 1 for t in tps):
        raise ValueError(f"tps must be TP degrees, integers >= 1, got {list(tps)}")
    if isinstance(max_devices, bool) or not isinstance(max_devices, int) or not 2 <= max_devices <= MAX_DEVICES:
        raise ValueError(f"a plan of pools searches from 2 devices (a prefill and a decode device) to {MAX_DEVICES}, "
                         f"got {max_devices!r} devices")
    if 2 * min(tps) > max_devices:  # worded without the argument's name: the CLI calls it --max-workers
        raise ValueError(f"a split needs two workers of at least TP {min(tps)}: {2 * min(tps)} devices, more than the "
                         f"{max_devices} allowed")
    return tuple(sorted(set(tps)))


def plan_pools(model, prefill_gpu: str, decode_gpu: str, tps=(1,), workload="chat", ttft_slo_s: float | None = None,
               tpot_slo_s: float | None = None, max_devices: int = 8, prefill_price: float | None = None,
               decode_price: float | None = None, dtype: str = "bf16", link: str = "400 Gb/s network",
               max_batch: int | None = None, max_prefill_tokens: int = 2048, target: float = 0.9,
               tolerance: float = 0.03, seed: int = 0, scale: float | None = None, max_requests: int = 2000,
               progress: bool | None = None, memory_utilization: float = MEMORY_UTILIZATION,
               chunk_tokens=CHUNK_TOKENS, **efficiencies) -> PoolPlan:
    """Rank clusters of up to ``max_devices`` devices (module docstring).

    Args:
        model: a published model or a config.json with ``n_params`` (the analytic cost model's).
        prefill_gpu, decode_gpu: names of :data:`splitlab.sizing.GPUS`; colocated clusters run on each.
        tps: TP degrees tried for each pool (every pair for a split; a degree a GPU cannot hold the model and a KV
            cache with is skipped, and an error if none is left).
        prefill_price, decode_price: per device-hour (None: the GPU table's, an error where it has none).
        ttft_slo_s, tpot_slo_s: the SLOs (None: chosen by chapter 6's rule on the prefill GPU's smallest-TP cost
            model; ``PoolPlan.chosen`` says so). dtype, link, efficiencies: of the analytic cost models.
        max_batch: a cap on each worker's batch (None, the default: none; each worker's KV budget, of its own
            GPU and TP, bounds its batch: module docstring; ``PoolPlan.batch_lines`` states each pool's).
        memory_utilization: the share of each device's memory a worker uses (vLLM's ``gpu_memory_utilization``).
        chunk_tokens: token budgets per step of the chunked colocated clusters (one cluster per budget and GPU and
            TP; empty: prefill-first colocated clusters only, which favours the split).
        max_prefill_tokens, target, tolerance, seed, scale, max_requests: as in :func:`splitlab.planner.plan`.

    Returns:
        a :class:`PoolPlan`. A cluster no rate serves ranks last with goodput 0 and its reason.

    Raises:
        ValueError: an unknown GPU (lists the known ones), no price for a GPU the table has none for, tps not
            integers >= 1, max_devices outside 2 .. :data:`MAX_DEVICES` or below two workers, a chunk budget that is
            not an integer > 1 (or not above ``max_batch``); :class:`NoPool` (a ValueError): no TP degree of ``tps``
            that divides the heads and fits the model and a KV cache in ``memory_utilization`` of a pool's GPU (the
            reasons); and the errors of
            :func:`~splitlab.costmodel.roofline_cost_model` and :func:`~splitlab.serving.goodput`.
    """
    tps = _check_tps(tps, max_devices)
    chunks = tuple(sorted(set(chunk_sizes(chunk_tokens, max_batch))))
    show = show_progress(progress)
    sides = {"prefill": (prefill_gpu, prefill_price), "decode": (decode_gpu, decode_price)}
    forward_tokens = ServingConfig.disaggregated(1, 1, max_prefill_tokens=max_prefill_tokens).forward_tokens
    costs, refused = pool_costs(model, sides, tps, dtype, link, memory_utilization, forward_tokens, **efficiencies)
    first_pool, first_cost = costs[next(iter(costs))]
    ex0 = CostModelExecutor(first_cost)
    chosen = None
    if ttft_slo_s is None or tpot_slo_s is None:
        slos = choose_defaults(first_cost, workload, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, seed=seed,
                               scale=scale)
        ttft_slo_s, tpot_slo_s = slos.ttft_slo_s, slos.tpot_slo_s
        chosen = dict(slos.to_json(), on=f"{first_pool.name} ({first_cost.source})")
    requests = workload_requests(workload, max_requests, 1.0, ex0, seed, scale)
    prompts = np.array([r.prompt_len for r in requests])
    outputs = np.array([r.max_new_tokens for r in requests])
    common = dict(max_batch=max_batch, max_prefill_tokens=max_prefill_tokens, memory_utilization=memory_utilization)
    bounds = {}  # pool name -> its workers' batch bound (a split's decode workers: the decode pool's)

    def bound(pool, executor):
        if pool.name not in bounds:
            b = batch_bound(executor, ServingConfig.disaggregated(1, 1, **common), prompts, outputs)
            bounds[pool.name] = (b, dict(b.to_json(), line=b.line(), pool=pool.name))
        return bounds[pool.name]

    jobs = []
    for gpu in dict.fromkeys((prefill_gpu, decode_gpu)):
        for tp in tps:
            found = costs.get(("prefill" if gpu == prefill_gpu else "decode", tp))
            if found and max_devices // tp >= 1:
                pool, cost = found
                n = max_devices // tp
                b, said = bound(pool, CostModelExecutor(cost))
                guess = colocated_capacity(cost, prompts, outputs, ttft_slo_s, tpot_slo_s, _guess_batch(b))
                jobs.append((f"{n} colocated ({pool.name})", "colocated", [("colocated", pool, n)],
                             ServingConfig.colocated(n, **common), CostModelExecutor(cost), guess, None, said))
                for c in chunks:  # its own bound: a chunk's smaller forward, and chunk - 1 rows at most
                    cfg = ServingConfig.colocated(n, policy="chunked", chunk_tokens=c, **common)
                    bc = batch_bound(CostModelExecutor(cost), cfg, prompts, outputs)
                    jobs.append((f"{n} colocated chunked {c} ({pool.name})", "colocated", [("colocated", pool, n)],
                                 cfg, CostModelExecutor(cost), guess, None, dict(bc.to_json(), line=bc.line(),
                                                                                 pool=pool.name)))
    for tp_p in tps:
        for tp_d in tps:
            if ("prefill", tp_p) not in costs or ("decode", tp_d) not in costs or tp_p + tp_d > max_devices:
                continue  # no split of this pair: its pools' bounds are not stated
            (pp, cp), (dp, cd) = costs["prefill", tp_p], costs["decode", tp_d]
            cp, info = handoff(model, cp, pp, dp, link)
            ex = PoolCostExecutor(cp, cd)
            mu_p = prefill_capacity(cp, prompts, ttft_slo_s, max_prefill_tokens)
            b, said = bound(dp, ex)  # the decode pool's budget (PoolCostExecutor.auto_kv_budget)
            mu_d = decode_capacity(cd, prompts, outputs, tpot_slo_s, _guess_batch(b))
            mean_kv = float(prompts.mean()) * cp.kv_bytes_per_token
            room = CostModelExecutor(cp).auto_kv_budget()  # the cluster charges the decode pool's: say the other
            info = dict(info, reshard_bytes_per_request=mean_kv * info["moved_share"],
                        prefill_kv_room_requests=None if room is None else room / mean_kv)
            for x in range(1, max_devices // tp_p + 1):
                for y in range(1, (max_devices - x * tp_p) // tp_d + 1):
                    jobs.append((f"{x}P({pp.name})+{y}D({dp.name})", "disaggregated",
                                 [("prefill", pp, x), ("decode", dp, y)],
                                 ServingConfig.disaggregated(x, y, **common), ex, split_capacity(mu_p, mu_d, x, y),
                                 info, said))
    from tqdm import tqdm
    candidates = []
    bar = dict(desc="plan pools: goodput of each cluster", leave=False,
               disable=not (show and (progress is not None or len(jobs) > 4)))
    for name, layout, pools, cfg, ex, first, info, said in tqdm(jobs, **bar):
        res = goodput(requests, cfg, ex, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, target=target,
                      tolerance=tolerance, min_requests=min(100, max_requests), max_requests=max_requests,
                      start_rate_per_worker=max(first, 1e-3), prefixes=True, step=1.25,
                      extend=PLAN_EXTEND)  # plain runs for every cluster, as the planner's (before: up to the list)
        rps = res.goodput_rps_per_worker * cfg.n_workers
        costs_ = cluster_costs([(p, w) for _, p, w in pools], rps, float(outputs.mean()))
        candidates.append(PoolCandidate(name, layout, pools, rps, costs_, res.binding_slo, info, res, said))
    sources = {f"{role} {pool.name}": cost.source for (role, _), (pool, cost) in costs.items()}
    sources.update({f"refused {role} TP{tp}": why for (role, tp), why in refused.items()})
    plan = PoolPlan(candidates, ttft_slo_s, tpot_slo_s, max_devices, float(prompts.mean()), float(outputs.mean()),
                    sources, chosen, {name: said for name, (_, said) in bounds.items()})
    plan.candidates = plan.ranked("cost")
    return plan


def _guess_batch(bound) -> int:
    """The decode batch the closed form's first guess assumes: the worker's batch bound (``bound``: a
    :class:`.batch.BatchBound`), at most the planner's ``CLOSED_FORM_BATCH``."""
    return int(min(bound.batch, CLOSED_FORM_BATCH))


def batch_cell(batch: dict | None) -> str:
    """'123 (KV)' or '16 (cap)': a candidate's batch bound in a table cell."""
    if batch is None or batch["batch"] is None:
        return "unlimited"
    return f"{batch['batch']:.0f} ({'cap' if batch['binds'] == 'max_batch' else 'KV'})"
