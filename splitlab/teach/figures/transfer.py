"""Figures of moving the KV cache (chapter 5): bytes per prompt, link bandwidths, transfer times measured against
``latency + bytes / bandwidth``, DistServe's transfer-versus-decode-step comparison, and layer-wise streaming.

Like :mod:`splitlab.plots`, every function draws on a given matplotlib Axes (or makes one, phone-legible:
:func:`splitlab.teach.figures.confusions.figure`), labels both axes with units, sets a title, and returns the Axes.
Text is drawn in the page style :data:`~splitlab.teach.figures.confusions.PHONE`. Times are drawn in milliseconds,
bandwidths in GB/s (1e9 bytes/s). Quantities spanning decades go on log axes as dots, never as bars (a bar's
length on a log axis means nothing).

- :func:`kv_bytes_vs_prompt`: KV bytes to move vs prompt length for several models (formula lines, measured dots).
- :func:`bandwidth_dots`: bandwidths measured here beside published link speeds (:data:`splitlab.sizing.LINKS`).
- :func:`transfer_vs_bytes`: measured transfer times vs bytes with the fitted ``latency + bytes / bandwidth``.
- :func:`handoff_dots`: one prompt's transfer time over each link vs a decode step and a prefill (DistServe).
- :func:`handoff_grid`: the numbers behind it (and behind chapter 5's explorers): models x prompts x links.
- :func:`streaming_timeline`: one layer-wise streamed prefill: the forward, each layer's send, what is left after.

The chapter's tables (phone-wide: few columns, 3 significant digits) come from :mod:`.transfer_tables`, its
sentences about its own run from :mod:`.transfer_notes`.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker
import pandas as pd

from ... import sizing
from .confusions import _styled, figure
from .phone import legend_below
from .phases import _minor_label
from .transfer_notes import (cache_cost_note, gloo_note, handoff_note, layerwise_note, link_rate_note,  # noqa: F401
                             link_words, stream_cost_note, stream_prefill_lines, summary, sweep_note, takeaway_note)
from .transfer_tables import bench_table, fit_sweep, overlap_table, published_kv_table, sweep_table  # noqa: F401
from .style import DECODE, PREDICTED, PREFILL, TRANSFER

__all__ = ["kv_bytes_vs_prompt", "bandwidth_dots", "transfer_vs_bytes", "handoff_dots", "streaming_timeline",
           "bandwidth_bars", "handoff_bars", "handoff_grid", "MEASURED", "PUBLISHED",
           "published_kv_table", "bench_table", "sweep_table", "overlap_table", "sweep_note", "handoff_note",
           "link_rate_note", "takeaway_note", "summary", "cache_cost_note", "layerwise_note",
           "stream_prefill_lines", "stream_cost_note", "link_words", "gloo_note", "fit_sweep"]

MEASURED, PUBLISHED = TRANSFER, "tab:gray"  # a link measured here: the transfer's colour
_UNITS = {2 ** 30: "GiB", 2 ** 20: "MiB", 2 ** 10: "KiB"}


def _ax(ax, size=(7, 4)):
    """``ax``, or the one panel of a new phone-legible figure of the aspect ``size`` asks for."""
    return ax if ax is not None else figure(1, height=min(4.2, 5.6 * size[1] / size[0] + 0.6))[1][0]


def _plain(v: float) -> str:
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def _plain_log(axis, minor: bool = True) -> None:
    """Plain numbers (0.2, 1, 50, 1,000) on a log axis: the decades, and with ``minor`` the minor ticks 2 and 5
    of each decade (3 too would touch its neighbours at 12 pt on a phone-wide panel)."""
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _plain(v)))
    if not minor:
        axis.set_minor_formatter(ticker.NullFormatter())
        return
    axis.set_minor_formatter(ticker.FuncFormatter(
        lambda v, pos: "" if round(v / 10 ** np.floor(np.log10(v) + 1e-9)) == 3 else _minor_label(v, pos, _plain)))


def handoff_grid(models: Sequence[str], prompt_tokens: Sequence[int], links: Mapping[str, float] | None = None,
                 measured: Mapping[str, float] | None = None, gpu: str = "H100", dtype="fp16") -> pd.DataFrame:
    """DistServe's comparison (:func:`splitlab.sizing.handoff`) over a grid: one row per model x prompt length x
    link, the links sorted fastest first.

    Args:
        models: published models (:data:`splitlab.sizing.PUBLISHED_MODELS`). prompt_tokens: lengths (tokens).
        links: label -> bytes/s (default: every link of :data:`splitlab.sizing.LINKS`, datasheet numbers);
            measured: label -> bytes/s measured on this machine (chapter 5's fit to the raw buffer).

    Returns:
        columns ``model``, ``prompt_tokens``, ``link``, ``bandwidth_bytes_per_s``, ``link_source`` ("published"
        or "measured"), ``kv_bytes``, ``transfer_s``, ``decode_step_s`` (minimum, on ``gpu``), ``prefill_s``
        (roofline), ``decode_steps``, ``prefill_share`` and ``label`` (every time is predicted from the bytes and
        the bandwidth: "predicted, published link" or "predicted, link measured here").

    Raises:
        KeyError: an unknown model or GPU; ValueError: a bandwidth that is not > 0 (from ``sizing``).
    """
    links = {k: v["bandwidth_bytes_per_s"] for k, v in sizing.LINKS.items()} if links is None else dict(links)
    speeds = [(name, bw, "published") for name, bw in links.items()]
    speeds += [(name, bw, "measured") for name, bw in (measured or {}).items()]
    speeds.sort(key=lambda s: -s[1])
    rows = [dict(model=m, prompt_tokens=int(n), link=name, bandwidth_bytes_per_s=float(bw), link_source=src,
                 **sizing.handoff(m, int(n), bw, gpu, dtype),
                 label="predicted, " + ("published link" if src == "published" else "link measured here"))
            for m in models for n in prompt_tokens for name, bw, src in speeds]
    return pd.DataFrame(rows)


@_styled
def kv_bytes_vs_prompt(models: Sequence[str] | Mapping[str, str], dtype="fp16", max_tokens: int = 32768,
                       measured: Mapping[str, tuple] | None = None, unit: int = 2 ** 30, ax=None,
                       title: str | None = None):
    """KV bytes to move for one prompt vs its length, one line per model (:func:`splitlab.sizing.kv_bytes`).

    Args:
        models: names of published models or presets; or a mapping name -> dtype (each model in its own dtype).
        measured: name -> (prompt lengths, measured cache bytes), drawn as dots on that model's line.
        unit: 2**30 (GiB), 2**20 (MiB) or 2**10 (KiB) on the y axis.
    """
    ax = _ax(ax)
    dtypes = dict(models) if isinstance(models, Mapping) else {m: dtype for m in models}
    tokens = np.linspace(0, max_tokens, 65)
    for name, dt in dtypes.items():
        cfg = sizing.resolve_config(name)
        g = sizing.kv_geometry(cfg)
        per_token = sizing.kv_bytes_per_token(cfg, dt)
        line, = ax.plot(tokens, tokens * per_token / unit, lw=2,
                        label=f"{name} ({g.attention}): {per_token / 2 ** 10:g} KiB/token")
        if measured and name in measured:
            t, b = measured[name]
            ax.plot(t, np.asarray(b, dtype=float) / unit, "o", color=line.get_color(), mec="black", ms=6)
    if measured:
        ax.plot([], [], "o", color="white", mec="black", label="measured: a real cache's bytes")
    ax.set_xlim(0, max_tokens)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(4, integer=True))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    top = max_tokens * max(sizing.kv_bytes_per_token(sizing.resolve_config(n), dt) for n, dt in dtypes.items()) / unit
    ax.set_ylim(0, top * (1.25 + 0.12 * (len(dtypes) + bool(measured))))  # room above the lines for the legend
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel(f"KV cache to move ({_UNITS.get(unit, f'{unit} B')})")
    ax.set_title(title or "Bytes to move grow linearly with the prompt")
    ax.legend(loc="upper left", borderaxespad=0.2, handlelength=1.5)
    return ax


@_styled
def bandwidth_bars(measured: Mapping[str, float], links: Mapping[str, dict] | None = None, ax=None,
                   title: str = "Bandwidth: measured here vs published links"):
    """Dots on a log scale: ``measured`` (label -> bytes/s, green) below the published ``links`` (default
    :data:`splitlab.sizing.LINKS`, grey), each labelled with its GB/s."""
    links = sizing.LINKS if links is None else links
    ax = ax if ax is not None else figure(1, height=0.27 * (len(measured) + len(links)) + 1.3)[1][0]
    rows = [(k, v["bandwidth_bytes_per_s"], PUBLISHED) for k, v in sorted(links.items(),
                                                                        key=lambda kv: kv[1]["bandwidth_bytes_per_s"])]
    rows = [(k, v, MEASURED) for k, v in sorted(measured.items(), key=lambda kv: kv[1])] + rows
    labels, values, colors = zip(*rows)
    gbps = np.asarray(values, dtype=float) / 1e9
    y = np.arange(len(rows))
    ax.hlines(y, gbps.min() / 3, gbps, color="#dddddd", lw=1, zorder=0)  # guides to the labels, not bars
    ax.scatter(gbps, y, c=colors, s=60, zorder=2)
    for yi, v in zip(y, gbps):
        ax.annotate(f"{v:,.3g}", (v, yi), xytext=(6, 0), textcoords="offset points", va="center")
    ax.set_yticks(y, labels)
    ax.set_xscale("log")
    _plain_log(ax.xaxis)
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())  # decades only: the bars carry their own numbers
    ax.set_xlim(gbps.min() / 3, gbps.max() * 8)
    ax.set_xlabel("bandwidth, one direction (GB/s, log)")
    ax.set_ylabel("path")
    legend_below(ax.figure, [plt.Line2D([], [], marker="o", ls="", color=MEASURED),
                             plt.Line2D([], [], marker="o", ls="", color=PUBLISHED)],
                 ["measured here", "published"], ncols=2)
    ax.set_title(title)
    return ax


@_styled
def transfer_vs_bytes(series: Mapping[str, tuple], latency_s: float, bandwidth_bytes_per_s: float, ax=None,
                      title: str | None = None):
    """Measured transfer times (label -> (bytes, seconds)) against bytes, log-log, with the prediction
    ``latency + bytes / bandwidth`` as a line."""
    ax = _ax(ax)
    markers = ["o", "s", "^", "D"]
    lo, hi = np.inf, 0.0
    for (label, (nbytes, seconds)), m in zip(series.items(), markers):
        nbytes = np.asarray(nbytes, dtype=float)
        ax.plot(nbytes / 2 ** 20, np.asarray(seconds, dtype=float) * 1e3, m, ms=6, alpha=0.8, label=label)
        lo, hi = min(lo, nbytes.min()), max(hi, nbytes.max())
    x = np.geomspace(lo / 1.5, hi * 1.5, 100)
    ax.plot(x / 2 ** 20, (latency_s + x / bandwidth_bytes_per_s) * 1e3, "--", color=PREDICTED,
            label=f"{latency_s * 1e3:.3g} ms + bytes / {bandwidth_bytes_per_s / 1e9:.3g} GB/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 4)  # room for the legend above the points
    _plain_log(ax.xaxis)
    _plain_log(ax.yaxis)
    ax.set_xlabel("bytes moved (MiB, log scale)")
    ax.set_ylabel("transfer time (ms, log scale)")
    ax.set_title(title or "Transfer time = latency + bytes / bandwidth")
    ax.legend(loc="upper left", borderaxespad=0.2, handlelength=1.5)
    return ax


@_styled
def handoff_bars(model: str, prompt_tokens: int, gpu: str = "H100", dtype="fp16",
                 extra: Mapping[str, float] | None = None, links: Sequence[str] | None = None, ax=None,
                 title: str | None = None):
    """DistServe's comparison for one prompt: its cache's transfer time over each link (one dot per row, fastest
    on top; ``extra`` adds label -> bytes/s, e.g. measured here) against the minimum decode step and the
    roofline prefill of the same model on ``gpu`` (vertical lines). Log-scale time axis, so the transfers are
    dots, each labelled with its ms."""
    ax = _ax(ax, (8, 4))
    links = list(sizing.LINKS) if links is None else list(links)
    grid = handoff_grid([model], [prompt_tokens], {n: sizing.LINKS[n]["bandwidth_bytes_per_s"] for n in links}, extra,
                        gpu, dtype)
    ms = grid.transfer_s.to_numpy() * 1e3
    y = np.arange(len(ms))
    colors = [MEASURED if src == "measured" else PUBLISHED for src in grid.link_source]
    row = grid.iloc[0]
    decode_ms, prefill_ms = row["decode_step_s"] * 1e3, row["prefill_s"] * 1e3
    lo, hi = min(ms.min(), decode_ms) / 3, max(ms.max(), prefill_ms) * 8
    ax.hlines(y, lo, ms, color="#dddddd", lw=1, zorder=0)  # guides to the labels, not bars
    ax.scatter(ms, y, c=colors, s=60, zorder=3)
    for yi, v in zip(y, ms):
        ax.annotate(f"{v:,.3g}", (v, yi), xytext=(6, 0), textcoords="offset points", va="center")
    ax.set_yticks(y, [n.split(" (")[0] if src == "measured" else n for n, src in zip(grid.link, grid.link_source)])
    ax.invert_yaxis()
    ax.axvline(decode_ms, color=DECODE, ls="--", label=f"decode step (min.): {decode_ms:.3g} ms")
    ax.axvline(prefill_ms, color=PREFILL, ls=":", lw=2, label=f"prefill (roofline): {prefill_ms:.3g} ms")
    ax.set_xscale("log")
    _plain_log(ax.xaxis, minor=False)
    ax.set_xlim(lo, hi)
    ax.set_xlabel(f"transfer time (ms, log); lines: {gpu}")
    ax.set_ylabel("link")
    ax.set_title(title or f"{model}, {prompt_tokens:,} tokens: {row['kv_bytes'] / 2 ** 20:,.0f} MiB ({dtype})")
    legend_below(ax.figure, ax)
    return ax


@_styled
def streaming_timeline(stream: dict, layers: int, ax=None, title: str | None = None):
    """One streamed prefill (:meth:`splitlab.peer.Peer.stream`): the forward as a bar, a tick where each layer's
    KV was handed to the link, and the transfer still running after the forward (until the receiver had it)."""
    ax = ax if ax is not None else figure(1, height=2.8)[1][0]
    stats = stream["stats"]
    end = stream["total_s"] - stream["exposed_s"]
    start = max(0.0, end - stats.compute_s)
    ax.broken_barh([(start * 1e3, stats.compute_s * 1e3)], (1.6, 0.8), color=PREFILL, label="prefill forward")
    ax.broken_barh([(end * 1e3, stream["exposed_s"] * 1e3)], (0.6, 0.8), color=TRANSFER,
                   label=f"exposed transfer: {stream['exposed_s'] * 1e3:.3g} ms")
    every = max(1, int(np.ceil(len(stats.layer_s[:layers]) / 6)))  # at most ~6 labels: 12 pt ones must not touch
    for i, t in enumerate(stats.layer_s[:layers]):
        ax.plot([t * 1e3] * 2, [0.6, 2.4], color="black", lw=1)
        if i % every == 0 or i == layers - 1:
            ax.annotate(f"L{i}", (t * 1e3, 2.45), ha="center", va="bottom")
    ax.plot([], [], color="black", lw=1, label="layer's KV handed to the link")
    ax.set_yticks([1, 2], ["link", "compute"])
    ax.set_ylim(0.3, 3.3)
    ax.set_xlabel("time since the streamed prefill began (ms)")
    ax.set_ylabel("")
    ax.set_title(title or "Layer-wise streaming: each layer leaves while the later layers compute")
    legend_below(ax.figure, ax)
    return ax


#: the names the chapters use (dots on log axes); the old names stay for existing callers
bandwidth_dots, handoff_dots = bandwidth_bars, handoff_bars
