"""Figures for the book. Every function draws on a given matplotlib Axes (or makes one), labels both axes with
units, sets a title, and returns the Axes, so notebooks stay one line per figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .engine import Generation

__all__ = ["token_timeline", "phase_throughput", "cached_vs_recompute", "kv_growth", "roofline",
           "prefill_scaling", "decode_scaling"]

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


def prefill_scaling(measured: pd.DataFrame, predicted_s=None, ax=None):
    """Prefill time vs prompt length, measured (and predicted if given, seconds per row)."""
    ax = _ax(ax)
    ax.plot(measured["prompt_tokens"], measured["prefill_s"] * 1e3, "o-", color=PREFILL, label="measured")
    if predicted_s is not None:
        ax.plot(measured["prompt_tokens"], np.asarray(predicted_s) * 1e3, "--", color=PREDICTED, label="predicted")
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("prefill time (ms)")
    ax.set_title("Prefill time grows with the prompt")
    ax.legend()
    return ax


def decode_scaling(measured: pd.DataFrame, predicted_s=None, ax=None):
    """Decode step time vs batch size, measured (and predicted if given, seconds per row)."""
    ax = _ax(ax)
    ax.plot(measured["batch"], measured["step_s"] * 1e3, "o-", color=DECODE, label="measured")
    if predicted_s is not None:
        ax.plot(measured["batch"], np.asarray(predicted_s) * 1e3, "--", color=PREDICTED, label="predicted")
    ax.set_xlabel("decode batch size (sequences)")
    ax.set_ylabel("decode step time (ms)")
    ax.set_title(f"A decode step at {int(measured['context'].iloc[0])} cached tokens per sequence")
    ax.legend()
    return ax


def roofline(peak_flops_per_s: float, bandwidth_bytes_per_s: float, points: dict[str, tuple] | None = None,
             ax=None, title: str = "Roofline"):
    """Attainable FLOP/s vs arithmetic intensity; ``points`` maps a label to (intensities, achieved FLOP/s)."""
    ax = _ax(ax)
    x = np.logspace(-1, 4, 200)
    ax.loglog(x, np.minimum(peak_flops_per_s, x * bandwidth_bytes_per_s), color=PREDICTED, label="roofline")
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    ax.axvline(ridge, color="grey", ls=":", label=f"ridge point {ridge:.0f} FLOP/B")
    for (label, (intensity, achieved)), color in zip((points or {}).items(), [DECODE, PREFILL, "tab:green"]):
        ax.loglog(intensity, achieved, "o", color=color, label=label)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("FLOP per second")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return ax
