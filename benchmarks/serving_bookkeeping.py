"""How much of an emulated serving run is the emulator itself, and what batching buys on this machine.

    python benchmarks/serving_bookkeeping.py [--model tiny] [--batch 8] [--prompt-tokens 200]
                                             [--new-tokens 64] [--threads 1] [--repeats 3] [--json] [--quick]

1. Bookkeeping share: ``batch`` requests arrive together and decode as one continuous batch, colocated and
   disaggregated (1P + 1D). Bookkeeping = wall time of ``Cluster.run`` minus the seconds the executor measured
   (forward passes and KV copies): event loop, scheduling, batch-cache merges, token picking. Goal <= 10%.
2. Decode throughput at batch 16 vs batch 1 (tokens/s ratio, :func:`splitlab.profiling.measure_decode`).
Medians over ``repeats`` runs. ``--quick``: batch 2, 16-token prompts, 4 new tokens, one run (a smoke test for CI).
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch

import splitlab as sl
from splitlab import serving
from splitlab.phases.profiling import measure_decode


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=200)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, seconds (CI)")
    args = ap.parse_args(argv)
    if args.quick:
        args.batch, args.prompt_tokens, args.new_tokens, args.repeats = 2, 16, 4, 1
    torch.set_num_threads(args.threads)
    lm = sl.load_model(args.model, threads=args.threads)
    ex = serving.ModelExecutor(lm)
    spec = serving.WorkloadSpec("bench", serving.Fixed(args.prompt_tokens), serving.Fixed(args.new_tokens))
    out = dict(model=lm.name, device=sl.describe_device(lm.device), batch=args.batch, threads=args.threads,
               prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens)
    for layout in ("colocated", "disaggregated"):
        shares = []
        for i in range(args.repeats):
            reqs = serving.make_workload(spec, args.batch, rate_per_s=1e6, seed=i, model=lm)
            res = serving.run(reqs, serving.ServingConfig(layout=layout, max_batch=args.batch, kv_budget_bytes=None), ex)
            shares.append(res.bookkeeping_s / res.wall_s)
        out[f"bookkeeping_share_{layout}"] = statistics.median(shares)
    dec = measure_decode(lm, [1, 16], context=args.prompt_tokens, steps=2 if args.quick else 16).set_index("batch")
    out["decode_tokens_per_s_batch1"] = float(dec.loc[1, "tokens_per_s"])
    out["decode_tokens_per_s_batch16"] = float(dec.loc[16, "tokens_per_s"])
    out["batch16_over_batch1"] = out["decode_tokens_per_s_batch16"] / out["decode_tokens_per_s_batch1"]
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:32} {v:.3f}" if isinstance(v, float) else f"{k:32} {v}")


if __name__ == "__main__":
    main()
