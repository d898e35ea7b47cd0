"""Chapter 4's measured-against-predicted figures: the stall of running streams vs the prompt that caused it
(:func:`itl_spikes`), TTFT over runs at several prompt lengths or rates (:func:`ttft_sweep`), and each request's
TTFT beside a prediction (:func:`ttft_by_request`)."""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from .serving import KIND_COLORS, _as_results, _ax

__all__ = ["itl_spikes", "ttft_sweep", "ttft_by_request"]

PREDICTED = "black"


def _legend_below(ax, ncol: int = 2) -> None:
    """Legend under the axes, so that it never hides a measured point (noisy runs put them anywhere)."""
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=ncol, frameon=False)


def _predicted_lines(ax, predicted, scale: float = 1e3) -> None:
    """``predicted``: mapping label -> (x, seconds); drawn as black lines with distinct styles, in ms."""
    for (label, (x, y)), style in zip((predicted or {}).items(), ["--", ":", "-."]):
        ax.plot(x, np.asarray(y, dtype=float) * scale, style, color=PREDICTED, lw=1.5, label=label)


def itl_spikes(spikes: pd.DataFrame, predicted: Mapping[str, tuple] | None = None, ax=None,
               title: str | None = None):
    """The gap running streams saw across a long prompt's prefill (the ITL spike) vs that prompt's length, from
    :func:`splitlab.serving.interference.spike_table` rows (one or several runs): measured spikes as dots, the
    in-run prefill as hollow circles, the streams' typical gap as a dashed blue line; ``predicted`` maps a
    label to (prompt tokens, seconds)."""
    ax = _ax(ax, (7, 4))
    ax.plot(spikes.prompt_tokens, spikes.spike_s * 1e3, "o", color=KIND_COLORS["decode"], ms=7,
            label="measured: stall of the running streams")
    ax.plot(spikes.prompt_tokens, spikes.prefill_s * 1e3, "o", mfc="none", mec=KIND_COLORS["prefill"], ms=11,
            label="measured: the prefill inside that run")
    _predicted_lines(ax, predicted)
    typical = float(np.nanmedian(spikes.typical_itl_s))
    ax.axhline(typical * 1e3, color=KIND_COLORS["decode"], ls=":", lw=1,
               label=f"typical gap between tokens ({typical * 1e3:.1f} ms)")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("length of the arriving prompt (tokens)")
    ax.set_ylabel("longest gap between tokens (ms)")
    ax.set_title(title or "A long prompt stalls every running stream for about its prefill")
    _legend_below(ax)
    return ax


def ttft_sweep(table: pd.DataFrame, x: str, predicted: Mapping[str, tuple] | None = None, ax=None,
               xlabel: str | None = None, title: str | None = None):
    """Measured TTFT over several runs: ``table`` has the column ``x`` (e.g. ``prompt_tokens`` or
    ``rate_per_s``), ``ttft_mean_s`` and optionally ``ttft_p90_s``; ``predicted`` maps a label to (x, seconds)
    (e.g. the prefill floor and a queueing formula)."""
    ax = _ax(ax, (6, 4))
    ax.plot(table[x], table.ttft_mean_s * 1e3, "o-", color=KIND_COLORS["prefill"], label="measured: mean TTFT")
    if "ttft_p90_s" in table:
        ax.plot(table[x], table.ttft_p90_s * 1e3, "^", color=KIND_COLORS["prefill"], mfc="none",
                label="measured: P90 TTFT")
    _predicted_lines(ax, predicted)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel or {"prompt_tokens": "prompt length (tokens)",
                             "rate_per_s": "request rate (requests/s)"}.get(x, x))
    ax.set_ylabel("time to first token (ms)")
    ax.set_title(title or "TTFT grows with the prompt and with the load")
    _legend_below(ax)
    return ax


def ttft_by_request(results, predicted_s=None, ax=None, title: str | None = None,
                    predicted_label: str = "predicted"):
    """Each request's TTFT (ms) as bars, one colour per run (one run, a list, or a dict label -> run), in
    request-id order; ``predicted_s`` (one value per request, seconds) as black markers."""
    ax = _ax(ax, (8, 3.5))
    runs = _as_results(results)
    width = 0.8 / max(len(runs), 1)
    for k, (label, res) in enumerate(runs.items()):
        table = res.request_table().sort_values("id")
        ax.bar(table.id + (k - (len(runs) - 1) / 2) * width, table.ttft_s * 1e3, width, label=label)
    if predicted_s is not None:
        ids = sorted(r.id for r in next(iter(runs.values())).requests)
        ax.plot(ids, np.asarray(predicted_s, dtype=float) * 1e3, "_", color=PREDICTED, ms=18, mew=2.5,
                label=predicted_label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("request (id, in arrival order)")
    ax.set_ylabel("time to first token (ms)")
    ax.set_title(title or "TTFT of each request")
    _legend_below(ax, ncol=3)
    return ax
