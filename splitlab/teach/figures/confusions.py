"""Chapter 8's figures and tables (what the split is not), and the page style the serving chapters' figures share.

:data:`PHONE`, :data:`WIDTH`, :func:`phone` and :func:`figure` (stacked panels) are the page style of
:mod:`.phone`: figures that stay legible when the page is a 412 px phone screen (every text 9 pt or more there).

- :func:`chunked_vs_split`: every gap between tokens of several runs (CDF), and SLO attainment against the rate.
- :func:`kv_schemes`: KV bytes held over a served run by padded, reserved and paged memory.
- :func:`speculative_sweep`: tokens per verify step and time per output token against the proposals per step.
- :func:`prefix_reuse`: prefill time with and without a cached prefix, and prompt tokens computed by routing.

Tables (DataFrames that fit a phone's column: one column per configuration, units in the row names) and printed
verdicts: :func:`headline`, :func:`chunked_verdict`, :func:`waste_table`, :func:`quant_table`, :func:`quant_note`,
:func:`summary_table`; the simulator and goodput against the live runs and the curves, in words:
:func:`simulator_note`, :func:`goodput_note`.
"""
from __future__ import annotations

import textwrap
from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, NullFormatter

from .phone import PHONE, WIDTH, figure, legend_below, phone, styled as _styled
from .style import OTHER_COLORS, PREDICTED, TARGET, TARGET_LS, layout_color
from .confusions_tables import (chunked_verdict, fmt3, headline, quant_note, quant_table, reuse_table, routing_counts,
                                routing_table, sig3, speculative_tables, summary_table, waste_table)
from .confusions_runs import draft_note, goodput_searches, prefix_reuse_rows, rate_sweep, speculative_row
from .confusions_sim import goodput_note, simulator_note

__all__ = ["PHONE", "WIDTH", "phone", "figure", "chunked_vs_split", "kv_schemes", "speculative_sweep", "prefix_reuse",
           "headline", "chunked_verdict", "waste_table", "quant_table", "quant_note", "summary_table",
           "speculative_tables", "reuse_table", "routing_table", "sig3", "fmt3", "rate_sweep", "speculative_row",
           "prefix_reuse_rows", "draft_note", "routing_counts", "simulator_note", "goodput_note",
           "goodput_searches"]

#: what is not a layout (a draft model, a memory scheme, a routing policy) takes none of a layout's colours
COLORS = OTHER_COLORS


@_styled
def chunked_vs_split(runs: Mapping[str, object], sweep: pd.DataFrame, ttft_slo_s: float, tpot_slo_s: float,
                     target: float = 0.9, goodputs: Mapping[str, float] | None = None):
    """Top: the CDF of every inter-token gap (ITL, ms, log axis) of each run in ``runs`` (name ->
    ServingResult), with each run's P99 marked. Bottom: SLO attainment (%) against the cluster's request rate
    (its worker count, that of the runs, in the axis label), from ``sweep`` (columns ``config``, ``rate_per_s``,
    ``slo_attainment``), with the ``target`` line of goodput and, from ``goodputs`` (name -> requests/s per worker,
    the bisection's), a triangle on that line at each goodput times the workers. Each run in its layout's colour
    (:data:`.style.LAYOUT_COLORS`) where its name names one."""
    fig, (a1, a2) = figure(2, 3.1)
    for i, (name, res) in enumerate(runs.items()):
        color = layout_color(name, COLORS[i % len(COLORS)])
        gaps = np.sort(res.token_table().gap_s.dropna().to_numpy()) * 1e3
        a1.step(gaps, np.arange(1, gaps.size + 1) / gaps.size * 100, where="post", color=color, label=name)
        a1.axvline(np.percentile(gaps, 99), color=color, ls=":", lw=1.2)
    a1.set_xscale("log")
    a1.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    a1.xaxis.set_minor_formatter(NullFormatter())
    a1.set_xlabel("gap between two tokens, ITL (ms, log)")
    a1.set_ylabel("share of gaps (%)")
    a1.set_title("Inter-token gaps (dotted: P99)")
    sizes = {len(res.workers) for res in runs.values()}
    for i, (name, g) in enumerate(sweep.groupby("config", sort=False)):
        color = layout_color(name, COLORS[i % len(COLORS)])
        a2.plot(g.rate_per_s, g.slo_attainment * 100, "o-", color=color, ms=4, label=name)
        if goodputs and name in goodputs and len(sizes) == 1:
            a2.plot([goodputs[name] * next(iter(sizes))], [target * 100], "v", color=color, ms=9, mec="black",
                    mew=0.6, zorder=4)
    a2.axhline(target * 100, color=TARGET, ls=TARGET_LS, lw=1, label=f"{target:.0%}: goodput")
    if goodputs and len(sizes) == 1:  # one legend entry for the triangles, in no layout's colour
        a2.plot([], [], "v", color="white", mec="black", mew=0.6, ms=9, label="bisected")
    a2.set_ylim(-3, 103)
    a2.set_xlabel(f"request rate of the {next(iter(sizes))} workers (requests/s)" if len(sizes) == 1 else
                  "request rate of the cluster (requests/s)")
    a2.set_ylabel("within both SLOs (%)")
    a2.set_title(f"SLOs: TTFT ≤ {ttft_slo_s * 1e3:.0f} ms, TPOT ≤ {tpot_slo_s * 1e3:.0f} ms")
    legend_below(fig, a2, ncols=2)  # the runs' colours are the same in both panels
    return fig


@_styled
def kv_schemes(schemes: pd.DataFrame, worker: str, unit: float = 2 ** 20, unit_name: str = "MiB",
               title: str | None = None):
    """KV bytes one ``worker`` holds over a served run under each scheme of
    :func:`splitlab.serving.paged.memory_schemes` (``used``, ``paged``, ``reserved``, ``padded``)."""
    fig, (ax,) = figure(1, 4.2)  # the legend below takes ~1 in of it
    g = schemes[schemes.worker == worker]
    styles = {"padded": (COLORS[3], "-"), "reserved": (COLORS[1], "--"), "paged": (COLORS[0], "-"),
              "used": (COLORS[2], ":")}  # measured: a colour (grey); black is for predictions
    labels = {"padded": "padded batch, final sizes", "reserved": "reserved up front (prompt + max new)",
              "paged": "paged (blocks)", "used": "used (positions cached)"}
    for scheme, (color, ls) in styles.items():
        ax.step(g.time_s, g[scheme] / unit, where="post", color=color, ls=ls, lw=1.6, label=labels[scheme])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time in the run (s)")
    ax.set_ylabel(f"KV memory held ({unit_name})")
    ax.set_title(title or f"KV memory of worker {worker}")
    legend_below(fig, ax)
    return fig


@_styled
def speculative_sweep(table: pd.DataFrame, baseline_tpot_s: float):
    """From ``table`` (columns ``draft``, ``k``, ``tokens_per_step``, ``predicted_tokens_per_step``,
    ``tpot_ms``): top, tokens per verify step (measured dots, Leviathan et al.'s prediction at the measured
    acceptance as a black dashed line, the book's colour of a prediction); bottom, TPOT against plain decoding's
    (measured: a colour, not black)."""
    fig, (a1, a2) = figure(2, 2.9, sharex=True)
    for i, (color, (name, g)) in enumerate(zip(COLORS, table.groupby("draft", sort=False))):
        g = g.groupby("k").mean(numeric_only=True).reset_index()
        a1.plot(g.k, g.tokens_per_step, "o", color=color, ms=7, label=f"{name}: measured")
        # predicted: black and dashed, as in every chapter; one legend entry for the drafts' predictions
        a1.plot(g.k, g.predicted_tokens_per_step, "--", color=PREDICTED, lw=1.3,
                label="predicted" if i == 0 else "_predicted")
        a2.plot(g.k, g.tpot_ms, "o-", color=color, ms=6, label=name)
    # plain decoding is measured: a colour of its own, not the predictions' black
    a2.axhline(baseline_tpot_s * 1e3, color=COLORS[2], ls=":", lw=1.8, label="plain decoding")
    a1.set_ylim(bottom=0)
    a2.set_ylim(bottom=0)
    a1.set_ylabel("tokens per verify")
    a1.set_title("Tokens out of one target forward")
    a2.set_ylabel("TPOT (ms)")
    a2.set_xlabel("draft tokens proposed per step, k")
    a2.set_title("Time per output token")
    h1, l1 = a1.get_legend_handles_labels()
    h2, l2 = a2.get_legend_handles_labels()
    legend_below(fig, h1 + h2[-1:], l1 + l2[-1:], ncols=2)  # bottom: the same colours, joined
    a2.set_xticks(sorted(table.k.unique()))
    return fig


@_styled
def prefix_reuse(timings: pd.DataFrame, routing: pd.DataFrame):
    """Top: prefill time (ms) of prompts made of a shared prefix and a new suffix, against the prefix length,
    cold (``cold_s``) and with the prefix cached (``warm_s``), beside a prefill of the suffix alone
    (``suffix_alone_s``); columns ``prefix_tokens``. Bottom: prompt tokens the prefill pool computed under
    each routing policy (``routing``: index policy, column ``computed_tokens``; horizontal bars, linear axis)."""
    fig, (a1, a2) = figure(2, 2.9)
    x = timings.prefix_tokens
    a1.plot(x, timings.cold_s * 1e3, "o-", color=COLORS[3], label="no cache: whole prompt")
    a1.plot(x, timings.warm_s * 1e3, "o-", color=COLORS[0], label="prefix cached: suffix only")
    # measured too (a prompt of that length, prefilled alone): a colour, not the predictions' black
    a1.plot(x, timings.suffix_alone_s * 1e3, "--", color=COLORS[2], lw=1.4, label="a prompt of the suffix's length")
    a1.set_ylim(bottom=0)
    a1.set_xlabel("shared prefix (tokens)")
    a1.set_ylabel("prefill (ms)")
    a1.set_title("Prefill with and without the prefix's KV")
    legend_below(fig, a1)
    # a long policy name ("cache on the decode side") on one line took half the panel's width: wrapped
    names = [textwrap.fill(str(n), 12) for n in routing.index]
    # one neutral colour: the policies are named on the axis, and a colour of the top panel's lines would tie them
    a2.barh(names, routing.computed_tokens / 1e3, color=COLORS[4])
    a2.invert_yaxis()
    a2.set_xlabel("tokens prefilled (thousands)")
    a2.set_title("Where the prefix cache lives")
    return fig
