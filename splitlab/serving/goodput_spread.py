"""How sure a goodput run's verdict is, and a run that goes on until it is sure: :class:`Settle`, a sequential stop.

Near its boundary a queue's SLO misses come in episodes (a burst of arrivals, then hundreds of requests waiting
behind it), so the attainment of one run of a few thousand requests is a noisy sample: on DistServe's toy (2P+2D,
5.8 requests/s per worker, 1.3% below its goodput) 2,000 requests of seeds 0-7 met the SLOs 84.5%-96.1% of the
time, 40,000 of seed 0 92.9%. Seed 2's first 1,000 arrivals come 8% faster than the rate asked (their mean gap
is 0.926 of the nominal one, 2.3 standard deviations of a Poisson count of 1,000), which put its run at 84.5% and
its search 7.7% low; a run now scales its arrivals to exactly its rate (:func:`~.arrival_rate.at_rate`), and the
same run still meets the SLOs only 87.6% of the time: the burst is also in the order of its gaps. A fixed run
long enough for every seed would cost many times the search; so a run measures its own spread and goes on only
while its verdict is not settled.

**The rule** (a sequential test with an indifference zone). A run holds up to ``extend`` x its requests (the same
seeded request set, continued; ``extend`` at most :data:`MAX_EXTEND`) and is judged at checkpoints: after its first
``n`` requests, then ``2n``, ``4n`` ... (each checkpoint counts the requests between the warm-up and the cool-down
of that many, the requests after it keep the load on). At a checkpoint the attainment ``a`` of the counted
requests has a standard error ``se``: :data:`SE_SCALE` x the batch-means standard error of :data:`BATCHES`
consecutive batches of the counted requests in arrival order (:func:`run_se`). The verdict (pass if
``a >= target``) is *settled* when ``SETTLE_Z * se < |a - target| + INDIFFERENCE``: then either its confidence
interval lies on one side of the target, or the target lies within :data:`INDIFFERENCE` (4 points of attainment)
of ``a``, where either verdict moves the goodput by little (on the toy 2P+2D, 4 points are about 2% of rate).
Otherwise the run goes on to the next checkpoint; at the last one its verdict is the plain ``a >= target``.

*Why 2.4 and the scale.* The batch means are few (10: Student's t with 9 degrees of freedom puts 2.5% above 2.26,
not 1.96) and a run looks up to 4 times (Pocock's constant for 4 looks at 5% two-sided is 2.36, not 1.96):
:data:`SETTLE_Z` is 2.4. And batches of a first checkpoint (about 170 requests) are shorter than the misses'
episodes (hundreds of requests near saturation), so batch means understate the spread: measured on runs of
60,000 requests cut into 2,000-request windows (``benchmarks/goodput_steady.py --se``), the mean batch-means se
was 0.69-0.78 of the windows' real standard deviation for the toy's 2P+2D (seeds 0, 1), 0.81 for the built-in
2P+2D, 0.85-0.95 colocated, 0.99 for 1P+3D. :data:`SE_SCALE` (1 / 0.69) lifts the worst of them to the real spread.

*Early verdicts, both sides by the same rule.* At its first checkpoint a run may stop before its end only when
its verdict is settled whatever its undecided requests do (:func:`sure_margins`): it fails once its attainment is
certain to end so low that even the largest se its batch means could have (all batches at 0 or 1) settles it
(about 37% for a target of 90%), and passes once it is certain to end so high (about 99%). Before, a run failed
as soon as it was certain to end 10 points low while its mirror (10 points high, above 100%) could never fire, so
a burst that cost a run its first checkpoint was denied the extension that exists for it.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

from . import metrics as M
from .goodput_verdict import STOPPED, Verdict, deadlines
from .request import Request

__all__ = ["Settle", "batch_se", "run_se", "settled", "sure_margins", "EXTEND", "MAX_EXTEND", "BATCHES", "SETTLE_Z",
           "SE_SCALE", "INDIFFERENCE"]

#: a run may go on to this many times its requests (checkpoints at 1, 2, 4, 8 x) while its verdict is not settled
EXTEND = 8
#: the largest ``extend``: a run that never settles serves at most this many times its requests (2,000 x 64 =
#: 128,000 requests; at extend=10**9 a search ran past 60 s with no output)
MAX_EXTEND = 64
#: batches of the batch-means standard error
BATCHES = 10
#: the critical value of a settled verdict: t with 9 degrees of freedom (2.26 at 97.5%) raised for up to 4 looks
#: (Pocock: 2.36 for 4 looks at 5%, against 1.96 for one); module docstring
SETTLE_Z = 2.4
#: the batch-means se is multiplied by this: 1 / 0.69, the smallest ratio of the mean batch-means se to the real
#: standard deviation of 2,000-request windows measured (toy 2P+2D; module docstring)
SE_SCALE = 1 / 0.69
#: attainment within this of the target may be judged either way (the indifference zone)
INDIFFERENCE = 0.04


def batch_se(met: np.ndarray, batches: int = BATCHES) -> float:
    """The standard error of the mean of ``met`` (shape (n,), 0/1 per request in arrival order) from the means of
    ``batches`` consecutive batches (their standard deviation / sqrt(batches)); 0.0 when n < 2 x batches."""
    if len(met) < 2 * batches:
        return 0.0
    means = np.array([b.mean() for b in np.array_split(np.asarray(met, dtype=float), batches)])
    return float(means.std(ddof=1) / math.sqrt(batches))


def run_se(met: np.ndarray) -> float:
    """The standard error a run's verdict is judged by: :data:`SE_SCALE` x :func:`batch_se` of ``met`` (shape (n,),
    0/1 per counted request in arrival order)."""
    return SE_SCALE * batch_se(met)


@functools.lru_cache(maxsize=64)
def sure_margins(target: float) -> tuple[float, float]:
    """(fail, pass) margins of a first checkpoint's early verdict (:class:`~.goodput_verdict.Verdict`): a run whose
    attainment is certain to end at or below ``target - fail`` (at or above ``target + pass``) is settled whatever
    its batch means are, since ``SETTLE_Z * se`` of any attainment ``a`` there stays below ``|a - target| +
    INDIFFERENCE`` even at the largest se batch means in [0, 1] averaging ``a`` can have, ``SE_SCALE x sqrt(a (1 -
    a) / (BATCHES - 1))``. A side with no such attainment in [0, 1] gets a margin that never fires (above 1)."""
    grid = np.linspace(0.0, 1.0, 10001)
    worst = SETTLE_Z * SE_SCALE * np.sqrt(grid * (1 - grid) / (BATCHES - 1))
    sure = worst < np.abs(grid - target) + INDIFFERENCE
    below = np.logical_and.accumulate(sure) & (grid <= target)  # every attainment from 0 up to it settled
    above = np.logical_and.accumulate(sure[::-1])[::-1] & (grid >= target)  # ... from it up to 1
    return (float(target - grid[below].max()) if below.any() else 2.0), \
        (float(grid[above].min() - target) if above.any() else 2.0)


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
        first: the run's first checkpoint is the search's first (its early verdict may decide: with the margins
            of :func:`sure_margins` if there is more than one checkpoint, else as the full run's).
        final: the last checkpoint is the last of all: its verdict is taken settled or not; else an unsettled one
            stops the run undecided, to go on in a longer one.

    After the run: ``decided`` ("pass", "fail", or None: go on), ``k`` (the checkpoint that decided), ``verdict``
    (the early :class:`Verdict` of the first checkpoint, or None), ``attainment`` and ``se`` (at checkpoint ``k``;
    None if the early verdict decided).

    Raises:
        ValueError: no checkpoint, or one without counted requests; those of :class:`~.goodput_verdict.Verdict`.
    """

    def __init__(self, checkpoints: Sequence[Sequence[Request]], ttft_slo_s: float, tpot_slo_s: float,
                 target: float, first: bool = True, final: bool = True):
        self.cps, self.slos, self.target, self.k = [list(c) for c in checkpoints], (ttft_slo_s, tpot_slo_s), target, 0
        if not self.cps or not all(self.cps):
            raise ValueError(f"checkpoints must be one or more, each of one or more counted requests, got "
                             f"{[len(c) for c in self.cps]} requests")
        self.final = final
        fail, up = (0.0, 0.0) if final and len(self.cps) == 1 else sure_margins(target)
        self.verdict = Verdict(self.cps[0], ttft_slo_s, tpot_slo_s, target, margin=fail, pass_margin=up) \
            if first else None
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
            self.attainment, self.se = float(met.mean()), run_se(met)
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
