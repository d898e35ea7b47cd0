"""``python -m splitlab serve`` and ``python -m splitlab compare``: a workload through a cluster, on any back end.

``--backend emulated`` (default: the real model runs every batch on this device and each worker's clock moves by
the measured times), ``simulated`` (a cost model predicts the times; no model is loaded and torch is not
imported) or ``distributed`` (one process per worker, wall clocks, KV moved with torch.distributed; ``--timeout``
bounds every exchange; ``--torchrun`` joins the processes torchrun started). Every back end takes the same
options and prints the same JSON.

``serve`` runs one layout; ``compare`` runs the same requests (same workload and seed) colocated on
``--workers`` workers (default: prefill + decode workers, so both get the same number) and disaggregated on
``--prefill-workers`` + ``--decode-workers``, and says whether every request got the same tokens. With
``--json`` the output is one object with one entry per layout (``colocated`` / ``disaggregated``), each holding
``completed``, ``rejected``, ``failed``, ``ttft_s``, ``tpot_s``, ``itl_s`` percentiles (``p50``, ``p90``,
``p99``, ``mean``), ``slo_attainment``, ``throughput_tokens_per_s``, ``rejections`` (id, state and reason of every
request that did not complete), ``notes`` (faults and what was done about them) and more; ``compare`` adds
``tokens_identical`` and ``tokens_compared``. Undefined numbers (no completed request) are ``null``.
"""
from __future__ import annotations

import math

from ..serving.config import POLICIES, TRANSFER_MODES
from ..serving.workload import WORKLOADS
from .args import (check_chunking, check_torchrun, device_name, link_gbps, positive_float, positive_int,
                   request_count, seed_int, timeout_seconds)
from .demo import check_loadable, quiet_hub
from .registry import CLIError, arg, command, stage_printer

__all__ = ["serve", "compare", "COMMON", "setup", "clean"]

BACKENDS = ("emulated", "simulated", "distributed")
COMMON = (
    arg("--workload", choices=sorted(WORKLOADS), default="chat", help="named workload (default chat)"),
    arg("--rate", type=positive_float, default=2.0, metavar="REQ_PER_S", help="mean arrival rate (default 2)"),
    arg("--requests", type=request_count, default=16, metavar="N", help="requests to send (default 16)"),
    arg("--arrival", choices=("poisson", "gamma"), default="poisson", help="arrival process (default poisson)"),
    arg("--cv", type=positive_float, default=2.0, help="gamma arrivals: coefficient of variation, 0.001 to 100 (default 2)"),
    arg("--scale", type=positive_float, default=None,
        help="multiply the workload's prompt and output lengths (default: from the model's context)"),
    arg("--policy", choices=POLICIES, default="prefill-first", help="colocated batching policy"),
    arg("--chunk-tokens", type=positive_int, default=256, help="chunked policy: token budget per step (256)"),
    arg("--max-batch", type=positive_int, default=16, help="requests resident per worker (default 16)"),
    arg("--max-prefill-tokens", type=positive_int, default=2048, help="prompt tokens per prefill forward (2048)"),
    arg("--kv-budget-bytes", type=positive_int, default=None,
        help="KV budget per worker (default: device memory minus weights; unlimited for a cost model)"),
    arg("--first-token-on", choices=("prefill", "decode"), default="prefill",
        help="disaggregated: which side emits the first token (default prefill)"),
    arg("--transfer-mode", choices=TRANSFER_MODES, default="whole", help="disaggregated: how the cache moves"),
    arg("--link-gbps", type=link_gbps, default=None,
        help="disaggregated, virtual clocks: model a KV link of this many GB/s instead of charging the measured copy"),
    arg("--backend", choices=BACKENDS, default="emulated", help="emulated (default), simulated or distributed"),
    arg("--model", default="tiny", help="preset, Hugging Face name or local path (default: tiny)"),
    arg("--device", type=device_name, default=None, help="cpu, cuda, cuda:N or mps (default: best available)"),
    arg("--timeout", type=timeout_seconds, default=30.0, metavar="S",
        help="distributed: limit of every exchange with a worker (default 30 s; at most a week)"),
    arg("--torchrun", action="store_true", help="distributed: join the processes torchrun started"),
    arg("--ttft-slo", type=positive_float, default=1.0, metavar="S", help="TTFT SLO in seconds (default 1.0)"),
    arg("--tpot-slo", type=positive_float, default=0.1, metavar="S", help="TPOT SLO in seconds (default 0.1)"),
    arg("--seed", type=seed_int, default=0, help="seeds arrivals, lengths, prompts and random weights (default 0)"),
)
POOLS = (
    arg("--prefill-workers", type=positive_int, default=1, metavar="P", help="disaggregated prefill workers (1)"),
    arg("--decode-workers", type=positive_int, default=1, metavar="D", help="disaggregated decode workers (1)"),
)


def clean(x):
    """NaN/inf -> None, recursively, so the JSON is strict."""
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def options(args) -> dict:
    """The ServingConfig fields the command line sets (the layout and pool sizes aside)."""
    check_chunking(args)
    check_torchrun(args)
    return dict(policy=args.policy, chunk_tokens=args.chunk_tokens, max_batch=args.max_batch,
                max_prefill_tokens=args.max_prefill_tokens, kv_budget_bytes=args.kv_budget_bytes or "auto",
                first_token_on=args.first_token_on, transfer_mode=args.transfer_mode, timeout_s=args.timeout,
                link_bytes_per_s=args.link_gbps * 1e9 if args.link_gbps else None)


def setup(args, n_workers: int, cost=None):
    """``(backend, requests, close)`` for the parsed options; ``cost``: the simulated back end's cost model (None:
    the built-in one). Under ``--torchrun`` a worker rank serves here and gets ``(None, None, None)``."""
    from .. import serving
    if args.backend == "simulated":  # the workload sized to the cost model's context (2048 for the built-in one)
        backend = serving.CostModelExecutor(cost)
        reqs = serving.workload_requests(args.workload, args.requests, args.rate, backend, args.seed, args.scale,
                                         args.arrival, args.cv)
        return backend, reqs, lambda: None
    check_loadable(args.model)
    quiet_hub()
    if args.backend == "emulated":
        from ..phases.models import load_model
        lm = load_model(args.model, device=args.device, seed=args.seed)
        return serving.ModelExecutor(lm), _workload(args, lm), lambda: None
    from ..serving.distributed import launch
    from ..transfer.spawn import max_workers
    device = args.device or "cpu"
    if not args.torchrun and n_workers > max_workers():
        raise CLIError(f"{n_workers} workers: the distributed back end starts 1 .. {max_workers()} worker processes on "
                       f"this machine (4 per CPU, at most 64); use the simulated back end for larger clusters")
    say = None if args.json else stage_printer(args.command)
    if args.torchrun:
        group = launch.join(device, args.timeout)
        if group.rank:
            launch.work(group, args.model, device=device, seed=args.seed)
            return None, None, None
        backend = launch.backend(group, args.model, device=device, seed=args.seed, timeout_s=args.timeout)
        backend.say = say
    else:
        backend = serving.DistributedBackend(args.model, device=device, seed=args.seed, timeout_s=args.timeout,
                                             say=say)
    backend.prepare(n_workers)  # the workers' model shapes the workload (context, vocabulary)
    if say is not None:
        say(f"serving {args.requests} {args.workload} requests at {args.rate:g}/s"
            + (" (colocated, then disaggregated)" if args.command == "compare" else ""))
    return backend, _workload(args, backend), backend.close


def _workload(args, model):
    from ..serving import make_workload
    return make_workload(args.workload, args.requests, args.rate, seed=args.seed, model=model, arrival=args.arrival,
                         cv=args.cv, scale=args.scale)


def header(args) -> dict:
    return dict(workload=args.workload, rate_per_s=args.rate, requests=args.requests, arrival=args.arrival,
                seed=args.seed, policy=args.policy, backend=args.backend,
                model=None if args.backend == "simulated" else args.model, ttft_slo_s=args.ttft_slo,
                tpot_slo_s=args.tpot_slo)


def _rejections(res) -> list[dict]:
    """``[{"id", "state", "reason"}]`` of every request that did not complete (the JSON's ``rejections``)."""
    return [dict(id=r.id, state=r.state.value, reason=r.reject_reason) for r in res.requests if r.reject_reason]


def metrics(res, args) -> dict:
    """The run's metrics (:meth:`~splitlab.serving.Result.metrics`) plus ``rejections`` and ``slo_misses``: how
    many requests missed each bound the attainment counts (``unfinished``, ``ttft``, ``ttst``: the second token
    later than TTFT SLO + TPOT SLO, ``tpot``; each request under the first it misses)."""
    from ..serving.metrics import slo_misses
    return clean(dict(res.metrics(args.ttft_slo, args.tpot_slo), rejections=_rejections(res),
                      slo_misses=slo_misses(res.requests, args.ttft_slo, args.tpot_slo)))


SHOWN_WORKERS = 8  # worker names the text lists before "... and N more" (--json lists them all)


def _workers(names: list[str]) -> str:
    """The worker names, each pool (W, P, D) cut to its first :data:`SHOWN_WORKERS`: 'W0,...,W7 ... and 9992
    more' (10,000 names on one line told nothing; ``--json`` holds every one)."""
    pools: dict[str, list[str]] = {}
    for n in names:
        pools.setdefault(n.rstrip("0123456789"), []).append(n)
    parts = [",".join(p) if len(p) <= SHOWN_WORKERS else
             f"{','.join(p[:SHOWN_WORKERS])} ... and {len(p) - SHOWN_WORKERS} more" for p in pools.values()]
    return ("; " if any(len(p) > SHOWN_WORKERS for p in pools.values()) else ",").join(parts)


def _misses(m: dict) -> str:
    """' (missed: TTFT 0, TTST 11, TPOT 0)' next to the attainment: the text shows every bound it counts."""
    miss = m.get("slo_misses")
    if not miss:
        return ""
    parts = [f"{name.upper()} {miss[name]}" for name in ("ttft", "ttst", "tpot")]
    if miss.get("unfinished"):
        parts.append(f"not finished {miss['unfinished']}")
    return f" (missed: {', '.join(parts)})"


def lines(name: str, m: dict) -> list[str]:
    ms = lambda d, k: "n/a" if d[k] is None else f"{d[k] * 1e3:8.1f}"  # noqa: E731
    t, s, p = m["ttft_s"], m["ttst_s"], m["tpot_s"]
    slo = m.get("ttft_slo_s"), m.get("tpot_slo_s")
    bound = f"  (second token; SLO TTFT + TPOT = {(slo[0] + slo[1]) * 1e3:g} ms)" if None not in slo else ""
    out = [f"{name:<14} workers {_workers(m['workers'])}: completed {m['completed']}/{m['submitted']}, "
           f"rejected {m['rejected']}, failed {m['failed']}, SLO attainment {m['slo_attainment'] or 0:.0%}"
           f"{_misses(m)}, {m['throughput_tokens_per_s'] or 0:.1f} output tokens/s",
           f"{'':<14} TTFT ms  p50 {ms(t, 'p50')}  p90 {ms(t, 'p90')}  p99 {ms(t, 'p99')}",
           f"{'':<14} TTST ms  p50 {ms(s, 'p50')}  p90 {ms(s, 'p90')}  p99 {ms(s, 'p99')}{bound}",
           f"{'':<14} TPOT ms  p50 {ms(p, 'p50')}  p90 {ms(p, 'p90')}  p99 {ms(p, 'p99')}"]
    if m["rejections"]:  # say why, not only how many (the first one; --json lists them all)
        first, more = m["rejections"][0], len(m["rejections"]) - 1
        out.append(f"{'':<14} {first['state']}: request {first['id']}: {first['reason']}"
                   + (f" (and {more} more, see --json)" if more else ""))
    out += [f"{'':<14} note: {n}" for n in m.get("notes", [])]
    return out


def title(verb: str, args) -> str:
    return (f"splitlab {verb}: {args.requests} {args.workload} requests at {args.rate:g}/s ({args.backend}, SLOs "
            f"TTFT {args.ttft_slo:g} s, TPOT {args.tpot_slo:g} s)")


@command("serve", "serve a workload on a cluster (colocated or disaggregated) and report TTFT/TPOT",
         arg("--layout", choices=("colocated", "disaggregated"), default="colocated", help="(default colocated)"),
         arg("--workers", type=positive_int, default=1, metavar="N", help="colocated workers (default 1)"),
         *POOLS, *COMMON)
def serve(args):
    from .. import serving
    cfg = serving.ServingConfig(layout=args.layout, workers=args.workers, prefill_workers=args.prefill_workers,
                                decode_workers=args.decode_workers, **options(args))
    backend, reqs, close = setup(args, cfg.n_workers)
    if backend is None:
        return None
    try:
        res = serving.run(reqs, cfg, backend)
    finally:
        close()
    m = metrics(res, args)
    return (dict(header(args), layout=args.layout, **{args.layout: m}), [title("serve", args), *lines(args.layout, m)],
            failed_status(m))


@command("compare", "serve the same workload colocated and disaggregated, side by side",
         arg("--workers", type=positive_int, default=None, metavar="N",
             help="colocated workers (default: prefill + decode workers)"),
         *POOLS, *COMMON)
def compare(args):
    from .. import serving
    configs = serving.contenders(args.workers, args.prefill_workers, args.decode_workers, **options(args))
    backend, reqs, close = setup(args, max(c.n_workers for c in configs.values()))
    if backend is None:
        return None
    try:
        cmp = serving.compare(reqs, configs, backend)
    finally:
        close()
    data = dict(header(args), **{name: metrics(res, args) for name, res in cmp.results.items()},
                tokens_identical=cmp.tokens_identical, tokens_compared=cmp.tokens_compared)
    if args.backend == "simulated":
        same = "not checked: the cost model emits no real tokens"
    elif not cmp.tokens_compared:
        same = "nothing to compare: no request completed in both layouts"
    else:
        same = f"{'yes' if cmp.tokens_identical else 'NO'} ({cmp.tokens_compared} requests completed in both)"
    text = [title("compare", args), *lines("colocated", data["colocated"]),
            *lines("disaggregated", data["disaggregated"]), f"tokens identical in both layouts: {same}"]
    return data, text, max(failed_status(data[name]) for name in cmp.results)


FAILED_REQUESTS = 3  #: the exit status of a serve or compare run in which requests failed (results printed)


def failed_status(m: dict) -> int:
    """:data:`FAILED_REQUESTS` when a run's metrics count failed requests (a worker lost with nobody to take its
    requests, a cache that could not be moved), else 0: a script sees the run went wrong without reading it."""
    return FAILED_REQUESTS if m.get("failed") else 0
