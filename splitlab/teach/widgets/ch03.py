"""Chapter 3's explorer: the roofline's latency-throughput curve of decode, live (ipywidgets) and in the rendered
book (plotly). Both take their numbers from :func:`decode_roofline_grid`, so the two cannot disagree."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ... import sizing
from ...phases.models import LoadedModel
from ...phases.profiling import weight_bytes_read
from ..figures.style import DECODE, PREDICTED
from .base import explorer

__all__ = ['DecodeSetup', 'published_setup', 'device_setup', 'decode_roofline_grid', 'decode_roofline_explorer',
           'decode_roofline_figure']


@dataclass(frozen=True)
class DecodeSetup:
    """A model on a device, as the roofline sees it: parameters, KV geometry, weight bytes a step reads, KV bytes
    per token, peak FLOP/s (x ``efficiency``, the share of it the kernels reach), bandwidth (B/s), and either the
    device's memory (bytes: batches up to the one whose caches fill it) or the batches to draw."""

    name: str
    n_params: float
    geometry: sizing.KVGeometry
    weight_bytes: float
    kv_bytes_per_token: float
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    memory_bytes: float | None = None
    batches: tuple[int, ...] | None = None
    max_context: int | None = None
    efficiency: float = 1.0


def published_setup(model: str, gpu: str, dtype: str = "bf16") -> DecodeSetup:
    """A published model (``sizing.PUBLISHED_MODELS``) with ``dtype`` weights and cache on a datasheet GPU
    (``sizing.GPUS``). Raises KeyError/ValueError for an unknown model, GPU or dtype."""
    cfg, g = sizing.resolve_config(model), sizing.GPUS[gpu]
    return DecodeSetup(f"{model} on {gpu}", cfg["n_params"], sizing.kv_geometry(cfg),
                       cfg["n_params"] * sizing.dtype_bytes(dtype), sizing.kv_bytes_per_token(cfg, dtype),
                       g["peak_flops_per_s"], g["bandwidth_bytes_per_s"], memory_bytes=g["memory_bytes"])


def device_setup(lm: LoadedModel, peak_flops_per_s: float, bandwidth_bytes_per_s: float, efficiency: float = 1.0,
                 batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64), name: str | None = None) -> DecodeSetup:
    """A loaded model on this device with its measured peak and bandwidth (the chapter's ``PEAK``, ``BANDWIDTH``
    and ``EFFICIENCY``): the numbers of ``figures.roofline.with_decode_roofline``."""
    name = name or f"{lm.name} here (\u2264 {lm.max_context:,} tokens)"
    return DecodeSetup(name, lm.n_params, lm.geometry, weight_bytes_read(lm),
                       sizing.kv_bytes_per_token(lm.config, lm.dtype), peak_flops_per_s, bandwidth_bytes_per_s,
                       batches=tuple(int(b) for b in batches), max_context=lm.max_context, efficiency=efficiency)


def decode_roofline_grid(setup: DecodeSetup, context: int) -> pd.DataFrame:
    """Roofline decode step of ``setup`` at ``context`` cached tokens per sequence, batch by batch: step_s =
    max(F / (efficiency x peak), (weights + batch x context x KV bytes) / bandwidth) (Williams et al., 2009; F =
    ``sizing.decode_flops``), tokens_per_s = batch / step_s. Batches: ``setup.batches``, or 60 log-spaced ones up
    to the largest whose caches fit beside the weights in ``setup.memory_bytes`` (none if not even one fits).
    Empty past ``setup.max_context``.

    Returns:
        columns batch, context, step_s, tokens_per_s, bound ("memory" or "compute").

    Raises:
        ValueError: context < 1, or a setup with neither memory_bytes nor batches.
    """
    if context < 1:
        raise ValueError(f"context must be >= 1 token, got {context}")
    if setup.batches is not None:
        batches = np.array(setup.batches)
    elif setup.memory_bytes is not None:
        fit = sizing.max_decode_batch(setup.memory_bytes, setup.weight_bytes, context, setup.kv_bytes_per_token)
        steps = np.logspace(0, np.log2(fit), 60, base=2).astype(int)  # its top may round down: fit itself last
        batches = np.unique(np.append(steps[steps < fit], fit)) if fit >= 1 else np.array([], int)
    else:
        raise ValueError("the setup needs memory_bytes or batches")
    if setup.max_context is not None and context > setup.max_context:
        batches = np.array([], int)
    flops = np.array([sizing.decode_flops(setup.n_params, int(b), context, setup.geometry) for b in batches])
    nbytes = np.array([sizing.decode_bytes(setup.weight_bytes, int(b), context, setup.kv_bytes_per_token)
                       for b in batches])
    compute_s = flops / (setup.efficiency * setup.peak_flops_per_s)
    memory_s = nbytes / setup.bandwidth_bytes_per_s
    step = np.maximum(compute_s, memory_s)
    return pd.DataFrame(dict(batch=batches.astype(int), context=context, step_s=step, tokens_per_s=batches / step,
                             bound=np.where(compute_s > memory_s, "compute", "memory")))


def decode_roofline_explorer(model: str = "Llama-3-8B", gpu: str = "H100", context: int = 2048,
                             dtype: str = "bf16") -> widgets.VBox:
    """Ch. 3: the roofline's latency-throughput curve of decode for a published model on a datasheet GPU: TPOT
    (the step time) against tokens/s, batch by batch, up to the batch whose caches fill the GPU's memory
    (:func:`decode_roofline_grid`)."""
    def draw(model: str, gpu: str, context: int) -> None:
        grid = decode_roofline_grid(published_setup(model, gpu, dtype), context)
        ax = plt.subplots()[1]
        if grid.empty:
            ax.text(0.5, 0.5, f"{model} does not fit in one {gpu}", ha="center", transform=ax.transAxes)
            ax.set_axis_off()
            return
        batches, step, tps = grid.batch.to_numpy(), grid.step_s.to_numpy(), grid.tokens_per_s.to_numpy()
        ax.plot(tps, step * 1e3, "-", color=PREDICTED)  # a prediction: black, as in the rendered book's figure
        for b in sorted({1, int(batches[len(batches) // 2]), int(batches[-1])}):
            i = int(np.searchsorted(batches, b))
            ax.annotate(f"B={b}", (tps[i], step[i] * 1e3), textcoords="offset points", xytext=(4, 6))
        ax.plot(tps[-1], step[-1] * 1e3, "x", color=PREDICTED, ms=9, mew=2)
        ax.set_xlim(0, tps[-1] * 1.2)
        ax.set_ylim(0, step.max() * 1e3 * 1.25)
        ax.set_xlabel("predicted output tokens/s")
        ax.set_ylabel("predicted TPOT (ms)")
        ax.set_title(f"{model} on {gpu}, {context:,} tokens each; x: memory full")

    return explorer(draw,
                    model=widgets.Dropdown(options=list(sizing.PUBLISHED_MODELS), value=model, description="model"),
                    gpu=widgets.Dropdown(options=list(sizing.GPUS), value=gpu, description="GPU"),
                    context=widgets.IntSlider(context, 128, 32768, 128, description="context"))


def decode_roofline_figure(setups: Sequence[DecodeSetup], contexts: Sequence[int] = (64, 256, 1024, 4096, 16384),
                           measured: Mapping[str, pd.DataFrame] | None = None, context_default: int = 1024):
    """Ch. 3, in the rendered book: predicted TPOT against tokens/s (:func:`decode_roofline_grid`) for each setup
    (dropdown) and context (slider); ``measured``: setup name -> the page's ``profiling.measure_decode`` table
    (columns batch, context, step_s), drawn at its own context. Returns the plotly figure."""
    from ..interactive import Trace, explorer_figure, room_for_legend

    measured = dict(measured or {})
    by_name = {s.name: s for s in setups}
    for name, dc in measured.items():
        if name not in by_name or dc.context.nunique() != 1:
            raise ValueError(f"measured[{name!r}]: no such setup, or a table of more than one context")

    def traces(name: str, context: int) -> list[Trace]:
        s, g = by_name[name], decode_roofline_grid(by_name[name], context)
        # predicted black, measured decode steps in the decode colour (as the page's figures draw them)
        out = [Trace("predicted (roofline)", g.tokens_per_s, g.step_s * 1e3, "lines+markers", color=PREDICTED)]
        if s.memory_bytes is not None:
            last = g.tail(1)
            out.append(Trace("memory full", last.tokens_per_s, last.step_s * 1e3, "markers",
                             color=PREDICTED, extra=dict(marker_symbol="x", marker_size=11)))
        if name in measured:
            dc = measured[name]
            here = int(dc.context.iloc[0]) == context
            out.append(Trace(f"measured, context {int(dc.context.iloc[0])}",
                             dc.batch / dc.step_s if here else [], dc.step_s * 1e3 if here else [], "markers",
                             color=DECODE))
        return out

    contexts = sorted(set(int(c) for c in contexts))
    default = contexts.index(context_default) if context_default in contexts else 0
    fig = explorer_figure(traces, slider=("context (tokens per sequence)", contexts), dropdown=("setup", list(by_name)),
                          title="Decode, batch by batch", x_title="output tokens/s (whole batch)",
                          y_title="TPOT: one decode step (ms)", slider_default=default,
                          slider_format=lambda c: f"{c:,}")
    fig.update_xaxes(rangemode="tozero")
    return room_for_legend(fig, 2)
