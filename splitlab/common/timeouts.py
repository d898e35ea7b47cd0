"""The one check of a timeout between processes, shared by every API and option that sets one (torch-free).

A timeout is handed to ``datetime.timedelta`` and from there to torch.distributed's C++ clocks: 1e14 s overflowed
``timedelta`` (an ``OverflowError`` traceback from deep inside a process group's start) and a timeout of years
means a hang in practice. So a timeout is a finite number of seconds > 0 and at most :data:`MAX_TIMEOUT_S`
(a week: the longest wait splitlab ever makes, that of the control plane's reader thread)."""
from __future__ import annotations

import math
import numbers

__all__ = ["MAX_TIMEOUT_S", "check_timeout"]

MAX_TIMEOUT_S = 7 * 24 * 3600.0  #: a week, in seconds


def check_timeout(value, name: str = "timeout_s") -> float:
    """``value`` as a float if it is a time in seconds with 0 < value <= :data:`MAX_TIMEOUT_S` (a week).

    Raises:
        ValueError: ``value`` is not a real number (a bool, a string, None), not finite, <= 0 or more than a week;
            the message names ``name`` and the value.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a time > 0 s, got {value!r}")
    if value > MAX_TIMEOUT_S:
        raise ValueError(f"{name} must be at most {MAX_TIMEOUT_S:,.0f} s (a week), got {value:g} s")
    return float(value)
