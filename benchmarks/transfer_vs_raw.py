"""splitlab's cross-process KV transfer vs the raw bandwidth of the same backend, for caches of 8 MiB and more.

    python benchmarks/transfer_vs_raw.py [--model tiny-mha] [--prompt-tokens 1024 2048] [--batch 1 2]
                                         [--repeats 21] [--goal 0.8] [--json] [--quick]

``--quick``: one cache of 64 tokens, 2 repeats (a smoke test for CI: it runs every method, checks no goal).

Two local processes joined over gloo (:class:`splitlab.transfer.peer.Peer`). For each cache (a real prefill of
``--model``: tiny-mha holds 8 KiB per token in float32, so 1024 tokens = 8 MiB):

- ``raw``: one contiguous uint8 tensor of the cache's bytes (the very buffer ``whole`` sends), ``send`` then a
  one-byte acknowledgement;
- ``whole``: :func:`splitlab.transfer.link.send_cache` of the cache a prefill worker makes
  (:func:`splitlab.transfer.link.prefill_flat`: the forward of ``splitlab.prefill`` writing K/V straight into one send
  buffer), timed until the receiver acknowledges: header (model identity, shapes) then the payload as one
  message into the receiver's buffer, header checked, views built. The receiver posts its buffers from the
  plan announced on the control plane, as a disaggregated server does;
- ``whole-tensors``: the cache of ``splitlab.prefill`` (one tensor per layer and K/V), sent in place as
  2 x layers messages into the receiver's one flat buffer (no copy, more messages);
- ``whole-packed``: that cache packed into one buffer at send time (one message, one extra copy of every byte);
- ``whole-unplanned``: ``whole`` without the plan (the receiver reads the header, then posts its receives).

The receiving process reuses one preallocated buffer for every method (as a server receives into its KV pool),
so no method pays page faults on fresh memory. Methods alternate inside every repeat, after two warm-up rounds, so load on the machine hits all alike; the
median is reported, and ``ratio = whole GB/s / raw GB/s``, and the median of the per-repeat ratios (steadier
when the machine's load drifts). The goal (DESIGN: >= 80% of raw for caches >= 8 MiB) is checked on ``ratio``;
the exit status is 1 if a cache misses it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

import splitlab as sl
from splitlab.transfer import link as L, wire as W
from splitlab.transfer.peer import Peer

METHODS = ("raw", "whole", "whole-tensors", "whole-packed", "whole-unplanned")


def run(peer: Peer, flat_cache, cache, method: str) -> float:
    if method == "raw":  # the very memory "whole" sends, as one tensor with no header
        return peer.raw(W._flat_backed([t for kv in zip(flat_cache.keys, flat_cache.values) for t in kv]))
    if method == "whole-tensors":
        return peer.transfer(cache)["seconds"]
    if method == "whole-packed":
        return peer.transfer(cache, segments="flat")["seconds"]
    if method == "whole-unplanned":  # the receiver learns sizes from the header, then posts its receives
        return peer.transfer(flat_cache, planned=False)["seconds"]
    return peer.transfer(flat_cache)["seconds"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny-mha")
    p.add_argument("--prompt-tokens", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--batch", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeats", type=int, default=21)
    p.add_argument("--goal", type=float, default=0.8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", action="store_true")
    p.add_argument("--quick", action="store_true", help="tiny sizes, seconds (CI)")
    args = p.parse_args(argv)
    if args.quick:
        args.prompt_tokens, args.batch, args.repeats = [64], [1], 2
    torch.set_num_threads(args.threads)
    lm = sl.load_model(args.model, device="cpu", threads=args.threads)
    results = []
    with Peer(timeout_s=120, threads=args.threads) as peer:
        for batch in args.batch:
            for n in args.prompt_tokens:
                prompts = [[(7 * i + b) % 256 for i in range(n)] for b in range(batch)]
                cache = sl.prefill(lm, prompts).cache
                flat_cache = L.prefill_flat(lm, prompts).cache
                assert W.cache_plan(flat_cache)["segments"] == 1 and flat_cache.nbytes == cache.nbytes
                t = {m: [] for m in METHODS}
                for rep in range(args.repeats + 2):
                    order = METHODS if rep % 2 == 0 else METHODS[::-1]
                    sample = {m: run(peer, flat_cache, cache, m) for m in order}
                    if rep >= 2:
                        for m, s in sample.items():
                            t[m].append(s)
                gbps = {m: cache.nbytes / statistics.median(v) / 1e9 for m, v in t.items()}
                row = dict(model=lm.name, prompt_tokens=n, batch=batch, nbytes=cache.nbytes,
                           mib=cache.nbytes / 2**20, repeats=args.repeats, gbps=gbps,
                           best_gbps={m: cache.nbytes / min(v) / 1e9 for m, v in t.items()},
                           ratio=gbps["whole"] / gbps["raw"],
                           ratio_paired_median=statistics.median(r / w for r, w in zip(t["raw"], t["whole"])))
                row["meets_goal"] = row["ratio"] >= args.goal if cache.nbytes >= 8 * 2**20 else None
                results.append(row)
                if not args.json:
                    print(f"{lm.name} batch {batch} x {n} tokens = {row['mib']:.1f} MiB: "
                          + ", ".join(f"{m} {g:.2f} GB/s" for m, g in gbps.items())
                          + f"; whole/raw {row['ratio']:.2f} (paired {row['ratio_paired_median']:.2f})"
                          + ("" if row["meets_goal"] is None else
                             f" -> {'meets' if row['meets_goal'] else 'MISSES'} the {args.goal:.0%} goal"))
    if args.json:
        print(json.dumps(dict(results=results, goal=args.goal, threads=args.threads, backend="gloo",
                              torch=torch.__version__)))
    return 0 if all(r["meets_goal"] is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
