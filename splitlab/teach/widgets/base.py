"""The one way every explorer works: a static figure at its default settings (what the rendered book shows), then
core ipywidgets that redraw a live copy when a kernel runs (Colab, Jupyter)."""
from __future__ import annotations

from typing import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

__all__ = ["explorer", "phone_room"]


def explorer(draw: Callable[..., None], **controls: widgets.ValueWidget) -> widgets.VBox:
    """Draw ``draw(**defaults)`` as a static figure, then display ``controls`` with a live figure below them.

    ``draw`` takes one keyword per control and draws on the current matplotlib figure.
    Returns the widget box (already displayed).
    """
    draw(**{name: w.value for name, w in controls.items()})
    plt.show()

    def redraw(**values):
        draw(**values)
        plt.show()

    out = widgets.interactive_output(redraw, controls)
    box = widgets.VBox([widgets.HBox(list(controls.values())), out])
    display(box)
    return box



def phone_room(fig, legend_rows: int = 2):
    """Room below a :func:`splitlab.teach.interactive.explorer_figure` for a legend of ``legend_rows`` rows (a
    phone's column wraps a legend that fits one row on a wide page) above its slider, so the two never overlap.
    Returns ``fig``."""
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    extra = 24 * (legend_rows - 1)
    fig.update_layout(margin_b=fig.layout.margin.b + extra, height=fig.layout.height + extra)
    fig.layout.sliders[0].y = -(fig.layout.margin.b - 88) / plot_px  # the slider keeps its 88 px
    return fig
