"""Chapter 4's figures: the stall of running streams vs the prompt that caused it (:func:`itl_spikes`), TTFT over
runs at several prompt lengths or rates (:func:`ttft_sweep`), each request's TTFT beside a prediction
(:func:`ttft_by_request`), and the chapter's composite figures (:func:`stall_run`, :func:`ttft_sweeps`,
:func:`memory_waves`, :func:`policies`, :func:`ttft_load`), each a phone-legible figure of at most three panels
stacked vertically (:mod:`.confusions`' page style). Its tables come from :mod:`.interference_tables`."""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from . import serving as serving_plots
from .confusions import _styled, figure
from .phone import legend_below, wrap
from .interference_tables import (chunk_note, chunk_steps, length_note, load_note, prefill_alone_table,  # noqa: F401
                                  remedies_frame, remedies_table, run_spread, stall_check, stall_summary, stall_table,
                                  ttft_table)
from .serving import KIND_COLORS, _as_results
from .style import DECODE, PREDICTED, change_words, fmt3, layout_color  # noqa: F401 (for the chapter)

__all__ = ["itl_spikes", "ttft_sweep", "ttft_by_request", "stall_run", "ttft_sweeps", "memory_waves", "policies",
           "ttft_load", "prefill_alone_table", "stall_table", "ttft_table", "remedies_table", "run_spread", "load_note",
           "length_note", "chunk_steps", "chunk_note", "stall_summary"]


def _ax(ax, size=(8, 3.5)):
    return ax if ax is not None else figure(1, height=min(4.0, 5.6 * size[1] / size[0] + 0.6))[1][0]



def _legend_below(ax, ncol: int = 1) -> None:
    """The panel's legend under its figure's panels (one column: a phone-wide figure has no room for two), so
    that it never hides a measured point (noisy runs put them anywhere)."""
    legend_below(ax.figure, ax, ncols=ncol)


def _predicted_lines(ax, predicted, scale: float = 1e3) -> None:
    """``predicted``: mapping label -> (x, seconds); drawn as black lines with distinct styles, in ms."""
    for (label, (x, y)), style in zip((predicted or {}).items(), ["--", ":", "-."]):
        ax.plot(x, np.asarray(y, dtype=float) * scale, style, color=PREDICTED, lw=1.5, label=label)


@_styled
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
               label=f"typical gap between tokens ({typical * 1e3:.3g} ms)")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("length of the arriving prompt (tokens)")
    ax.set_ylabel("longest gap between tokens (ms)")
    ax.set_title(title or "A long prompt stalls every running stream for about its prefill")
    _legend_below(ax)
    return ax


@_styled
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


@_styled
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
    _legend_below(ax)
    return ax


@_styled
def stall_run(res, long_id: int, pad_s: float, title: str):
    """Run 1: the streams' inter-token gaps over time with the long prompt's arrival marked (top), and the
    worker's steps around it (bottom)."""
    fig, (a1, a2) = figure(2, 2.6, height_ratios=[3, 2])
    serving_plots.itl_over_time(res, marked=[long_id], ax=a1, title=title)
    r = res.requests[long_id]
    t_range = (max(0.0, r.prefill_start_s - pad_s), r.token_times_s[-1] + pad_s)
    serving_plots.worker_timeline(res, ax=a2, t_range=t_range,
                                  title="The worker around the arrival")
    a2.set_ylabel("worker")
    handles, labels = a1.get_legend_handles_labels()
    labels = [lab.replace("its prefill runs", "prefill (of the long prompt)").replace("ITL", "gaps") for lab in labels]
    decode = [h for h in a2.get_legend().legend_handles if h.get_label() == "decode"]
    a1.get_legend().remove()
    a2.get_legend().remove()
    legend_below(fig, handles + decode, labels + ["decode steps"])
    return fig


@_styled
def ttft_sweeps(by_length: pd.DataFrame, by_rate: pd.DataFrame, prefill_s: Mapping[int, float], rate: float,
                sweep_prompt: int, decode_step_s: float):
    """Run 2: mean and P90 TTFT against the prompt length at one rate (top) and against the rate at one length
    (bottom), with the M/D/1 prediction and the prefill floor (the prefill timed alone)."""
    from ...serving.interference import queueing_ttft_s

    fig, (a1, a2) = figure(2, 3.3)
    lengths = np.array(sorted(prefill_s))
    floor = np.array([prefill_s[n] for n in lengths])
    ttft_sweep(by_length, "prompt_tokens", {
        "predicted mean (M/D/1 queue)": (lengths,
                                         [queueing_ttft_s(rate, prefill_s[n], decode_step_s) for n in lengths]),
        "prefill timed alone": (lengths, floor)}, ax=a1, title=f"TTFT vs prompt length at {rate:g} requests/s")
    grid = np.linspace(0.05, 0.85, 60) / prefill_s[sweep_prompt]
    ttft_sweep(by_rate, "rate_per_s", {
        "predicted mean (M/D/1 queue)": (grid, queueing_ttft_s(grid, prefill_s[sweep_prompt], decode_step_s)),
        "prefill timed alone": (grid, np.full_like(grid, prefill_s[sweep_prompt]))},
        ax=a2, title=f"TTFT vs request rate, {sweep_prompt}-token prompts")
    del fig.legends[1:]  # both panels have the same entries: one legend under them
    return fig


@_styled
def memory_waves(with_budget, no_budget, predicted_ttft_s, fit: int, budget_tokens: int):
    """Run 3: KV memory held and reserved over time under the budget (top), and each request's TTFT with and
    without the budget beside the waves prediction (bottom)."""
    fig, (a1, a2) = figure(2, 3.1)
    serving_plots.kv_memory(with_budget, ax=a1, title=f"KV memory with a budget of {budget_tokens} positions")
    h1, l1 = a1.get_legend_handles_labels()
    a1.get_legend().remove()
    ttft_by_request({"with the KV budget": with_budget, "no budget": no_budget}, predicted_ttft_s, ax=a2,
                    predicted_label=f"predicted: waves of {fit}", title="Requests arriving at once: TTFT of each")
    h2, l2 = a2.get_legend_handles_labels()
    fig.legends.clear()  # one legend for both panels, under them
    legend_below(fig, h1 + h2, [lab.replace(" per worker", "") if lab.startswith("KV") else "KV " + lab.split(": ")[-1]
                                for lab in l1] + l2, ncols=2)
    return fig


@_styled
def policies(runs: Mapping[str, object], long_id: int, title: str):
    """The same arrival under several policies (``runs``: policy -> ServingResult): one panel of the streams'
    gaps over time each, in the policy's colour (:data:`.style.LAYOUT_COLORS`), stacked, sharing both axes."""
    fig, axes = figure(len(runs), 2.1, sharex=True)
    for ax, (name, r) in zip(axes, runs.items()):
        serving_plots.itl_over_time(r, marked=[long_id], ax=ax, title=name, color=layout_color(name, DECODE))
        ax.set_xlabel("")
        ax.set_ylabel("gap (ms)")
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    axes[-1].set_xlabel("time (s)")
    top = max(float(r.token_table().gap_s.max()) for r in runs.values()) * 1e3
    for ax in axes:
        ax.set_ylim(0, top * 1.1)
    axes[0].set_xlim(0, max(r.end_s for r in runs.values()))
    fig.suptitle(title)
    return fig


@_styled
def ttft_load(runs, prefill_alone_s: float, predicted_mean_s: float, title: str):
    """Each request's TTFT against its arrival time, one marker per run (arrival seed), with two floors: the
    request's own prefill inside its run (TTFT can never be below it) and the prefill timed alone; and the
    predicted mean."""
    fig, (ax,) = figure(1, 3.6)
    markers = ["o", "s", "^", "D", "v"]
    for i, res in enumerate(runs):
        t = res.request_table()
        ax.plot(t.arrival_s, t.ttft_s * 1e3, markers[i % 5], color=KIND_COLORS["prefill"], alpha=0.8,
                label="measured TTFT" if i == 0 else None)
        own = [(r.prefill_end_s - r.prefill_start_s) * 1e3 for r in res.requests]
        ax.plot(t.arrival_s, own, "_", color="black", ms=10, mew=1.5,
                label="its prefill inside the run" if i == 0 else None)
    ax.axhline(prefill_alone_s * 1e3, color=PREDICTED, ls=":", label="prefill timed alone")
    if np.isfinite(predicted_mean_s):
        ax.axhline(predicted_mean_s * 1e3, color=PREDICTED, ls="--", label="predicted mean (M/D/1)")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("arrival time (s)")
    ax.set_ylabel("time to first token (ms)")
    ax.set_title(wrap(title))
    _legend_below(ax)
    return fig
