"""How fast the simulator is: simulated requests and output tokens per second of wall time, for 1k/10k/100k
requests on 8/64/512 workers, colocated and split.

    python benchmarks/simulator_scale.py [--requests 1000,10000,100000] [--workers 8,64,512]
                                         [--rate-per-worker 4.7] [--workload chat] [--json]

Workload and load: the ``chat`` workload (prompts lognormal, median 200 tokens; answers 32-96 tokens) on the
built-in cost model (the tiny model on a laptop CPU), Poisson arrivals at ``rate_per_worker`` x workers requests
per second, so the load per worker is the same at every size (4.7 requests/s per worker by default: 300/s on 64
workers, where a colocated worker spends about 8% of its time in prefill and holds about one stream). Layouts:
``W`` colocated workers, and a split of ``W / 4`` prefill + ``3 W / 4`` decode workers. No trace (metrics only:
the fast path of ``splitlab.serving.fast``). Each point is the fastest of ``--repeats`` runs of ``serving.run``
(CPU seconds of this process), so other programs on a shared machine disturb it less.
"""
from __future__ import annotations

import argparse
import json
import platform
import time

from splitlab.serving import CostModelExecutor, ServingConfig, make_workload, run


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.replace(",", " ").split()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=_ints, default=[1000, 10000, 100000])
    ap.add_argument("--workers", type=_ints, default=[8, 64, 512])
    ap.add_argument("--rate-per-worker", type=float, default=4.7)
    ap.add_argument("--workload", default="chat")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for workers in args.workers:
        for n in args.requests:
            reqs = make_workload(args.workload, n, args.rate_per_worker * workers, seed=0)
            for cfg in (ServingConfig.colocated(workers, trace=False),
                        ServingConfig.disaggregated(workers // 4, workers - workers // 4, trace=False)):
                best = float("inf")
                for _ in range(args.repeats if n <= 10000 else 1):
                    t0 = time.process_time()
                    res = run(reqs, cfg, CostModelExecutor())
                    best = min(best, time.process_time() - t0)
                tokens = sum(len(r.output) for r in res.requests)
                m = res.metrics(1.0, 0.1)
                rows.append(dict(requests=n, workers=workers, layout=cfg.name, cpu_s=best, requests_per_s=n / best,
                                 output_tokens_per_s=tokens / best, slo_attainment=m["slo_attainment"]))
                if not args.json:
                    r = rows[-1]
                    print(f"{n:>7} requests {workers:>4} workers {cfg.name:<28} {best:7.2f} s  "
                          f"{r['requests_per_s']:>8,.0f} req/s  {r['output_tokens_per_s']:>10,.0f} tokens/s",
                          flush=True)
    if args.json:
        print(json.dumps(dict(machine=platform.processor() or platform.machine(), python=platform.python_version(),
                              workload=args.workload, rate_per_worker=args.rate_per_worker, rows=rows)))


if __name__ == "__main__":
    main()
