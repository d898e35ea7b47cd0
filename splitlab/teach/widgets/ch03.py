"""Chapter 3's explorers."""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from ... import sizing
from .base import explorer

__all__ = ['decode_roofline_explorer']


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

