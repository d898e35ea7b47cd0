"""Chapter 3's explorers."""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from ... import sizing
from .base import explorer

__all__ = ['decode_roofline_explorer']


def decode_roofline_explorer(model: str = "Llama-3-8B", gpu: str = "H100", context: int = 2048,
                             dtype: str = "bf16") -> widgets.VBox:
    """Ch. 3: the roofline's latency-throughput curve of decode for a published model on a datasheet GPU: TPOT
    (the step time) against tokens/s, batch by batch, up to the batch whose caches fill the GPU's memory."""
    def draw(model: str, gpu: str, context: int) -> None:
        cfg, g = sizing.resolve_config(model), sizing.GPUS[gpu]
        geom, params, kv = sizing.kv_geometry(cfg), cfg["n_params"], sizing.kv_bytes_per_token(cfg, dtype)
        weights = params * sizing.dtype_bytes(dtype)
        fit = int((g["memory_bytes"] - weights) // (context * kv))  # sequences whose caches fit beside the weights
        ax = plt.subplots()[1]
        if fit < 1:
            ax.text(0.5, 0.5, f"{model} does not fit in one {gpu}", ha="center", transform=ax.transAxes)
            ax.set_axis_off()
            return
        batches = np.unique(np.logspace(0, np.log2(fit), 60, base=2).astype(int))
        step = np.array([sizing.roofline_time_s(sizing.decode_flops(params, b, context, geom),
                                                sizing.decode_bytes(weights, b, context, kv),
                                                g["peak_flops_per_s"], g["bandwidth_bytes_per_s"]) for b in batches])
        ax.plot(batches / step, step * 1e3, "-", color="tab:blue")
        for b in sorted({1, int(batches[len(batches) // 2]), int(batches[-1])}):
            i = int(np.searchsorted(batches, b))
            ax.annotate(f"B={b}", (batches[i] / step[i], step[i] * 1e3), textcoords="offset points", xytext=(4, 6))
        ax.plot(batches[-1] / step[-1], step[-1] * 1e3, "x", color="tab:blue", ms=9, mew=2)
        ax.set_xlim(0, batches[-1] / step[-1] * 1.2)
        ax.set_ylim(0, step.max() * 1e3 * 1.25)
        ax.set_xlabel("predicted output tokens/s")
        ax.set_ylabel("predicted TPOT (ms)")
        ax.set_title(f"{model} on {gpu}, {context:,} tokens each; x: memory full")

    return explorer(draw,
                    model=widgets.Dropdown(options=list(sizing.PUBLISHED_MODELS), value=model, description="model"),
                    gpu=widgets.Dropdown(options=list(sizing.GPUS), value=gpu, description="GPU"),
                    context=widgets.IntSlider(context, 128, 32768, 128, description="context"))
