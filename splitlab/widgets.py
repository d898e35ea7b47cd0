"""Interactive explorers (core ipywidgets + inline matplotlib, which work on Colab and in Jupyter).

Widgets are dead in the static HTML of the book, so every explorer first draws a static figure at its default
settings, then shows the sliders, which redraw a live copy when a kernel is running.
"""
from __future__ import annotations

from typing import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

from . import plots, sizing
from .engine import generate
from .models import LoadedModel
from .profiling import random_prompt

__all__ = ["explorer", "two_phases_explorer", "kv_size_explorer", "decode_roofline_explorer"]


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
