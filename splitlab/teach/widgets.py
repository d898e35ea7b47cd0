"""Interactive explorers (core ipywidgets + inline matplotlib, which work on Colab and in Jupyter).

Widgets are dead in the static HTML of the book, so every explorer first draws a static figure at its default
settings, then shows the sliders, which redraw a live copy when a kernel is running.
"""
from __future__ import annotations

from typing import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

from .. import sizing
from ..phases.engine import generate
from ..phases.models import LoadedModel
from ..phases.profiling import random_prompt
from .figures import phases as plots

__all__ = ["explorer", "two_phases_explorer", "kv_size_explorer", "decode_roofline_explorer", "stall_explorer",
           "ttft_load_explorer", "split_explorer", "kv_transfer_explorer"]


def explorer(draw: Callable[..., None], **controls: widgets.ValueWidget) -> widgets.VBox:
    """Draw ``draw(**defaults)`` as a static figure, then display ``controls`` with a live figure below them.

    ``draw`` takes one keyword per control and draws on the current matplotlib figure.
    Returns the widget box (already displayed).
    """
    draw(**{name: w.value for name, w in controls.items()})
    plt.show()

    def redraw(**values):
        draw(**values)
        plt.show()

    out = widgets.interactive_output(redraw, controls)
    box = widgets.VBox([widgets.HBox(list(controls.values())), out])
    display(box)
    return box


def two_phases_explorer(lm: LoadedModel, prompt_tokens: int = 256, new_tokens: int = 32) -> widgets.VBox:
    """Ch. 1: run one real request for the chosen prompt length and output length; plot its token timeline."""
    def draw(prompt_tokens: int, new_tokens: int) -> None:
        gen = generate(lm, [random_prompt(lm, prompt_tokens)], max_new_tokens=new_tokens)
        plots.token_timeline(gen, ax=plt.subplots(figsize=(7, 3.5))[1],
                             title=f"{prompt_tokens}-token prompt, {new_tokens} new tokens ({lm.name})")

    cap = min(2048, lm.max_context) - 128
    return explorer(draw,
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 16, cap, 16, description="prompt"),
                    new_tokens=widgets.IntSlider(new_tokens, 4, 128, 4, description="new tokens"))


def kv_size_explorer(models: list[str], context: int = 4096, batch: int = 8, dtype: str = "fp16") -> widgets.VBox:
    """Ch. 2: KV-cache GiB of several published models for a chosen context, batch and dtype (bar chart)."""
    def draw(context: int, batch: int, dtype: str) -> None:
        ax = plt.subplots(figsize=(7, 3.5))[1]
        gib = [sizing.kv_bytes(sizing.resolve_config(m), context, batch, dtype) / 2 ** 30 for m in models]
        bars = ax.barh(models, gib, color="tab:blue")
        ax.bar_label(bars, fmt="%.1f")
        ax.set_xlabel("KV cache (GiB)")
        ax.set_ylabel("model")
        ax.set_title(f"KV cache for batch {batch} x {context} tokens in {dtype}")

    return explorer(draw,
                    context=widgets.IntSlider(context, 512, 32768, 512, description="context"),
                    batch=widgets.IntSlider(batch, 1, 64, 1, description="batch"),
                    dtype=widgets.Dropdown(options=["fp32", "fp16", "fp8", "int4"], value=dtype, description="dtype"))


def decode_roofline_explorer(model: str = "Llama-3-8B", gpu: str = "H100", context: int = 2048) -> widgets.VBox:
    """Ch. 3: predicted decode step time and tokens/s vs batch for a published model on a datasheet GPU."""
    import numpy as np

    def draw(model: str, gpu: str, context: int) -> None:
        cfg, g = sizing.resolve_config(model), sizing.GPUS[gpu]
        geom, params = sizing.kv_geometry(cfg), cfg["n_params"]
        batches = np.arange(1, 513)
        step = [sizing.roofline_time_s(sizing.decode_flops(params, b, context, geom),
                                       sizing.decode_bytes(params * 2, b, context, sizing.kv_bytes_per_token(cfg)),
                                       g["peak_flops_per_s"], g["bandwidth_bytes_per_s"]) for b in batches]
        weights, kv = params * 2, sizing.kv_bytes_per_token(cfg)
        fit = int((g["memory_bytes"] - weights) // (context * kv))  # sequences whose cache fits beside the weights
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
        a1.plot(batches, np.array(step) * 1e3)
        a1.set_xlabel("decode batch (sequences)")
        a1.set_ylabel("predicted step time (ms)")
        a1.set_title(f"{model} on {gpu}: step time, {context} tokens each", fontsize=10)
        a2.plot(batches, batches / np.array(step))
        a2.set_xlabel("decode batch (sequences)")
        a2.set_ylabel("predicted tokens per second")
        a2.set_title("Throughput rises with batch, then saturates", fontsize=10)
        for ax in (a1, a2):  # grey out batches whose KV cache does not fit in GPU memory
            if fit < batches[-1]:
                ax.axvspan(max(fit, 0) + 0.5, batches[-1], color="grey", alpha=0.2,
                           label=f"does not fit in {g['memory_bytes'] / 1e9:.0f} GB" if ax is a1 else None)
        if fit < batches[-1]:
            a1.legend(loc="upper left", fontsize=8)
        fig.tight_layout()

    return explorer(draw,
                    model=widgets.Dropdown(options=list(sizing.PUBLISHED_MODELS), value=model, description="model"),
                    gpu=widgets.Dropdown(options=list(sizing.GPUS), value=gpu, description="GPU"),
                    context=widgets.IntSlider(context, 128, 32768, 128, description="context"))


def stall_explorer(lm: LoadedModel, prompt_tokens: int = 512, policy: str = "prefill-first", n_streams: int = 4,
                   schedule: tuple[float, int] | None = None) -> widgets.VBox:
    """Ch. 4: ``n_streams`` streams (16-token prompts) decode on one colocated worker; one prompt of
    ``prompt_tokens`` arrives while they run. Runs it for real (emulated worker) under the chosen policy and draws
    the streams' inter-token gaps over time. ``schedule``: ``(arrive_s, stream_tokens)`` from
    :func:`splitlab.serving.interference.stall_schedule` (measured here if not given)."""
    from .. import serving
    from ..serving.interference import stall_schedule, streams_and_long_prompts
    from .figures import serving as serving_plots

    arrive_s, stream_tokens = schedule or stall_schedule(lm, n_streams)

    def draw(prompt_tokens: int, policy: str) -> None:
        reqs = streams_and_long_prompts([prompt_tokens], [arrive_s], n_streams, 16, stream_tokens, model=lm)
        res = serving.run(reqs, serving.ServingConfig(policy=policy, kv_budget_bytes=None, chunk_tokens=128),
                          model=lm)
        table = res.request_table()
        ax = plt.subplots(figsize=(9, 3.5))[1]
        serving_plots.itl_over_time(res, marked=[n_streams], ax=ax, title=(
            f"{policy}: longest stream gap {table.max_itl_s[:n_streams].max() * 1e3:.0f} ms, "
            f"TTFT of the {prompt_tokens}-token prompt {table.ttft_s.iloc[-1] * 1e3:.0f} ms"))

    cap = min(2048, lm.max_context) - 8
    return explorer(draw,
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 64, cap, 64, description="prompt"),
                    policy=widgets.Dropdown(options=["prefill-first", "decode-first", "chunked"], value=policy,
                                            description="policy"))


def ttft_load_explorer(lm: LoadedModel, rate_per_s: float = 2.0, prompt_tokens: int = 512,
                       max_rate_per_s: float = 10.0, n_requests: int = 12, new_tokens: int = 4,
                       prefill_table=None, decode_step_s: float | None = None) -> widgets.VBox:
    """Ch. 4: ``n_requests`` prompts of ``prompt_tokens`` tokens arrive at ``rate_per_s`` (Poisson) on one
    colocated worker; runs them for real and draws each request's TTFT against its arrival time, with the
    prefill floor and the queueing prediction. The prediction's prefill time is interpolated in
    ``prefill_table`` (columns prompt_tokens, prefill_s, measured alone) within its range and measured otherwise;
    ``decode_step_s`` is measured if not given."""
    import numpy as np

    from .. import serving
    from ..phases import profiling
    from ..serving.interference import queueing_ttft_s

    step_s = decode_step_s or profiling.measure_decode(lm, [2], context=prompt_tokens, steps=4).step_s[0]

    def prefill_alone_s(n: int) -> float:
        if prefill_table is not None and prefill_table.prompt_tokens.min() <= n <= prefill_table.prompt_tokens.max():
            return float(np.interp(n, prefill_table.prompt_tokens, prefill_table.prefill_s))
        return float(profiling.measure_prefill(lm, [n], repeats=3).prefill_s[0])

    def draw(rate_per_s: float, prompt_tokens: int) -> None:
        prefill_s = prefill_alone_s(prompt_tokens)
        spec = serving.WorkloadSpec(f"fixed-{prompt_tokens}", serving.Fixed(prompt_tokens), serving.Fixed(new_tokens))
        res = serving.run(serving.make_workload(spec, n_requests, rate_per_s, model=lm),
                          serving.ServingConfig(kv_budget_bytes=None), model=lm)
        table = res.request_table()
        ax = plt.subplots(figsize=(8, 3.5))[1]
        ax.plot(table.arrival_s, table.ttft_s * 1e3, "o", color=plots.PREFILL, label="measured TTFT")
        ax.axhline(prefill_s * 1e3, color=plots.PREDICTED, ls=":", label="floor: prefill alone")
        pred = queueing_ttft_s(rate_per_s, prefill_s, step_s)
        if np.isfinite(pred):
            ax.axhline(pred * 1e3, color=plots.PREDICTED, ls="--", label="predicted mean (M/D/1 queue)")
        ax.set_ylim(bottom=0)
        ax.set_xlabel("arrival time (s)")
        ax.set_ylabel("time to first token (ms)")
        ax.set_title(f"{prompt_tokens}-token prompts at {rate_per_s:g}/s: load \u03c1 = {rate_per_s * prefill_s:.2f}, "
                     f"mean TTFT {table.ttft_s.mean() * 1e3:.0f} ms")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)

    cap = min(2048, lm.max_context) - new_tokens
    step = float(f"{max_rate_per_s / 20:.1g}")  # about 20 positions on the rate slider
    return explorer(draw,
                    rate_per_s=widgets.FloatSlider(value=rate_per_s, min=step, max=max_rate_per_s, step=step,
                                                   description="rate /s"),
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 64, cap, 64, description="prompt"))


def split_explorer(lm: LoadedModel, workload="research", rate_per_s: float = 8.0, prefill_workers: int = 1,
                   decode_workers: int = 1, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None,
                   n_requests: int = 24, max_rate_per_s: float | None = None, seed: int = 0) -> widgets.VBox:
    """Ch. 6: the same requests served colocated on P + D workers and split into P prefill + D decode workers, for
    a chosen request rate and P:D ratio. Runs both for real (emulated workers) and draws the TTFT and TPOT CDFs
    side by side, with the SLOs and each layout's SLO attainment."""
    from .. import serving
    from .figures import serving as serving_plots

    ex = serving.ModelExecutor(lm)  # warmed up once, shared by every redraw

    def draw(rate_per_s: float, prefill_workers: int, decode_workers: int) -> None:
        reqs = serving.make_workload(workload, n_requests, rate_per_s, seed=seed, model=lm)
        cmp = serving.compare(reqs, serving.contenders(prefill_workers=prefill_workers,
                                                       decode_workers=decode_workers), ex)
        n = prefill_workers + decode_workers
        runs = {f"colocated, {n} workers": cmp.colocated,
                f"split, {prefill_workers}P + {decode_workers}D": cmp.disaggregated}
        att = {k: r.metrics(ttft_slo_s, tpot_slo_s)["slo_attainment"] for k, r in runs.items()}
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
        serving_plots.ttft_cdf(runs, ax=a1, slo_s=ttft_slo_s, title="Time to first token")
        serving_plots.latency_cdf(runs, "tpot", ax=a2, slo_s=tpot_slo_s, title="Time per output token")
        name = workload if isinstance(workload, str) else getattr(workload, "name", "custom")
        fig.suptitle(f"{name} at {rate_per_s:.3g} requests/s. SLO attainment: "
                     + ", ".join(f"{k}: {v:.0%}" for k, v in att.items()), fontsize=10)
        fig.tight_layout()

    top = max_rate_per_s or 3 * rate_per_s
    return explorer(draw,
                    rate_per_s=widgets.FloatSlider(value=rate_per_s, min=top / 30, max=top, step=top / 30,
                                                   description="rate /s", readout_format=".3g"),
                    prefill_workers=widgets.IntSlider(prefill_workers, 1, 4, 1, description="prefill (P)"),
                    decode_workers=widgets.IntSlider(decode_workers, 1, 4, 1, description="decode (D)"))


def kv_transfer_explorer(model: str = "Llama-3-8B", prompt_tokens: int = 2048, link: str = "PCIe 4.0 x16",
                         gpu: str = "H100", dtype: str = "fp16", measured: dict[str, float] | None = None
                         ) -> widgets.VBox:
    """Ch. 5: when does moving the KV cache cost more than a decode step? For a published ``model`` (dropdown), a
    prompt length (slider) and a link (dropdown: :data:`splitlab.sizing.LINKS` plus ``measured``, label -> bytes/s
    measured here): left, the transfer time over that link, the model's minimum decode step and its roofline
    prefill on ``gpu`` against prompt length; right, the chosen prompt's transfer over every link
    (:func:`splitlab.sizing.handoff`)."""
    import numpy as np

    from .figures import transfer as transfer_plots

    speeds = {k: v["bandwidth_bytes_per_s"] for k, v in sizing.LINKS.items()} | dict(measured or {})

    def draw(model: str, prompt_tokens: int, link: str) -> None:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw=dict(width_ratios=[1, 1.2]))
        tokens = np.geomspace(128, 32768, 40)
        h = [sizing.handoff(model, int(t), speeds[link], gpu, dtype) for t in tokens]
        a1.loglog(tokens, [x["transfer_s"] * 1e3 for x in h], color=transfer_plots.TRANSFER, lw=2,
                  label=f"transfer over {link}")
        a1.loglog(tokens, [x["decode_step_s"] * 1e3 for x in h], "--", color="tab:blue",
                  label=f"one decode step on {gpu} (minimum)")
        a1.loglog(tokens, [x["prefill_s"] * 1e3 for x in h], ":", color="tab:orange",
                  label=f"prefill on {gpu} (roofline)")
        a1.axvline(prompt_tokens, color="grey", lw=1)
        transfer_plots._plain_log(a1.yaxis)
        a1.set_xticks([128, 512, 2048, 8192, 32768], ["128", "512", "2,048", "8,192", "32,768"])
        a1.xaxis.set_minor_formatter(plt.NullFormatter())  # unlabelled minor ticks: the labels overlapped
        a1.set_xlabel("prompt length (tokens, log scale)")
        a1.set_ylabel("time (ms, log scale)")
        here = sizing.handoff(model, prompt_tokens, speeds[link], gpu, dtype)
        a1.set_title(f"{prompt_tokens:,} tokens over {link}: {here['decode_steps']:.2g} decode steps, "
                     f"{here['prefill_share']:.0%} of the prefill", fontsize=10)
        a1.legend(fontsize=8, loc="upper left")
        transfer_plots.handoff_bars(model, prompt_tokens, gpu, dtype, extra=measured, ax=a2)
        fig.tight_layout()

    return explorer(draw,
                    model=widgets.Dropdown(options=list(sizing.PUBLISHED_MODELS), value=model, description="model"),
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 128, 32768, 128, description="prompt"),
                    link=widgets.Dropdown(options=list(speeds), value=link, description="link"))
