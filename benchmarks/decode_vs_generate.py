"""splitlab's own decode loop vs transformers' ``model.generate``: same model, prompt, token count, greedy.

    python benchmarks/decode_vs_generate.py [--model tiny] [--prompt-tokens 128] [--new-tokens 128]
                                            [--repeats 7] [--device cpu] [--threads N] [--json] [--quick]

``--quick``: a 16-token prompt, 8 new tokens, one repeat, no warm-up (a smoke test for CI).

Both are timed as whole calls (tokens/s = new tokens / wall time of the call, prefill included); splitlab's
decode-only rate counts the tokens after the first over the time from the first token to the last. Runs
alternate between the two (after warm-up) so that a busy machine slows both alike; the median is reported.
The tokens of both must be identical, or the comparison is void.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import torch
import transformers

import splitlab as sl
from splitlab.phases.profiling import text_prompt
from splitlab.phases.device import synchronize


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(fn, device) -> tuple[float, object]:
    synchronize(device)
    t0 = time.perf_counter()
    result = fn()
    synchronize(device)
    return time.perf_counter() - t0, result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: load_model's choice)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quick", action="store_true", help="tiny sizes, seconds (CI)")
    args = p.parse_args(argv)
    if args.quick:
        args.prompt_tokens, args.new_tokens, args.repeats, args.warmup = 16, 8, 1, 0
    if args.threads:
        torch.set_num_threads(args.threads)

    lm = sl.load_model(args.model, device=args.device, dtype=args.dtype, threads=args.threads)
    ids = text_prompt(lm, args.prompt_tokens)
    n = args.new_tokens
    run_splitlab = lambda: sl.generate(lm, [ids], max_new_tokens=n)  # noqa: E731
    run_transformers = lambda: sl.reference_generate(lm, ids, n)  # noqa: E731  (model.generate, greedy)

    for _ in range(args.warmup):
        run_splitlab(), run_transformers()
    walls_sl, walls_hf, decode_rates, forward_rates = [], [], [], []
    tokens_sl = tokens_hf = None
    for r in range(args.repeats):
        order = [("sl", run_splitlab), ("hf", run_transformers)]
        for name, fn in order if r % 2 == 0 else order[::-1]:
            wall, out = timed(fn, lm.device)
            if name == "sl":
                walls_sl.append(wall)
                tokens_sl = out.tokens[0]
                decode_wall = out.token_time_s[-1] - out.token_time_s[0]
                decode_rates.append((len(out.tokens[0]) - 1) / decode_wall)
                forward_rates.append(len(out.decode_step_s) / sum(out.decode_step_s))
            else:
                walls_hf.append(wall)
                tokens_hf = out
    sl_tps = n / statistics.median(walls_sl)
    hf_tps = n / statistics.median(walls_hf)
    result = dict(
        model=args.model, model_description=repr(lm), prompt_tokens=len(ids), new_tokens=n, repeats=args.repeats,
        splitlab_tokens_per_s=sl_tps, transformers_tokens_per_s=hf_tps, ratio=sl_tps / hf_tps,
        ratio_paired_median=statistics.median(h / s for s, h in zip(walls_sl, walls_hf)),
        splitlab_decode_tokens_per_s=statistics.median(decode_rates),
        splitlab_decode_forward_only_tokens_per_s=statistics.median(forward_rates),
        splitlab_wall_s=walls_sl, transformers_wall_s=walls_hf, same_tokens=tokens_sl == tokens_hf,
        torch=torch.__version__, transformers=transformers.__version__, python=platform.python_version(),
        device=str(lm.device), device_description=sl.describe_device(lm.device), threads=torch.get_num_threads(),
        cpu=cpu_name())
    if args.json:
        print(json.dumps(result))
    else:
        print(f"model        {result['model_description']}")
        print(f"machine      {result['device_description']} on {result['cpu']}; torch {torch.__version__}, "
              f"transformers {transformers.__version__}, python {result['python']}, {result['threads']} threads")
        print(f"workload     {len(ids)}-token prompt, {n} new tokens, greedy; median of {args.repeats} "
              f"alternating runs after {args.warmup} warm-up")
        print(f"splitlab     {sl_tps:8.1f} tokens/s whole call   ({result['splitlab_decode_tokens_per_s']:.1f} "
              f"tokens/s decode phase, {result['splitlab_decode_forward_only_tokens_per_s']:.1f} forward passes only)")
        print(f"transformers {hf_tps:8.1f} tokens/s whole call   (model.generate)")
        print(f"ratio        {result['ratio']:.3f}  (splitlab / transformers; > 1 means splitlab is faster)")
        print(f"per pair     {result['ratio_paired_median']:.3f}  (median over the {args.repeats} back-to-back pairs; "
              f"steadier when the machine's load changes)")
        print(f"same tokens  {result['same_tokens']}")
    return 0 if result["same_tokens"] else 1


if __name__ == "__main__":
    sys.exit(main())
