"""Chapter 3's predictions, figures and tables: the roofline of this device, prefill and decode measured against
it, decode seen memory-bound on a model larger than the last-level cache, and datasheet GPUs.

The predictions apply :mod:`splitlab.sizing`'s formulas (Williams et al. 2009; Kaplan et al. 2020) row by row;
figure functions draw on a given Axes (or make one of the book's size) and return it."""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib import colormaps, ticker

from ... import sizing
from ...phases.models import LoadedModel
from ...phases.profiling import flops_of_decode, flops_of_prefill, weight_bytes_read
from .phases import DECODE, PREDICTED, PREFILL, fmt3, fmt_table, new_ax, plain_log_ticks
from .phone import legend_below
from .roofline_notes import (batching_note, gpu_ridge_note, ops_note, prediction_note, prefill_note,  # noqa: F401
                             ridge_note, trained_note)
from .style import OTHER_COLORS, fmt2

__all__ = ["with_prefill_roofline", "prefill_crossing", "with_decode_roofline", "prediction_note", "prefill_note",
           "ridge_note", "ops_note", "batching_note", "gpu_ridge_note", "trained_note", "flat_up_to", "device_table",
           "weights_table", "decode_table", "floor_summary", "gpu_table", "predicted_decode_curves",
           "decode_vs_batch", "latency_throughput", "roofline", "decode_throughput"]


def with_prefill_roofline(lm: LoadedModel, pf: pd.DataFrame, peak: float, bandwidth: float) -> pd.DataFrame:
    """``pf`` (``profiling.measure_prefill``) with ``flops`` (``profiling.flops_of_prefill``: the FLOPs the engine
    does, the output layer at the last position only), ``bytes`` (weights read +
    KV written), ``intensity`` (FLOP/B), ``roofline_s`` = max(F / peak, M / bandwidth), ``efficiency`` =
    achieved FLOP/s / peak."""
    kv = sizing.kv_bytes_per_token(lm.config, lm.dtype)
    out = pf.copy()
    out["flops"] = [flops_of_prefill(lm, t, b) for t, b in zip(pf["prompt_tokens"], pf["batch"])]
    out["bytes"] = [sizing.prefill_bytes(weight_bytes_read(lm), t, kv, b)
                    for t, b in zip(pf["prompt_tokens"], pf["batch"])]
    out["intensity"] = out["flops"] / out["bytes"]
    out["roofline_s"] = np.maximum(out["flops"] / peak, out["bytes"] / bandwidth)
    out["efficiency"] = out["flops"] / out["prefill_s"] / peak
    return out


def prefill_crossing(lm: LoadedModel, ridge: float, max_tokens: int = 1 << 16) -> int | None:
    """The shortest prompt whose prefill intensity (``profiling.flops_of_prefill`` over the weights read plus the
    KV written) exceeds ``ridge``: where prefill turns compute-bound on this device; None if no prompt up to
    ``max_tokens`` does."""
    kv, weights = sizing.kv_bytes_per_token(lm.config, lm.dtype), weight_bytes_read(lm)
    for t in range(1, max_tokens + 1):
        if flops_of_prefill(lm, t) / sizing.prefill_bytes(weights, t, kv) > ridge:
            return t
    return None


def with_decode_roofline(lm: LoadedModel, dc: pd.DataFrame, peak: float, bandwidth: float,
                         efficiency: float = 1.0) -> pd.DataFrame:
    """``dc`` (``profiling.measure_decode``) with, per row: ``flops`` (``profiling.flops_of_decode``), ``bytes``
    (weights a step reads, ``profiling.weight_bytes_read``, plus batch x context x KV bytes per token), ``intensity``,
    ``floor_s`` = bytes / bandwidth (the memory roof), ``compute_s`` = FLOPs / (efficiency x peak) (the compute
    roof at the efficiency the model's kernels reach), ``predicted_s`` = the larger of the two,
    ``achieved_bytes_per_s`` = bytes / measured step and ``share_of_bandwidth`` = that over ``bandwidth``; also
    ``weight_bytes`` and ``bandwidth`` themselves."""
    kv = sizing.kv_bytes_per_token(lm.config, lm.dtype)
    out = dc.copy()
    out["flops"] = [flops_of_decode(lm, b, c) for b, c in zip(dc["batch"], dc["context"])]
    out["bytes"] = [sizing.decode_bytes(weight_bytes_read(lm), b, c, kv) for b, c in zip(dc["batch"], dc["context"])]
    out["weight_bytes"] = weight_bytes_read(lm)
    out["bandwidth"] = bandwidth
    out["intensity"] = out["flops"] / out["bytes"]
    out["floor_s"] = out["bytes"] / bandwidth
    out["compute_s"] = out["flops"] / (efficiency * peak)
    out["predicted_s"] = np.maximum(out["floor_s"], out["compute_s"])
    out["achieved_bytes_per_s"] = out["bytes"] / out["step_s"]
    out["share_of_bandwidth"] = out["achieved_bytes_per_s"] / bandwidth
    return out


def flat_up_to(dc: pd.DataFrame, within: float = 0.3) -> int:
    """The largest batch of ``dc`` (sorted by batch) up to which every step stays within ``within`` (30%) of the
    batch-1 step: how far decode's batch rides for free."""
    dc = dc.sort_values("batch")
    base, best = float(dc["step_s"].iloc[0]), int(dc["batch"].iloc[0])
    for b, s in zip(dc["batch"], dc["step_s"]):
        if s > (1 + within) * base:
            break
        best = int(b)
    return best


def device_table(peak: float, matmul_n: int, bandwidth: float, llc_bytes: int, llc_source: str) -> pd.DataFrame:
    """This device's roofline, as text of 3 significant digits, with how each number was found: the peak
    (FLOP/s, the best matmul of side ``matmul_n``), the copy bandwidth (bytes/s, read + write counted), their
    ratio the ridge point (FLOP/byte) and the last-level cache (bytes; ``llc_source`` says where it was read)."""
    return pd.DataFrame({"value": [fmt3(peak / 1e9), fmt3(bandwidth / 1e9), fmt3(sizing.ridge_point(peak, bandwidth)),
                                   fmt3(llc_bytes / 2**20)],
                         "how": [f"best matmul, n = {matmul_n}", "copy: read + write counted", "peak / bandwidth",
                                 llc_source]},
                        index=["peak (GFLOP/s)", "bandwidth (GB/s)", "ridge (FLOP/B)", "last-level cache (MiB)"])


def weights_table(models, llc_bytes: int) -> pd.DataFrame:
    """The weight bytes a decode step of each of ``models`` (``LoadedModel``s, a model given twice shown once) reads
    (``profiling.weight_bytes_read``, MB) and their ratio to the last-level cache of ``llc_bytes`` bytes."""
    models = list({id(m): m for m in models}.values())
    weights = pd.DataFrame([{"model": m.name, "MB": weight_bytes_read(m) / 1e6} for m in models])
    weights["x LLC"] = weights["MB"] * 1e6 / llc_bytes
    return fmt_table(weights, {"model": "model", "MB": "weights read per step (MB)", "x LLC": "x last-level cache"},
                     index="model")


#: the columns :func:`decode_table` can show, with their headers and the factor each is shown in
DECODE_COLUMNS = {"step_s": ("step (ms)", 1e3), "matmul_s": ("matmuls alone (ms)", 1e3), "floor_s": ("floor (ms)", 1e3),
                  "bytes": ("MB read", 1e-6), "achieved_bytes_per_s": ("GB/s", 1e-9),
                  "share_of_bandwidth": ("% of copy", 100)}


def decode_table(dc: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """Decode steps of :func:`with_decode_roofline` by batch, 3 significant digits: the ``columns`` named (keys
    of :data:`DECODE_COLUMNS`; by default step, matmuls alone, MB read, GB/s and % of copy). Raises KeyError
    for a column not in :data:`DECODE_COLUMNS`."""
    names = columns or ("step_s", "matmul_s", "bytes", "achieved_bytes_per_s", "share_of_bandwidth")
    return fmt_table(dc, {"batch": "batch", **{c: DECODE_COLUMNS[c] for c in names}}, index="batch")


def floor_summary(name: str, row: pd.Series) -> str:
    """One decode step (a row of :func:`with_decode_roofline`) against its memory floor, on lines of at most 40
    characters (a phone's column): MB of weights and of KV read per step, the floor and the step in ms, their
    ratio."""
    kv_mb = (row["bytes"] - row["weight_bytes"]) / 1e6
    return (f"{name}: {row['weight_bytes'] / 1e6:.3g} MB of weights\n  + {kv_mb:.2g} MB of KV per step\n"
            f"floor from memory: {row['floor_s'] * 1e3:.3g} ms\n"
            f"the step: {row['step_s'] * 1e3:.3g} ms ({fmt2(row['step_s'] / row['floor_s'])}x the floor)")


def gpu_table() -> pd.DataFrame:
    """Datasheet GPUs (``sizing.GPUS``): dense bf16/fp16 peak (TFLOP/s), memory bandwidth (TB/s), memory size (GB)
    and ridge point (FLOP/byte), as text of 3 significant digits (a float column would print 121.0 and 203.0).
    Short headers, so that the table fits a phone's column (412 px)."""
    rows = [{"GPU": name, "peak TFLOP/s": g["peak_flops_per_s"] / 1e12, "mem. TB/s": g["bandwidth_bytes_per_s"] / 1e12,
             "mem. GB": int(round(g["memory_bytes"] / 1e9)),
             "ridge FLOP/B": sizing.ridge_point(g["peak_flops_per_s"], g["bandwidth_bytes_per_s"])}
            for name, g in sizing.GPUS.items()]
    df = pd.DataFrame(rows)
    for col in ("peak TFLOP/s", "mem. TB/s", "ridge FLOP/B"):
        df[col] = df[col].map(fmt3)
    return df.set_index("GPU")


def predicted_decode_curves(model: str, gpu: str, contexts=(128, 2048, 8192), dtype: str = "bf16",
                            max_batch: int = 1024):
    """Roofline tokens/s of decode vs batch for a published ``model`` on a datasheet ``gpu``, one curve per context:
    batch / max(F / peak, (weights + batch x context x KV) / bandwidth), NaN once weights and caches exceed the
    GPU's memory. The batches: 200 log-spaced ones up to ``max_batch`` and, for each context, the largest that fits
    (``sizing.max_decode_batch``, the memory-full point chapter 3's explorer marks too), so that each curve ends
    exactly there. Returns (batches, {label: tokens/s}, compute ceiling tokens/s = peak / (2 x params))."""
    cfg, g = sizing.resolve_config(model), sizing.GPUS[gpu]
    params, geom, kv = cfg["n_params"], sizing.kv_geometry(cfg), sizing.kv_bytes_per_token(cfg, dtype)
    weights = params * sizing.dtype_bytes(dtype)
    full = [sizing.max_decode_batch(g["memory_bytes"], weights, c, kv) for c in contexts]
    batches = np.unique(np.concatenate([np.logspace(0, np.log2(max_batch), 200, base=2).astype(int),
                                        [b for b in full if 1 <= b <= max_batch]]))
    curves = {}
    for context in contexts:
        tps = []
        for b in batches:
            step = sizing.roofline_time_s(sizing.decode_flops(params, b, context, geom),
                                          sizing.decode_bytes(weights, b, context, kv),
                                          g["peak_flops_per_s"], g["bandwidth_bytes_per_s"])
            tps.append(b / step if weights + b * context * kv <= g["memory_bytes"] else np.nan)
        curves[f"context {context:,}"] = np.array(tps)
    return batches, curves, g["peak_flops_per_s"] / (2 * params)


def _batch_axis(ax) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("decode batch (sequences)")


def decode_vs_batch(dc: pd.DataFrame, ax=None, title: str | None = None):
    """Measured decode step (ms) vs batch beside its two roofs from :func:`with_decode_roofline`: the memory
    floor (weights + KV) / bandwidth and the compute roof FLOPs / (e x peak), both predictions (black); the legend
    under the panel, off the measured points."""
    made, ax = ax is None, new_ax(ax)
    ax.plot(dc["batch"], dc["step_s"] * 1e3, "o-", color=DECODE, label="measured step")
    if "matmul_s" in dc:  # a part of the step, not a phase: not the transfer's green
        ax.plot(dc["batch"], dc["matmul_s"] * 1e3, "s-", color=OTHER_COLORS[0], ms=4, label="weight matmuls alone")
    ax.plot(dc["batch"], dc["floor_s"] * 1e3, "--", color=PREDICTED, label="memory floor: bytes / bandwidth")
    ax.plot(dc["batch"], dc["compute_s"] * 1e3, ":", color=PREDICTED, lw=2, label="compute roof: FLOPs / (e × peak)")
    _batch_axis(ax)
    ax.set_ylim(0, 1.15 * max(dc["step_s"].max(), dc["compute_s"].max()) * 1e3)
    ax.set_ylabel("decode step (ms)")
    ax.set_title(title or "A decode step against its two roofs")
    _legend_under(ax, made)
    return ax


def latency_throughput(dc: pd.DataFrame, ax=None, title: str | None = None):
    """TPOT (ms; every sequence gets one token per step, so TPOT = the step) against decode throughput
    (tokens/s = batch / step), one point per batch, labelled with the batch."""
    ax = new_ax(ax)
    tps, tpot = dc["batch"] / dc["step_s"], dc["step_s"] * 1e3
    ax.plot(tps, tpot, "o-", color=DECODE)
    for b, x, y in zip(dc["batch"], tps, tpot):
        ax.annotate(f"B={int(b)}", (x, y), textcoords="offset points", xytext=(4, 6))
    ax.set_xlim(0, tps.max() * 1.18)
    ax.set_ylim(0, tpot.max() * 1.2)
    ax.set_xlabel("decode throughput (output tokens/s)")
    ax.set_ylabel("TPOT (ms per token)")
    ax.set_title(title or "Batching buys throughput; past the ridge, with latency")
    return ax


def _legend_under(ax, made: bool) -> None:
    """The panel's legend under the figure, off the points; a figure made here grows by the legend's rows."""
    if made:
        ax.figure.set_figheight(ax.figure.get_figheight() + 0.22 * len(ax.get_legend_handles_labels()[1]))
    legend_below(ax.figure, ax)


def roofline(peak_flops_per_s: float, bandwidth_bytes_per_s: float, points: Mapping[str, tuple] | None = None,
             efficiency: float | None = None, ax=None, title: str = "Roofline"):
    """Attainable FLOP/s vs arithmetic intensity (log-log), the ridge point marked; ``points`` maps a label to
    (intensities, achieved FLOP/s), drawn in the colour of the phase its label names (prefill, decode; else one
    of :data:`.style.OTHER_COLORS`); ``efficiency`` also draws the compute roof lowered to e x peak."""
    made, ax = ax is None, new_ax(ax)
    x = np.logspace(-1, 3, 200)
    ax.loglog(x, np.minimum(peak_flops_per_s, x * bandwidth_bytes_per_s), color=PREDICTED, label="roofline")
    if efficiency is not None:
        ax.loglog(x, np.minimum(efficiency * peak_flops_per_s, x * bandwidth_bytes_per_s), "--", color="grey",
                  lw=1, label=f"roof at e × peak (e = {efficiency:.0%})")
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    ax.axvline(ridge, color="grey", ls=":", label=f"ridge: {ridge:.3g} FLOP/B")
    for k, (label, (intensity, achieved)) in enumerate((points or {}).items()):
        color = PREFILL if "prefill" in label.lower() else DECODE if "decode" in label.lower() else OTHER_COLORS[k]
        ax.loglog(intensity, achieved, "o", color=color, label=label)
    lo, hi = ax.get_ylim()  # whole decades, so that the axis has at least two labelled ticks
    ax.set_ylim(10 ** np.floor(np.log10(lo)), 10 ** np.ceil(np.log10(hi) + 1e-9))
    eng = ticker.EngFormatter(unit="FLOP/s", places=0)
    ax.yaxis.set_major_formatter(eng)
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    plain_log_ticks(ax.xaxis, minor=False)
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title)
    _legend_under(ax, made)
    return ax


def decode_throughput(batches, tokens_per_s: Mapping[str, np.ndarray], ceiling_tokens_per_s: float | None = None,
                      ax=None, title: str = "Predicted decode throughput"):
    """Predicted decode tokens/s vs batch (log-log), one curve per label in shades of the decode colour, darker
    for later labels (longer contexts) (NaN where a batch does not fit in memory; the last point that fits is marked
    with an x). ``ceiling_tokens_per_s`` draws the compute-bound limit."""
    made, ax = ax is None, new_ax(ax)
    batches = np.asarray(batches)
    full = False
    shades = colormaps["Blues"](np.linspace(0.5, 0.95, len(tokens_per_s)))  # decode curves: no phase's other colour
    for (label, tps), shade in zip(tokens_per_s.items(), shades):
        tps = np.asarray(tps, dtype=float)
        line, = ax.loglog(batches, tps, color=shade, label=label)
        fits = np.flatnonzero(np.isfinite(tps))
        if len(fits) and fits[-1] < len(tps) - 1:
            ax.plot(batches[fits[-1]], tps[fits[-1]], "x", color=line.get_color(), ms=9, mew=2)
            full = True
    if full:
        ax.plot([], [], "x", color="grey", ms=9, mew=2, label="memory full")
    if ceiling_tokens_per_s is not None:
        ax.axhline(ceiling_tokens_per_s, color=PREDICTED, ls="--", lw=1, label="compute-bound ceiling")
    plain_log_ticks(ax.xaxis, lambda v: f"{v:,.0f}", minor=False)
    plain_log_ticks(ax.yaxis, lambda v: f"{v:,.0f}" if v >= 1 else f"{v:g}", minor=False)
    ax.set_xlabel("decode batch (sequences)")
    ax.set_ylabel("output tokens/s")
    ax.set_title(title)
    _legend_under(ax, made)
    return ax
