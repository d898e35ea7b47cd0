"""When a goodput run's verdict is decided before the run ends: :class:`Verdict`, an early stop for the event loop.

A goodput run passes when at least ``target`` of its counted requests meet their SLOs. Each request's fate is
known by a deadline, so the run can stop as soon as its verdict cannot change:

- by ``arrival + TTFT SLO`` a request without its first token, or with a late one, has missed (the TTFT deadline);
- by ``arrival + TTFT SLO + (output tokens - 1) x TPOT SLO`` (the most time its SLOs allow it: TTFT + (n - 1) x
  TPOT) a request that has not finished has missed; one that has finished is judged exactly as
  :func:`~.metrics.meets_slo` judges it (the lifetime deadline).

Misses are counted as these deadlines pass (two pointers over the counted requests, sorted by deadline: each
request is looked at once or twice, so the check costs the same however long the queues are). The run fails as
soon as even every undecided request meeting its SLOs would leave the attainment below ``target``, and passes as
soon as the requests that met them already reach it: the pass/fail verdict is the full run's, only sooner
(``tests/test_goodput_steady.py`` checks it against full runs). The requests left when it stops end FAILED with
the reason :data:`STOPPED`. The deadlines carry a margin of a billionth so that rounding never decides a request
before its time.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import metrics as M
from .request import Request, State

__all__ = ["Verdict", "STOPPED", "late_slo", "deadlines", "misses_of"]

#: why a request left unfinished by an early stop did not finish
STOPPED = "the goodput run stopped once its SLO verdict was decided"
_MARGIN = 1e-9


def late_slo(r: Request, ttft_slo_s: float, tpot_slo_s: float) -> str:
    """The SLO a request that missed its lifetime deadline missed: "unfinished" (rejected or failed before it),
    "ttft", "ttst" (no second token within TTFT SLO + TPOT SLO) or "tpot" (its tokens too slow to finish in
    time); a finished request as :func:`~.metrics.slo_misses` counts it."""
    if r.state == State.FINISHED:
        return M._miss(r, ttft_slo_s, tpot_slo_s) or "tpot"
    if r.state in (State.REJECTED, State.FAILED) and r.reject_reason != STOPPED:
        return "unfinished"
    times = r.token_times_s
    if not times or not times[0] - r.arrival_s <= ttft_slo_s:
        return "ttft"
    if len(times) < 2 or not times[1] - r.arrival_s <= ttft_slo_s + tpot_slo_s:
        return "ttst"
    return "tpot"


def _due(t: np.ndarray) -> np.ndarray:
    return t * (1 + _MARGIN) + _MARGIN


def deadlines(requests: Sequence[Request], ttft_slo_s: float, tpot_slo_s: float) -> np.ndarray:
    """Each request's lifetime deadline (s, shape (n,)): arrival + TTFT SLO + (output tokens - 1) x TPOT SLO, by
    when its fate is known (module docstring), with the margin against rounding."""
    arrival = np.array([r.arrival_s for r in requests], dtype=float)
    outputs = np.array([r.max_new_tokens for r in requests], dtype=float)
    return _due(arrival + ttft_slo_s + tpot_slo_s * np.maximum(outputs - 1, 0))


def misses_of(missed, ttft_slo_s: float, tpot_slo_s: float) -> dict[str, int]:
    """Requests that missed, by the SLO missed (the keys of :func:`~.metrics.slo_misses`, ``transfer`` among them):
    a request left unfinished by a stop counts under the SLO its token times had missed (:func:`late_slo`)."""
    out = dict(unfinished=0, ttft=0, ttst=0, tpot=0, transfer=0)
    for r in missed:
        slo = late_slo(r, ttft_slo_s, tpot_slo_s)
        out[slo] += 1
        out["transfer"] += M.transfer_caused(r, slo, ttft_slo_s, tpot_slo_s)
    return out


class Verdict:
    """Counts the counted requests' SLO misses and passes as their deadlines pass (module docstring).

    Call it with the time up to which every event has been processed: True once the run's verdict is decided
    (``decided``: "fail" or "pass"). ``misses`` holds the requests known to have missed, ``met`` how many met.

    Args:
        counted: the requests whose attainment decides the run (objects the run mutates), arrival order.
        ttft_slo_s, tpot_slo_s: the SLOs (s); target: the attainment that passes (0..1].
        margin: fail only once the attainment is certain to end at least this far below the target, else at the
            last deadline; 0 is the full run's verdict. pass_margin: pass only once it is certain to end at least
            this far above it (None: ``margin``), the bar capped at 1 (every request met). A margin above 1 (2 from
            :func:`~.goodput_spread.sure_margins` for a side that cannot be sure early) fails no run early and
            passes only one where every request met.

    Raises:
        ValueError: no counted requests, a target outside (0, 1], a margin that is not a number >= 0 (NaN, or a
            negative one, which would pass or fail a run before its attainment says so).
    """

    def __init__(self, counted: Sequence[Request], ttft_slo_s: float, tpot_slo_s: float, target: float,
                 margin: float = 0.0, pass_margin: float | None = None):
        if not len(counted):
            raise ValueError("Verdict needs at least one counted request: an attainment of no requests is undefined")
        if not 0 < target <= 1:
            raise ValueError(f"target must be an attainment in (0, 1], got {target!r}")
        for name, m in (("margin", margin), ("pass_margin", pass_margin)):
            if m is not None and not m >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {m!r}")
        self.reqs, self.slos, self.target, self.n = list(counted), (ttft_slo_s, tpot_slo_s), target, len(counted)
        self.margin, self.pass_margin = margin, margin if pass_margin is None else pass_margin
        self.first_due = _due(np.array([r.arrival_s for r in self.reqs], dtype=float) + ttft_slo_s).tolist()
        life_due = deadlines(self.reqs, ttft_slo_s, tpot_slo_s)
        self.order = np.argsort(life_due, kind="stable").tolist()
        self.life_due = life_due[self.order].tolist()
        self.i = self.j = self.met = 0
        self.missed: dict[int, Request] = {}  # position -> request, known misses
        self.decided: str | None = None
        self.reason = STOPPED
        self.next = min(self.first_due[0], self.life_due[0]) if self.n else float("inf")

    def __call__(self, t: float) -> bool:
        if t < self.next:
            return False
        ttft = self.slos[0]
        reqs, missed, n = self.reqs, self.missed, self.n
        while self.i < n and self.first_due[self.i] <= t:
            r = reqs[self.i]
            if not r.token_times_s or not M.ttft_s(r) <= ttft:
                missed[self.i] = r
            self.i += 1
        while self.j < n and self.life_due[self.j] <= t:
            k = self.order[self.j]
            if k not in missed:
                r = reqs[k]
                if r.state == State.FINISHED and M.meets_slo(r, *self.slos):
                    self.met += 1
                else:
                    missed[k] = r
            self.j += 1
        self.next = min(self.first_due[self.i] if self.i < n else float("inf"),
                        self.life_due[self.j] if self.j < n else float("inf"))
        if not (n - len(missed)) / n >= self.target - self.margin:
            self.decided = "fail"
        elif self.met / n >= min(self.target + self.pass_margin, 1.0):
            self.decided = "pass"
        return self.decided is not None

    def misses(self) -> dict[str, int]:
        """Known misses by the SLO missed (the keys of :func:`~.metrics.slo_misses`, ``transfer`` among them), read
        after the run."""
        return misses_of(self.missed.values(), *self.slos)
