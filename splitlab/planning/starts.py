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

A conditional split (decode workers prefill some prompts themselves: ``local_prefill_tokens``,
``local_prefill_queue``) is another family: its pools carry another load than a plain split's, so it learns only
from splits of its own rule, and a plain split only from plain ones.
"""
from __future__ import annotations

__all__ = ["Starts"]

RULES = ("local_prefill_queue", "local_prefill_tokens")  # a conditional split's rule (ServingConfig fields)


def _family(rule) -> tuple:
    """The key of a split's family: its conditional rule's set fields, sorted (``()``: a plain split)."""
    return tuple(sorted((k, v) for k, v in (rule or {}).items() if k in RULES and v is not None))


class Starts:
    """Learns, from the candidates found so far, how far the closed form lands from the simulation.

    Args:
        prefill_rps, decode_rps: the closed form's requests/s of one prefill and one decode worker (``mu_p``,
            ``mu_d``: :func:`~.closed_form.first_guess`).
    """

    def __init__(self, prefill_rps: float, decode_rps: float):
        self.mu = {"prefill": prefill_rps, "decode": decode_rps}
        self.factors: dict[tuple, dict[str, dict[int, float]]] = {}  # family -> pool -> size -> factor
        self.colocated: dict[str, float] = {}  # policy -> goodput / first guess of its latest search

    def _k(self, factor: dict, pool: str, size: int) -> float:
        seen = factor[pool]
        if not seen:
            return 1.0
        return seen[min(seen, key=lambda s: (abs(s - size), -s))]

    def start(self, policy: str, prefill_workers: int, decode_workers: int, first: float,
              rule: dict | None = None) -> tuple[float, bool]:
        """Where to start the search of a layout whose closed form is ``first`` (requests/s per worker; a split
        when it has decode workers; ``rule``: a conditional split's ``local_prefill_tokens`` and/or
        ``local_prefill_queue``, None for a plain one), and whether anything was learned for it, from layouts of
        its family (then a small first step pays)."""
        if not decode_workers:
            k = self.colocated.get(policy)
            return (first if k is None else first * k), k is not None
        x, y = prefill_workers, decode_workers
        factor = self.factors.get(_family(rule))
        if not factor:
            return first, False
        kp, kd = self._k(factor, "prefill", x), self._k(factor, "decode", y)
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
            rule = {k: getattr(c.config, k, None) for k in RULES}
            factor = self.factors.setdefault(_family(rule), {"prefill": {}, "decode": {}})
            factor[pool][size] = c.goodput_rps_per_worker * c.workers / (size * self.mu[pool])
