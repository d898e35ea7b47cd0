"""How every checker answers: prints whether the answer is right and returns True/False; ``None`` means "not
answered yet". Every line a checker prints goes through :func:`say`, wrapped to fit a phone's column."""
from __future__ import annotations

import math
import textwrap
from typing import Any

__all__ = ["verdict", "say", "shown", "WIDTH"]

#: The longest line a checker prints (characters): a cell's output on a 412 px phone shows 41 characters of the
#: book's monospace font (8.4 px each in a 348 px box); 60 would scroll sideways.
WIDTH = 40


def say(text: str) -> None:
    """Print ``text`` wrapped at :data:`WIDTH` characters (each of its own lines wrapped separately)."""
    print("\n".join(textwrap.fill(line, WIDTH, break_long_words=False, break_on_hyphens=False) or line
                    for line in text.split("\n")))


def shown(value: float, rel_tol: float = 0.0) -> str:
    """``value`` as a checker prints it: a whole number in full (104,950), a value checked within a tolerance of
    1% or more with 3 significant digits (0.0812, not 0.0811798: more would be false precision), else 6."""
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.3g}" if rel_tol >= 0.01 else f"{value:,.6g}"


def verdict(answer: Any, expected: float, rel_tol: float, what: str, hint: str) -> bool:
    if answer is None:
        say(f"Not answered yet: set your answer for {what} and run the cell again.")
        return False
    try:
        value = float(answer)
    except (TypeError, ValueError):
        say(f"Not a number: {answer!r}. {what} is a number.")
        return False
    if math.isclose(value, expected, rel_tol=rel_tol, abs_tol=1e-12):
        say(f"Correct: {what} = {shown(expected, rel_tol)}.")
        return True
    say(f"Not yet: {shown(value, rel_tol)} is not {what} (tolerance {rel_tol:.0%}). Hint: {hint}")
    return False

