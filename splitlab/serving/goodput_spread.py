"""How sure a goodput run's verdict is, and a run that goes on until it is sure: :class:`Settle`, a sequential stop.

Near its boundary a queue's SLO misses come in episodes (a burst of arrivals, then hundreds of requests waiting
behind it), so the attainment of one run of a few thousand requests is a noisy sample: on DistServe's toy (2P+2D,
5.8 requests/s per worker, 1.3% below its goodput) 2,000 requests of seeds 0-7 met the SLOs 84.5%-96.1% of the
time, 40,000 of seed 0 92.9%. Seed 2's first 1,000 arrivals come 7.4% faster than the rate asked (their mean gap
is 0.926 of the nominal one, 2.3 standard deviations of a Poisson count of 1,000), which put its run at 84.5% and
its search 7.7% low. A fixed run long enough for every seed would cost many times the search; so a run measures
its own spread and goes on only while its verdict is not settled.

**The rule** (a sequential test with an indifference zone). A run holds up to ``extend`` x its requests (the same
seeded request set, continued) and is judged at checkpoints: after its first ``n`` requests, then ``2n``,
``4n`` ... (each checkpoint counts the requests between the warm-up and the cool-down of that many, the requests
after it keep the load on). At a checkpoint the attainment ``a`` of the counted requests has a standard error
``se`` from :data:`BATCHES` batch means (consecutive batches of the counted requests in arrival order, so the
misses' correlation within a batch is kept in the spread). The verdict (pass if ``a >= target``) is *settled*
when ``SETTLE_Z * se < |a - target| + INDIFFERENCE``: then either its confidence interval of about 95% lies on
one side of the target, or the target lies within :data:`INDIFFERENCE` (4 points of attainment) of ``a``, where
either verdict moves the goodput by little (on the toy 2P+2D, 4 points are about 2% of rate). Otherwise the run
goes on to the next checkpoint; at the last one its verdict is the plain ``a >= target``. A run that is already
certain to end :data:`FAIL_MARGIN` (10 points) or more below the target at its first checkpoint fails at once
(:mod:`.goodput_verdict`).

**What it guarantees, and what not.** Nothing is reweighted, selected or smoothed: the arrivals are the seeded
Poisson process and the attainment is the plain share of counted requests that met their SLOs, so an extended
run is an unbiased sample of the same process, only longer; only *how long* a run goes on depends on what it has
seen. Each verdict is wrong (a rate whose long-run attainment is more than :data:`INDIFFERENCE` from the target
judged on the wrong side) with a probability of about 2.5% if the batch means are independent; batches shorter
than the misses' episodes understate ``se``, which is why a run is judged on its full checkpoints, not on partial
ones. It is measured, not argued: ``benchmarks/goodput_steady.py`` over seeds 0-7 and two cost models (31 of the
32 cases with a reference within 5% of runs 20x longer, one 6.9% low; runs that never go on: 27 of 32, 7.5% low at
worst), and ``tests/test_goodput_steady.py``. ``extend=1`` is the plain run of the first ``n`` requests.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from . import metrics as M
from .goodput_verdict import STOPPED, Verdict, deadlines
from .request import Request

__all__ = ["Settle", "batch_se", "settled", "EXTEND", "BATCHES", "SETTLE_Z", "INDIFFERENCE", "FAIL_MARGIN"]

#: a run may go on to this many times its requests (checkpoints at 1, 2, 4, 8 x) while its verdict is not settled
EXTEND = 8
#: batches of the batch-means standard error
BATCHES = 10
#: the confidence of a settled verdict: about 95% two-sided (97.5% that it is on the right side)
SETTLE_Z = 2.0
#: attainment within this of the target may be judged either way (the indifference zone)
INDIFFERENCE = 0.04
#: a run certain to end this far below the target at its first checkpoint fails at once
FAIL_MARGIN = 0.1


def batch_se(met: np.ndarray, batches: int = BATCHES) -> float:
    """The standard error of the mean of ``met`` (shape (n,), 0/1 per request in arrival order) from the means of
    ``batches`` consecutive batches (their standard deviation / sqrt(batches)); 0.0 when n < 2 x batches."""
    if len(met) < 2 * batches:
        return 0.0
    means = np.array([b.mean() for b in np.array_split(np.asarray(met, dtype=float), batches)])
    return float(means.std(ddof=1) / math.sqrt(batches))


def settled(attainment: float, se: float, target: float) -> bool:
    """True if a run's verdict at ``attainment`` with standard error ``se`` is settled (module docstring)."""
    return SETTLE_Z * se < abs(attainment - target) + INDIFFERENCE


class Settle:
    """The stop of a goodput run judged at checkpoints (module docstring): call it with the time up to which every
    event has been processed; True once the verdict is taken.

    Args:
        checkpoints: the counted requests of each checkpoint of this run (arrival order; objects the run mutates),
            shortest first; the run holds the requests of the last one and of its cool-down.
        ttft_slo_s, tpot_slo_s: the SLOs (s); target: the attainment that passes (0..1].
        first: the run's first checkpoint is the search's first (its early verdict may decide, with
            :data:`FAIL_MARGIN` if there is more than one checkpoint, else as the full run's).
        final: the last checkpoint is the last of all: its verdict is taken settled or not; else an unsettled one
            stops the run undecided, to go on in a longer one.

    After the run: ``decided`` ("pass", "fail", or None: go on), ``k`` (the checkpoint that decided), ``verdict``
    (the early :class:`Verdict` of the first checkpoint, or None), ``attainment`` and ``se`` (at checkpoint ``k``;
    None if the early verdict decided).
    """

    def __init__(self, checkpoints: Sequence[Sequence[Request]], ttft_slo_s: float, tpot_slo_s: float,
                 target: float, first: bool = True, final: bool = True):
        self.cps, self.slos, self.target, self.k = [list(c) for c in checkpoints], (ttft_slo_s, tpot_slo_s), target, 0
        self.final = final
        margin = 0.0 if final and len(self.cps) == 1 else FAIL_MARGIN
        self.verdict = Verdict(self.cps[0], ttft_slo_s, tpot_slo_s, target, margin=margin) if first else None
        self.reason = STOPPED
        self.due = [float(deadlines(c, ttft_slo_s, tpot_slo_s).max()) for c in self.cps]
        self.decided, self.attainment, self.se = None, None, None
        self.next = min(self.verdict.next if first else math.inf, self.due[0])

    def __call__(self, t: float) -> bool:
        if t < self.next:
            return False
        if self.k == 0 and self.verdict is not None and self.verdict(t):
            self.decided = self.verdict.decided
            return True
        while self.k < len(self.cps) and self.due[self.k] <= t:
            met = np.array([M.meets_slo(r, *self.slos) for r in self.cps[self.k]])
            self.attainment, self.se = float(met.mean()), batch_se(met)
            last = self.k == len(self.cps) - 1
            if (last and self.final) or settled(self.attainment, self.se, self.target):
                self.decided = "pass" if self.attainment >= self.target else "fail"
                return True
            if last:  # not settled: a longer run goes on
                return True
            self.k += 1
        later = self.due[self.k]
        self.next = min(self.verdict.next, later) if self.k == 0 and self.verdict is not None else later
        return False
