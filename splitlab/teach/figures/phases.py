"""Figures for the book. Every function draws on a given matplotlib Axes (or makes one), labels both axes with
units, sets a title, and returns the Axes, so notebooks stay one line per figure."""
from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker
import pandas as pd

from ...phases.engine import Generation

__all__ = ["token_timeline", "phase_throughput", "cached_vs_recompute", "kv_growth", "roofline",
           "prefill_scaling", "decode_scaling", "decode_throughput"]

PREFILL, DECODE, PREDICTED = "tab:orange", "tab:blue", "black"


def _ax(ax):
    return ax if ax is not None else plt.subplots(figsize=(7, 4))[1]


def token_timeline(gen: Generation, ax=None, title: str | None = None):
    """When each output token of the first request became available (ms after the request started)."""
    ax = _ax(ax)
    t_ms = np.array(gen.token_time_s) * 1e3
    ax.axvspan(0, gen.prefill_s * 1e3, color=PREFILL, alpha=0.25, label=f"prefill ({gen.prompt_lengths[0]} tokens)")
    ax.plot(t_ms, np.arange(1, len(t_ms) + 1), ".", color=DECODE, label="output token available")
    ax.annotate(f"first token: TTFT {gen.ttft_s * 1e3:.1f} ms", (t_ms[0], 1), xytext=(0.35, 0.6),
                textcoords="axes fraction", arrowprops=dict(arrowstyle="->"))
    ax.set_xlabel("time since the request started (ms)")
    ax.set_ylabel("output tokens emitted")
    ax.set_title(title or "One request: a long prefill, then one token per decode step")
    ax.legend(loc="upper left")
    return ax


def phase_throughput(prefill_tokens_per_s: float, decode_tokens_per_s: float, ax=None):
    """Bar chart of tokens processed per second in each phase (one request)."""
    ax = _ax(ax)
    bars = ax.bar(["prefill\n(prompt tokens)", "decode\n(output tokens)"], [prefill_tokens_per_s, decode_tokens_per_s],
                  color=[PREFILL, DECODE])
    ax.bar_label(bars, fmt="%.0f")
    ax.set_ylabel("tokens per second")
    ax.set_title(f"Prefill pushes {prefill_tokens_per_s / decode_tokens_per_s:.0f}x more tokens/s than decode")
    return ax


def cached_vs_recompute(df: pd.DataFrame, prefill_df: pd.DataFrame | None = None, ax=None):
    """Per-token time with the KV cache vs recomputing the whole sequence; optionally the prediction
    'recompute = a prefill of the whole sequence' interpolated from a prefill sweep."""
    ax = _ax(ax)
    ax.plot(df["context"], df["recompute_s"] * 1e3, ".", color=PREFILL, label="measured: full recompute")
    ax.plot(df["context"], df["cached_s"] * 1e3, ".", color=DECODE, label="measured: cached decode step")
    if prefill_df is not None:
        pred = np.interp(df["context"] + 1, prefill_df["prompt_tokens"], prefill_df["prefill_s"]) * 1e3
        ax.plot(df["context"], pred, "-", color=PREDICTED, label="predicted: prefill of (context + 1) tokens")
    ax.set_xlabel("tokens already in the sequence (context)")
    ax.set_ylabel("time to produce the next token (ms)")
    ax.set_yscale("log")
    plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_title("The KV cache turns each step from a full pass into a one-token pass")
    ax.legend()
    return ax


def kv_growth(steps, measured_bytes, predicted_bytes, ax=None, label: str = ""):
    """Cache bytes measured at each decode step against the formula."""
    ax = _ax(ax)
    ax.plot(steps, np.asarray(measured_bytes) / 2 ** 10, "o", ms=3, label=f"measured {label}".strip())
    ax.plot(steps, np.asarray(predicted_bytes) / 2 ** 10, "-", color=PREDICTED, lw=1,
            label="formula" if not label else None)
    ax.set_xlabel("tokens in the cache")
    ax.set_ylabel("KV cache size (KiB)")
    ax.set_title("The KV cache grows by the same number of bytes every token")
    ax.legend()
    return ax


def _predictions(ax, x, predicted_s) -> None:
    """Draw one or several predicted curves (seconds, drawn in ms): an array is labelled "predicted", a mapping
    label -> array draws each with its own line style."""
    if predicted_s is None:
        return
    if not isinstance(predicted_s, Mapping):
        predicted_s = {"predicted": predicted_s}
    for (label, seconds), (style, color) in zip(predicted_s.items(),
                                                 [("--", PREDICTED), (":", PREDICTED), ("-.", "tab:gray")]):
        ax.plot(x, np.asarray(seconds, dtype=float) * 1e3, style, color=color, lw=1.5, label=label)


def _minor_label(value: float, _pos=None, fmt=lambda v: f"{v:g}") -> str:
    """Label the minor ticks 2, 3 and 5 of each decade (0.2, 3, 50, ...) with ``fmt``, leave the others blank."""
    mantissa = value / 10 ** np.floor(np.log10(value) + 1e-9)
    return fmt(value) if any(abs(mantissa - m) < 1e-6 for m in (2, 3, 5)) else ""


def _log_axes(ax, log: bool) -> None:
    if log:  # plain numbers on the ticks (1, 2, 4, ...; 0.5, 2, 5, ...), not powers of ten
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(ticker.FuncFormatter(_minor_label))


def prefill_scaling(measured: pd.DataFrame, predicted_s=None, ax=None, log: bool = False, title: str | None = None):
    """Prefill time vs prompt length, measured and, if given, predicted: ``predicted_s`` is seconds per row, or a
    dict label -> seconds per row for several predictions. ``log`` draws both axes on log scales."""
    ax = _ax(ax)
    ax.plot(measured["prompt_tokens"], measured["prefill_s"] * 1e3, "o-", color=PREFILL, label="measured")
    _predictions(ax, measured["prompt_tokens"], predicted_s)
    _log_axes(ax, log)
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("prefill time (ms)")
    ax.set_title(title or "Prefill time grows with the prompt")
    ax.legend()
    return ax


def decode_scaling(measured: pd.DataFrame, predicted_s=None, ax=None, log: bool = False, title: str | None = None):
    """Decode step time vs batch size, measured and, if given, predicted (seconds per row, or a dict
    label -> seconds per row). ``log`` draws both axes on log scales."""
    ax = _ax(ax)
    ax.plot(measured["batch"], measured["step_s"] * 1e3, "o-", color=DECODE, label="measured")
    _predictions(ax, measured["batch"], predicted_s)
    _log_axes(ax, log)
    ax.set_xlabel("decode batch size (sequences)")
    ax.set_ylabel("decode step time (ms)")
    ax.set_title(title or f"A decode step at {int(measured['context'].iloc[0])} cached tokens per sequence")
    ax.legend()
    return ax


def decode_throughput(batches, tokens_per_s: Mapping[str, np.ndarray], ceiling_tokens_per_s: float | None = None,
                      ax=None, title: str = "Predicted decode throughput"):
    """Predicted decode tokens/s vs batch, one curve per label (NaN where a batch does not fit in memory; the
    last point that fits is marked with an x). ``ceiling_tokens_per_s`` draws the compute-bound limit."""
    ax = _ax(ax)
    batches = np.asarray(batches)
    full = False
    for label, tps in tokens_per_s.items():
        tps = np.asarray(tps, dtype=float)
        line, = ax.loglog(batches, tps, label=label)
        fits = np.flatnonzero(np.isfinite(tps))
        if len(fits) and fits[-1] < len(tps) - 1:
            ax.plot(batches[fits[-1]], tps[fits[-1]], "x", color=line.get_color(), ms=9, mew=2)
            full = True
    if full:
        ax.plot([], [], "x", color="grey", ms=9, mew=2, label="memory full")
    if ceiling_tokens_per_s is not None:
        ax.axhline(ceiling_tokens_per_s, color=PREDICTED, ls="--", lw=1, label="compute-bound ceiling")
    plain = ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(ticker.FuncFormatter(
        lambda v, pos: _minor_label(v, pos, lambda x: f"{x:,.0f}" if x >= 1 else f"{x:g}")))
    ax.set_xlabel("decode batch size (sequences)")
    ax.set_ylabel("predicted output tokens per second")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def roofline(peak_flops_per_s: float, bandwidth_bytes_per_s: float, points: dict[str, tuple] | None = None,
             ax=None, title: str = "Roofline"):
    """Attainable FLOP/s vs arithmetic intensity; ``points`` maps a label to (intensities, achieved FLOP/s)."""
    ax = _ax(ax)
    x = np.logspace(-1, 4, 200)
    ax.loglog(x, np.minimum(peak_flops_per_s, x * bandwidth_bytes_per_s), color=PREDICTED, label="roofline")
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    ax.axvline(ridge, color="grey", ls=":", label=f"ridge point {ridge:.3g} FLOP/B")
    for (label, (intensity, achieved)), color in zip((points or {}).items(), [DECODE, PREFILL, "tab:green"]):
        ax.loglog(intensity, achieved, "o", color=color, label=label)
    eng = ticker.EngFormatter(unit="FLOP/s")  # 10 GFLOP/s, 1 TFLOP/s, ...
    ax.yaxis.set_major_formatter(eng)
    ax.yaxis.set_minor_formatter(ticker.FuncFormatter(lambda v, pos: _minor_label(v, pos, lambda x: eng(x))))
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("attainable or achieved FLOP/s")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return ax
