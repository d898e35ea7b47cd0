"""Chapter 7's explorers."""
from __future__ import annotations

import ipywidgets as widgets

from .base import explorer

__all__ = ['pools_explorer', 'pools_figure']


def pools_explorer(cost, workload="research", ttft_slo_s: float = 0.5, tpot_slo_s: float = 0.02,
                   scale: float = 1.0, max_workers: int = 4, price_per_hour: float = 1.0,
                   chunk_tokens=(256,), max_requests: int = 100, tolerance: float = 0.1) -> widgets.VBox:
    """Ch. 7: the planner (:func:`splitlab.teach.figures.pools.pools_plan`, simulated on ``cost``) for chosen
    SLOs, prompt and output lengths (``scale`` x the workload's) and a number of workers; draws every candidate's
    goodput per worker, the winner and each one's binding SLO. A redraw takes a second or a few."""
    from ..figures import pools

    def draw(ttft_slo_s: float, tpot_slo_s: float, scale: float, max_workers: int) -> None:
        p = pools.pools_plan(cost, workload, ttft_slo_s, tpot_slo_s, scale, max_workers, chunk_tokens, max_requests,
                             tolerance, price_per_hour)
        pools.candidates(p, title=f"TTFT <= {ttft_slo_s * 1e3:.0f} ms, TPOT <= {tpot_slo_s * 1e3:.1f} ms, "
                                  f"lengths x{scale:g}")

    return explorer(draw,
                    ttft_slo_s=widgets.FloatLogSlider(value=ttft_slo_s, base=10, min=-2, max=1, step=0.1,
                                                      description="TTFT SLO s", readout_format=".3g"),
                    tpot_slo_s=widgets.FloatLogSlider(value=tpot_slo_s, base=10, min=-3, max=0, step=0.1,
                                                      description="TPOT SLO s", readout_format=".3g"),
                    scale=widgets.FloatSlider(value=scale, min=0.25, max=2.0, step=0.25, description="lengths x"),
                    max_workers=widgets.IntSlider(max_workers, 2, 6, 1, description="max workers"))


def phone_tick(name: str) -> str:
    """A candidate's name as a tick of two lines of at most 5 characters ("4 coloc." -> "4<br>coloc",
    "1P+3D" -> "1P<br>+3D"): eight such ticks side by side fit the 330 px plot of a 412 px phone at 11 px
    (about 6 px a character; "4<br>colocated" took 9, and the ticks ran into each other)."""
    count, _, kind = name.partition(" ")
    if kind:
        return f"{count}<br>{_TICK_WORDS.get(kind, kind)}"
    prefill, plus, decode = name.partition("+")
    return f"{prefill}<br>+{decode}" if plus else name


_TICK_WORDS = {"colocated": "coloc", "coloc.": "coloc", "chunked": "chunk"}  # short_name's and the map's words


def pools_figure(cost, workload="research", ttft_slo_s: float = 0.5, tpot_slos_s=(0.02, 0.08),
                 scales=(0.25, 0.5, 0.75, 1.0), scale: float = 0.5, tpot_slo_s: float | None = None,
                 decode_step_s: float | None = None, max_workers: int = 4, **options):
    """Ch. 7's explorer for the rendered book (no kernel): every candidate's goodput per worker (bars, simulated
    on ``cost``) and the closed-form first guess (dots, predicted), for a TPOT SLO (dropdown over ``tpot_slos_s``)
    and prompt and output lengths ``scale`` x the workload's (slider over ``scales``), at one TTFT SLO. The numbers
    are :func:`splitlab.teach.figures.pools.pools_grid`'s, the very plans the ipywidgets explorer draws.
    ``decode_step_s``: shows each TPOT SLO in decode steps too. Returns a plotly figure.

    Raises:
        ValueError: ``scale`` not in ``scales`` or ``tpot_slo_s`` not in ``tpot_slos_s``, either list empty.
    """
    from ..figures import pools
    from ..figures.style import layout_color
    from ..interactive import Trace, explorer_figure, room_for_legend

    tpots, scales = list(tpot_slos_s), list(scales)
    if not tpots or not scales:
        raise ValueError("tpot_slos_s and scales need at least one value each")
    tpot_slo_s = tpots[0] if tpot_slo_s is None else tpot_slo_s
    if scale not in scales or tpot_slo_s not in tpots:
        raise ValueError(f"the defaults scale={scale}, tpot_slo_s={tpot_slo_s} must be among {scales} and {tpots}")
    grid = pools.pools_grid(cost, workload, ttft_slo_s, tpots, scales, max_workers=max_workers, **options)
    first = grid.assign(split=grid.layout == "disaggregated", chunked=grid.policy == "chunked")
    order = list(dict.fromkeys(first.sort_values(["split", "chunked", "workers", "prefill_workers"]).candidate))
    label = {t: f"{t * 1e3:.3g} ms" + (f" ({t / decode_step_s:.2g} steps)" if decode_step_s else "") for t in tpots}

    tpot_of = {v: t for t, v in label.items()}

    ticks = [phone_tick(n) for n in order]  # "4<br>chunk": eight fit a phone's column

    def traces(tpot_label, s):
        g = grid[(grid.tpot_slo_s == tpot_of[tpot_label]) & (grid.scale == s)].set_index("candidate")
        sim, guess = g[g.label == "simulated"], g[g.label != "simulated"]
        return [Trace("goodput, simulated", ticks, [sim.goodput_rps_per_worker[n] for n in order], "bar"),
                Trace("first guess, predicted (closed form)", ticks, [guess.goodput_rps_per_worker[n] for n in order],
                      "markers", color="#000000")]

    fig = explorer_figure(traces, ("lengths", scales), f"Goodput per worker, TTFT <= {ttft_slo_s * 1e3:.0f} ms",
                          "layout", "goodput per worker (requests/s)", dropdown=("TPOT SLO", [label[t] for t in tpots]),
                          slider_default=scales.index(scale), dropdown_default=tpots.index(tpot_slo_s),
                          slider_format=lambda s: f"x{s:g}", height=600)
    fig.update_traces(marker_color=[layout_color(n) for n in order], selector=dict(type="bar"))
    fig.update_traces(marker_size=22, marker_symbol="line-ew-open", marker_line_width=3, selector=dict(mode="markers"))
    fig.update_xaxes(tickangle=0, tickfont_size=11)
    return room_for_legend(fig, 2, axis_px=57)
