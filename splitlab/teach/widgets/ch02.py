"""Chapter 2's explorer: KV-cache bytes of several models for a context, a batch and a dtype, live (ipywidgets)
and in the rendered book (plotly). Both take their numbers from :func:`kv_grid`, so the two cannot disagree."""
from __future__ import annotations

from typing import Sequence

import ipywidgets as widgets
import numpy as np
import pandas as pd

from ... import sizing
from .base import explorer

__all__ = ['kv_grid', 'kv_size_explorer', 'kv_size_figure']


def kv_grid(models: Sequence[str], tokens: Sequence[int], batches: Sequence[int], dtype: str = "fp16") -> pd.DataFrame:
    """KV-cache bytes of every (model, tokens, batch): ``sizing.kv_bytes`` (per layer, the positions it keeps x
    its elements per position x bytes(dtype) x batch; a sliding-window layer keeps at most W - 1 positions).

    Args:
        models: published model names or splitlab presets (``sizing.resolve_config``).
        tokens: cached tokens per sequence (integers >= 0); batches: sequences (integers >= 0).
        dtype: the cache's element type ("fp32", "fp16", "bf16", "fp8", "int4", ...).

    Returns:
        one row per (model, tokens, batch): columns model, attention (MHA/GQA/MQA/MLA), tokens, batch, dtype, nbytes.

    Raises:
        ValueError: an unknown model or dtype, tokens or a batch that is not an integer >= 0, an empty list.
    """
    if not len(models) or not len(tokens) or not len(batches):
        raise ValueError("kv_grid needs at least one model, one token count and one batch")
    rows = []
    for m in models:
        cfg = sizing.resolve_config(m)
        kind = sizing.kv_geometry(cfg).attention
        # kv_bytes checks each count (a fractional one is refused, not truncated); int() only for the table
        rows += [dict(model=m, attention=kind, tokens=int(t), batch=int(b), dtype=dtype,
                      nbytes=sizing.kv_bytes(cfg, t, b, dtype)) for t in tokens for b in batches]
    return pd.DataFrame(rows)


def kv_size_explorer(models: list[str], context: int = 4096, batch: int = 8, dtype: str = "fp16") -> widgets.VBox:
    """Ch. 2: KV-cache GiB of several published models for a chosen context, batch and dtype (bar chart; the
    numbers of :func:`kv_grid`)."""
    from ..figures.phone import figure, fit_titles, phone

    def draw(context: int, batch: int, dtype: str) -> None:
        fig, (ax,) = figure(1, 0.3 * len(models) + 1.6)
        with phone():
            gib = kv_grid(models, [context], [batch], dtype).nbytes / 2 ** 30
            bars = ax.barh(models, gib, color="tab:blue")
            ax.bar_label(bars, fmt="%.3g", padding=2)
            ax.margins(x=0.2)
            ax.invert_yaxis()
            ax.set_xlabel("KV cache (GiB)")
            ax.set_title(f"Batch {batch} x {context:,} tokens, {dtype}")
            fit_titles(fig)

    return explorer(draw,
                    context=widgets.IntSlider(context, 512, 32768, 512, description="context"),
                    batch=widgets.IntSlider(batch, 1, 64, 1, description="batch"),
                    dtype=widgets.Dropdown(options=["fp32", "fp16", "fp8", "int4"], value=dtype, description="dtype"))


def kv_size_figure(published: Sequence[str], measured: pd.DataFrame, dtype: str = "fp16",
                   preset_dtype: str = "fp32", batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
                   max_tokens: int = 32768):
    """Ch. 2, in the rendered book: KV-cache bytes against the tokens per sequence, one line per model, for each
    batch (slider). Dropdown: the ``published`` models in ``dtype`` (predicted by :func:`kv_grid`), or the
    splitlab presets the page measured (``measured``: the table of ``figures.kv_cache.measure_attention_variants``,
    indexed by model, with columns tokens and "cache (KiB)"), their formula lines in ``preset_dtype`` beside the
    caches measured at batch 1 (shown on the slider's batch-1 position). Returns the plotly figure."""
    from ..interactive import Trace, explorer_figure, room_for_legend

    if 1 not in batches:
        raise ValueError("batches must include 1: the measured caches are of one sequence")
    groups = {f"published models, {dtype}": (list(published), np.linspace(0, max_tokens, 9).astype(int), dtype),
              "splitlab presets (measured)": (list(measured.index),
                                              np.linspace(0, 2 * int(measured.tokens.max()), 9).astype(int),
                                              preset_dtype)}
    grids = {g: kv_grid(m, t, batches, d) for g, (m, t, d) in groups.items()}

    def traces(group: str, batch: int) -> list[Trace]:
        grid = grids[group].query("batch == @batch")
        out = [Trace(f"{g.attention.iloc[0]}: {m}", g.tokens, g.nbytes, "lines")
               for m, g in grid.groupby("model", sort=False)]
        if group.startswith("splitlab"):
            one = batch == 1
            out.append(Trace("measured, batch 1", measured.tokens if one else [],
                             measured["cache (KiB)"] * 2 ** 10 if one else [], "markers", color="black"))
        return out

    fig = explorer_figure(traces, slider=("batch (sequences)", list(batches)), dropdown=("models", list(groups)),
                          title="KV cache: formula (lines), measured (dots)",
                          x_title="tokens per sequence", y_title="KV cache (bytes)")
    fig.update_yaxes(tickformat="~s")
    return room_for_legend(fig, (max(len(m) for m, _, _ in groups.values()) + 2) // 2)
