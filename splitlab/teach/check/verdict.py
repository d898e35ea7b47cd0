"""How every checker answers: prints whether the answer is right and returns True/False; ``None`` means "not
answered yet"."""
from __future__ import annotations

import math
from typing import Any

__all__ = ["verdict"]


def verdict(answer: Any, expected: float, rel_tol: float, what: str, hint: str) -> bool:
    if answer is None:
        print(f"Not answered yet: set your answer for {what} and run the cell again.")
        return False
    try:
        value = float(answer)
    except (TypeError, ValueError):
        print(f"Not a number: {answer!r}. {what} is a number.")
        return False
    if math.isclose(value, expected, rel_tol=rel_tol, abs_tol=1e-12):
        print(f"Correct: {what} = {expected:,.6g}.")
        return True
    print(f"Not yet: {value:,.6g} is not {what} (tolerance {rel_tol:.0%}). Hint: {hint}")
    return False

