"""How close does a decode step come to this machine's memory bandwidth?

    python benchmarks/decode_bandwidth.py [--model smollm2-135m] [--context 128] [--batch 1] [--steps 8]
                                          [--rounds 7] [--threads 1] [--concat] [--json] [--quick]

``--quick``: the tiny model, 16-token context, 2 steps, 1 round (a smoke test for CI: the tokens are checked, the
bandwidth goal is not).

A decode step reads every weight (``profiling.weight_bytes_read``) and every cached key and value
(batch x context x KV bytes per token). Its achieved bandwidth is those bytes over the step time; the goal
(issue 9, section 4) is at least half of the copy bandwidth measured in the same run
(``profiling.measure_memory_bandwidth``, read + write bytes counted) at batch 1 on the smollm2-135m preset, with
the same tokens as transformers' ``generate``.

Rounds alternate a copy measurement and a short decode run (a fresh prefill, then ``--steps`` timed steps) so
that another program's load slows both alike. The figure of merit follows chapter 3's convention (on a shared
machine other programs only add time): the fastest step's bandwidth over the fastest copy's, both from this run.
The paired median over rounds of (median step bandwidth / median copy bandwidth) is printed beside it. ``--concat`` also runs each round with transformers'
own append by concatenation (``DynamicLayer.update``) in place of splitlab's in-place ``AppendLayer``, to show
what the preallocated cache buys.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
from unittest import mock

import torch
from transformers.cache_utils import DynamicLayer

import splitlab as sl
from splitlab.kvcache.append import AppendLayer
from splitlab.phases import profiling

GOAL = 0.5  # step bandwidth / copy bandwidth


def decode_run(lm, prompts, steps: int) -> tuple[list[float], list[list[int]]]:
    """Step times (s) of ``steps`` decode steps after one prefill, and the tokens chosen (greedy)."""
    pre = sl.prefill(lm, prompts, max_new_tokens=steps + 1)
    cache, tokens = pre.cache, pre.logits.argmax(-1)
    chosen, times = [tokens.tolist()], []
    for _ in range(steps):
        out = sl.decode_step(lm, cache, tokens)
        cache, tokens = out.cache, out.logits.argmax(-1)
        times.append(out.seconds)
        chosen.append(tokens.tolist())
    return times[1:], chosen  # the first step allocates the cache's room: not a steady step


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--context", type=int, default=128, help="prompt tokens per sequence")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--concat", action="store_true", help="also time transformers' append by concatenation")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quick", action="store_true", help="tiny sizes, seconds (CI)")
    args = p.parse_args(argv)
    if args.quick:
        args.model, args.context, args.steps, args.rounds = "tiny", 16, 2, 1
    torch.set_num_threads(args.threads)

    lm = sl.load_model(args.model, threads=args.threads)
    prompts = [profiling.text_prompt(lm, args.context, seed=b) for b in range(args.batch)]
    reference = sl.reference_generate(lm, prompts[0], args.steps + 1)
    weights = profiling.weight_bytes_read(lm)
    kv_per_token = sl.sizing.kv_bytes_per_token(lm.config, lm.dtype)
    llc, llc_source = profiling.last_level_cache(lm.device)
    modes = {"in place": contextlib.nullcontext}
    if args.concat:
        modes["concat"] = lambda: mock.patch.object(AppendLayer, "update", DynamicLayer.update)
    copy_bw, step_s, fastest = [], {m: [] for m in modes}, {m: float("inf") for m in modes}
    ratio = {m: [] for m in modes}
    best_copy = 0.0
    same = True
    decode_run(lm, prompts, 2)  # warm-up
    for _ in range(args.rounds):
        bw = profiling.measure_memory_bandwidth(lm.device, repeats=3, statistic="median")
        best_copy = max(best_copy, profiling.measure_memory_bandwidth(lm.device, repeats=3, statistic="min"))
        copy_bw.append(bw)
        for mode, patch in modes.items():
            with patch():
                times, chosen = decode_run(lm, prompts, args.steps)
            same &= [row[0] for row in chosen] == reference
            s = statistics.median(times)
            step_s[mode].append(s)
            fastest[mode] = min(fastest[mode], min(times))
            # bytes read per step: weights + the KV cache held during the median step (context + steps/2 tokens)
            kv = args.batch * (args.context + args.steps // 2) * kv_per_token
            ratio[mode].append((weights + kv) / s / bw)
    kv = args.batch * (args.context + args.steps // 2) * kv_per_token
    result = dict(model=args.model, description=repr(lm), batch=args.batch, context=args.context,
                  steps=args.steps, rounds=args.rounds, threads=torch.get_num_threads(),
                  device=sl.describe_device(lm.device), llc_bytes=llc, llc_source=llc_source,
                  weight_bytes_read=weights, kv_bytes_read=kv, copy_bandwidth_bytes_per_s=best_copy,
                  copy_bandwidth_median_bytes_per_s=statistics.median(copy_bw),
                  same_tokens_as_transformers_generate=same, goal=GOAL)
    for mode in modes:
        s = statistics.median(step_s[mode])
        best = fastest[mode]
        result[mode] = dict(step_s=best, step_median_s=s, step_bandwidth_bytes_per_s=(weights + kv) / best,
                            share_of_copy_bandwidth=(weights + kv) / best / best_copy,
                            share_paired_median=statistics.median(ratio[mode]))
    passed = same and result["in place"]["share_of_copy_bandwidth"] >= GOAL
    if args.json:
        print(json.dumps(result))
    else:
        print(f"model      {result['description']}")
        print(f"machine    {result['device']}, {result['threads']} thread(s); last-level cache "
              f"{llc / 2 ** 20:.0f} MiB ({llc_source})")
        print(f"bytes/step {weights / 1e6:,.1f} MB weights + {kv / 1e6:,.2f} MB KV cache "
              f"(batch {args.batch}, ~{args.context + args.steps // 2} tokens each)")
        print(f"copy       {best_copy / 1e9:.2f} GB/s fastest, {result['copy_bandwidth_median_bytes_per_s'] / 1e9:.2f} "
              f"GB/s median of {args.rounds} rounds (read + write counted)")
        for mode in modes:
            r = result[mode]
            print(f"{mode:10s} {r['step_s'] * 1e3:7.2f} ms/step fastest ({r['step_median_s'] * 1e3:.2f} median) -> "
                  f"{r['step_bandwidth_bytes_per_s'] / 1e9:.2f} GB/s = {r['share_of_copy_bandwidth']:.0%} of the "
                  f"fastest copy ({r['share_paired_median']:.0%} paired median)")
        print(f"tokens     {'same as' if same else 'DIFFERENT from'} transformers' generate")
        print(f"goal       >= {GOAL:.0%} of copy bandwidth: {'met' if passed else 'NOT met'}")
    return 0 if passed or (args.quick and same) else 1


if __name__ == "__main__":
    sys.exit(main())
