"""Two pools of their own hardware and tensor parallelism on the command line.

``python -m splitlab plan --prefill-gpu H100 --decode-gpu A100-80GB --model-config Llama-3-8B [--tp 1,2,4]``:
the planner across two pools of different hardware and tensor parallelism (:func:`splitlab.planning.hetero.
plan_pools`), ranked by cost per million output tokens and by output tokens per joule. ``plan`` hands over to it
when a pool option is given; ``--max-workers`` then counts DEVICES (a TP ``t`` worker is ``t`` of them). JSON:
``by_cost`` (each cluster with ``pools``, ``goodput_rps``, ``devices``, ``rps_per_device``, ``price_per_hour``,
``cost_per_million_tokens``, ``tokens_per_joule``, ``handoff`` (lanes, ``moved_share`` re-sharded,
``reshard_bytes_per_request``), ...), ``by_power`` (names, most tokens per joule first) and the inputs.

``python -m splitlab simulate --layout disaggregated --prefill-gpu H100 --decode-gpu A100-80GB --decode-tp 2
--model-config Llama-3-8B``: a split whose prefill workers run on one analytic cost model and decode workers on
another (:class:`splitlab.serving.PoolCostExecutor`); its JSON adds ``decode_cost_source`` and ``handoff``."""
from __future__ import annotations

import argparse

from ..sizing import GPUS
from .args import list_items, positive_float, positive_int, progress
from .defaults import chosen_lines
from .registry import CLIError, arg
from .report import clean

__all__ = ["POOL_OPTIONS", "SIMULATE_POOL_OPTIONS", "wants_pools", "plan_pools", "pool_executor", "handoff_line"]

def tp_list(text: str) -> list[int]:
    """'1,2 4' -> [1, 2, 4]: tensor-parallel degrees, each a positive integer."""
    out = [positive_int(part) for part in list_items(text)]
    if not out:
        raise argparse.ArgumentTypeError("give at least one TP degree, e.g. 1,2,4")
    return out


POOL_OPTIONS = (
    arg("--prefill-gpu", choices=sorted(GPUS), default=None, help="pools: the prefill pool's GPU (default: --gpu)"),
    arg("--decode-gpu", choices=sorted(GPUS), default=None, help="pools: the decode pool's GPU (default: --gpu)"),
    arg("--tp", type=tp_list, default=None, metavar="LIST",
        help="pools: tensor-parallel degrees tried per pool, e.g. 1,2,4,8 (--max-workers then counts devices)"),
    arg("--prefill-price", type=positive_float, default=None, metavar="PRICE",
        help="pools: price of one prefill device per hour (default: the GPU table's, where it has one)"),
    arg("--decode-price", type=positive_float, default=None, metavar="PRICE",
        help="pools: price of one decode device per hour (default: the GPU table's, where it has one)"),
)


SIMULATE_POOL_OPTIONS = (
    POOL_OPTIONS[0], POOL_OPTIONS[1],
    arg("--prefill-tp", type=positive_int, default=None, metavar="N",
        help="pools: devices per prefill worker (default 1)"),
    arg("--decode-tp", type=positive_int, default=None, metavar="N",
        help="pools: devices per decode worker (default 1)"),
)


def pool_executor(args):
    """``(PoolCostExecutor, handoff info)`` for ``simulate``'s pool options, or ``(None, None)`` when none is given.

    Raises:
        CLIError: pool options with --cost or --model, without --model-config or a GPU per pool, or with a
            colocated layout (a worker of both pools).
        CLIError (exit status 2), naming the pool and its TP flag: a TP that does not divide the heads, a shard
            that does not fit (:func:`splitlab.costmodel.roofline_cost_model`), a GPU with no TP link.
    """
    if all(getattr(args, k) is None for k in ("prefill_gpu", "decode_gpu", "prefill_tp", "decode_tp")):
        return None, None
    from ..planning.pools import Pool, handoff, pool_cost_model
    from ..serving import PoolCostExecutor
    if args.cost or args.model:
        raise CLIError("pool options (--prefill-gpu, --decode-gpu, --prefill-tp, --decode-tp) simulate on the "
                       "analytic cost model: give --model-config NAME, not --cost/--model")
    if args.layout != "disaggregated":
        raise CLIError("pool options give a split's two pools their own hardware: use --layout disaggregated")
    gpus = args.prefill_gpu or args.gpu, args.decode_gpu or args.gpu
    if not (all(gpus) and args.model_config):
        raise CLIError("pools need --model-config NAME and a GPU for each pool: --prefill-gpu and --decode-gpu (or "
                       "--gpu for both)")
    eff = {k: getattr(args, k) for k in ("compute_efficiency", "memory_efficiency") if getattr(args, k)}
    link = args.link or "400 Gb/s network"
    pools = [Pool(g, tp or 1) for g, tp in zip(gpus, (args.prefill_tp, args.decode_tp))]
    costs = []
    for role, pool in zip(("prefill", "decode"), pools):
        flag = f"--{role}-tp {pool.tp}"
        if pool.tp > 1 and GPUS[pool.gpu].get("tp_link") is None:  # the API's link option is no flag here
            raise CLIError(f"{flag}: splitlab's GPU table gives {pool.gpu} no GPU-to-GPU link for a TP group to "
                           f"all-reduce over; use TP 1 on {pool.gpu}")
        try:  # a TP that does not divide the heads, a shard that does not fit
            costs.append(pool_cost_model(args.model_config, pool, args.dtype or "bf16", link, **eff))
        except ValueError as err:
            raise CLIError(f"{flag} on {pool.gpu}: {err}") from None
    prefill, info = handoff(args.model_config, costs[0], *pools, link)
    return PoolCostExecutor(prefill, costs[1]), info


def handoff_line(h: dict) -> str:
    """One line on a hand-off between two pools (:func:`splitlab.planning.pools.handoff`'s info)."""
    reshard = f", {h['moved_share']:.0%} of the cache re-sharded over {h['reshard_link']}" if h["moved_share"] else ""
    return (f"hand-off: over {h['link']}, {h['lanes']} device link(s) at once{reshard}: "
            f"{h['seconds_per_gb'] * 1e3:.3g} ms per GB of cache")


def wants_pools(args) -> bool:
    """A pool option was given: ``plan`` hands over to :func:`plan_pools`."""
    return any(getattr(args, k) is not None for k in ("prefill_gpu", "decode_gpu", "tp", "prefill_price",
                                                       "decode_price"))


def plan_pools(args):
    """The ``plan`` subcommand with pools (module docstring).

    Raises:
        CLIError: --cost, --model, --price-per-hour, --chunk-tokens or --local-prefill-tokens with pool options, no
            GPU or model, --max-workers outside 2 x the smallest --tp .. 16 devices, or no --tp degree that
            serves the model on a pool's GPU (:class:`~splitlab.planning.hetero.NoPool`).
    """
    from ..planning.hetero import MAX_DEVICES, NoPool, batch_cell, plan_pools as run
    from ..planning.defaults import NoDefault
    from .defaults import in_flags
    if args.cost or args.model:
        raise CLIError("pool options (--prefill-gpu, --decode-gpu, --tp, prices) plan on the analytic cost model: "
                       "give --model-config NAME, not --cost/--model")
    if args.price_per_hour != 2.0:
        raise CLIError("with pool options give --prefill-price/--decode-price (per device), not --price-per-hour")
    if args.chunk_tokens != [128, 256, 512, "tpot"]:
        raise CLIError("pools plan chunked colocated clusters at 512-token chunks: leave --chunk-tokens out")
    if args.local_prefill_tokens is not None:  # it was dropped without a word
        raise CLIError("a plan of pools ranks no conditional splits: leave --local-prefill-tokens out (or plan them "
                       "on one GPU: --gpu NAME without pool options)")
    prefill_gpu, decode_gpu = args.prefill_gpu or args.gpu, args.decode_gpu or args.gpu
    if not (prefill_gpu and decode_gpu and args.model_config):
        raise CLIError("pools need --model-config NAME and a GPU for each pool: --prefill-gpu and --decode-gpu (or "
                       "--gpu for both)")
    tps = args.tp or [1]
    if not 2 * min(tps) <= args.max_workers <= MAX_DEVICES:  # before any cost model: in the command line's words
        raise CLIError(f"--max-workers counts devices with pool options: from 2 x the smallest --tp ({2 * min(tps)}: "
                       f"a prefill and a decode worker) to {MAX_DEVICES}, got {args.max_workers}")
    eff = {k: getattr(args, k) for k in ("compute_efficiency", "memory_efficiency") if getattr(args, k)}
    try:
        p = run(args.model_config, prefill_gpu, decode_gpu, tps=tps, workload=args.workload,
                ttft_slo_s=args.ttft_slo, tpot_slo_s=args.tpot_slo, max_devices=args.max_workers,
                prefill_price=args.prefill_price, decode_price=args.decode_price, dtype=args.dtype or "bf16",
                link=args.link or "400 Gb/s network", max_batch=args.max_batch, seed=args.seed, scale=args.scale,
                progress=progress(args), memory_utilization=args.memory_utilization, **eff)
    except NoDefault as err:
        raise in_flags(err) from None
    except NoPool as err:  # the --tp list, the GPUs, --memory-utilization: a usage error
        raise CLIError(f"--tp {','.join(map(str, tps))}: {err}") from None
    data = dict(workload=args.workload, **p.to_json())
    text = [f"splitlab plan (pools): {args.model_config}, prefill on {prefill_gpu}, decode on {decode_gpu}, TP "
            f"{','.join(map(str, args.tp or [1]))}, {args.workload}, TTFT <= {p.ttft_slo_s:g} s, TPOT <= "
            f"{p.tpot_slo_s:g} s, at most {args.max_workers} devices", *chosen_lines(p.chosen),
            *(f"cost model, {k}: {v}" for k, v in p.sources.items()), *p.batch_lines(),
            f"{'cluster':<40} {'dev':>3} {'goodput':>9} {'per dev':>8} {'$/hour':>7} {'cost/1M':>8} {'tok/J':>6}  "
            f"{'batch':<10} binding  hand-off"]
    for c in p.ranked("cost"):
        k, h = c.costs, c.handoff
        room = h and h["prefill_kv_room_requests"]
        hand = "" if h is None else (f"{h['lanes']} lane(s), {h['moved_share']:.0%} re-sharded "
                                     f"({h['reshard_bytes_per_request'] / 1e6:.3g} MB/request)"
                                     + (f", prefill room {room:.3g} caches" if room is not None else ""))
        text.append(f"{c.name:<40} {k['devices']:>3} {c.goodput_rps:>7.3g}/s {k['rps_per_device']:>6.3g}/s "
                    f"{k['price_per_hour']:>7.4g} {k['cost_per_million_tokens']:>8.4g} {k['tokens_per_joule']:>6.3g}"
                    f"  {batch_cell(c.batch):<10} {c.binding_slo:<7}  {hand}{'' if c.outcome == 'found' else ' *'}")
    text += [f"* {c.name}: {c.reason}" for c in p.candidates if c.outcome != "found"]
    best_cost, best_power = p.ranked("cost")[0], p.ranked("power")[0]
    text += [f"cheapest per million output tokens (iso-cost): {best_cost.name}; most output tokens per joule "
             f"(iso-power, TDP): {best_power.name}" if best_cost.goodput_rps > 0 else  # none to call cheapest
             "no cluster serves any rate within the SLOs (*): none is cheapest or most efficient",
             "prices: " + "; ".join(sorted({f"{p_.gpu} {p_.device_price_per_hour:g}/hour ({p_.price_source})"
                                            for c in p.candidates for _, p_, _ in c.pools}))]
    return clean(data), text
