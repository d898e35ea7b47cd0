"""The one check of a thread count, shared by every API and option that sets torch's threads (torch-free).

``torch.set_num_threads`` takes any positive number: 10,000 OpenMP threads starved a 2-core machine for minutes
and 100,000 segfaulted it (or failed to map the next shared library), so a count is bounded by this machine's
CPU count."""
from __future__ import annotations

import numbers
import os

__all__ = ["max_threads", "check_threads"]


def max_threads() -> int:
    """The most threads splitlab lets torch run: this machine's CPU count (``os.cpu_count()``)."""
    return os.cpu_count() or 1


def check_threads(value, name: str = "threads") -> int:
    """``value`` as an int if it is an integer in 1 .. :func:`max_threads`.

    Raises:
        ValueError: ``value`` is not an integer (a bool, a float, a string) or is outside 1 .. the CPU count;
            the message names ``name``, the value and the machine's CPU count.
    """
    limit = max_threads()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= limit:
        raise ValueError(f"{name} must be an integer in 1 .. {limit} (this machine has {limit} CPUs), got {value!r}")
    return int(value)
