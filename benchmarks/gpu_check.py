"""One-shot GPU diagnostics for splitlab: generate timings (the tiny preset, fp32 by default, then forced fp32),
transformers generate, a profile of a decode step, and token identity across serving layouts in both.

    PYTHONPATH=. python benchmarks/gpu_check.py [--new-tokens 64] [--quick] [--allow-cpu]

Without CUDA it says so and exits 0 (skipped), unless ``--allow-cpu`` runs it on the CPU. ``--quick``: 8 new
tokens, 2 requests per layout (a smoke test for CI). The JSON goes to stdout and to ``$OUT/gpu_check.json``
(``$OUT`` defaults to /tmp).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--quick", action="store_true", help="tiny sizes, seconds (CI)")
    p.add_argument("--allow-cpu", action="store_true", help="run on the CPU when there is no CUDA device")
    args = p.parse_args(argv)
    n, requests = (8, 2) if args.quick else (args.new_tokens, 8)
    if n < 2:
        p.error(f"--new-tokens must be >= 2, got {n}")

    import torch
    if not torch.cuda.is_available() and not args.allow_cpu:
        print("gpu_check: skipped, no CUDA device (torch.cuda.is_available() is False; --allow-cpu runs it on the "
              "CPU)")
        return 0
    import transformers

    import splitlab as sl
    from splitlab import profiling, serving

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    out = {"device": sl.describe_device(dev), "torch": torch.__version__, "transformers": transformers.__version__}
    lm = sl.load_model("tiny", device=dev)
    print(lm, flush=True)
    ids = profiling.text_prompt(lm, 512)
    profiling.warm_up(lm, 512)
    runs = []
    for _ in range(1 if args.quick else 3):
        t = time.perf_counter()
        g = sl.generate(lm, [ids], max_new_tokens=n)
        wall = time.perf_counter() - t
        runs.append(dict(prefill_s=g.prefill_s, decode_median_s=sorted(g.decode_step_s)[len(g.decode_step_s) // 2],
                         ttft_s=g.ttft_s, wall_per_token_s=(g.token_time_s[-1] - g.token_time_s[0]) / (n - 1),
                         wall_s=wall))
    print("generate", runs, flush=True)
    out["generate_bf16"] = runs
    t = time.perf_counter()
    sl.reference_generate(lm, ids, n)
    sync()
    out["hf_generate_per_token_s"] = (time.perf_counter() - t) / n
    print("hf generate per token", out["hf_generate_per_token_s"], flush=True)
    # where does a decode step's time go?
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev == "cuda" else [])
    with torch.profiler.profile(activities=acts) as prof:
        sl.generate(lm, [ids], max_new_tokens=min(n, 16))
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=30), flush=True)
    # fp32: decode timing and token identity across layouts
    lm32 = sl.load_model("tiny", device=dev, dtype="float32")
    g = sl.generate(lm32, [ids], max_new_tokens=n)
    out["generate_fp32_decode_median_s"] = sorted(g.decode_step_s)[len(g.decode_step_s) // 2]
    for name, m in [("bf16", lm), ("fp32", lm32)]:
        cmp = serving.compare(serving.make_workload("chat", requests, 20.0, model=m), serving.contenders(), model=m)
        out[f"compare_tokens_identical_{name}"] = cmp.tokens_identical
        print(name, "tokens_identical", cmp.tokens_identical, flush=True)
    print(json.dumps(out, indent=1))
    folder = os.environ.get("OUT", "/tmp")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "gpu_check.json"), "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
