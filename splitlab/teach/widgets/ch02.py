"""Chapter 2's explorers."""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from ... import sizing
from .base import explorer

__all__ = ['kv_size_explorer']


def kv_size_explorer(models: list[str], context: int = 4096, batch: int = 8, dtype: str = "fp16") -> widgets.VBox:
    """Ch. 2: KV-cache GiB of several published models for a chosen context, batch and dtype (bar chart)."""
    def draw(context: int, batch: int, dtype: str) -> None:
        ax = plt.subplots()[1]
        gib = [sizing.kv_bytes(sizing.resolve_config(m), context, batch, dtype) / 2 ** 30 for m in models]
        bars = ax.barh(models, gib, color="tab:blue")
        ax.bar_label(bars, fmt="%.3g", padding=2)
        ax.margins(x=0.15)
        ax.set_xlabel("KV cache (GiB)")
        ax.set_title(f"KV cache for batch {batch} x {context} tokens in {dtype}")

    return explorer(draw,
                    context=widgets.IntSlider(context, 512, 32768, 512, description="context"),
                    batch=widgets.IntSlider(batch, 1, 64, 1, description="batch"),
                    dtype=widgets.Dropdown(options=["fp32", "fp16", "fp8", "int4"], value=dtype, description="dtype"))

