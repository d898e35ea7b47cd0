"""Explorers that stay interactive in the rendered book: plotly figures with a slider (and a dropdown) over a grid
of values computed when the page is built, which need no kernel and no network.

The figure holds every trace of every dropdown value. A slider step replaces the x and y data of all of them (its
``restyle`` sets data), a dropdown entry shows one group and hides the others (its ``restyle`` sets visibility):
the two touch different properties, so any combination of positions shows the right curves. plotly.js comes from
the book's own static files (:mod:`.book_assets`), so a page works offline.

In the book build the figure goes out as HTML that uses that copy of plotly.js; in JupyterLab the same output
also carries plotly's own JSON; on Colab it is shown with plotly's default renderer. The grid comes from the
same function the chapter's ipywidgets explorer calls, so the two cannot disagree.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

__all__ = ["Trace", "explorer_figure", "room_for_legend", "show"]

#: mode-bar buttons every explorer figure leaves out (download and reset stay)
MODEBAR_REMOVED = ["zoom", "pan", "select", "lasso", "zoomin", "zoomout", "autoscale", "togglespikelines",
                   "hoverclosest", "hovercompare"]
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


@dataclass
class Trace:
    """One curve (``kind`` "lines", "markers", "lines+markers") or a set of bars (``kind`` "bar") of a grid
    point; ``name`` labels it in the legend (say "measured" or "predicted" in it)."""

    name: str
    x: Sequence
    y: Sequence
    kind: str = "lines"
    dash: str = "solid"
    color: str | None = None
    extra: dict = field(default_factory=dict)


def _values(x) -> list:
    return [v.item() if hasattr(v, "item") else v for v in x]


def _traces_at(traces_for, group, value, grouped: bool) -> list:
    """``traces_for`` at one grid point; its own error gains a note naming the point."""
    try:
        traces = traces_for(group, value) if grouped else traces_for(value)
    except Exception as err:
        err.add_note(f"raised by traces_for at {'dropdown ' + repr(group) + ', ' if grouped else ''}slider {value!r}")
        raise
    if not isinstance(traces, (list, tuple)) or not all(isinstance(t, Trace) for t in traces):
        raise TypeError(f"traces_for must return a list of Trace, got {type(traces).__name__} at slider {value!r}")
    return list(traces)


def explorer_figure(traces_for: Callable[..., list[Trace]], slider: tuple[str, Sequence], title: str,
                    x_title: str, y_title: str, dropdown: tuple[str, Sequence] | None = None,
                    slider_default: int = 0, dropdown_default: int = 0, x_log: bool = False, y_log: bool = False,
                    height: int = 560, slider_format: Callable[[object], str] = str):
    """A plotly figure over a grid: ``traces_for(slider_value)`` (or ``traces_for(dropdown_value, slider_value)``)
    returns the traces drawn at that grid point, the same number and names at every slider value.

    Args:
        slider: (label, values) of the slider; dropdown: (label, values) or None.
        title, x_title, y_title: the title and the axis titles (with units).
        slider_default, dropdown_default: the positions shown first.
        x_log, y_log: log axes (never with bars).

    Returns:
        a ``plotly.graph_objects.Figure`` (show it with :func:`show`).

    Raises:
        ValueError: no slider or dropdown values, a default position out of range, traces whose number, names or
        kinds differ between slider values, bars on a log axis. TypeError: traces_for returns no list of Trace
        (its own errors pass through, with a note naming the grid point).
    """
    import plotly.graph_objects as go

    label, values = slider[0], list(slider[1])
    groups = list(dropdown[1]) if dropdown else [None]
    if not values:
        raise ValueError("the slider needs at least one value")
    if not groups:
        raise ValueError("the dropdown needs at least one value (or pass dropdown=None)")
    for name, pos, n in (("slider_default", slider_default, len(values)), ("dropdown_default", dropdown_default,
                                                                          len(groups))):
        if isinstance(pos, bool) or not isinstance(pos, int) or not 0 <= pos < n:
            raise ValueError(f"{name} must be a position in 0..{n - 1}, got {pos!r}")
    grid = [[_traces_at(traces_for, g, v, dropdown is not None) for v in values] for g in groups]
    for g, rows in zip(groups, grid):
        if len({len(t) for t in rows}) != 1:
            raise ValueError(f"traces_for gave a different number of traces across the slider (group {g!r})")
        if len({tuple((t.name, t.kind) for t in ts) for ts in rows}) != 1:
            raise ValueError(f"traces_for gave traces of different names or kinds across the slider (group {g!r}); "
                             "a slider step only replaces their data")
        if (x_log or y_log) and any(t.kind == "bar" for t in rows[0]):
            raise ValueError("bars on a log axis mislead: use lines or linear axes")
    fig, owner = go.Figure(), []
    for j, rows in enumerate(grid):
        for k, t in enumerate(rows[slider_default]):
            color = t.color or COLORS[k % len(COLORS)]
            common = dict(name=t.name, x=_values(t.x), y=_values(t.y), visible=j == dropdown_default,
                          legendgroup=t.name, **t.extra)
            if t.kind == "bar":
                fig.add_trace(go.Bar(marker_color=color, **common))
            else:
                fig.add_trace(go.Scatter(mode=t.kind, line=dict(color=color, dash=t.dash), marker=dict(color=color),
                                         **common))
            owner.append(j)
    steps = []
    for i, v in enumerate(values):
        xs = [_values(t.x) for rows in grid for t in rows[i]]
        ys = [_values(t.y) for rows in grid for t in rows[i]]
        steps.append(dict(method="restyle", label=slider_format(v), args=[{"x": xs, "y": ys}]))
    top = 90 if dropdown else 50
    layout = dict(
        title=dict(text=title, x=0.01, xanchor="left", y=0.99, yref="container", yanchor="top",
                   font=dict(size=14)),
        height=height, autosize=True, margin=dict(l=60, r=20, t=top, b=175), font=dict(size=12),
        xaxis=dict(title=dict(text=x_title), type="log" if x_log else None),
        yaxis=dict(title=dict(text=y_title), type="log" if y_log else None, rangemode="tozero" if not y_log else None),
        legend=dict(orientation="h", x=0, y=-0.17, yanchor="top", font=dict(size=11)),
        sliders=[dict(active=slider_default, steps=steps, x=0, len=1.0, y=-0.3, yanchor="top", pad=dict(t=10, b=0),
                      currentvalue=dict(prefix=f"{label}: ", font=dict(size=12)))])
    if dropdown:
        buttons = [dict(method="restyle", label=f"{dropdown[0]}: {g}", args=[{"visible": [o == j for o in owner]}])
                   for j, g in enumerate(groups)]
        layout["updatemenus"] = [dict(buttons=buttons, active=dropdown_default, x=0, xanchor="left", y=1.03,
                                      yanchor="bottom", showactive=True, pad=dict(r=4))]
    # a mode bar trimmed to download and reset, so that on a phone it does not cover the title
    layout["modebar"] = dict(remove=MODEBAR_REMOVED)
    fig.update_layout(**layout)
    return fig


def _book_html(fig) -> str:
    import plotly.io as pio

    return pio.to_html(fig, config={"responsive": True, "displaylogo": False}, include_plotlyjs=False,
                       include_mathjax=False, auto_play=False, full_html=False, default_width="100%",
                       default_height=f"{fig.layout.height}px", validate=False)


class _Bundle:
    """An output whose HTML uses the book's copy of plotly.js, with plotly's JSON beside it for JupyterLab."""

    def __init__(self, fig):
        self.fig = fig

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/html": _book_html(self.fig), "application/vnd.plotly.v1+json": self.fig.to_plotly_json()}


def show(fig) -> None:
    """Display ``fig`` so that it is interactive in the rendered book (no kernel, no CDN), in JupyterLab and on
    Colab (plotly's own renderer there)."""
    from IPython.display import display

    if "google.colab" in sys.modules:
        fig.show()
    else:
        display(_Bundle(fig))


def room_for_legend(fig, rows: int, plot_px: int | None = None, axis_px: int = 52):
    """Make an :func:`explorer_figure` fit a 412 px phone: room below the x axis for ``rows`` rows of legend (each
    about 21 px; a phone's column wraps a legend that fits one row on a wide page) above the slider, so the two
    never overlap.

    Args:
        rows: legend rows to leave room for (>= 1).
        plot_px: height of the plot itself (px); None keeps the figure's.
        axis_px: room for the tick labels and the axis title under the plot (px): 52 for one line of tick
            labels, about 57 for two short lines.

    Returns ``fig``. Raises ValueError for rows < 1."""
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    top = fig.layout.margin.t
    if plot_px is None:
        plot_px = fig.layout.height - top - fig.layout.margin.b
    row_px, slider_px = 21, 80  # one legend row; the slider and its ticks
    bottom = axis_px + rows * row_px + slider_px
    fig.update_layout(height=top + plot_px + bottom, margin=dict(b=bottom),
                      legend=dict(y=-axis_px / plot_px, yanchor="top"))
    fig.layout.sliders[0].update(y=-(axis_px + rows * row_px + 6) / plot_px)
    return fig
