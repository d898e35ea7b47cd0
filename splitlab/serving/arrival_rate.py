"""A request set's arrivals scaled to a rate (:func:`at_rate`): what each run of a goodput search
(:mod:`.goodput_runs`) serves, the seeded set conditioned on its counts so that a run tests the rate it is said to
run at."""
from __future__ import annotations

import math
import numbers
from typing import Sequence

from .request import Request

__all__ = ["at_rate"]


def at_rate(requests: Sequence[Request], rate_per_s: float, marks: Sequence[int] = ()) -> list[Request]:
    """Fresh copies of ``requests`` (arrival order) whose arrivals come at exactly ``rate_per_s`` on average: the
    first ``m`` span ``(m - 1) / rate_per_s`` seconds for ``m`` = each of ``marks`` and ``len(requests)`` (times
    stretched piecewise linearly between those requests, so their order and their gaps' shape stay; the first
    arrives at its own time scaled by the first stretch's factor). A Poisson set conditioned on its counts: a seed
    whose first arrivals come 8% faster than its nominal rate (seed 2 of the chat and toy sets, over 1,000) would
    otherwise test 1.08 x the rate it is said to run at, and a search of short runs land up to 8% low.

    Raises:
        ValueError: fewer than 2 requests, the first and last arriving at the same time, requests out of arrival
            order, a rate not a number > 0 whose span ``(n - 1) / rate_per_s`` is finite, a mark not an integer."""
    requests = list(requests)  # an iterator read once for its times was served as no requests
    times = [r.arrival_s for r in requests]
    rate_ok = isinstance(rate_per_s, numbers.Real) and not isinstance(rate_per_s, bool) and 0 < rate_per_s < math.inf
    if len(times) < 2 or times[-1] <= times[0] or not (rate_ok and math.isfinite(len(times) / rate_per_s)):
        raise ValueError(f"a rate needs a rate > 0 and at least 2 requests arriving at different times, got "
                         f"{rate_per_s!r} requests/s for {len(times)} requests")  # 0: ZeroDivisionError, 1e-310 NaN
    late = next((i for i in range(1, len(times)) if times[i] < times[i - 1]), None)
    if late is not None:  # the stretches would reorder them
        raise ValueError(f"at_rate takes requests in arrival order: request {requests[late].id} arrives at "
                         f"{times[late]:g} s, before request {requests[late - 1].id} ({times[late - 1]:g} s)")
    if any(isinstance(m, bool) or not isinstance(m, numbers.Integral) for m in marks):
        raise ValueError(f"marks must be request counts (integers), got {list(marks)!r}")
    knots, goals = [times[0]], [0.0]
    for m in sorted({*(m for m in marks if 2 <= m < len(times)), len(times)}):
        if times[m - 1] > knots[-1]:  # else ties: the later mark's span holds (the whole set's always does)
            knots.append(times[m - 1])
        goals[len(knots) - 1:] = [(m - 1) / rate_per_s] if len(knots) > 1 else [0.0]  # the first m at once: none
    first = times[0] * goals[1] / (knots[1] - knots[0])  # the first gap scaled as the first stretch is
    out, j = [], 1
    for r, t in zip(requests, times):
        while j < len(knots) - 1 and t > knots[j]:
            j += 1
        c = r.fresh()
        c.arrival_s = first + goals[j - 1] + (t - knots[j - 1]) * (goals[j] - goals[j - 1]) / (knots[j] - knots[j - 1])
        out.append(c)
    return out
