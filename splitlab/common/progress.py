"""Progress bars on stderr for the calls that can run more than a few seconds (torch-free).

Every such call (``serving.run`` / ``compare`` of a real model, ``profiling.calibrate``, ``serving.validate``, the
CLI's ``demo``, ``compare``, ``serve``, ``calibrate``) takes ``progress``: True shows a tqdm bar on stderr, False
shows none, and None (the default) shows one only when stderr is a terminal, so tests, pipes and log files get
none. The CLI passes False under ``--json``, else whether stderr is a terminal. ``TQDM_DISABLE=1`` in the
environment turns every bar off.
"""
from __future__ import annotations

import sys

__all__ = ["show_progress", "progress_bar"]


def show_progress(progress: bool | None) -> bool:
    """Whether to draw a bar: ``progress`` itself, or for None whether stderr is a terminal.

    Raises:
        TypeError: ``progress`` is neither True, False nor None.
    """
    if progress is None:
        isatty = getattr(sys.stderr, "isatty", None)
        try:
            return bool(isatty and isatty())
        except ValueError:  # a closed stderr
            return False
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None (a bar when stderr is a terminal), got {progress!r}")
    return progress


def progress_bar(total: int | None, desc: str, progress: bool | None = None, unit: str = "it", delay: float = 0.0):
    """A tqdm bar of ``total`` ``unit`` on stderr, drawn when :func:`show_progress` says so (a disabled bar
    otherwise: its ``update`` and ``close`` do nothing), only once it has run ``delay`` seconds, erased at the end.
    Use it as a context manager, or close it."""
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit=unit, disable=not show_progress(progress), file=sys.stderr,
                dynamic_ncols=True, leave=False, delay=delay)
