"""Every matplotlib figure the chapters draw, on small fixed data (simulated serving runs, datasheet numbers,
tables shaped like the chapters' own), without a model: ``CASES`` maps "chNN name" to a function returning the
figure as the chapter's cell draws it (titles as long as the chapter's). tests/test_phone_figures.py checks them
against the book's phone rule."""
from __future__ import annotations

import functools
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from splitlab import serving, sizing  # noqa: E402
from splitlab.costmodel import CostModel  # noqa: E402
from splitlab.serving import interference  # noqa: E402
from splitlab.teach import widgets  # noqa: E402
from splitlab.teach.figures import (confusions, interference as ch04, kv_cache as ch02, phases as ch01,  # noqa: E402
                                    roofline as ch03, transfer as ch05)

COST = CostModel(prefill_base_s=2e-3, prefill_per_token_s=2e-4, decode_base_s=8e-3, decode_per_seq_s=2e-4,
                 kv_bytes_per_token=8192)
LINK = {"this machine (gloo, measured)": 2.1e9}


@functools.lru_cache(maxsize=None)
def runs():
    """Simulated runs shaped like chapter 4's and 8's: streams with a long arrival, a budgeted burst, a sweep."""
    ex = serving.CostModelExecutor(COST)
    stall = serving.run(interference.streams_and_long_prompts([1024], [0.18], 4, 16, 120),
                        serving.ServingConfig(policy="prefill-first", kv_budget_bytes=None), ex)
    policies = {p: serving.run(interference.streams_and_long_prompts([1024], [0.18], 4, 16, 120),
                               serving.ServingConfig(policy=p, kv_budget_bytes=None, chunk_tokens=128), ex)
                for p in ("prefill-first", "decode-first", "chunked")}
    burst = [serving.Request(i, 0.0, [1] * 256, 16) for i in range(8)]
    budget = serving.run(burst, serving.ServingConfig(kv_budget_bytes=3 * 272 * 8192), ex)
    free = serving.run(burst, serving.ServingConfig(kv_budget_bytes=None), ex)
    reqs = serving.make_workload("chat", 12, 20.0, seed=0)
    three = serving.compare(reqs, {"prefill-first": serving.ServingConfig.colocated(2, kv_budget_bytes=None),
                                   "chunked": serving.ServingConfig.colocated(2, policy="chunked",
                                                                              kv_budget_bytes=None),
                                   "split 1P+1D": serving.ServingConfig.disaggregated(1, 1, kv_budget_bytes=None)}, ex)
    load = [serving.run(serving.make_workload("chat", 12, 4.0, seed=s), serving.ServingConfig(kv_budget_bytes=None), ex)
            for s in (0, 1)]
    return SimpleNamespace(stall=stall, policies=policies, budget=budget, free=free, three=three.results, load=load)


def _ttft_table(x, values):
    return pd.DataFrame({x: values, "ttft_mean_s": np.linspace(0.05, 0.3, len(values)),
                         "ttft_p90_s": np.linspace(0.07, 0.45, len(values))})


def _dc():
    b = np.array([1, 2, 4, 8, 16])
    return pd.DataFrame(dict(batch=b, step_s=0.058 + 0.006 * b, matmul_s=0.05 + 0.005 * b, floor_s=np.full(5, 0.03),
                             compute_s=0.004 * b, intensity=b * 0.5, flops=b * 2.7e8))


def _ch03_throughput():
    batches, curves, ceiling = ch03.predicted_decode_curves("Llama-3-8B", "H100")
    return ch03.decode_throughput(batches, curves, ceiling_tokens_per_s=ceiling,
                                  title="Llama-3-8B decode on an H100 (roofline, bf16)")


def _ch01_timeline():
    t = 0.03 + 0.002 * np.arange(64)
    gen = SimpleNamespace(token_time_s=list(t), prefill_s=0.029, prompt_lengths=[512])
    return ch01.token_timeline(gen, title="One request on tiny")


def _ch01_recompute():
    c = np.arange(16, 512, 16)
    return ch01.cached_vs_recompute(pd.DataFrame(dict(context=c, recompute_s=1e-5 * c, cached_s=np.full(c.size, 2e-3))),
                                    pd.DataFrame(dict(prompt_tokens=c, prefill_s=1e-5 * c)))


def _ch02_variants():
    return pd.DataFrame({"attention": ["MHA", "GQA", "MQA"], "KV heads": [8, 2, 1],
                         "cache (KiB)": [2296.0, 574.0, 287.0], "formula (KiB)": [2296.0, 574.0, 287.0]})


def _ch05_bytes():
    fig, (a1, a2) = confusions.figure(2, 3.4)
    ch05.kv_bytes_vs_prompt(["Llama-2-7B", "Llama-3-8B", "Llama-3-70B", "StarCoder-15B"], "fp16", 32768, ax=a1,
                            unit=2 ** 30, title="Published models (fp16)")
    lengths = [128, 512, 1024]
    measured = {n: (lengths, [t * sizing.kv_bytes_per_token(sizing.resolve_config(n), "float32") for t in lengths])
                for n in ("tiny-mha", "tiny", "tiny-mqa")}
    ch05.kv_bytes_vs_prompt({n: "float32" for n in measured}, max_tokens=1024, measured=measured, ax=a2, unit=2 ** 20,
                            title="Real caches here: measured bytes on the formula")
    return fig


def _ch05_vs_bytes():
    n = np.array([0.5, 2, 4, 8]) * 2 ** 20
    return ch05.transfer_vs_bytes({"raw buffer (the fit)": (n, 4e-4 + n / 2.1e9), "whole cache": (n, 6e-4 + n / 2e9),
                                   "layer-wise cache": (n, 1e-3 + n / 1.9e9)}, 4e-4, 2.1e9,
                                  title="Moving KV caches between two processes (gloo)")


def _ch05_bandwidth():
    return ch05.bandwidth_dots({"copy, 1 process": 9e9, "whole, 2 processes": 2e9, "layer-wise, 2 proc.": 1.7e9,
                                "raw buffer (fit)": 2.1e9}, title="Measured here (1,024-token caches) vs published")


def _ch05_stream():
    stats = SimpleNamespace(compute_s=0.02, layer_s=[0.006, 0.011, 0.016, 0.021])
    return ch05.streaming_timeline(dict(stats=stats, total_s=0.024, exposed_s=0.003), 4,
                                   title="Streaming a 1,024-token prefill, layer by layer")


def _ch08_sweep():
    rows = [dict(config=c, rate_per_s=r, slo_attainment=max(0.0, 1 - r / (k * 20)))
            for k, c in ((1.2, "prefill-first"), (0.6, "chunked"), (0.9, "split 1P+1D")) for r in range(3, 27, 3)]
    return confusions.chunked_vs_split(runs().three, pd.DataFrame(rows), 0.296, 0.03,
                                       goodputs={"prefill-first": 11.0, "chunked": 5.5, "split 1P+1D": 8.5})


def _ch08_schemes():
    res = runs().three["split 1P+1D"]
    schemes = serving.paged.memory_schemes(res, 16, 8192, max_context=2048)
    return confusions.kv_schemes(schemes[schemes.worker == "D0"], "D0", title="Decode worker D0, 16-token blocks")


def _ch08_speculative():
    rows = [dict(draft=d, k=k, tokens_per_step=1 + a * k, predicted_tokens_per_step=1 + a * k * 0.95,
                 tpot_ms=2 + k * (0.5 if d == "tiny" else 0.3)) for d, a in (("tiny", 0.3), ("tiny-mqa", 0.2))
            for k in (1, 2, 4, 6)]
    return confusions.speculative_sweep(pd.DataFrame(rows), 2.5e-3)


def _ch08_prefix():
    x = np.array([128, 256, 512, 1024])
    timings = pd.DataFrame(dict(prefix_tokens=x, cold_s=1e-5 * (x + 64), warm_s=np.full(4, 1e-3),
                                suffix_alone_s=np.full(4, 0.9e-3)))
    routing = pd.DataFrame(dict(computed_tokens=[30000, 28000, 9000, 41000]),
                           index=["round-robin", "least-loaded", "prefix-aware", "cache on the decode side"])
    return confusions.prefix_reuse(timings, routing)


def _widget(make):
    """The static figure an explorer leaves (the figure current after it drew)."""
    make()
    return plt.gcf()


CASES = {
    "ch01 token_timeline": _ch01_timeline,
    "ch01 cached_vs_recompute": _ch01_recompute,
    "ch02 kv_growth": lambda: ch02.kv_growth(pd.DataFrame(dict(tokens_in_cache=np.arange(256, 288),
                                                               nbytes=np.arange(256, 288) * 8192.0,
                                                               predicted_nbytes=np.arange(256, 288) * 8192.0))),
    "ch02 cache_by_attention": lambda: ch02.cache_by_attention(_ch02_variants(), tokens=287),
    "ch02 kv_size_explorer": lambda: _widget(lambda: widgets.kv_size_explorer(
        ["Llama-2-7B", "Llama-3-8B", "Mistral-7B", "Qwen2.5-7B", "StarCoder-15B", "Llama-3-70B"], 4096, 8)),
    "ch03 decode_vs_batch": lambda: ch03.decode_vs_batch(_dc(), title="Decode on smollm2-135m, 64 cached tokens each"),
    "ch03 latency_throughput": lambda: ch03.latency_throughput(_dc(), title="smollm2-135m on this CPU core"),
    "ch03 roofline": lambda: ch03.roofline(5e10, 2.4e10, efficiency=0.6, title="smollm2-135m on this CPU core",
                                           points={"decode, batch 1..16": (_dc().intensity, _dc().flops / _dc().step_s),
                                                   "prefill, 16..256 tokens": ([8, 30, 90], [2e10, 2.6e10, 2.8e10])}),
    "ch03 decode_throughput": lambda: _ch03_throughput(),
    "ch03 decode_roofline_explorer": lambda: _widget(lambda: widgets.decode_roofline_explorer("Llama-3-8B", "H100")),
    "ch04 stall_run": lambda: ch04.stall_run(runs().stall, 4, 0.1, "4 streams; a 1024-token prompt arrives"),
    "ch04 itl_spikes": lambda: ch04.itl_spikes(
        interference.spike_table(runs().stall, long_ids=[4]),
        {"predicted: prefill alone + one decode step": ([128, 1024], [0.03, 0.21])},
        title="A long prompt stalls every stream (tiny)"),
    "ch04 ttft_sweeps": lambda: ch04.ttft_sweeps(_ttft_table("prompt_tokens", [64, 128, 256, 512]),
                                                 _ttft_table("rate_per_s", [1.0, 2.0, 3.0, 4.0]),
                                                 {64: 0.015, 128: 0.03, 256: 0.06, 512: 0.12}, 2.0, 256, 8e-3),
    "ch04 memory_waves": lambda: ch04.memory_waves(runs().budget, runs().free, np.repeat([0.06, 0.12, 0.18], 3)[:8],
                                                   3, 816),
    "ch04 stall_explorer (policies)": lambda: ch04.policies(
        {f"{p}: max gap 183 ms, TTFT 250 ms": r for p, r in runs().policies.items()}, 4,
        "A 1024-token arrival, chunks of 128"),
    "ch04 ttft_load_explorer": lambda: ch04.ttft_load(runs().load, 0.03, 0.05,
                                                      "512 tokens at 2.5/s (\u03c1 = 0.81): mean TTFT 89 ms"),
    "ch05 kv_bytes_vs_prompt": _ch05_bytes,
    "ch05 transfer_vs_bytes": _ch05_vs_bytes,
    "ch05 bandwidth_dots": _ch05_bandwidth,
    "ch05 streaming_timeline": _ch05_stream,
    "ch05 kv_transfer_explorer": lambda: _widget(lambda: widgets.kv_transfer_explorer(
        "Llama-3-8B", 2048, "PCIe 4.0 x16", "H100", measured=LINK)),
    "ch08 chunked_vs_split": _ch08_sweep,
    "ch08 kv_schemes": _ch08_schemes,
    "ch08 speculative_sweep": _ch08_speculative,
    "ch08 prefix_reuse": _ch08_prefix,
}


def as_figure(drawn):
    """The Figure of what a figure function returned (a Figure or an Axes)."""
    return drawn if isinstance(drawn, plt.Figure) else drawn.figure


def is_number(text: str) -> bool:
    """A tick label that is a number ("1,024", "−12", "50%"): the axis is a scale, not a list of names."""
    try:
        float(text.replace(",", "").replace("\u2212", "-").rstrip("%"))
    except ValueError:
        return False
    return True
