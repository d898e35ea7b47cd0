"""``python -m splitlab plan``: how many prefill and decode workers? Ranks colocated (prefill-first, chunked) and
every xPyD split up to ``--max-workers`` by simulated goodput per worker (:func:`splitlab.planner.plan`), on the
cost model of ``simulate`` (``--cost FILE``, ``--gpu NAME --model-config NAME``, or the built-in one). No model
is loaded. JSON: ``candidates`` (best first; each with ``layout``, ``policy``, ``workers``, ``prefill_workers``,
``decode_workers``, ``goodput_rps_per_worker``, ``cost_per_million_tokens``, ``binding_slo``, ``outcome``,
``reason``, ``batch_cap``, ...), ``best``,
``first_guess`` (the closed form), ``batch`` (the decode batch bound every layout ran with: ``kv_budget_bytes``,
``kv_requests`` it holds, ``max_batch``, ``binds``; its ``line`` is printed) and the inputs. ``--local-prefill-tokens
median,512`` adds conditional contenders: every split again, its decode workers prefilling the prompts up to each
threshold (a candidate's ``local_prefill_tokens``)."""
from __future__ import annotations

from ..serving.workload import WORKLOADS
import argparse

from .args import (MEMORY_UTILIZATION, check_chunk_list, chunk_list, list_items, positive_float, positive_int,
                   progress, prompt_threshold, seed_int, slo_seconds)
from .costs import COST_OPTIONS, cost_model
from .defaults import OPTIONS_HELP, chosen_lines, in_flags
from .pools import POOL_OPTIONS, plan_pools, wants_pools
from .registry import CLIError, arg, command
from .report import clean

__all__ = ["plan"]


def thresholds(text: str) -> list:
    """'median,512 inf' -> ['median', 512, inf]: prompt thresholds of conditional contenders."""
    from ..planning.conditional_layouts import QUANTILES
    out = [p if p in QUANTILES else prompt_threshold(p) for p in list_items(text)]
    if not out:
        raise argparse.ArgumentTypeError(f"give at least one threshold: tokens, inf or {', '.join(QUANTILES)}")
    return out


@command("plan", "rank layouts (colocated, chunked, every xPyD split) by goodput per worker and cost",
         arg("--workload", choices=sorted(WORKLOADS), default="chat", help="named workload (default chat)"),
         arg("--ttft-slo", type=slo_seconds, default=None, metavar="S",
             help=f"TTFT SLO in seconds ({OPTIONS_HELP})"),
         arg("--tpot-slo", type=slo_seconds, default=None, metavar="S",
             help=f"TPOT SLO in seconds ({OPTIONS_HELP})"),
         arg("--max-workers", type=int, default=4, metavar="N", help="at most this many workers, 2 to 16 (default 4)"),
         arg("--price-per-hour", type=positive_float, default=2.0, metavar="PRICE",
             help="price of one worker per hour (default 2.0; the cost column is in the same currency)"),
         arg("--chunk-tokens", type=chunk_list, default=[128, 256, 512, "tpot"], metavar="LIST",
             help="chunk sizes tried for chunked prefill; tpot: the largest budget whose hybrid step fits the TPOT "
                  "SLO (default 128,256,512,tpot)"),
         arg("--max-batch", type=positive_int, default=None,
             help="cap on requests resident per worker (default: none, the KV budget bounds the batch)"),
         MEMORY_UTILIZATION,
         arg("--scale", type=positive_float, default=None,
             help="multiply the workload's lengths (default: from the cost model's context)"),
         arg("--local-prefill-tokens", type=thresholds, default=None, metavar="LIST",
             help="also rank conditional splits: decode workers prefill prompts up to each threshold (tokens, inf, "
                  "p25, median, p75 of the request set; default: none)"),
         arg("--seed", type=seed_int, default=0, help="seeds the request set (default 0)"),
         arg("--model", default=None, help="with --cost: the model you mean to plan for (checked against the file)"),
         *COST_OPTIONS, *POOL_OPTIONS)
def plan(args):
    from ..planning.defaults import NoDefault
    from ..planning.planner import MAX_WORKERS, plan as run_plan
    if wants_pools(args):  # two pools of their own hardware and TP: splitlab.planning.hetero
        return plan_pools(args)
    if not 2 <= args.max_workers <= MAX_WORKERS:
        raise CLIError(f"--max-workers must be >= 2 (a split needs a prefill and a decode worker) and <= "
                       f"{MAX_WORKERS} (every xPyD split up to it is a goodput search), got {args.max_workers}")
    check_chunk_list(args)
    cost = cost_model(args, args.model)
    try:
        p = run_plan(cost, args.workload, args.ttft_slo, args.tpot_slo, args.max_workers, args.price_per_hour,
                     chunk_tokens=args.chunk_tokens, max_batch=args.max_batch, seed=args.seed, scale=args.scale,
                     progress=progress(args), memory_utilization=args.memory_utilization,
                     local_prefill_tokens=args.local_prefill_tokens)
    except NoDefault as err:  # an SLO left out that this cost model cannot choose: in the command line's words
        raise in_flags(err) from None
    data = dict(workload=args.workload, **p.to_json())
    g = p.first_guess
    text = [f"splitlab plan: {args.workload}, TTFT <= {p.ttft_slo_s:g} s, TPOT <= {p.tpot_slo_s:g} s, at most "
            f"{args.max_workers} workers at {args.price_per_hour:g}/hour",
            f"cost model: {p.cost_source}", *chosen_lines(p.chosen), p.batch_line,
            "goodput runs: plain, never going on past their requests (every layout alike)",
            f"{'layout':<40} {'goodput/worker':>15} {'first guess':>12} {'cost/1M tok':>12}  binding SLO"]
    for c in p.candidates:
        text.append(f"{c.name:<40} {c.goodput_rps_per_worker:>13.3g}/s {c.first_guess_rps_per_worker:>10.3g}/s "
                    f"{c.cost_per_million_tokens:>12.4g}  {c.binding_slo}{'' if c.outcome == 'found' else ' *'}")
    text += [f"* {c.name}: {c.reason}" for c in p.candidates if c.outcome != "found"]
    text += [f"closed form: a prefill worker {g['prefill_rps']:.3g} req/s at the TTFT SLO, a decode worker "
             f"{g['decode_rps']:.3g} req/s at the TPOT SLO -> {g['prefill_workers']}P+{g['decode_workers']}D; "
             f"colocated {g['colocated_rps']:.3g} req/s per worker", p.why()]
    return clean(data), text
