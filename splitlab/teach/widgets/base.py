"""The one way every explorer works: a static figure at its default settings (what the rendered book shows), then
core ipywidgets that redraw a live copy when a kernel runs (Colab, Jupyter)."""
from __future__ import annotations

from typing import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

__all__ = ["explorer"]


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
