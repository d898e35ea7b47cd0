"""Chapter 6's tables and figures: several serving runs of the same requests side by side, against their SLOs.

- :func:`slo_table`: one column per run, one row per latency percentile (ms), SLO attainment and the misses of
  each SLO (a table that fits the text column: runs are columns, metrics are rows).
- :func:`winner`: which run met the SLOs for the most requests, in one line.
- :func:`latency_cdfs`: TTFT and TPOT CDFs of the runs, two panels, the SLOs drawn.
- :func:`timelines`: what each worker did, one panel per run, stacked, over the same window.
- :func:`split_runs`: the same requests on P + D colocated workers and on the PxDy split (the explorer's runs).
- :func:`split_grid`: SLO attainment and P90 latencies of both over rates x P:D ratios (the explorers' grid).

Figures are 4.8 inches wide with fonts of 12 pt or more (:data:`PHONE`), panels stacked: shown at a 412 px
phone's text column (about 3.85 in), their labels stay at 9.6 pt or more.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter, ScalarFormatter
import pandas as pd

from ... import serving
from ...serving import metrics as M
from . import serving as serving_plots
from .split_tables import short_name
from .style import sig3

__all__ = ["slo_table", "winner", "latency_cdfs", "timelines", "split_runs", "split_grid", "RATIOS"]

#: the P:D ratios of chapter 6's explorer in the rendered book: every split of at most four workers
RATIOS = ((1, 1), (2, 1), (1, 2), (3, 1), (2, 2), (1, 3))

#: width (in) and font sizes (pt) of this module's figures: 12 pt at 4.8 in reads as 9.6 pt on a phone's column
WIDTH_IN = 4.8
PHONE = {"font.size": 12, "axes.titlesize": 12, "axes.labelsize": 12, "xtick.labelsize": 12,
         "ytick.labelsize": 12, "legend.fontsize": 12, "figure.titlesize": 12}


def slo_table(runs: Mapping[str, object], ttft_slo_s: float, tpot_slo_s: float) -> pd.DataFrame:
    """Rows: TTFT, TTST (time to second token), TPOT P50/P90 and ITL P99 in ms, SLO attainment (%), how many
    requests missed each SLO, output tokens/s per worker; one column per run (3 significant digits)."""
    cols = {}
    for name, res in runs.items():
        m = res.metrics(ttft_slo_s, tpot_slo_s)
        miss = M.slo_misses(res.requests, ttft_slo_s, tpot_slo_s)
        cols[short_name(name)] = {"workers": len(res.workers), "TTFT P50 (ms)": m["ttft_s"]["p50"] * 1e3,
                      "TTFT P90 (ms)": m["ttft_s"]["p90"] * 1e3, "TTST P90 (ms)": m["ttst_s"]["p90"] * 1e3,
                      "TPOT P50 (ms)": m["tpot_s"]["p50"] * 1e3, "TPOT P90 (ms)": m["tpot_s"]["p90"] * 1e3,
                      "ITL P99 (ms)": m["itl_s"]["p99"] * 1e3, "SLO attainment (%)": 100 * m["slo_attainment"],
                      "missed TTFT": miss["ttft"], "missed TTST": miss["ttst"], "missed TPOT": miss["tpot"],
                      "tokens/s per worker": m["throughput_tokens_per_s_per_worker"]}
    table = pd.DataFrame(cols)
    counts = ["workers", "missed TTFT", "missed TTST", "missed TPOT"]
    out = table.astype(object)
    for row in table.index:
        out.loc[row] = [int(v) if row in counts else sig3(v) for v in table.loc[row]]
    return out


def winner(runs: Mapping[str, object], ttft_slo_s: float, tpot_slo_s: float) -> str:
    """``"<name> wins: x% within both SLOs\nagainst y% (<other>) ..."``: the runs ranked by SLO attainment, short
    names, two lines (a tie says so)."""
    att = {name: res.metrics(ttft_slo_s, tpot_slo_s)["slo_attainment"] for name, res in runs.items()}
    ranked = sorted(att, key=att.get, reverse=True)
    best = ranked[0]
    others = ", ".join(f"{att[k]:.0%} ({short_name(k)})" for k in ranked[1:])
    if len(ranked) > 1 and att[ranked[1]] == att[best]:
        return f"a tie on SLO attainment at {att[best]:.0%}:\n" + ", ".join(map(short_name, ranked))
    return f"{short_name(best)} wins: {att[best]:.0%} within both SLOs\nagainst {others}"


def latency_cdfs(runs: Mapping[str, object], ttft_slo_s: float, tpot_slo_s: float, title: str | None = None,
                 log_ttft: bool = False):
    """TTFT (top) and TPOT (bottom) CDFs of every run, stacked, the SLOs as dotted lines, one legend below (short
    names). Returns the figure (:data:`WIDTH_IN` wide, :data:`PHONE` fonts)."""
    runs = {short_name(k): v for k, v in runs.items()}
    with plt.rc_context(PHONE):
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(WIDTH_IN, 6.4), layout="constrained")
        serving_plots.ttft_cdf(runs, ax=a1, slo_s=ttft_slo_s, title="Time to first token", log=log_ttft)
        serving_plots.latency_cdf(runs, "tpot", ax=a2, slo_s=tpot_slo_s, title="Time per output token")
        for ax in (a1, a2):
            ax.set_xlabel(ax.get_xlabel().replace("time to first token, ", "").replace("time per output token, ",
                                                                                         ""))
            if log_ttft and ax is a1:
                ax.xaxis.set_major_formatter(ScalarFormatter())
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.get_legend().remove()
        handles, labels = a1.get_legend_handles_labels()
        labels = ["SLO (dotted)" if lab.startswith("SLO") else lab for lab in labels]
        fig.legend(handles, labels, loc="outside lower center", ncols=2, frameon=False)
        if title:
            fig.suptitle(title)
    return fig


def timelines(runs: Mapping[str, object], t_range: tuple[float, float] | None = None):
    """One worker timeline per run, stacked, sharing the time axis (``t_range`` in s zooms in). Returns the
    figure (:data:`WIDTH_IN` wide, :data:`PHONE` fonts)."""
    rows = [len(res.workers) + 0.6 * sum(1 for w in res.timeline.worker.unique() if "->" in w)
            for res in runs.values()]
    with plt.rc_context(PHONE):
        fig, axes = plt.subplots(len(runs), 1, figsize=(WIDTH_IN, 0.42 * sum(rows) + 1.3 * len(runs)),
                                 sharex=True, layout="constrained", height_ratios=rows)
        axes = np.atleast_1d(axes)
        for ax, (name, res) in zip(axes, runs.items()):
            serving_plots.worker_timeline(res, ax=ax, t_range=t_range, title=short_name(name))
            ax.get_legend().remove()
            ax.set_xlabel("")
        axes[-1].set_xlabel("time on the virtual clock (s)")
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for k, c in serving_plots.KIND_COLORS.items()]
        fig.legend(handles, list(serving_plots.KIND_COLORS), loc="outside lower center", ncols=4, frameon=False)
    return fig


def split_runs(backend, workload, rate_per_s: float, splits: Sequence[tuple[int, int]], n_requests: int = 300,
               scale: float | None = None, seed: int = 0, colocated: bool | Mapping = True) -> dict:
    """The same ``n_requests`` requests of ``workload`` arriving at ``rate_per_s`` (Poisson, ``seed``) served by
    each split of ``splits`` ((P, D): P prefill + D decode workers, all of one size N = P + D) and, if
    ``colocated``, by N colocated workers (True: prefill-first; a mapping: those
    :meth:`~splitlab.serving.ServingConfig.colocated` options, ``{"policy": "chunked", "chunk_tokens": 256}``), on
    ``backend`` (a :class:`splitlab.serving.CostModelExecutor`: simulated).

    Returns:
        name -> :class:`splitlab.serving.ServingResult` ("4 colocated", "3P+1D").

    Raises:
        ValueError: splits of different sizes or none; a bad rate or worker count (from :mod:`splitlab.serving`).
        TypeError: ``colocated`` neither a bool nor a mapping ("chunked" was served prefill-first in silence).
    """
    if not isinstance(colocated, (bool, Mapping)):
        raise TypeError(f"colocated must be True, False or a mapping of colocated options ({{'policy': 'chunked', "
                        f"'chunk_tokens': 256}}), got {type(colocated).__name__} {colocated!r}")
    sizes = {p + d for p, d in splits}
    if len(sizes) != 1:
        raise ValueError(f"splits must all have one number of workers (P + D), got {list(splits)}")
    reqs = serving.workload_requests(workload, n_requests, rate_per_s, backend, seed, scale)
    n, runs = sizes.pop(), {}
    if colocated:
        options = dict(colocated) if isinstance(colocated, Mapping) else {}
        runs[f"{n} colocated"] = serving.run(reqs, serving.ServingConfig.colocated(n, trace=False, **options), backend)
    for p, d in splits:
        runs[f"{p}P+{d}D"] = serving.run(reqs, serving.ServingConfig.disaggregated(p, d, trace=False), backend)
    return runs


def _row(workload, res, rate_per_s: float, slos, label: str) -> dict:
    cfg, m = res.config, res.metrics(*slos)
    split = cfg.layout == "disaggregated"
    return dict(workload=workload, layout="split" if split else "colocated", name=cfg.name,
                prefill_workers=cfg.prefill_workers if split else 0, decode_workers=cfg.decode_workers if split else 0,
                workers=len(res.workers), rate_per_s=rate_per_s, rate_per_worker=rate_per_s / len(res.workers),
                slo_attainment=m["slo_attainment"], ttft_p90_s=m["ttft_s"]["p90"], tpot_p90_s=m["tpot_s"]["p90"],
                policy="" if split else cfg.policy, label=label)


def _check_colocated(colocated, workloads) -> None:
    """:func:`split_grid`'s ``colocated`` checked before its first run (a misspelt workload was served prefill-first
    in silence; a string was "'str' object has no attribute 'get'")."""
    if colocated is None:
        return
    if not isinstance(colocated, Mapping) or not all(isinstance(v, Mapping) for v in colocated.values()):
        raise TypeError(f"colocated must be a mapping {{workload: {{'policy': ..., 'chunk_tokens': ...}}}}, got "
                        f"{colocated!r:.120}")
    unknown = [k for k in colocated if k not in workloads]
    if unknown:
        raise ValueError(f"colocated names {unknown}, not among the workloads {list(workloads)}")
    for workload, options in colocated.items():
        try:
            serving.ServingConfig.colocated(1, trace=False, **options)
        except (TypeError, ValueError) as err:
            raise type(err)(f"colocated[{workload!r}]: {err}") from None


def split_grid(cost, workloads: Mapping[str, tuple[float, float]], rates_per_worker: Mapping[str, Sequence[float]],
               ratios: Sequence[tuple[int, int]] = RATIOS, n_requests: int = 100, scale: float | None = None,
               seed: int = 0, measured: Mapping[str, tuple[float, Mapping[str, object]]] | None = None,
               names: Mapping[str, str] | None = None, colocated: Mapping[str, Mapping] | None = None) -> pd.DataFrame:
    """Chapter 6's explorer grid: for each workload (name -> its (TTFT SLO, TPOT SLO) in s), each rate per worker
    of ``rates_per_worker[workload]`` and each (P, D) of ``ratios``, :func:`split_runs` on the simulator with
    ``cost`` (each colocated size run once per rate), summarised; then the chapter's live runs. ``names``: the
    workload each key serves, where the keys are labels (one workload under two SLOs: ``{"research, TPOT 2.5
    steps": "research", "research, TPOT 10 steps": "research"}``); default, each key is a workload's name.

    Args:
        cost: a :class:`splitlab.costmodel.CostModel` or a calibration (its ``.cost``); None: the built-in one.
        measured: workload -> (rate_per_s, name -> ServingResult) of emulated runs (the real model timed every
            step); colocated runs of another policy than the simulated line's are left out.
        colocated: workload -> the colocated contender's options (:func:`split_runs`' mapping; chapter 6's loss
            served chunked prefill live); a workload not in it: prefill-first.

    Returns:
        one row per run: ``workload``, ``layout`` ("colocated" or "split"), ``name``, ``prefill_workers``,
        ``decode_workers`` (0 colocated), ``workers``, ``rate_per_s``, ``rate_per_worker``, ``slo_attainment``
        (share), ``ttft_p90_s``, ``tpot_p90_s``, ``policy`` (a colocated run's, "" for a split) and ``label``
        ("simulated" or "measured").

    Raises:
        TypeError/ValueError: ``colocated`` not a mapping {workload: mapping of options}, a key not among
            ``workloads``, options :meth:`~splitlab.serving.ServingConfig.colocated` refuses (checked before any run,
            named by workload); those of :func:`split_runs`.
    """
    _check_colocated(colocated, workloads)
    ex = serving.CostModelExecutor(getattr(cost, "cost", cost))
    rows = []
    for workload, slos in workloads.items():
        options = dict((colocated or {}).get(workload, {}))
        policy = options.get("policy", "prefill-first")
        for rate in rates_per_worker[workload]:
            for n in sorted({p + d for p, d in ratios}):
                runs = split_runs(ex, (names or {}).get(workload, workload), rate * n,
                                  [r for r in ratios if sum(r) == n], n_requests, scale, seed, options or True)
                rows += [_row(workload, r, rate * n, slos, "simulated") for r in runs.values()]
        rate_s, results = (measured or {}).get(workload, (None, {}))
        rows += [_row(workload, r, rate_s, slos, "measured") for r in results.values()
                 if r.config.layout == "disaggregated" or r.config.policy == policy]
    return pd.DataFrame(rows)
