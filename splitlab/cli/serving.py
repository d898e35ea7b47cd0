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
request that did not complete), ``notes`` (faults and what was done about them; a batch cap that bound),
``kv_budget_bytes``, ``max_batch`` and ``batch_capped`` (what bounded each worker's batch) and more; ``compare`` adds
``tokens_identical`` and ``tokens_compared``. Undefined numbers (no completed request) are ``null``.
``--local-prefill-tokens`` and ``--local-prefill-queue`` make the split conditional
(:mod:`splitlab.serving.conditional`: decode workers prefill short prompts themselves); its entry then adds
``conditional`` (the rule) and ``local_prefill_share``.
"""
from __future__ import annotations

from ..serving.config import POLICIES, ROUTINGS, TRANSFER_MODES
from ..serving.workload import WORKLOADS
from .args import (MEMORY_UTILIZATION, THREADS, check_chunking, check_kv_room, check_torchrun, device_name, gamma_cv,
                   link_gbps, positive_float, positive_int, progress, prompt_threshold, queue_length, request_count,
                   seed_int, slo_seconds, timeout_seconds)
from .defaults import OPTIONS_HELP, chosen_lines, fill
from .demo import check_loadable, quiet_hub
from .prefix_options import prefix_fields, with_system
from .registry import CLIError, arg, command, stage_printer
from .report import about, clean, failed_status, header, lines, metrics, title

__all__ = ["serve", "compare", "COMMON", "setup", "resolve"]

BACKENDS = ("emulated", "simulated", "distributed")
COMMON = (
    arg("--workload", choices=sorted(WORKLOADS), default="chat", help="named workload (default chat)"),
    arg("--rate", type=positive_float, default=None, metavar="REQ_PER_S",
        help="mean arrival rate (default: below the layouts' simulated capacity within the SLOs)"),
    arg("--requests", type=request_count, default=16, metavar="N", help="requests to send (default 16)"),
    arg("--arrival", choices=("poisson", "gamma"), default="poisson", help="arrival process (default poisson)"),
    arg("--cv", type=gamma_cv, default=None,
        help="gamma arrivals: coefficient of variation, 0.001 to 100 (default 2)"),
    arg("--scale", type=positive_float, default=None,
        help="multiply the workload's prompt and output lengths (default: from the model's context)"),
    arg("--policy", choices=POLICIES, default=None, help="colocated batching policy (default prefill-first)"),
    arg("--chunk-tokens", type=positive_int, default=None, help="chunked policy: token budget per step (256)"),
    arg("--max-batch", type=positive_int, default=None,
        help="cap on requests resident per worker (default: none, the KV budget bounds the batch)"),
    arg("--max-prefill-tokens", type=positive_int, default=2048, help="prompt tokens per prefill forward (2048)"),
    arg("--kv-budget-bytes", type=positive_int, default=None,
        help="KV budget per worker (default: --memory-utilization x device memory - weights - activations; a "
             "cost model without a memory size: 16 GiB)"),
    MEMORY_UTILIZATION,
    arg("--first-token-on", choices=("prefill", "decode"), default=None,
        help="disaggregated: which side emits the first token (default decode: after the KV transfer, when the "
             "decode worker admits the request; "
             "prefill: DistServe's convention)"),
    arg("--transfer-mode", choices=TRANSFER_MODES, default=None,
        help="disaggregated: how the cache moves (default whole)"),
    arg("--link-gbps", type=link_gbps, default=None,
        help="disaggregated, virtual clocks: model a KV link of this many GB/s instead of charging the measured copy"),
    arg("--local-prefill-tokens", type=prompt_threshold, default=None, metavar="T",
        help="disaggregated: conditional split, prompts of at most T tokens prefill on a decode worker, no transfer "
             "(inf: every prompt)"),
    arg("--local-prefill-queue", type=queue_length, default=None, metavar="Q",
        help="disaggregated: conditional split, a request prefills on a decode worker when Q requests already wait "
             "at the prefill worker it would join"),
    arg("--routing", choices=ROUTINGS, default=None,
        help="simulated: how a request picks its (prefill) worker, with prefix caches on the workers that prefill "
             "(default least-loaded, and no prefix cache unless --prefix-cache-tokens)"),
    arg("--prefix-cache-tokens", type=prompt_threshold, default=None, metavar="T",
        help="simulated: each prefilling worker caches up to T tokens of prompt prefixes, LRU (default with "
             "--routing: inf)"),
    arg("--system-prompts", type=positive_int, default=None, metavar="N",
        help="prefix each prompt with one of N shared system prompts (with --system-prompt-tokens)"),
    arg("--system-prompt-tokens", type=positive_int, default=None, metavar="S", help="tokens of each system prompt"),
    arg("--backend", choices=BACKENDS, default="emulated", help="emulated (default), simulated or distributed"),
    arg("--model", default=None, help="emulated, distributed: preset, Hugging Face name or local path (default: tiny)"),
    arg("--device", type=device_name, default=None, help="cpu, cuda, cuda:N or mps (default: best available)"),
    THREADS,
    arg("--timeout", type=timeout_seconds, default=30.0, metavar="S",
        help="distributed: limit of every exchange with a worker (default 30 s; at most a week)"),
    arg("--torchrun", action="store_true", help="distributed: join the processes torchrun started"),
    arg("--ttft-slo", type=slo_seconds, default=None, metavar="S", help=f"TTFT SLO in seconds ({OPTIONS_HELP})"),
    arg("--tpot-slo", type=slo_seconds, default=None, metavar="S", help=f"TPOT SLO in seconds ({OPTIONS_HELP})"),
    arg("--seed", type=seed_int, default=0, help="seeds arrivals, lengths, prompts and random weights (default 0)"),
)
POOLS = (
    arg("--prefill-workers", type=positive_int, default=None, metavar="P", help="disaggregated prefill workers (1)"),
    arg("--decode-workers", type=positive_int, default=None, metavar="D", help="disaggregated decode workers (1)"),
)


#: the defaults of options that only some runs read (None on the command line: not given)
DEFAULTS = dict(workers=1, prefill_workers=1, decode_workers=1, policy="prefill-first", chunk_tokens=256,
                first_token_on="decode", transfer_mode="whole", model="tiny", cv=2.0)
#: options only one layout reads
ONLY = {"colocated": ("workers", "policy"),
        "disaggregated": ("prefill_workers", "decode_workers", "first_token_on", "transfer_mode", "link_gbps",
                          "local_prefill_tokens", "local_prefill_queue")}


def _flags(names) -> str:
    return ", ".join(f"--{n.replace('_', '-')}" for n in names)


def resolve(args, layouts: tuple[str, ...]) -> None:
    """Refuse an option that no run of this command reads (it would be ignored without a word: ``--workers 3``
    with ``--layout disaggregated`` ran 1P+1D; ``--model`` on the simulated back end ran no model), then fill in
    the defaults of :data:`DEFAULTS`.

    Raises:
        CLIError: an option of a layout that does not run, ``--chunk-tokens`` without ``--policy chunked``, or
            ``--model``, ``--device`` or ``--threads`` on the simulated back end.
    """
    for layout, names in ONLY.items():
        given = [n for n in names if layout not in layouts and getattr(args, n, None) is not None]
        if given:
            one = len(given) == 1
            raise CLIError(f"{_flags(given)} only {'applies' if one else 'apply'} to the {layout} layout, and this "
                           f"run is {' and '.join(layouts)}: leave {'it' if one else 'them'} out or use --layout "
                           f"{layout}")
    if args.chunk_tokens is not None and (args.policy or "prefill-first") != "chunked":
        raise CLIError(f"--chunk-tokens sets the chunked policy's budget, but --policy is "
                       f"{args.policy or 'prefill-first (the default)'}: add --policy chunked or leave it out")
    if args.cv is not None and args.arrival != "gamma":  # was ignored: Poisson arrivals have a CV of 1
        raise CLIError(f"--cv shapes gamma arrivals, but --arrival is {args.arrival}: add --arrival gamma or leave it "
                       f"out")
    unused = [n for n in ("model", "device", "threads") if getattr(args, n, None) is not None]
    if args.backend == "simulated" and unused:
        raise CLIError(f"{_flags(unused)} only {'applies' if len(unused) == 1 else 'apply'} to the back ends that run "
                       f"a model (emulated, distributed); the simulated back end runs a cost model (one measured on "
                       f"a model: simulate --cost FILE --model NAME)")
    for name, value in DEFAULTS.items():
        if getattr(args, name, None) is None and not (name == "workers" and len(layouts) > 1):  # compare: P + D
            setattr(args, name, value)


def options(args) -> dict:
    """The ServingConfig fields the command line sets (the layout and pool sizes aside)."""
    check_chunking(args)
    check_torchrun(args)
    return dict(policy=args.policy, chunk_tokens=args.chunk_tokens, max_batch=args.max_batch,
                max_prefill_tokens=args.max_prefill_tokens, kv_budget_bytes=args.kv_budget_bytes or "auto",
                memory_utilization=args.memory_utilization,
                first_token_on=args.first_token_on, transfer_mode=args.transfer_mode, timeout_s=args.timeout,
                link_bytes_per_s=args.link_gbps * 1e9 if args.link_gbps else None,
                local_prefill_tokens=args.local_prefill_tokens, local_prefill_queue=args.local_prefill_queue,
                **prefix_fields(args))


#: from this many requests on, the simulated back end says it draws them first (20,000: 4 s, 100,000: 21 s, load 12)
MANY_REQUESTS = 20_000


def setup(args, configs: dict, cost=None):
    """``(backend, requests, close)`` for the parsed options and layouts (name -> ServingConfig); ``cost``: the
    simulated back end's cost model (None: the built-in one) or executor (a PoolCostExecutor). SLOs and a rate
    the command line left out are chosen first (:func:`.defaults.fill`). Under ``--torchrun`` a worker rank serves
    here and gets ``(None, None, None)``."""
    from .. import serving
    n_workers, args.chosen = max(c.n_workers for c in configs.values()), None
    if args.backend == "simulated":  # the workload sized to the cost model's context (2048 for the built-in one)
        backend = cost if isinstance(cost, serving.CostModelExecutor) else serving.CostModelExecutor(cost)
        fill(args, configs, backend.cost)  # an executor of two pools (cli.pools): SLOs from its prefill pool's
        check_kv_room(backend, configs)
        if not args.json and args.requests >= MANY_REQUESTS:  # 1,000,000 ran minutes, silent (issue 18 QA)
            stage_printer(args.command)(f"drawing {args.requests:,} {args.workload} requests (arrivals, lengths, "
                                        f"prompt ids: about 5 s per 20,000 on a busy 2-core machine), then simulating")
        reqs = serving.workload_requests(args.workload, args.requests, args.rate, backend, args.seed, args.scale,
                                         args.arrival, args.cv)
        return backend, with_system(args, reqs, backend.max_context, None), lambda: None
    check_loadable(args.model)
    quiet_hub()
    if args.backend == "emulated":
        from ..phases.models import load_model
        lm = load_model(args.model, device=args.device, seed=args.seed, threads=args.threads)
        fill(args, configs, lm=lm)
        return serving.ModelExecutor(lm), _workload(args, lm), lambda: None
    from ..serving.distributed import launch
    from ..transfer.spawn import max_workers
    device = args.device or "cpu"
    if not args.torchrun and n_workers > max_workers():
        raise CLIError(f"{n_workers} workers: the distributed back end starts 1 .. {max_workers()} worker processes on "
                       f"this machine (4 per CPU, at most 64); use the simulated back end for larger clusters")
    say = None if args.json else stage_printer(args.command)
    if args.torchrun:
        if args.threads is not None:
            raise CLIError("--threads is not passed to the processes torchrun starts: set OMP_NUM_THREADS for them")
        group = launch.join(device, args.timeout)
        if group.rank:
            launch.work(group, args.model, device=device, seed=args.seed)
            return None, None, None
    if None in (args.rate, args.ttft_slo, args.tpot_slo):  # measured on a copy of the workers' model, here
        from ..phases.models import load_model
        fill(args, configs, lm=load_model(args.model, device=device, seed=args.seed))
    if args.torchrun:
        backend = launch.backend(group, args.model, device=device, seed=args.seed, timeout_s=args.timeout)
        backend.say = say
    else:
        backend = serving.DistributedBackend(args.model, device=device, seed=args.seed, timeout_s=args.timeout,
                                             threads=args.threads or 1, say=say)
    backend.prepare(n_workers)  # the workers' model shapes the workload (context, vocabulary)
    if say is not None:
        say(f"serving {args.requests} {args.workload} requests at {args.rate:g}/s"
            + (" (colocated, then disaggregated)" if args.command == "compare" else ""))
    return backend, _workload(args, backend), backend.close


def _workload(args, model):
    from ..serving import make_workload
    reqs = make_workload(args.workload, args.requests, args.rate, seed=args.seed, model=model, arrival=args.arrival,
                         cv=args.cv, scale=args.scale)
    return with_system(args, reqs, model.max_context, model.vocab_size)


@command("serve", "serve a workload on a cluster (colocated or disaggregated) and report TTFT/TPOT",
         arg("--layout", choices=("colocated", "disaggregated"), default="colocated", help="(default colocated)"),
         arg("--workers", type=positive_int, default=None, metavar="N", help="colocated workers (default 1)"),
         *POOLS, *COMMON)
def serve(args):
    from .. import serving
    resolve(args, (args.layout,))
    cfg = serving.ServingConfig(layout=args.layout, workers=args.workers, prefill_workers=args.prefill_workers,
                                decode_workers=args.decode_workers, **options(args))
    backend, reqs, close = setup(args, {args.layout: cfg})
    if backend is None:
        return None
    try:
        res = serving.run(reqs, cfg, backend, progress=progress(args))
    finally:
        close()
    m = metrics(res, args)
    extra, said = about(backend)
    return (dict(header(args), layout=args.layout, **{args.layout: m}, **extra),
            [title("serve", args), *chosen_lines(args.chosen), *said, *lines(args.layout, m)], failed_status(m))


@command("compare", "serve the same workload colocated and disaggregated, side by side",
         arg("--workers", type=positive_int, default=None, metavar="N",
             help="colocated workers (default: prefill + decode workers)"),
         *POOLS, *COMMON)
def compare(args):
    from .. import serving
    resolve(args, ("colocated", "disaggregated"))
    configs = serving.contenders(args.workers, args.prefill_workers, args.decode_workers, **options(args))
    backend, reqs, close = setup(args, configs)
    if backend is None:
        return None
    try:
        cmp = serving.compare(reqs, configs, backend, progress=progress(args))
    finally:
        close()
    extra, said = about(backend)
    data = dict(header(args), **{name: metrics(res, args) for name, res in cmp.results.items()},
                tokens_identical=cmp.tokens_identical, tokens_compared=cmp.tokens_compared, **extra)
    if args.backend == "simulated":
        same = "not checked: the cost model emits no real tokens"
    elif not cmp.tokens_compared:
        same = "nothing to compare: no request completed in both layouts"
    else:
        same = f"{'yes' if cmp.tokens_identical else 'NO'} ({cmp.tokens_compared} requests completed in both)"
    text = [title("compare", args), *chosen_lines(args.chosen), *said, *lines("colocated", data["colocated"]),
            *lines("disaggregated", data["disaggregated"]), f"tokens identical in both layouts: {same}"]
    return data, text, max(failed_status(data[name]) for name in cmp.results)




