"""One-shot GPU diagnostics for splitlab: generate timings (bf16, fp32), transformers generate, a profile of a
decode step, and token identity across serving layouts in bf16 and fp32. Run: PYTHONPATH=. python benchmarks/gpu_check.py"""
import json, os, time
import torch
import splitlab as sl
from splitlab import profiling, serving

dev = "cuda" if torch.cuda.is_available() else "cpu"
out = {"device": sl.describe_device(dev), "torch": torch.__version__}
import transformers; out["transformers"] = transformers.__version__
lm = sl.load_model("tiny", device=dev)
print(lm, flush=True)
ids = profiling.text_prompt(lm, 512)
profiling.warm_up(lm, 512)
runs = []
for i in range(3):
    t = time.perf_counter()
    g = sl.generate(lm, [ids], max_new_tokens=64)
    wall = time.perf_counter() - t
    runs.append(dict(prefill_s=g.prefill_s, decode_median_s=sorted(g.decode_step_s)[31], ttft_s=g.ttft_s,
                     wall_per_token_s=(g.token_time_s[-1] - g.token_time_s[0]) / 63, wall_s=wall))
print("generate bf16", runs, flush=True)
out["generate_bf16"] = runs
t = time.perf_counter(); sl.reference_generate(lm, ids, 64); torch.cuda.synchronize() if dev == "cuda" else None
out["hf_generate_per_token_s"] = (time.perf_counter() - t) / 64
print("hf generate per token", out["hf_generate_per_token_s"], flush=True)
# where does a decode step's time go?
acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev == "cuda" else [])
with torch.profiler.profile(activities=acts) as prof:
    sl.generate(lm, [ids], max_new_tokens=16)
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=30), flush=True)
# fp32 on GPU: decode timing and token identity across layouts
lm32 = sl.load_model("tiny", device=dev, dtype="float32")
g = sl.generate(lm32, [ids], max_new_tokens=64)
out["generate_fp32_decode_median_s"] = sorted(g.decode_step_s)[31]
for name, m in [("bf16", lm), ("fp32", lm32)]:
    cmp = serving.compare(serving.make_workload("chat", 8, 20.0, model=m), serving.contenders(), model=m)
    out[f"compare_tokens_identical_{name}"] = cmp.tokens_identical
    print(name, "tokens_identical", cmp.tokens_identical, flush=True)
print(json.dumps(out, indent=1))
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "gpu_check.json"), "w"), indent=1)
