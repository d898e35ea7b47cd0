"""A pool of workers: its GPU type, its tensor-parallel degree, its price and its power, and what a cluster of
pools costs per million tokens and serves per joule (Splitwise's cost and power views, Patel et al., ISCA'24).

A worker of a pool is a group of ``tp`` devices of one GPU type; every device costs ``price_per_hour`` and draws
``power_w``, by default the GPU table's (:data:`splitlab.sizing.GPUS`: the datasheet's TDP, an upper bound on the
draw, and a price that is a stated assumption with its source, or none). For a cluster serving ``rps`` requests/s
of ``mean_output_tokens`` output tokens each on devices costing ``C`` per hour and drawing ``P`` W in all:

    cost per million output tokens = C / 3600 / (rps x mean_output_tokens) x 1e6
    output tokens per joule        = rps x mean_output_tokens / P

Ranked by the first, a cluster wins Splitwise's iso-cost comparison (the most tokens for the same money); by the
second, its iso-power comparison (the most tokens within the same power budget).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from ..costmodel import CostModel, TensorParallel, reshard, roofline_cost_model
from ..costmodel.analytic import ROOFLINE_OPTIONS, check_roofline_options
from ..sizing import GPUS, LINKS, kv_geometry, resolve_config
from ..sizing.budget import kv_budget_bytes

__all__ = ["Pool", "cluster_costs", "pool_cost_model", "pool_costs", "NoPool", "handoff"]


@dataclass(frozen=True)
class Pool:
    """One pool's hardware: ``gpu`` (a name of :data:`splitlab.sizing.GPUS`), ``tp`` devices per worker,
    ``price_per_hour`` and ``power_w`` per DEVICE (None: the GPU table's).

    Raises:
        ValueError: an unknown GPU (the message lists the known ones), a price or power that is not a number > 0
            (and :attr:`device_price_per_hour`: no price given for a GPU whose table row records none).
    """

    gpu: str
    tp: int = 1
    price_per_hour: float | None = None
    power_w: float | None = None

    def __post_init__(self):
        if self.gpu not in GPUS:
            raise ValueError(f"unknown GPU {self.gpu!r}; choose one of {', '.join(GPUS)}")
        for name in ("price_per_hour", "power_w"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, numbers.Real) and not isinstance(v, bool)
                                      and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} of a {self.gpu} device must be a number > 0, got {v!r}")

    @property
    def device_price_per_hour(self) -> float:
        """The price of one device per hour: the given one, else the GPU table's.

        Raises:
            ValueError: none given for a GPU whose table row records none (the message says so).
        """
        if self.price_per_hour is None and GPUS[self.gpu].get("price_per_hour") is None:
            raise ValueError(f"splitlab's GPU table records no price for {self.gpu} "
                             f"({GPUS[self.gpu].get('price_source', 'none recorded')}): give its price per hour")
        return float(self.price_per_hour if self.price_per_hour is not None else GPUS[self.gpu]["price_per_hour"])

    @property
    def device_power_w(self) -> float:
        return float(self.power_w if self.power_w is not None else GPUS[self.gpu]["tdp_w"])

    @property
    def price_source(self) -> str:
        return "given" if self.price_per_hour is not None else GPUS[self.gpu]["price_source"]

    @property
    def name(self) -> str:
        return self.gpu if self.tp == 1 else f"{self.gpu} TP{self.tp}"


def pool_cost_model(model, pool: Pool, dtype: str = "bf16", link: str = "400 Gb/s network", **efficiencies
                    ) -> CostModel:
    """The analytic cost model of one worker of ``pool`` (:func:`~splitlab.costmodel.roofline_cost_model` with
    ``tp``); ``efficiencies``: its compute_efficiency, memory_efficiency. Raises its errors."""
    return roofline_cost_model(model, pool.gpu, dtype, link=link, tp=TensorParallel(pool.tp), **efficiencies)


class NoPool(ValueError):
    """No TP degree of those asked serves the model on a pool's GPU (each degree's reason in the message)."""


def pool_costs(model, sides: dict, tps, dtype: str, link: str, memory_utilization: float, forward_tokens: int,
               **efficiencies) -> tuple[dict, dict]:
    """The cost model of each pool at each TP degree that serves ``model``, and the reasons of those that do not.

    Args:
        sides: role ("prefill", "decode") -> (GPU name, price per device-hour or None: the table's).
        tps: TP degrees tried per role. memory_utilization, forward_tokens: a worker's "auto" KV budget is
            ``memory_utilization`` x its memory - weights - the activations of ``forward_tokens`` tokens
            (:func:`splitlab.sizing.kv_budget_bytes`); a degree that leaves it none is refused.

    Returns:
        ``(costs, refused)``: ``costs[role, tp] = (Pool, CostModel)``; ``refused[role, tp]`` the reason.

    Raises:
        NoPool: a role no degree serves (a TP that does not divide the heads, a shard or its KV that does not fit).
        ValueError: an unknown GPU, a GPU without a price in the table and none given; an option of the analytic
            model that no degree could take (a dtype, link or efficiency: :func:`check_roofline_options`), once.
        TypeError: an efficiency that is not an option of the analytic model, naming those that are."""
    unknown = sorted(set(efficiencies) - set(ROOFLINE_OPTIONS))
    if unknown:
        raise TypeError(f"unknown option {', '.join(map(repr, unknown))}: the analytic cost model's options are "
                        f"{', '.join(ROOFLINE_OPTIONS)}")
    costs, refused = {}, {}
    for role, (gpu, price) in sides.items():
        check_roofline_options(gpu, dtype, link, **efficiencies)
        for tp in tps:
            pool = Pool(gpu, tp, price)
            pool.device_price_per_hour  # no price for this GPU: refused before any search
            try:
                cost = pool_cost_model(model, pool, dtype, link, **efficiencies)
                kv_budget_bytes(cost.memory_bytes, cost.weight_bytes, cost.activation_bytes_per_token * forward_tokens,
                                memory_utilization)
                costs[role, tp] = pool, cost
            except ValueError as err:
                refused[role, tp] = str(err)
        if not any(r == role for r, _ in costs):  # each reason with its degree, said once
            whys = (refused[role, t] if refused[role, t].startswith(f"TP {t} ") else f"TP {t}: {refused[role, t]}"
                    for t in tps)
            raise NoPool(f"no TP degree of {list(tps)} serves {model} on {gpu}: " + "; ".join(whys))
    return costs, refused


def handoff(model, prefill: CostModel, prefill_pool: Pool, decode_pool: Pool,
            link: str = "400 Gb/s network") -> tuple[CostModel, dict]:
    """The prefill pool's cost model with its transfer fields set to the hand-off between the two pools, and what
    the hand-off does per KV byte. The cache crosses ``link`` over ``min(tp_p, tp_d)`` device links at once; with
    a TP mismatch the heads that land on the wrong decode device cross the decode group's ``tp_link`` once more
    (:func:`splitlab.costmodel.reshard`), so the seconds per byte are ``1 / (lanes x link) + moved_share /
    tp_link``.

    Returns:
        ``(cost, info)``: info has ``lanes``, ``moved_share`` (of the cache re-sharded), ``reshard_link`` and
        ``seconds_per_gb`` (the hand-off, re-shard included).

    Raises:
        ValueError: an unknown link, or a decode GPU with no TP link when the re-shard needs one.
    """
    if link not in LINKS:
        raise ValueError(f"unknown link {link!r}; choose one of {', '.join(LINKS)}")
    geo = kv_geometry(resolve_config(model))
    r = reshard(1.0, geo.kv_heads, prefill_pool.tp, decode_pool.tp)
    per_byte = 1.0 / (r["lanes"] * LINKS[link]["bandwidth_bytes_per_s"])
    intra = None
    if r["moved_share"] > 0:
        intra = GPUS[decode_pool.gpu].get("tp_link")
        if intra is None:
            raise ValueError(f"{decode_pool.gpu} has no GPU-to-GPU link in splitlab.sizing.GPUS to re-shard a cache "
                             f"over: give both pools the same TP")
        per_byte += r["moved_share"] / LINKS[intra]["bandwidth_bytes_per_s"]
    info = dict(lanes=r["lanes"], moved_share=r["moved_share"], reshard_link=intra, link=link,
                seconds_per_gb=per_byte * 1e9)
    return prefill.with_(transfer_bytes_per_s=1.0 / per_byte), info


def cluster_costs(pools_workers, rps: float, mean_output_tokens: float) -> dict:
    """Devices, price, power and the two rankings' measures of a cluster serving ``rps`` requests/s (module
    docstring). ``pools_workers``: ``(Pool, workers)`` pairs.

    Returns:
        dict: ``devices``, ``price_per_hour``, ``power_w``, ``rps_per_device``, ``cost_per_million_tokens`` (inf
        when nothing is served), ``tokens_per_joule``, ``tokens_per_s_per_price`` (iso-cost: output tokens/s per
        unit of price per hour) and ``tokens_per_s_per_kw`` (iso-power).
    """
    devices = sum(p.tp * w for p, w in pools_workers)
    price = sum(p.tp * w * p.device_price_per_hour for p, w in pools_workers)
    power = sum(p.tp * w * p.device_power_w for p, w in pools_workers)
    tokens_s = rps * mean_output_tokens
    return dict(devices=devices, price_per_hour=price, power_w=power, rps_per_device=rps / devices,
                cost_per_million_tokens=price / 3600 / tokens_s * 1e6 if tokens_s > 0 else math.inf,
                tokens_per_joule=tokens_s / power, tokens_per_s_per_price=tokens_s / price,
                tokens_per_s_per_kw=tokens_s / power * 1e3)
