"""The map's explorers (:mod:`splitlab.planning.split_map`): where the split pays off, with the KV link's
bandwidth as the control, and the cluster's size as a second one.

- :func:`split_map_grid`: one map per link bandwidth, the numbers both explorers draw (the colocated layouts do
  not cross the link: searched once, taken into every other map by ``colocated_from``); :func:`split_map_grids`:
  such a grid per cluster size (4 and 8 workers).
- :func:`split_map_explorer`: a static heatmap at the default link, then an ipywidgets slider over the links (and
  a menu of the cluster sizes) that redraws a live copy when a kernel runs (:func:`.base.explorer`).
- :func:`split_map_figure`: the same maps as a plotly heatmap with a slider over the links (and a dropdown over
  the cluster sizes), interactive in the rendered book without a kernel (:mod:`splitlab.teach.interactive`);
  colours and words per cell are :func:`splitlab.teach.figures.split_map.cell_color` and ``marked_text``, so both
  explorers show the same map.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Sequence

import ipywidgets as widgets

from .base import explorer

__all__ = ["split_map_grid", "split_map_grids", "split_map_explorer", "split_map_figure", "LINKS_GBPS", "link_label"]

#: default slider of the KV link between the pools, GB/s: a slow network to NVLink-class
LINKS_GBPS = (0.1, 1.0, 10.0, 100.0)


#: the slider's inset from each side of the plot (a fraction of its width): room for half an end label
SLIDER_X = 0.12


def link_label(gbps: float | None) -> str:
    """'12.5 GB/s', or "cost model's" for None (the cost model's own transfer); no exponent ('1,000,000 GB/s')."""
    from ..figures.style import gb_per_s
    return "cost model's" if gbps is None else gb_per_s(gbps)


def split_map_grid(cost=None, links_gbps: Sequence[float | None] = LINKS_GBPS, workers: int = 4,
                   progress: bool | None = None, **options) -> dict:
    """One :class:`~splitlab.planning.split_map.SplitMap` per KV link of ``links_gbps`` (GB/s; None: the cost
    model's transfer), same axes and cluster (``options``: :func:`~splitlab.planning.split_map.split_map`'s).
    The first map searches every layout, the others only their splits. Returns {link GB/s: map}, in the order
    given.

    Raises:
        ValueError: no links, a link twice, a link that is not a finite number > 0 or None; and split_map's."""
    from ...planning.split_map import split_map
    links = _distinct_list("links_gbps", links_gbps, "link bandwidths (GB/s, or None)",
                           "link bandwidth (GB/s, or None)")
    maps, first = {}, None
    for gbps in links:
        if gbps is not None and not (isinstance(gbps, numbers.Real) and not isinstance(gbps, bool)
                                     and 0 < float(gbps) < 1e300):  # np.float32(10.0) was refused
            raise ValueError(f"every link must be a finite number of GB/s > 0 (or None: the cost model's), got "
                             f"{gbps!r}")
        gbps = None if gbps is None else float(gbps)
        maps[gbps] = first = split_map(cost, workers, link_bytes_per_s=None if gbps is None else gbps * 1e9,
                                       colocated_from=first, progress=progress, **options)
    return maps


def split_map_grids(cost=None, workers: Sequence[int] = (4, 8), links_gbps: Sequence[float | None] = LINKS_GBPS,
                    progress: bool | None = None, **options) -> dict:
    """:func:`split_map_grid` once per cluster size of ``workers``, same axes and links. Returns {workers: {link
    GB/s: map}}, in the order given, which :func:`split_map_figure` and :func:`split_map_explorer` draw with a
    control over the cluster sizes.

    Raises:
        ValueError: no cluster size, or one twice; and split_map_grid's (a size outside 2 .. 16 among them)."""
    sizes = _distinct_list("workers", workers, "cluster sizes", "cluster size")
    return {n: split_map_grid(cost, links_gbps, n, progress, **options) for n in sizes}


def _distinct_list(name: str, values, many: str, one: str) -> list:
    """``values`` as a list of at least one value (``one``, in words), none twice; ValueError otherwise, a scalar
    or a str too (``many``: what the list holds; it was 'not iterable' from inside)."""
    if isinstance(values, (str, bytes, dict)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list of {many}, got {values!r}")
    out = list(values)
    if not out:
        raise ValueError(f"{name} is empty: give at least one {one}")
    if len(set(out)) != len(out):
        raise ValueError(f"{name} holds a {one} twice: {out}")
    return out


def _by_workers(maps: dict) -> dict:
    """{workers: {link: map}} from either shape :func:`split_map_figure` takes. ValueError: no map; TypeError: not
    such a dict."""
    from ...planning.split_map import SplitMap
    if not isinstance(maps, dict) or not all(isinstance(v, (dict, SplitMap)) for v in maps.values()) or not all(
            isinstance(m, SplitMap) for v in maps.values() if isinstance(v, dict) for m in v.values()):
        raise TypeError(f"maps must be split_map_grid's {{link: map}} or split_map_grids' {{workers: {{link: map}}}}, "
                        f"got {type(maps).__name__}")  # a SplitMap was "'SplitMap' object has no attribute 'values'"
    if not maps or any(isinstance(v, dict) and not v for v in maps.values()):
        raise ValueError("maps is empty: give split_map_grid's {link: map} or split_map_grids' {workers: {link: map}}")
    if all(isinstance(v, dict) for v in maps.values()):
        return maps
    first = next(iter(maps.values()))
    return {first.workers: maps}


def _default(maps: dict, default):
    if default is None:
        return next(iter(maps))
    if default not in maps:
        raise ValueError(f"default link {default!r} is not one of the grid's {list(maps)}")
    return default


def split_map_explorer(maps: dict, default: float | None = None) -> widgets.VBox:
    """A static heatmap of ``maps[default]`` (the first link if None), then a slider over the links of
    :func:`split_map_grid`'s ``maps`` that redraws it when a kernel runs; given :func:`split_map_grids`' {workers:
    {link: map}}, a menu of the cluster sizes beside it (the first size shown first). Returns the widget box
    (displayed).

    Raises:
        ValueError: ``default`` not a link of ``maps``."""
    from ..figures.split_map import map_heatmap
    grids = _by_workers(maps)
    first = next(iter(grids.values()))
    default = _default(first, default)
    labels = {link_label(g): g for g in first}
    controls = dict(link=widgets.SelectionSlider(options=list(labels), value=link_label(default),
                                                 description="KV link"))
    if len(grids) > 1:
        controls["workers"] = widgets.Dropdown(options=list(grids), value=next(iter(grids)), description="workers")

    def draw(link: str, workers: int | None = None) -> None:
        map_heatmap((grids[workers] if workers is not None else first)[labels[link]])

    return explorer(draw, **controls)


def _colorscale():
    """A plotly colorscale on z in [0, 5): [k, k + 1) the kind k of (split, prefill-first, chunked), from its
    palest shade to full; [3, 4) a tie (grey), [4, 5] none (white). z = kind + shade is
    :func:`splitlab.teach.figures.split_map.cell_color` on a heatmap."""
    from matplotlib.colors import to_hex

    from ..figures.split_map import KIND_COLORS, NONE_COLOR, PALEST, TIE_COLOR

    def pale(color):
        from matplotlib.colors import to_rgb
        return to_hex(tuple(1 - PALEST + PALEST * c for c in to_rgb(color)))
    scale = []
    for k, color in enumerate(KIND_COLORS.values()):
        scale += [[k / 5, pale(color)], [(k + 0.99) / 5, to_hex(color)]]
    return scale + [[3 / 5, TIE_COLOR], [3.99 / 5, TIE_COLOR], [4 / 5, NONE_COLOR], [1.0, NONE_COLOR]]


def _z(cell) -> float:
    from ...planning.split_map import KINDS
    from ..figures.split_map import FULL_MARGIN
    if cell.winner in KINDS:
        return KINDS.index(cell.winner) + 0.99 * min(cell.margin / FULL_MARGIN, 1.0)
    return 3.5 if cell.winner == "tie" else 4.5


def _hover(cell) -> str:
    from ...planning.split_map import KIND_LABELS, KINDS
    lines = [f"{cell.prompt_tokens:,}-token prompt: prefill = {cell.prefill_steps:.3g} decode steps",
             f"TPOT SLO {cell.tpot_slo_s * 1e3:.3g} ms ({cell.tpot_steps:g} steps), TTFT SLO "
             f"{cell.ttft_slo_s * 1e3:.3g} ms"]
    lines += [f"{KIND_LABELS[k]}: {cell.names[k]}, {cell.goodput[k]:.3g} req/s per worker (binding "
              f"{cell.binding[k].upper()})" for k in KINDS]
    return "<br>".join(lines)


def split_map_figure(maps: dict, default: float | None = None, height: int = 600, title: str | None = None):
    """The maps of :func:`split_map_grid` ({link: map}) or of :func:`split_map_grids` ({workers: {link: map}}) as
    one plotly heatmap with a slider over the KV link (GB/s), and with several cluster sizes a dropdown over them
    (one heatmap per size, the dropdown shows one: the slider restyles them all, so the two controls combine), for
    the rendered book: colour = winner, shade = margin, words in each cell, every layout's goodput on hover. Show
    it with :func:`splitlab.teach.interactive.show`. ``title``: its first line (default "Most goodput per worker,
    N workers"; " (predicted)" is added to either for a map of an analytic cost model). Returns a plotly figure.

    Raises:
        ValueError: ``default`` not a link of ``maps``; maps of different axes or links; ``height`` not an integer
            number of pixels >= 100. TypeError: ``title`` not a str or None; ``maps`` not such a dict."""
    if isinstance(height, bool) or not isinstance(height, numbers.Integral) or height < 100:
        raise ValueError(f"height must be an integer number of pixels >= 100, got {height!r}")  # 0: ZeroDivisionError
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None (the default title), got {title!r}")
    import plotly.graph_objects as go
    from matplotlib.colors import to_hex

    from ...planning.map_result import lead_text
    from ..figures.split_map import (FULL_MARGIN, KIND_COLORS, NONE_COLOR, SHORT_LABEL, TIE_COLOR, axis_ticks,
                                     marked_text, predicted, run_lifetimes, short_run)
    from ..figures.style import pct2
    from ..interactive import MODEBAR_REMOVED

    grids = _by_workers(maps)
    every = [m for g in grids.values() for m in g.values()]
    links = list(next(iter(grids.values())))
    default = _default(grids[next(iter(grids))], default)
    first = grids[next(iter(grids))][default]
    if any((m.prompt_tokens, m.tpot_steps) != (first.prompt_tokens, first.tpot_steps) for m in every):
        raise ValueError("the maps have different axes: make them with one split_map_grid(s) call")
    if any(list(g) != links for g in grids.values()):
        raise ValueError("the cluster sizes' grids have different links: make them with one split_map_grids call")
    x = [t.replace("\n", "<br>") for t in axis_ticks(first)]
    y = [f"{k:g}" for k in first.tpot_steps]
    cols = len(x)

    def grid(m):
        rows = [m.cells[i * cols:(i + 1) * cols] for i in range(len(y))]
        return ([[_z(c) for c in r] for r in rows],
                [[marked_text(m, c, "<br>") for c in r] for r in rows],
                [[_hover(c) + (f"<br>runs spanned {run_lifetimes(m, c):.2g} request lifetimes (< 20)"
                               if short_run(m, c) else "") for c in r] for r in rows])
    fig = go.Figure()
    for j, g in enumerate(grids.values()):
        z, text, hover = grid(g[default])
        fig.add_trace(go.Heatmap(z=z, x=x, y=y, text=text, hovertext=hover, texttemplate="%{text}",
                                 textfont=dict(size=12), hovertemplate="%{hovertext}<extra></extra>", zmin=0, zmax=5,
                                 colorscale=_colorscale(), showscale=False, xgap=2, ygap=2, visible=j == 0))
    for name, color in (("split (xPyD)", KIND_COLORS["split"]), ("colocated, pf-first", KIND_COLORS["prefill-first"]),
                        ("colocated, chunk", KIND_COLORS["chunked"]), (f"tie (within {pct2(first.tie_tolerance)})",
                                                                       TIE_COLOR)):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name,
                                 marker=dict(symbol="square", size=14, color=to_hex(color))))
    if any(c.winner == "none" for m in every for c in m.cells):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="none meets the SLOs",
                                 marker=dict(symbol="square-open", size=14, color="#999999")))
    if any(short_run(m, c) for m in every for c in m.cells):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=SHORT_LABEL,
                                 marker=dict(symbol="asterisk-open", size=10, color="#333333")))
    n = len(grids)
    steps = []
    for gbps in links:
        zz, tt, hh = zip(*(grid(g[gbps]) for g in grids.values()))
        steps.append(dict(method="restyle", label=link_label(gbps),
                          args=[{"z": list(zz), "text": list(tt), "hovertext": list(hh)}, list(range(n))]))
    sizes = f"{first.workers} workers" if n == 1 else ""
    top = 70 if n == 1 else 100  # a row for the dropdown under the title
    layout = dict(
        title=dict(text=f"{title or 'Most goodput per worker' + (', ' if sizes else '') + sizes}"
                        f"{' (predicted)' if predicted(first) else ''}"
                        f"<br><sup>shade: lead over the runner-up, full from {lead_text(FULL_MARGIN)}</sup>",
                   x=0.01, xanchor="left",
                   y=1 - 12 / (height + top - 70), yref="container", yanchor="top", font=dict(size=14)),
        height=height + top - 70, autosize=True, margin=dict(l=70, r=10, t=top, b=195), font=dict(size=12),
        xaxis=dict(title=dict(text="prefill cost, in decode steps (prompt tokens)"), type="category",
                   fixedrange=True),
        yaxis=dict(title=dict(text="TPOT SLO (lone decode steps)"), type="category", fixedrange=True),
        legend=dict(orientation="h", x=0, y=-0.25, yanchor="top", font=dict(size=11)),
        plot_bgcolor=NONE_COLOR, modebar=dict(remove=MODEBAR_REMOVED),
        # the rail inset so that its end labels, centred on its ends, stay inside a phone's 365 px ("0.01 GB/s" was
        # cut to "0.01 GB/" at x=0, len=1)
        sliders=[dict(active=links.index(default), steps=steps, x=SLIDER_X, len=1 - 2 * SLIDER_X, y=-0.47,
                      yanchor="top",
                      pad=dict(t=10, b=0), currentvalue=dict(prefix="KV link: ", font=dict(size=12)))])
    if n > 1:  # shows one cluster's heatmap, the legend's traces always
        traces = len(fig.data)
        layout["updatemenus"] = [dict(buttons=[dict(method="restyle", label=f"{w} workers",
                                                    args=[{"visible": [i == j or i >= n for i in range(traces)]}])
                                               for j, w in enumerate(grids)],
                                      active=0, x=0, xanchor="left", y=1.02, yanchor="bottom", showactive=True,
                                      pad=dict(r=4), font=dict(size=12))]
    fig.update_layout(**layout)
    return fig
