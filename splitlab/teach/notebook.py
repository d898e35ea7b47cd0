"""What every chapter calls first: ``notebook.setup()``.

It makes three things the same wherever a chapter runs (the book build, Jupyter, Colab, a laptop):

- **Figures show.** It selects matplotlib's inline backend when running in a Jupyter kernel. Without it, a
  kernel started with ``MPLBACKEND=Agg`` in its environment (common on headless build servers) draws every figure
  into memory and shows none: ``jupyter-book build -W`` then succeeds with every figure missing from the pages.
- **Figures read on a phone.** The book's figure style: one panel 4.8 x 3.4 inches, every text 12 pt, so that a
  figure shrunk to a 412 px phone's text column (about 3.85 in) keeps its labels at 9 pt or more.
- **Timings are steady on a CPU.** Without a CUDA GPU, torch runs on one thread (``cpu_threads``): several threads
  wait for each other after every operator, and on a machine shared with other programs each wait can cost a
  whole scheduler slice.
"""
from __future__ import annotations

import contextlib

import matplotlib

from ..common.threads import check_threads

__all__ = ["setup", "BOOK_STYLE", "inline_figures", "md", "rc_style"]

#: matplotlib settings of every figure in the book (sizes in inches and points): 4.8 in wide, every text 12 pt, so
#: that on a 412 px phone, whose text column (~3.85 in) shrinks the figure 0.8x, it still reads as 9.6 pt
#: (:func:`splitlab.teach.figures.phone.phone_font_pt` measures it; tests/test_phone_figures.py holds every
#: chapter's figures to it).
BOOK_STYLE = {
    "figure.figsize": (4.8, 3.4),
    "figure.dpi": 100,
    "font.size": 12,
    "axes.titlesize": 12,
    "axes.labelsize": 12,
    "xtick.labelsize": 12,
    "ytick.labelsize": 12,
    "legend.fontsize": 12,
    "figure.titlesize": 12,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def inline_figures() -> bool:
    """Select the inline backend if this runs in a Jupyter (IPython) kernel; return whether it did.

    ``%matplotlib inline`` overrides ``MPLBACKEND`` and registers the hook that shows each cell's figures as
    that cell's output. Outside a kernel (a plain script, pytest) nothing changes."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return False
    shell.run_line_magic("matplotlib", "inline")
    return True


def setup(cpu_threads: int | None = 1, style: bool = True) -> None:
    """Prepare a chapter: inline figures (:func:`inline_figures`), the book's figure style (:data:`BOOK_STYLE`)
    unless ``style`` is False, and, when torch sees no CUDA GPU, ``torch.set_num_threads(cpu_threads)`` unless
    ``cpu_threads`` is None.

    Raises:
        ValueError: ``cpu_threads`` is not None and not an integer in 1 .. this machine's CPU count.
    """
    if cpu_threads is not None:
        check_threads(cpu_threads, "cpu_threads")
    inline_figures()
    if style:
        matplotlib.rcParams.update(BOOK_STYLE)
    if cpu_threads is not None:
        import torch

        if not torch.cuda.is_available():
            from ..phases.cpu_threads import pin_threads
            pin_threads(cpu_threads)  # the chapter's count, which load_model keeps


def md(text: str) -> None:
    """Show ``text`` as Markdown in the cell's output, rendered by the built book, Jupyter and Colab alike: prose
    whose numbers come from this run (a takeaway, a solution), so the text always says what the page measured."""
    from IPython.display import Markdown, display

    display(Markdown(text))


@contextlib.contextmanager
def rc_style(rc: dict):
    """Matplotlib settings ``rc`` for the figures made inside. Interactive mode is kept as it is at the end: a
    notebook's inline backend, loaded by the first figure, switches it on, and a plain ``rc_context`` would switch
    it back off on exit, after which the figures of later cells would silently not be shown."""
    import matplotlib.pyplot as plt
    with plt.rc_context(rc):
        try:
            yield
        finally:
            interactive = plt.isinteractive()
    plt.interactive(interactive)
