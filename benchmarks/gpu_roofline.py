"""Measured against predicted on a GPU: calibrate a random-weight Llama-3-8B (bf16) on the device, print each
measured forward beside the roofline cost model's prediction for that GPU, and a fused hybrid step beside its
two passes.

    PYTHONPATH=. python benchmarks/gpu_roofline.py [--gpu H200] [--repeats 5] [--quick] [--allow-cpu]

The weights are random (timing does not depend on them; nothing here is downloaded): Llama-3-8B's published shape
(:data:`splitlab.sizing.PUBLISHED_MODELS`) with its 128,256-token vocabulary. :func:`splitlab.profiling.calibrate`
measures prefill, chunked prefill after a cached prefix, fused hybrid forwards (:mod:`splitlab.phases.fused`),
decode steps and cache copies; each prefill, hybrid and decode point is then printed beside
:func:`splitlab.costmodel.roofline_cost_model` for ``--gpu`` (the datasheet's peak x 0.6 and bandwidth x 0.8), with
the efficiency it implies (prefill: FLOP/s over the datasheet's peak; decode: bytes/s over its bandwidth).

Without CUDA it says so and exits 0 (skipped), unless ``--allow-cpu`` runs it on the CPU, where ``--quick`` (CI)
takes the ``tiny`` preset and small grids and the ratios mean nothing. The JSON (rows, fused-vs-two-pass pairs and
the calibration) goes to ``$OUT/gpu_roofline.json`` (``$OUT`` defaults to /tmp).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import tempfile
import time

LLAMA3_8B = dict(vocab_size=128256, rope_theta=500000.0, tie_word_embeddings=False)  # beside the published shape


def _model(quick: bool, dev: str):
    """A splitlab LoadedModel: the ``tiny`` preset (quick) or a random-weight Llama-3-8B in bf16."""
    import torch
    import transformers

    import splitlab as sl
    if quick:
        return sl.load_model("tiny", device=dev)
    shape = {k: v for k, v in sl.sizing.resolve_config("Llama-3-8B").items() if k not in ("n_params", "source")}
    config = transformers.LlamaConfig(**shape, **LLAMA3_8B)
    with torch.device(dev):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    return sl.load_model(model.eval(), sl.phases.tokenizer.ByteTokenizer())


def _roofline(lm, gpu: str):
    """The roofline cost model of ``lm``'s own config (its parameter count counted) on ``gpu``."""
    from splitlab.costmodel import roofline_cost_model
    cfg = dict(lm.config.to_dict(), n_params=sum(p.numel() for p in lm.model.parameters()))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f, default=str)
    dtype = {"torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(str(lm.dtype), "fp32")
    try:
        roof = roofline_cost_model(f.name, gpu=gpu, dtype=dtype)
    finally:
        os.unlink(f.name)
    return dataclasses.replace(roof, source=roof.source.replace(f.name, f"{lm.name} ({lm.n_params / 1e9:.2f}B)"))


def compare(cal, roof) -> tuple[list[dict], list[dict]]:
    """Each prefill, hybrid and decode point of ``cal`` beside ``roof``'s prediction (seconds), and each fused
    hybrid point beside the measured chunk (after the same prefix) plus the measured decode step of the same rows.

    Returns:
        (rows, pairs): rows with ``kind``, the point's sizes, ``measured_s``, ``predicted_s``, ``ratio``
        (measured / predicted) and ``efficiency`` (prefill and hybrid: FLOP/s over the peak, decode: bytes/s over
        the bandwidth, both the datasheet's); pairs with ``fused_s``, ``two_pass_s``, ``saving`` (1 - fused /
        two-pass) and the roofline's own ``predicted_saving``.
    """
    from splitlab.costmodel.analytic import COMPUTE_EFFICIENCY, MEMORY_EFFICIENCY
    peak, bw = roof.peak_flops_per_s / COMPUTE_EFFICIENCY, roof.bandwidth_bytes_per_s / MEMORY_EFFICIENCY
    rows, chunks, steps = [], {}, {}
    for r in cal.fits["prefill"].rows:
        t = r["prefill_s"]
        if r.get("hybrid_rows"):
            n, p, b, c = r["prompt_tokens"], r["cached"], r["hybrid_rows"], r["hybrid_context_tokens"]
            sq = (p + n) ** 2 - p * p
            pred = roof.hybrid_s(n, sq, n * (p + n), b, c)
            flops = roof.flops_per_token * (n + b) + roof.attn_flops_per_square * (sq + 2 * c)
            rows.append(dict(kind="hybrid", chunk_tokens=n, cached=p, decode_batch=b, decode_context_tokens=c,
                             measured_s=t, predicted_s=pred, efficiency=flops / t / peak))
        else:
            tokens, sq = r["tokens"], r["squares"]
            pred = roof.prefill_s(tokens, sq)
            flops = roof.flops_per_token * tokens + roof.attn_flops_per_square * sq
            kind = "chunk" if r.get("cached") else "prefill"
            rows.append(dict(kind=kind, batch=r["batch"], prompt_tokens=r["prompt_tokens"], cached=r.get("cached", 0),
                             measured_s=t, predicted_s=pred, efficiency=flops / t / peak))
            if kind == "chunk":
                chunks[(r["cached"], r["prompt_tokens"])] = t
    for r in cal.fits["decode"].rows:
        b, c, t = r["batch"], r["context_tokens"], r["step_s"]
        nbytes = roof.weight_bytes + roof.kv_bytes_per_token * c
        rows.append(dict(kind="decode", batch=b, context=r["context"], context_tokens=c, measured_s=t,
                         predicted_s=roof.decode_s(b, c), efficiency=nbytes / t / bw))
        steps[(b, c)] = t
    for row in rows:
        row["ratio"] = row["measured_s"] / row["predicted_s"]
    pairs = []
    for h in (r for r in rows if r["kind"] == "hybrid"):
        chunk = chunks.get((h["cached"], h["chunk_tokens"]))
        b, c = h["decode_batch"], h["decode_context_tokens"]
        step = min(steps.items(), key=lambda kv: (kv[0][0] != b, abs(kv[0][1] - c)), default=(None, None))[1]
        if chunk is None or step is None:
            continue
        n, p = h["chunk_tokens"], h["cached"]
        two = roof.prefill_s(n, (p + n) ** 2 - p * p) + roof.decode_s(b, c)
        pairs.append(dict(chunk_tokens=n, cached=p, decode_batch=b, decode_context_tokens=c, fused_s=h["measured_s"],
                          two_pass_s=chunk + step, saving=1 - h["measured_s"] / (chunk + step),
                          predicted_saving=1 - h["predicted_s"] / two))
    return rows, pairs


def kernel_split(lm, roof, batches=(1, 8, 32), context: int = 1024, prompt_tokens: int = 2048) -> list[dict]:
    """Where a step's wall time goes: one decode step of each batch in ``batches`` (``context`` cached tokens per
    row) and one ``prompt_tokens`` prefill, each timed by splitlab (``seconds``: CUDA events on a GPU) and under
    ``torch.profiler``, whose GPU kernel time (``kernel_s``, summed over kernels) is what the roofline models; the
    rest is the host launching kernels one by one (eager PyTorch, no CUDA graphs)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    from splitlab.phases.engine import decode_step, prefill
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if lm.device.type == "cuda" else [])

    def kernels(fn):
        fn()  # warm: allocator and kernel choice
        with profile(activities=acts) as prof:
            out = fn()
        ev = [e for e in prof.key_averages() if e.device_type == DeviceType.CUDA]  # kernels (ops would count twice)
        return out, sum(e.self_device_time_total for e in ev) / 1e6, sum(e.count for e in ev)

    ids = [7] * prompt_tokens
    out, k, n = kernels(lambda: prefill(lm, [ids]))
    rows = [dict(kind="prefill", batch=1, tokens=prompt_tokens, seconds=out.seconds, kernel_s=k, kernels=n,
                 predicted_s=roof.prefill_s(prompt_tokens))]
    for b in batches:
        cache = prefill(lm, [[7] * context] * b).cache
        tokens = torch.zeros(b, dtype=torch.long)
        out, k, n = kernels(lambda: decode_step(lm, cache, tokens))
        rows.append(dict(kind="decode", batch=b, tokens=b * context, seconds=out.seconds, kernel_s=k, kernels=n,
                         predicted_s=roof.decode_s(b, b * context)))
    for r in rows:
        print(f"{r['kind']} batch {r['batch']} ({r['tokens']} tokens): {1e3 * r['seconds']:.2f} ms timed, "
              f"{1e3 * r['kernel_s']:.2f} ms in {r['kernels']} GPU kernels, roofline {1e3 * r['predicted_s']:.2f} ms")
    return rows


def _print(rows: list[dict], pairs: list[dict]) -> None:
    print(f"{'kind':8} {'sizes':34} {'measured ms':>11} {'roofline ms':>11} {'ratio':>6} {'efficiency':>10}")
    for r in rows:
        sizes = ", ".join(f"{k}={r[k]}" for k in r if k not in
                          ("kind", "measured_s", "predicted_s", "ratio", "efficiency", "context_tokens"))
        print(f"{r['kind']:8} {sizes:34} {1e3 * r['measured_s']:11.3f} {1e3 * r['predicted_s']:11.3f} "
              f"{r['ratio']:6.2f} {r['efficiency']:10.2f}")
    for p in pairs:
        print(f"fused chunk {p['chunk_tokens']} after {p['cached']} + {p['decode_batch']} decode rows: "
              f"{1e3 * p['fused_s']:.3f} ms vs two passes {1e3 * p['two_pass_s']:.3f} ms (saves {p['saving']:.0%}; "
              f"roofline predicts {p['predicted_saving']:.0%})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", default="H200", help="the datasheet GPU of the prediction (splitlab.sizing.GPUS)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="the tiny preset and small grids, seconds (CI)")
    p.add_argument("--split-only", action="store_true", help="only the kernel split and transformers' generate")
    p.add_argument("--allow-cpu", action="store_true", help="run on the CPU when there is no CUDA device")
    args = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available() and not args.allow_cpu:
        print("gpu_roofline: skipped, no CUDA device (torch.cuda.is_available() is False; --allow-cpu runs it on "
              "the CPU)")
        return 0
    import splitlab as sl
    from splitlab import profiling
    from splitlab.sizing import GPUS
    if args.gpu not in GPUS:
        p.error(f"unknown --gpu {args.gpu!r}; choose one of {', '.join(GPUS)}")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    lm = _model(args.quick, dev)
    print(lm, flush=True)
    roof = _roofline(lm, args.gpu)
    grid = (dict(prompt_tokens=[16, 32, 64, 128], decode_batches=[1, 2, 4, 8], contexts=[32, 64],
                 chunk_tokens=[8, 16], chunk_prefixes=[32, 64], repeats=1) if args.quick else
            dict(prompt_tokens=[128, 256, 512, 1024, 2048, 4096], decode_batches=[1, 2, 4, 8, 16, 32],
                 contexts=[256, 1024, 2048], chunk_tokens=[256, 512], chunk_prefixes=[1024, 2048],
                 repeats=args.repeats, rounds=2))
    profiling.warm_up(lm, max(grid["prompt_tokens"]))
    cal, rows, pairs = None, [], []
    if not args.split_only:
        cal = profiling.calibrate(lm, progress=False, **grid)
        rows, pairs = compare(cal, roof)
        _print(rows, pairs)
    split = kernel_split(lm, roof, *(((1, 4), 32, 64) if args.quick else ()))
    ids = [7] * 512
    t = time.perf_counter()
    sl.reference_generate(lm, ids, 16)
    hf_s = (time.perf_counter() - t) / 16  # transformers' own generate, per token, for the same model
    print(f"transformers generate: {1e3 * hf_s:.2f} ms per token (512-token prompt, 16 tokens)")
    out = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               device=sl.describe_device(dev), command="PYTHONPATH=. python " + " ".join(sys.argv), gpu=args.gpu,
               roofline=roof.source, torch=torch.__version__, rows=rows, pairs=pairs, kernel_split=split,
               hf_generate_per_token_s=hf_s, calibration=cal and cal.to_json())
    path = os.path.join(os.environ.get("OUT", "/tmp"), "gpu_roofline.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
