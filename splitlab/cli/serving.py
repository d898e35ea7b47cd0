"""``python -m splitlab serve`` and ``python -m splitlab compare``: a workload through a simulated cluster.

``serve`` runs one layout; ``compare`` runs the same requests (same workload and seed) colocated on
``--workers`` workers (default: prefill + decode workers, so both layouts get the same number) and
disaggregated on ``--prefill-workers`` + ``--decode-workers``, and says whether every request got the same
tokens. With ``--json`` the output is one object with one entry per layout (``colocated`` /
``disaggregated``), each holding ``ttft_s`` and ``tpot_s`` percentiles (``p50``, ``p90``, ``p99``, ``mean``),
``slo_attainment``, ``completed``, ``rejected``, ``throughput_tokens_per_s``, ``rejections`` (id, state and
reason of every request that did not complete) and more; ``compare`` adds ``tokens_identical`` and
``tokens_compared`` (requests completed in both layouts; with ``--cost-model`` the tokens are placeholders and
the check means nothing). Undefined numbers (no completed request) are ``null``.

The real model runs every batch (emulated mode: measured times advance each worker's own clock); with
``--cost-model`` a linear cost model predicts the times instead and no model is loaded.
Registered into :mod:`splitlab.cli`.
"""
from __future__ import annotations

import math

from ..serving.config import POLICIES
from ..serving.workload import WORKLOADS
from .args import positive_float, positive_int, seed_int
from .demo import check_loadable
from .registry import CLIError, arg, command

__all__ = ["serve", "compare"]

COMMON = (
    arg("--workload", choices=sorted(WORKLOADS), default="chat", help="named workload (default chat)"),
    arg("--rate", type=positive_float, default=2.0, metavar="REQ_PER_S", help="mean arrival rate (default 2)"),
    arg("--requests", type=positive_int, default=16, metavar="N", help="requests to send (default 16)"),
    arg("--arrival", choices=("poisson", "gamma"), default="poisson", help="arrival process (default poisson)"),
    arg("--cv", type=positive_float, default=2.0, help="gamma arrivals: coefficient of variation (default 2)"),
    arg("--scale", type=positive_float, default=None,
        help="multiply the workload's prompt and output lengths (default: from the model's context)"),
    arg("--policy", choices=POLICIES, default="prefill-first", help="colocated batching policy"),
    arg("--chunk-tokens", type=positive_int, default=256, help="chunked policy: token budget per step (256)"),
    arg("--max-batch", type=positive_int, default=16, help="requests resident per worker (default 16)"),
    arg("--kv-budget-bytes", type=positive_int, default=None,
        help="KV budget per worker (default: device memory minus weights)"),
    arg("--first-token-on", choices=("prefill", "decode"), default="prefill",
        help="disaggregated: which side emits the first token (default prefill)"),
    arg("--link-gbps", type=positive_float, default=None,
        help="disaggregated: model a KV link of this many GB/s instead of charging the measured copy"),
    arg("--model", default="tiny", help="preset, Hugging Face name or local path (default: tiny)"),
    arg("--cost-model", action="store_true", help="predict step times with the default cost model (no model)"),
    arg("--ttft-slo", type=positive_float, default=1.0, metavar="S", help="TTFT SLO in seconds (default 1.0)"),
    arg("--tpot-slo", type=positive_float, default=0.1, metavar="S", help="TPOT SLO in seconds (default 0.1)"),
    arg("--seed", type=seed_int, default=0, help="seeds arrivals, lengths, prompts and random weights (default 0)"),
)
POOLS = (
    arg("--prefill-workers", type=positive_int, default=1, metavar="P", help="disaggregated prefill workers (1)"),
    arg("--decode-workers", type=positive_int, default=1, metavar="D", help="disaggregated decode workers (1)"),
)


def _clean(x):
    """NaN/inf -> None, recursively, so the JSON is strict."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _setup(args):
    """(executor, requests) for the parsed options."""
    from .. import serving
    if args.cost_model:
        executor, lm = serving.CostModelExecutor(), None
    else:
        from ..phases.models import load_model
        check_loadable(args.model)
        for name in ("transformers", "huggingface_hub"):
            __import__(f"{name}.utils", fromlist=["logging"]).logging.set_verbosity_error()
        lm = load_model(args.model, seed=args.seed)
        executor = serving.ModelExecutor(lm)
    reqs = serving.make_workload(args.workload, args.requests, args.rate, seed=args.seed, model=lm,
                                 arrival=args.arrival, cv=args.cv, scale=args.scale)
    return executor, reqs


def _options(args) -> dict:
    if args.policy == "chunked" and args.chunk_tokens <= args.max_batch:
        raise CLIError(f"--chunk-tokens ({args.chunk_tokens}) must exceed --max-batch ({args.max_batch})")
    return dict(policy=args.policy, chunk_tokens=args.chunk_tokens, max_batch=args.max_batch,
                kv_budget_bytes=args.kv_budget_bytes or "auto", first_token_on=args.first_token_on,
                link_bytes_per_s=args.link_gbps * 1e9 if args.link_gbps else None)


def _header(args, executor) -> dict:
    return dict(workload=args.workload, rate_per_s=args.rate, requests=args.requests, arrival=args.arrival,
                seed=args.seed, policy=args.policy, model=None if args.cost_model else args.model,
                executor=type(executor).__name__, ttft_slo_s=args.ttft_slo, tpot_slo_s=args.tpot_slo)


def _rejections(res) -> list[dict]:
    """``[{"id", "state", "reason"}]`` of every request that did not complete (the JSON's ``rejections``)."""
    return [dict(id=r.id, state=r.state.value, reason=r.reject_reason) for r in res.requests if r.reject_reason]


def _lines(name: str, m: dict) -> list[str]:
    ms = lambda d, k: "n/a" if d[k] is None else f"{d[k] * 1e3:8.1f}"  # noqa: E731
    t, p = m["ttft_s"], m["tpot_s"]
    lines = [f"{name:<14} workers {','.join(m['workers'])}: completed {m['completed']}/{m['submitted']}, "
             f"rejected {m['rejected']}, SLO attainment {m['slo_attainment']:.0%}, "
             f"{m['throughput_tokens_per_s'] or 0:.1f} output tokens/s",
             f"{'':<14} TTFT ms  p50 {ms(t, 'p50')}  p90 {ms(t, 'p90')}  p99 {ms(t, 'p99')}",
             f"{'':<14} TPOT ms  p50 {ms(p, 'p50')}  p90 {ms(p, 'p90')}  p99 {ms(p, 'p99')}"]
    if m["rejections"]:  # say why, not only how many (the first one; --json lists them all)
        first, more = m["rejections"][0], len(m["rejections"]) - 1
        lines.append(f"{'':<14} {first['state']}: request {first['id']}: {first['reason']}"
                     + (f" (and {more} more, see --json)" if more else ""))
    return lines


@command("serve", "serve a workload on a simulated cluster (colocated or disaggregated) and report TTFT/TPOT",
         arg("--layout", choices=("colocated", "disaggregated"), default="colocated", help="(default colocated)"),
         arg("--workers", type=positive_int, default=1, metavar="N", help="colocated workers (default 1)"),
         *POOLS, *COMMON)
def serve(args) -> tuple[dict, list[str]]:
    from .. import serving
    options = _options(args)
    executor, reqs = _setup(args)
    cfg = serving.ServingConfig(layout=args.layout, workers=args.workers, prefill_workers=args.prefill_workers,
                                decode_workers=args.decode_workers, **options)
    res = serving.run(reqs, cfg, executor)
    m = _clean(dict(res.metrics(args.ttft_slo, args.tpot_slo), rejections=_rejections(res)))
    data = dict(_header(args, executor), layout=args.layout, **{args.layout: m})
    lines = [f"splitlab serve: {args.requests} {args.workload} requests at {args.rate:g}/s "
             f"({data['executor']}, SLOs TTFT {args.ttft_slo:g} s, TPOT {args.tpot_slo:g} s)", *_lines(args.layout, m)]
    return data, lines


@command("compare", "serve the same workload colocated and disaggregated, side by side",
         arg("--workers", type=positive_int, default=None, metavar="N",
             help="colocated workers (default: prefill + decode workers)"),
         *POOLS, *COMMON)
def compare(args) -> tuple[dict, list[str]]:
    from .. import serving
    options = _options(args)
    executor, reqs = _setup(args)
    cmp = serving.compare(reqs, serving.contenders(args.workers, args.prefill_workers, args.decode_workers,
                                                   **options), executor)
    metrics = cmp.metrics(args.ttft_slo, args.tpot_slo)
    for name in ("colocated", "disaggregated"):
        metrics[name]["rejections"] = _rejections(getattr(cmp, name))
    metrics = _clean(metrics)
    data = dict(_header(args, executor), **metrics)
    if args.cost_model:
        same = "not checked: the cost model emits no real tokens"
    elif not cmp.tokens_compared:
        same = "nothing to compare: no request completed in both layouts"
    else:
        same = f"{'yes' if cmp.tokens_identical else 'NO'} ({cmp.tokens_compared} requests completed in both)"
    lines = [f"splitlab compare: {args.requests} {args.workload} requests at {args.rate:g}/s "
             f"({data['executor']}, SLOs TTFT {args.ttft_slo:g} s, TPOT {args.tpot_slo:g} s)",
             *_lines("colocated", metrics["colocated"]), *_lines("disaggregated", metrics["disaggregated"]),
             f"tokens identical in both layouts: {same}"]
    return data, lines
