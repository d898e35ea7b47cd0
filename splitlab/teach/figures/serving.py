"""Figures of serving runs (:class:`splitlab.serving.ServingResult`), for the serving chapters.

Like :mod:`splitlab.plots`, every function draws on a given matplotlib Axes (or makes one), labels both axes with
units, sets a title, and returns the Axes. Times are on the run's virtual clock, in seconds on the x axis;
latencies are drawn in milliseconds.

- :func:`worker_timeline`: Gantt chart of every worker and link (prefill, decode, transfer, idle).
- :func:`kv_memory`: KV-cache bytes held (and reserved) per worker over time, with the budget.
- :func:`latency_cdf` (:func:`ttft_cdf`, :func:`itl_cdf`): CDFs of TTFT or ITL for one or several runs.
- :func:`request_tokens`: one request's life: arrival, queueing, prefill, transfer, every output token.
- :func:`itl_over_time`: the inter-token gaps of running streams over time, with long-prompt arrivals marked.

Measured against predicted (chapter 4) is in :mod:`.interference`.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence


import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from .style import DECODE, OTHER_COLORS, PHASE_COLORS, layout_color

__all__ = ["KIND_COLORS", "worker_timeline", "kv_memory", "latency_cdf", "ttft_cdf", "itl_cdf", "request_tokens",
           "itl_over_time", "bytes_unit"]

#: colour of each kind of interval (the phases' colours of :mod:`.style`)
KIND_COLORS = {**PHASE_COLORS, "idle": "#e6e6e6"}
#: an arrival is neither a phase nor a layout: tab:pink, not the split's red
ARRIVAL, BUDGET = OTHER_COLORS[0], "black"


def _ax(ax, size=(8, 3.5)):
    return ax if ax is not None else plt.subplots(figsize=size)[1]


def bytes_unit(max_bytes: float) -> tuple[float, str]:
    """(divisor, name) of the binary unit that shows ``max_bytes`` as a number below 1024: B, KiB, MiB or GiB."""
    for power, name in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if max_bytes >= 1024 ** power:
            return 1024.0 ** power, name
    return 1.0, "B"


def _label(res, label: str | None) -> str:
    return label if label is not None else f"{res.config.layout} ({len(res.workers)} workers)"


def _as_results(results) -> dict:
    """``{label: ServingResult}`` from one result, a sequence of results or a mapping label -> result."""
    if isinstance(results, Mapping):
        return dict(results)
    if hasattr(results, "requests"):
        return {_label(results, None): results}
    out = {}
    for res in results:
        name = _label(res, None)
        out[name if name not in out else f"{name} #{len(out) + 1}"] = res
    return out


# --- 1. worker timeline ---------------------------------------------------------------------------------------
def worker_timeline(res, ax=None, title: str | None = None, t_range: tuple[float, float] | None = None,
                    show_idle: bool = True, annotate_tokens: bool = False):
    """Gantt chart of ``res.timeline``: one row per worker (and per link ``P0->D0`` of a split run), coloured
    intervals for prefill, decode and transfer, idle in light grey. ``t_range`` (s) zooms in on part of the
    run; ``annotate_tokens`` writes the prompt tokens of each prefill on its bar."""
    ax = _ax(ax, (9, 0.6 * (len(res.workers) + 2) + 1.5))
    tl = res.timeline
    rows = list(res.workers) + sorted(w for w in tl.worker.unique() if w not in res.workers)
    for y, name in enumerate(rows):
        mine = tl[tl.worker == name]
        for kind, color in KIND_COLORS.items():
            part = mine[mine.kind == kind]
            if kind == "idle" and not show_idle or part.empty:
                continue
            spans = list(zip(part.start_s, part.end_s - part.start_s))
            edge = "white" if kind == "decode" else None
            ax.broken_barh(spans, (y - 0.38, 0.76), facecolors=color, edgecolors=edge, linewidth=0.2)
        if annotate_tokens:
            for row in mine[mine.kind == "prefill"].itertuples():
                ax.text((row.start_s + row.end_s) / 2, y, f"{row.tokens}", ha="center", va="center")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first worker on top
    ax.set_xlim(*(t_range or (0.0, max(res.end_s, 1e-9))))
    kinds = [k for k in KIND_COLORS if (k != "idle" or show_idle) and (tl.kind == k).any()]
    ax.legend(handles=[Patch(color=KIND_COLORS[k], label=k) for k in kinds], loc="upper left",
              bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_xlabel("time on the virtual clock (s)")
    ax.set_ylabel("worker / link")
    ax.set_title(title or f"What each worker did ({res.config.layout})")
    return ax


# --- 2. KV memory ---------------------------------------------------------------------------------------------
def kv_memory(res, ax=None, title: str | None = None, workers: Sequence[str] | None = None,
              reserved: bool = True):
    """KV-cache bytes held by each worker over time (solid steps) from ``res.kv_usage``; ``reserved`` also draws
    what admission reserved (prompt + all output tokens of every admitted request, dashed), and the budget is a
    horizontal line when the run had one."""
    ax = _ax(ax)
    kv = res.kv_usage
    workers = list(workers) if workers is not None else [w for w in res.workers if (kv.worker == w).any()]
    kv = kv[kv.worker.isin(workers)]
    budget = kv.budget_bytes.dropna()
    top = max([kv.used_bytes.max() if len(kv) else 0, kv.reserved_bytes.max() if reserved and len(kv) else 0,
               budget.max() if len(budget) else 0, 1])
    div, unit = bytes_unit(top)
    end = max(res.end_s, 1e-9)
    for name in workers:
        mine = kv[kv.worker == name]
        t = np.r_[mine.time_s.to_numpy(), end]
        line, = ax.step(t, np.r_[mine.used_bytes.to_numpy(), mine.used_bytes.iloc[-1]] / div, where="post",
                        label=f"{name}: held")
        if reserved:
            ax.step(t, np.r_[mine.reserved_bytes.to_numpy(), mine.reserved_bytes.iloc[-1]] / div, where="post",
                    ls="--", lw=1, color=line.get_color(), label=f"{name}: reserved")
    if len(budget):
        ax.axhline(budget.iloc[0] / div, color=BUDGET, ls=":", lw=1.5, label="KV budget per worker")
    ax.set_xlim(0, end)
    ax.set_ylim(0, 1.1 * top / div)
    ax.set_xlabel("time on the virtual clock (s)")
    ax.set_ylabel(f"KV cache ({unit})")
    ax.set_title(title or "KV-cache memory per worker")
    ax.legend(loc="best")
    return ax


# --- 3. latency CDFs ------------------------------------------------------------------------------------------
def _latencies(res, metric: str) -> np.ndarray:
    if metric == "ttft":
        table = res.request_table()
        return table.loc[table.state == "finished", "ttft_s"].to_numpy(dtype=float)
    if metric == "itl":
        return res.token_table().gap_s.dropna().to_numpy(dtype=float)
    if metric == "tpot":
        return res.request_table().tpot_s.dropna().to_numpy(dtype=float)
    raise ValueError(f"metric must be 'ttft', 'itl' or 'tpot', got {metric!r}")


_METRIC_NAMES = {"ttft": "time to first token, TTFT", "itl": "inter-token latency, ITL",
                 "tpot": "time per output token, TPOT"}


def latency_cdf(results, metric: str = "ttft", ax=None, title: str | None = None, slo_s: float | None = None,
                log: bool = False):
    """Empirical CDF of ``metric`` ("ttft": one value per finished request; "itl": every gap between tokens;
    "tpot": one value per request) for one run, a list of runs, or a dict label -> run (one curve each, in its
    layout's colour, :func:`.style.layout_color`, where the label names a layout).
    ``slo_s`` draws the SLO as a vertical line; ``log`` uses a log scale for the latency."""
    ax = _ax(ax, (6, 3.5))
    for label, res in _as_results(results).items():
        x = np.sort(_latencies(res, metric)) * 1e3
        if x.size:
            ax.step(np.r_[x[0], x], np.r_[0, np.arange(1, x.size + 1) / x.size], where="post",
                    color=layout_color(label), label=f"{label} (n={x.size})")
        else:  # say so in the legend rather than leave the run out without a word
            ax.plot([], [], ls="none", label=f"{label} (n=0: no value)")
    if slo_s is not None:
        ax.axvline(slo_s * 1e3, color=BUDGET, ls=":", label=f"SLO {slo_s * 1e3:g} ms")
    if log:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"{_METRIC_NAMES[metric]} (ms)")
    ax.set_ylabel("share of " + ("requests" if metric != "itl" else "token gaps"))
    ax.set_title(title or f"CDF of {metric.upper()}")
    ax.legend(loc="lower right")
    return ax


def ttft_cdf(results, ax=None, title: str | None = None, slo_s: float | None = None, log: bool = False):
    """:func:`latency_cdf` of TTFT."""
    return latency_cdf(results, "ttft", ax, title, slo_s, log)


def itl_cdf(results, ax=None, title: str | None = None, slo_s: float | None = None, log: bool = False):
    """:func:`latency_cdf` of every inter-token gap."""
    return latency_cdf(results, "itl", ax, title, slo_s, log)


# --- 4. one request -------------------------------------------------------------------------------------------
def request_tokens(res, request_id: int, ax=None, title: str | None = None):
    """One request's life on the virtual clock: its arrival, the wait in the queue, its prefill, its KV transfer
    (split runs) and every output token (count on the y axis), with its TTFT and median ITL in the legend."""
    ax = _ax(ax)
    r = next((q for q in res.requests if q.id == request_id), None)
    if r is None:
        raise KeyError(f"no request with id {request_id} in this run")
    ax.axvline(r.arrival_s, color=ARRIVAL, lw=1.5, label=f"arrival ({r.prompt_len}-token prompt)")
    if r.prefill_start_s is not None:
        if r.prefill_start_s > r.arrival_s:
            ax.axvspan(r.arrival_s, r.prefill_start_s, color="grey", alpha=0.2, label="waiting in the queue")
        ax.axvspan(r.prefill_start_s, r.prefill_end_s or r.prefill_start_s, color=KIND_COLORS["prefill"],
                   alpha=0.3, label=f"prefill on {r.prefill_worker}")
    if r.transfer_start_s is not None and r.transfer_end_s is not None:
        ax.axvspan(r.transfer_start_s, r.transfer_end_s, color=KIND_COLORS["transfer"], alpha=0.35,
                   label="KV transfer")
    t = np.asarray(r.token_times_s)
    if t.size:
        gaps = np.diff(t)
        itl = f", median ITL {np.median(gaps) * 1e3:.3g} ms" if gaps.size else ""
        ax.plot(t, np.arange(1, t.size + 1), ".", color=KIND_COLORS["decode"], ms=4,
                label=f"output tokens (TTFT {(t[0] - r.arrival_s) * 1e3:.0f} ms{itl})")
        ax.plot(t[0], 1, "o", mfc="none", mec=BUDGET, ms=9, label="first token")
    if r.reject_reason:
        ax.text(0.02, 0.5, f"rejected: {r.reject_reason}", transform=ax.transAxes, wrap=True)
    ax.set_xlabel("time on the virtual clock (s)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("output tokens received")
    ax.set_title(title or f"Request {r.id}: arrival, prefill, then its tokens")
    ax.legend(loc="upper left")
    return ax


# --- 5. ITL over time -----------------------------------------------------------------------------------------
def itl_over_time(res, ax=None, title: str | None = None, streams: Iterable[int] | None = None,
                  marked: Iterable[int] | None = None, min_prompt_tokens: int | None = None,
                  show_prefills: bool = True, log: bool = False, color: str = DECODE):
    """Every inter-token gap of the running ``streams`` (request ids; default: the requests not marked), drawn at
    the time its token arrived, with the arrivals of the ``marked`` requests as red lines labelled with their
    prompt length. ``min_prompt_tokens`` marks every request with at least that many prompt tokens instead.
    ``show_prefills`` shades the intervals in which a marked request was being prefilled; ``color`` colours the
    gaps (the decode colour; a layout's colour where panels compare layouts)."""
    ax = _ax(ax, (9, 3.5))
    by_id = {r.id: r for r in res.requests}
    if marked is None:
        marked = [r.id for r in res.requests if min_prompt_tokens is not None and r.prompt_len >= min_prompt_tokens]
    marked = sorted(set(marked), key=lambda i: by_id[i].arrival_s)
    streams = [i for i in (streams if streams is not None else by_id) if i not in marked]
    tokens = res.token_table()
    gaps = tokens[tokens.request_id.isin(streams)].dropna(subset=["gap_s"])
    ax.plot(gaps.time_s, gaps.gap_s * 1e3, ".", ms=4, color=color,
            label=f"ITL of the {len(streams)} running streams")
    for k, i in enumerate(marked):
        r = by_id[i]
        ax.axvline(r.arrival_s, color=ARRIVAL, lw=1, ls="--", label="long prompt arrives" if k == 0 else None)
        ax.text(r.arrival_s, 1.0, f" {r.prompt_len}", transform=ax.get_xaxis_transform(), color=ARRIVAL,
                va="top", ha="left")
        if show_prefills and r.prefill_start_s is not None and r.prefill_end_s is not None:
            ax.axvspan(r.prefill_start_s, r.prefill_end_s, color=KIND_COLORS["prefill"], alpha=0.25,
                       label="its prefill runs" if k == 0 else None)
    if log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlim(0, max(res.end_s, 1e-9))
    ax.set_xlabel("time on the virtual clock (s)")
    ax.set_ylabel("gap before this token (ms)")
    ax.set_title(title or "Inter-token latency of running streams")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)  # outside: spikes stay visible
    return ax
