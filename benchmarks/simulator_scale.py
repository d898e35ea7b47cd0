"""How fast the simulator is: at scale, linear in requests below and above capacity, and beside DistServe's.

    python benchmarks/simulator_scale.py [--sections scale,linear,distserve] [--requests 1000,10000,100000]
                                         [--workers 8,64,512] [--rate-per-worker 4.7] [--workload chat]
                                         [--repeats 3] [--distserve PATH] [--json] [--quick]

Every time is CPU seconds of this process (``time.process_time``), so other programs on a shared machine disturb
it less; each point is the median of ``--repeats`` runs (one for 100,000 requests), the contenders of a
comparison alternating inside every repeat. All runs use the built-in cost model.

- ``scale``: ``serving.run`` without a trace (metrics only) of the ``chat`` workload (prompts lognormal, median
  200 tokens; answers 32-96) at ``rate_per_worker`` x workers Poisson arrivals (4.7/s per worker by default:
  about 8% of a colocated worker's time in prefill, about one stream per worker), for each count of requests and
  workers, colocated (``W`` workers) and split (``W/4`` prefill + ``3W/4`` decode). Goal: 100,000 requests on
  64 workers within 5 s per layout.
- ``linear``: 1P+1D, 256 prompt / 128 output tokens, batches capped at 16 (``max_batch=16``, the default before
  the KV budget bounded batches; capacity about 18 requests/s), at 0.9x and 1.5x capacity
  (16 and 27 requests/s), ``N`` and ``10 N`` requests (2,000 and 20,000), with a trace (``serving.run``'s
  default) and without. Goal: ``10 N`` requests within 12x the time of ``N`` (linear, not quadratic).
- ``distserve`` (with ``--distserve PATH``, a checkout holding DistServe's ``simdistserve`` folder, from
  github.com/LLMServe/DistServe, and ``pip install simpy``; not part of splitlab): 10,000 requests of 256 / 128
  tokens on 1P+1D (splitlab's batches capped at 16), each simulator below capacity at a similar mean decode
  batch: DistServe (its OPT-13B A100 profile) at 3.5 requests/s, splitlab at 17/s. Output tokens and decode
  steps per CPU second, splitlab with a trace and without. Goal: splitlab >= 3x DistServe.

``--quick``: tiny sizes, seconds, no DistServe (a smoke test for CI).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from splitlab.cli.args import positive_float, positive_int, request_count
from splitlab.serving import WORKLOADS, CostModelExecutor, Fixed, ServingConfig, WorkloadSpec, make_workload
from splitlab.serving.cluster import Cluster
from splitlab.serving.workload import MAX_REQUESTS

FIXED = WorkloadSpec("256/128", Fixed(256), Fixed(128))


def _counts(text: str, least: int = 1) -> list[int]:
    """A comma-separated list of request or worker counts, each at least ``least`` (an argparse type)."""
    values = [request_count(x) for x in text.replace(",", " ").split()]
    if not values:
        raise argparse.ArgumentTypeError("needs at least one count, e.g. 1000,10000")
    if min(values) < least:
        raise argparse.ArgumentTypeError(f"each must be at least {least} (the split needs a prefill and a decode "
                                         f"worker), got {min(values)}")
    return values


def _workers(text: str) -> list[int]:
    return _counts(text, least=2)


def timed(reqs, cfg: ServingConfig):
    """``(CPU seconds, cluster, result)`` of one run of ``reqs`` (fresh copies) on the built-in cost model."""
    cluster = Cluster(CostModelExecutor(), cfg)
    copies = [r.fresh() for r in reqs]
    t0 = time.process_time()
    res = cluster.run(copies)
    return time.process_time() - t0, cluster, res


def scale(args, say) -> list[dict]:
    rows = []
    for workers in args.workers:
        for n in args.requests:
            reqs = make_workload(args.workload, n, args.rate_per_worker * workers, seed=0)
            cfgs = (ServingConfig.colocated(workers, trace=False),
                    ServingConfig.disaggregated(max(1, workers // 4), workers - max(1, workers // 4), trace=False))
            times = {c.name: [] for c in cfgs}
            for _ in range(args.repeats if n <= 10000 else 1):
                for cfg in cfgs:
                    seconds, _, res = timed(reqs, cfg)
                    times[cfg.name].append(seconds)
            for cfg in cfgs:
                s = statistics.median(times[cfg.name])
                tokens = sum(len(r.output) for r in res.requests)
                rows.append(dict(section="scale", requests=n, workers=workers, layout=cfg.name, cpu_s=s,
                                 requests_per_s=n / s, output_tokens_per_s=tokens / s))
                say(f"{n:>7} requests {workers:>4} workers {cfg.name:<28} {s:7.2f} s  {n / s:>8,.0f} req/s")
    return rows


def linear(args, say) -> list[dict]:
    rows = []
    for rate, where in ((16.0, "0.9x capacity"), (27.0, "1.5x capacity")):
        for trace in (True, False):
            cfg = ServingConfig.disaggregated(1, 1, max_batch=16, trace=trace)
            sets = {n: make_workload(FIXED, n, rate, seed=0) for n in (args.linear_n, 10 * args.linear_n)}
            times = {n: [] for n in sets}
            for _ in range(args.repeats):
                for n, reqs in sets.items():
                    times[n].append(timed(reqs, cfg)[0])
            small, large = (statistics.median(times[n]) for n in sets)
            rows.append(dict(section="linear", rate_per_s=rate, load=where, trace=trace, requests=list(sets),
                             cpu_s=[small, large], ratio=large / small))
            say(f"1P+1D {where} ({rate:g}/s), trace {'on ' if trace else 'off'}: {args.linear_n:,} requests "
                f"{small:.2f} s, {10 * args.linear_n:,} requests {large:.2f} s: x{large / small:.1f} for 10x")
    return rows


def distserve_run(path: str, n: int, rate: float):
    """``(CPU seconds, output tokens, decode steps)`` of DistServe's simulator on ``n`` requests of 256 / 128
    tokens at ``rate`` (its 1P+1D, OPT-13B, TP 1), as its benchmarks/simulate_dist.py runs it."""
    sys.path.insert(0, path)
    import simpy
    from simdistserve.base.scheduler import put_requests_with_interarrivals
    from simdistserve.base.worker import WorkerConfig
    from simdistserve.base.workload import convert_pd_pair_to_request, get_gamma_interarrival
    from simdistserve.clusters.disagg import DisaggCluster
    from simdistserve.constants import ModelTypes
    from simdistserve.estimators.memory_estimator import get_max_num_tokens
    model = ModelTypes.model_str_to_object("facebook/opt-13b")
    most = get_max_num_tokens(model, 1, 1)
    requests = convert_pd_pair_to_request([(256, 128)] * n)
    arrival = get_gamma_interarrival(n, rate, 1.0, seed=0)
    t0 = time.process_time()
    env = simpy.Environment()
    config = WorkerConfig(model_type=model, TP=1, TP_Prefill=1, TP_Decode=1, prefill_max_batch_size=10 ** 7,
                          decode_max_batch_size=10 ** 7, prefill_max_tokens=most, decode_max_tokens=most,
                          enable_chunked_prefill=False, engine_type="distserve")
    cluster = DisaggCluster(env=env, PP_prefill=1, PP_decode=1, worker_configs=config)
    cluster.run()
    put_requests_with_interarrivals(env, cluster.scheduler, arrival, requests)
    env.run()
    seconds = time.process_time() - t0
    steps = [e for w in cluster.get_all_workers() for e in w.log if e[1] == "do_decode"]
    return seconds, sum(e[4] for e in steps) + n, len(steps)  # + n: the first tokens, made by the prefills


def distserve(args, say) -> list[dict]:
    n = args.distserve_n
    reqs = make_workload(FIXED, n, 17.0, seed=0)
    runs = {"distserve": [], "splitlab traced": [], "splitlab": []}
    for _ in range(args.repeats):
        runs["distserve"].append(distserve_run(args.distserve, n, 3.5))
        for trace in (True, False):
            seconds, cluster, res = timed(reqs, ServingConfig.disaggregated(1, 1, max_batch=16, trace=trace))
            steps = sum(len(w.clock) for w in cluster.decoders)
            runs["splitlab traced" if trace else "splitlab"].append(
                (seconds, sum(len(r.output) for r in res.requests), steps))
    rows = []
    for name, samples in runs.items():
        s = statistics.median(x[0] for x in samples)
        tokens, steps = samples[0][1], samples[0][2]
        rows.append(dict(section="distserve", simulator=name, requests=n, cpu_s=s, output_tokens_per_s=tokens / s,
                         decode_steps_per_s=steps / s, mean_decode_batch=(tokens - n) / steps))
    base = rows[0]
    for row in rows:
        row["speedup_tokens"] = row["output_tokens_per_s"] / base["output_tokens_per_s"]
        row["speedup_steps"] = row["decode_steps_per_s"] / base["decode_steps_per_s"]
        say(f"{row['simulator']:<16} {row['cpu_s']:6.2f} s  {row['output_tokens_per_s']:>10,.0f} tokens/s "
            f"{row['decode_steps_per_s']:>8,.0f} decode steps/s  mean decode batch {row['mean_decode_batch']:.1f}  "
            f"x{row['speedup_tokens']:.1f} tokens/s, x{row['speedup_steps']:.1f} steps/s")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="scale,linear,distserve")
    ap.add_argument("--requests", type=_counts, default=[1000, 10000, 100000])
    ap.add_argument("--workers", type=_workers, default=[8, 64, 512])
    ap.add_argument("--rate-per-worker", type=positive_float, default=4.7)
    ap.add_argument("--workload", default="chat", choices=sorted(WORKLOADS))
    ap.add_argument("--linear-n", type=request_count, default=2000, help="requests of the smaller linear run")
    ap.add_argument("--distserve", default=None, help="a folder holding DistServe's simdistserve package")
    ap.add_argument("--distserve-n", type=request_count, default=10000)
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, seconds (CI)")
    args = ap.parse_args(argv)
    sections = set(args.sections.replace(",", " ").split())
    if not sections:
        ap.error("--sections names none: give scale, linear or distserve")
    if 10 * args.linear_n > MAX_REQUESTS:
        ap.error(f"--linear-n {args.linear_n:,}: its larger run of 10x would exceed {MAX_REQUESTS:,} requests")
    if sections - {"scale", "linear", "distserve"}:
        ap.error(f"unknown sections {sorted(sections - {'scale', 'linear', 'distserve'})}")
    if args.quick:
        args.requests, args.workers, args.linear_n, args.repeats, args.distserve = [200], [4], 40, 1, None
    if args.distserve is not None and not os.path.isdir(os.path.join(args.distserve, "simdistserve")):
        ap.error(f"--distserve {args.distserve}: no simdistserve folder there")
    say = (lambda text: None) if args.json else (lambda text: print(text, flush=True))
    load = os.getloadavg()
    say(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    rows = []
    if "scale" in sections:
        rows += scale(args, say)
    if "linear" in sections:
        rows += linear(args, say)
    if "distserve" in sections and args.distserve:
        rows += distserve(args, say)
    elif "distserve" in sections and not args.quick:
        say("distserve: skipped (give --distserve PATH, a checkout of LLMServe/DistServe, and pip install simpy)")
    if args.json:
        print(json.dumps(dict(machine=platform.processor() or platform.machine(), python=platform.python_version(),
                              load_average=load, end_load_average=os.getloadavg(), rows=rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
