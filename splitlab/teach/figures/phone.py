"""The book's figures on a phone: the page style every figure is drawn in, and the rule it is checked against.

A 412 px phone shows the text column about 370 CSS px wide: :data:`COLUMN_IN` = 3.85 in at 96 px per inch. The
book shows each figure as the notebook saved it (``bbox_inches="tight"``: the drawn content plus 0.1 in on each
side) and shrinks a wider one to the column, so a text of ``s`` pt on a figure ``w`` in wide reads as
``s x 3.85 / w`` pt there. The rule (issue 9): every text, tick labels, axis labels, legends, titles and
annotations alike, at :data:`MIN_PT` = 9 pt or more, and at most :data:`MAX_COLUMNS` = 2 panels side by side.

The style is :data:`splitlab.teach.notebook.BOOK_STYLE` (4.8 in wide, 12 pt: 9.6 pt on the phone); the
serving chapters' figures add bold titles and frameless legends (:data:`PHONE`).

- :func:`phone`, :func:`styled`, :func:`figure`: draw in the style (a context, a decorator, stacked panels);
  :func:`legend_below`: one legend under the panels, off the data; :func:`wrap`: a title on lines that fit.
- :func:`phone_font_pt`: the smallest text of a figure as a phone shows it (pt); :func:`phone_texts` lists them.
- :func:`panel_columns`: how many panels sit side by side; :func:`overlapping_texts`: texts drawn over each other.
"""
from __future__ import annotations

import functools
import textwrap

import matplotlib.pyplot as plt
from matplotlib.text import Text

from ..notebook import BOOK_STYLE, rc_style

__all__ = ["COLUMN_IN", "MIN_PT", "MAX_COLUMNS", "WIDTH", "PHONE", "phone", "styled", "figure", "wrap", "fit_titles",
           "legend_below", "rendered_width_in", "phone_texts", "phone_font_pt", "panel_columns", "overlapping_texts"]

COLUMN_IN, MIN_PT, MAX_COLUMNS = 3.85, 9.0, 2
WIDTH = BOOK_STYLE["figure.figsize"][0]  # inches: 12 pt at 4.8 in reads as 9.6 pt in a 3.85 in column
PHONE = {**BOOK_STYLE, "legend.frameon": False, "axes.titleweight": "bold"}


def phone():
    """:data:`PHONE` for the figures made inside (interactive mode kept: :func:`splitlab.teach.notebook.rc_style`)."""
    return rc_style(PHONE)


def styled(fn):
    """Run a drawing function under :data:`PHONE`, so that every text it makes has the page's sizes, and wrap
    the titles of what it drew that are wider than the figure (:func:`fit_titles`)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with phone():
            drawn = fn(*args, **kwargs)
            fit_titles(drawn if isinstance(drawn, plt.Figure) else drawn.figure)
        return drawn
    return wrapper


def fit_titles(fig) -> None:
    """Break every panel title and the suptitle of ``fig`` that reaches past the figure's edges into lines that
    fit (a wider title widens the saved figure, which a phone then shrinks, fonts and all)."""
    renderer = fig.canvas.get_renderer()
    if fig.get_layout_engine() is not None:
        fig.get_layout_engine().execute(fig)  # where the panels will be once laid out
    edge = fig.bbox.width * 0.01
    titles = [ax.title for ax in fig.axes] + ([fig._suptitle] if fig._suptitle is not None else [])
    for t in titles:
        text = t.get_text().replace("\n", " ")
        chars = len(text)
        for _ in range(6):
            box = t.get_window_extent(renderer)
            over = max(0.0, edge - box.x0) + max(0.0, box.x1 - fig.bbox.width + edge)
            if not text or over <= 0 or chars <= 12:
                break
            chars = max(12, min(chars - 2, int(chars * (box.width - 2 * over) / box.width)))
            t.set_text(wrap(text, chars))


def figure(rows: int = 1, height: float = 3.2, sharex: bool = False, height_ratios=None):
    """A phone-legible figure of ``rows`` panels stacked vertically, ``height`` in tall each (on average, with
    ``height_ratios``): ``(fig, [axes])``."""
    with phone():
        fig, axes = plt.subplots(rows, 1, figsize=(WIDTH, height * rows), sharex=sharex, layout="constrained",
                                 squeeze=False, height_ratios=height_ratios)
    return fig, list(axes[:, 0])


def wrap(text: str, chars: int = 40) -> str:
    """``text`` broken into lines of at most ``chars`` characters: a title of 12 pt bold fits a 4.8 in figure
    in about 42 characters a line."""
    lines = max(1, -(-len(text) // chars))
    return "\n".join(textwrap.wrap(text, min(chars, -(-len(text) // lines) + 4))) or text  # lines of even length


def legend_below(fig, ax_or_handles, labels=None, ncols: int = 1) -> None:
    """One legend for the figure, under its panels (``loc="outside lower center"`` of constrained layout), so
    that it never hides a measured point; ``ax_or_handles``: an Axes whose legend entries to use (its own legend
    removed), or a list of handles with ``labels``."""
    if hasattr(ax_or_handles, "get_legend_handles_labels"):
        ax = ax_or_handles
        handles, labels = ax.get_legend_handles_labels()
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    else:
        handles = ax_or_handles
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols, frameon=False)


def _renderer(fig):
    if fig.stale:
        fig.canvas.draw()  # lays the figure out (constrained layout, ticks) as saving it would
    return fig.canvas.get_renderer()


def rendered_width_in(fig) -> float:
    """Width (in) of ``fig`` as a notebook shows it: the tight bounding box of what is drawn plus
    ``savefig.pad_inches`` on each side (matplotlib-inline saves with ``bbox_inches="tight"``)."""
    box = fig.get_tightbbox(_renderer(fig))
    return float(box.width) + 2 * float(plt.rcParams["savefig.pad_inches"])


def _texts(fig):
    """Every visible, non-empty Text drawn in ``fig`` (labels of ticks outside the view left out)."""
    renderer = _renderer(fig)
    shown, ticks = [], set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.majorTicks + axis.minorTicks:
                ticks.update((id(tick.label1), id(tick.label2)))
            if ax.get_visible():
                lo, hi = sorted(axis.get_view_interval())
                span = (hi - lo) * 1e-6
                shown += [label for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                          if lo - span <= tick.get_loc() <= hi + span for label in (tick.label1, tick.label2)]
    out = [t for t in shown if t.get_visible() and t.get_text().strip()]
    out += [t for t in fig.findobj(Text) if id(t) not in ticks and t.get_visible() and t.get_text().strip()
            and (t.axes is None or t.axes.get_visible())]
    return [t for t in out if t.get_window_extent(renderer).width > 0]


def phone_texts(fig, column_in: float = COLUMN_IN) -> list[tuple[float, str]]:
    """``(pt on the phone, text)`` of every visible text of ``fig``, smallest first: its font size times
    ``column_in`` / the figure's shown width (:func:`rendered_width_in`; a figure narrower than the column is
    not enlarged)."""
    scale = column_in / max(rendered_width_in(fig), column_in)
    return sorted((float(t.get_fontsize()) * scale, t.get_text()) for t in _texts(fig))


def phone_font_pt(fig, column_in: float = COLUMN_IN) -> float:
    """The smallest font size (pt) of ``fig``'s texts (tick labels, axis labels, legends, titles, annotations)
    once a phone's ``column_in``-inch column shows it: font pt x ``column_in`` / shown width (in). The book's
    rule: >= :data:`MIN_PT`. Raises ValueError for a figure without text."""
    texts = phone_texts(fig, column_in)
    if not texts:
        raise ValueError("the figure has no visible text")
    return texts[0][0]


def panel_columns(fig) -> int:
    """How many panels of ``fig`` sit side by side: the most visible Axes whose vertical spans overlap while
    their horizontal spans do not (twin axes count once)."""
    boxes = [ax.get_position() for ax in fig.axes if ax.get_visible() and ax.axison]
    best = 0
    for b in boxes:
        row = [c for c in boxes if c.y0 < b.y1 - 1e-3 and c.y1 > b.y0 + 1e-3]
        starts = sorted({round(c.x0, 3) for c in row})
        best = max(best, len(starts))
    return best


def overlapping_texts(fig, tolerance_px: float = 1.0) -> list[tuple[str, str]]:
    """Pairs of visible texts of ``fig`` drawn over each other (their boxes overlap by more than
    ``tolerance_px`` pixels in both directions): labels a reader cannot read."""
    renderer = _renderer(fig)
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(fig)]
    pairs = []
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            dx = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
            dy = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
            if dx > tolerance_px and dy > tolerance_px:
                pairs.append((a, b))
    return pairs
