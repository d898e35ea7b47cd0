"""Chapter 6's explorers."""
from __future__ import annotations

import ipywidgets as widgets

from .base import explorer

__all__ = ['split_explorer', 'split_figure']

#: rates of the rendered book's figure, as multiples of the chapter's live rate per worker
FACTORS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


def split_explorer(cost, workload="research", rate_per_s: float = 8.0, prefill_workers: int = 1,
                   decode_workers: int = 1, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None,
                   n_requests: int = 300, scale: float | None = None, max_rate_per_s: float | None = None,
                   seed: int = 0) -> widgets.VBox:
    """Ch. 6: the same requests served by P + D colocated workers (prefill-first) and by the split into P
    prefill + D decode workers, at a chosen rate and P:D ratio, on the simulator with ``cost`` (a
    :class:`splitlab.costmodel.CostModel`, e.g. a calibration's ``.cost``: each redraw takes a fraction of a
    second). Draws the TTFT and TPOT CDFs with the SLOs and each layout's SLO attainment. The returned box's
    ``attainment`` holds the static figure's (name -> share within both SLOs), for prose computed from it."""
    from ... import serving
    from ..figures import split as split_figures

    ex = serving.CostModelExecutor(getattr(cost, "cost", cost))
    drawn = []

    def draw(rate_per_s: float, prefill_workers: int, decode_workers: int) -> None:
        runs = split_figures.split_runs(ex, workload, rate_per_s, [(prefill_workers, decode_workers)], n_requests,
                                        scale, seed)
        att = {k: r.metrics(ttft_slo_s, tpot_slo_s)["slo_attainment"] for k, r in runs.items()}
        drawn.append(att)
        name = workload if isinstance(workload, str) else getattr(workload, "name", "custom")
        split_figures.latency_cdfs(runs, ttft_slo_s, tpot_slo_s,
                                   title=f"{name} at {rate_per_s:.3g}/s, simulated\nwithin both SLOs: "
                                         + ", ".join(f"{k} {v:.0%}" for k, v in att.items()))

    top = max_rate_per_s or 3 * rate_per_s
    box = explorer(draw,
                    rate_per_s=widgets.FloatSlider(value=rate_per_s, min=top / 30, max=top, step=top / 30,
                                                   description="rate /s", readout_format=".3g"),
                    prefill_workers=widgets.IntSlider(prefill_workers, 1, 6, 1, description="prefill (P)"),
                    decode_workers=widgets.IntSlider(decode_workers, 1, 6, 1, description="decode (D)"))
    box.attainment = drawn[0]
    return box


def split_figure(cost, workloads, reference_rate_per_worker, measured=None, ratios=None, factors=FACTORS,
                 n_requests: int = 100, scale: float | None = None, seed: int = 0, ratio=None, names=None,
                 colocated=None):
    """Ch. 6's explorer for the rendered book (no kernel): SLO attainment against the request rate per worker, of
    a P:D split (slider over ``ratios``) and of as many colocated workers, for each workload (a dropdown from two on;
    ``workloads``: name -> (TTFT SLO, TPOT SLO) in s). Lines: simulated on ``cost`` at ``factors`` x
    ``reference_rate_per_worker[workload]``; dots: the chapter's emulated runs (``measured``: workload ->
    (rate_per_s, name -> ServingResult)), shown where the slider's layout is theirs. The numbers are
    :func:`splitlab.teach.figures.split.split_grid`'s (its runs are :func:`~splitlab.teach.figures.split.split_runs`,
    the ipywidgets explorer's). ``ratio``: the (P, D) shown first. ``names``: label -> workload name, where
    ``workloads``' keys are labels (one workload under two SLOs), as :func:`~splitlab.teach.figures.split.split_grid`
    takes it. ``colocated``: workload -> the colocated contender's options (default prefill-first; chapter 6's loss
    served chunked prefill live: ``{"policy": "chunked", "chunk_tokens": 256}``), drawn in its policy's colour.
    Returns a plotly figure.

    Raises:
        ValueError: ``ratio`` not among ``ratios``, no workload or rate factor, a factor <= 0, a workload without
        a reference rate > 0.
    """
    from ..figures import split as split_figures
    from ..figures.style import LAYOUT_COLORS, TARGET, TARGET_DASH
    from ..interactive import Trace, explorer_figure, room_for_legend

    ratios = [tuple(r) for r in (ratios or split_figures.RATIOS)]
    ratio = tuple(ratio or ratios[0])
    if ratio not in ratios:
        raise ValueError(f"ratio {ratio} is not among {ratios}")
    if not len(workloads) or not len(factors) or not all(f > 0 for f in factors):
        raise ValueError(f"split_figure needs at least one workload and rate factors > 0, got {list(workloads)}, "
                         f"{list(factors)}")
    if not hasattr(reference_rate_per_worker, "keys") or not all(
            w in reference_rate_per_worker and reference_rate_per_worker[w] > 0 for w in workloads):
        raise ValueError("reference_rate_per_worker must map every workload to a rate > 0 (requests/s per worker), "
                         f"got {reference_rate_per_worker!r} for {list(workloads)}")
    rates = {w: [f * reference_rate_per_worker[w] for f in factors] for w in workloads}
    grid = split_figures.split_grid(cost, workloads, rates, ratios, n_requests, scale, seed, measured, names,
                                    colocated)
    names = list(workloads)

    def traces(workload, pd_ratio):
        p, d = pd_ratio
        g = grid[grid.workload == workload]
        split = g[(g.layout == "split") & (g.prefill_workers == p) & (g.decode_workers == d)]
        coloc = g[(g.layout == "colocated") & (g.workers == p + d)]
        out, policy = [], (dict((colocated or {}).get(workload, {})).get("policy", "prefill-first"))
        for kind, rows, color in (("split", split, LAYOUT_COLORS["split"]),
                                  (f"colocated {policy}", coloc, LAYOUT_COLORS[policy])):
            for label, mode in (("simulated", "lines+markers"), ("measured", "markers")):
                r = rows[rows.label == label].sort_values("rate_per_worker")
                out.append(Trace(f"{kind}, {label}", list(r.rate_per_worker), list(100 * r.slo_attainment), mode,
                                 color=color, dash="solid" if kind == "split" else "dash"))
        span = [0.9 * g.rate_per_worker.min(), 1.1 * g.rate_per_worker.max()]  # this workload's rates only
        return out + [Trace("90% target", span, [90, 90], dash=TARGET_DASH, color=TARGET)]

    one = len(names) == 1  # one workload: no menu of a single entry
    fig = explorer_figure((lambda r: traces(names[0], r)) if one else traces, ("P:D", ratios),
                          f"SLO attainment: split vs colocated{f' ({names[0]})' if one else ''}",
                          "request rate per worker (requests/s)", "requests within both SLOs (%)",
                          dropdown=None if one else ("workload", names),
                          slider_default=ratios.index(ratio), slider_format=lambda r: f"{r[0]}P+{r[1]}D", height=600)
    fig.update_traces(marker_size=11, marker_symbol="diamond", marker_line_width=1, marker_line_color="#000000",
                      selector=dict(mode="markers"))
    fig.update_traces(marker_size=5, selector=dict(mode="lines+markers"))
    fig.update_yaxes(range=[0, 104])
    return room_for_legend(fig, 3, axis_px=57)
