"""Numbers as text without false precision, for every part of splitlab that writes one (the planner's batch line,
the book's tables and sentences: :mod:`splitlab.teach.figures.style` re-exports :func:`fmt3`)."""
from __future__ import annotations

import numpy as np

__all__ = ["fmt3"]


def fmt3(value: float, digits: int = 3) -> str:
    """``value`` as text with ``digits`` significant digits (3, or 2 for a ratio: :func:`fmt2`), no exponent and
    no trailing zeros: 0.0123, 4.56, 78.9, 4,880, 1,230,000, 0.0000123, 2 (not "2.00" or "2e+00"); an exact whole
    number below a million in full (4,608 KiB stays 4,608, not 4,610). A bool prints as itself."""
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    value = float(value)
    if value == 0 or not np.isfinite(value):
        return f"{value:g}"
    if value.is_integer() and abs(value) < 1e6:
        return f"{value:,.0f}"
    r = float(f"{value:.{digits}g}")  # rounded to the digits, then written without padding or an exponent
    return f"{r:,.0f}" if abs(r) >= 10 ** (digits - 1) else np.format_float_positional(r, trim="-")
