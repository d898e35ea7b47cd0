"""Where the planner starts each goodput search: the closed form (:mod:`.closed_form`) corrected by the layouts
searched before it, so that most searches end in three runs (the start passes, the start x (1 + 2 x tolerance)
fails, one bisection) instead of stepping out from a guess 20-40% off.

The closed form misses the simulation by a factor that depends on the pool, not on the layout around it: an xPyD
split serves ``min(Lp(x), Ld(y)) / (x + y)`` requests/s per worker, where ``Lp(x)`` is what a pool of ``x``
prefill workers sustains within the TTFT SLO (queueing included: more workers pool their queue better) and
``Ld(y)`` what ``y`` decode workers sustain within the TPOT SLO. Each split found tells one of them: the one its
binding SLO names (TTFT: the prefill pool; TTST, TPOT: the decode pool), as ``goodput x workers`` against the
closed form's ``x mu_p`` or ``y mu_d``. A pool size not seen yet borrows the factor of the nearest one seen. A
colocated layout learns from the layouts of its own policy searched before it (the chunk sizes in turn).
"""
from __future__ import annotations

__all__ = ["Starts"]


class Starts:
    """Learns, from the candidates found so far, how far the closed form lands from the simulation.

    Args:
        prefill_rps, decode_rps: the closed form's requests/s of one prefill and one decode worker (``mu_p``,
            ``mu_d``: :func:`~.closed_form.first_guess`).
    """

    def __init__(self, prefill_rps: float, decode_rps: float):
        self.mu = {"prefill": prefill_rps, "decode": decode_rps}
        self.factor: dict[str, dict[int, float]] = {"prefill": {}, "decode": {}}
        self.colocated: dict[str, float] = {}  # policy -> goodput / first guess of its latest search

    def _k(self, pool: str, size: int) -> float:
        seen = self.factor[pool]
        if not seen:
            return 1.0
        return seen[min(seen, key=lambda s: (abs(s - size), -s))]

    def start(self, policy: str, prefill_workers: int, decode_workers: int, first: float) -> tuple[float, bool]:
        """Where to start the search of a layout whose closed form is ``first`` (requests/s per worker; a split
        when it has decode workers), and whether anything was learned for it (then a small first step pays)."""
        if not decode_workers:
            k = self.colocated.get(policy)
            return (first if k is None else first * k), k is not None
        x, y = prefill_workers, decode_workers
        if not (self.factor["prefill"] or self.factor["decode"]):
            return first, False
        kp, kd = self._k("prefill", x), self._k("decode", y)
        return min(x * self.mu["prefill"] * kp, y * self.mu["decode"] * kd) / (x + y), True

    def learn(self, candidate) -> None:
        """Take in a searched :class:`~.planner.Candidate` (only one whose search found a boundary teaches)."""
        c = candidate
        if c.outcome != "found" or c.first_guess_rps_per_worker <= 0:
            return
        if c.layout == "colocated":
            self.colocated[c.policy] = c.goodput_rps_per_worker / c.first_guess_rps_per_worker
            return
        pool, size = ("prefill", c.prefill_workers) if c.binding_slo == "ttft" else ("decode", c.decode_workers)
        if self.mu[pool] > 0 and self.mu[pool] != float("inf"):
            self.factor[pool][size] = c.goodput_rps_per_worker * c.workers / (size * self.mu[pool])
