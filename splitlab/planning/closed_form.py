"""A closed-form first guess at pool sizes, before any simulation: how many requests per second one worker of
each kind can take within its SLO, from the cost model alone.

- **Prefill worker, at the TTFT SLO** (the rule of NVIDIA Dynamo's SLA planner: prefill replicas from prefill
  throughput at the TTFT target): the largest batch of ``k`` mean-length prompts whose one forward still fits in
  the TTFT SLO (and in ``max_prefill_tokens``) gives ``k / prefill_s`` requests/s. Queueing is ignored, so this is
  an upper bound.
- **Decode worker, at the TPOT SLO** (Dynamo: decode replicas from decode throughput at the ITL target): the
  largest batch ``B <= max_batch`` whose step, with every row at its mean context (prompt + half the output),
  fits in the TPOT SLO, gives ``B / step`` tokens/s, i.e. ``B / (step x mean output tokens)`` requests/s.
- **Colocated worker**: at ``lam`` requests/s a worker spends ``rho = lam x t_p`` of its time prefilling, its
  streams get a token every ``t_d(B) / (1 - rho)`` seconds (chapter 6), and by Little's law it holds
  ``B = lam x output x TPOT`` streams; the highest ``lam`` with that TPOT within its SLO, ``B <= max_batch`` and an
  M/D/1 TTFT ``t_p + rho t_p / (2 (1 - rho))`` within the TTFT SLO.
- **xPyD split**: ``min(x lam_p, y lam_d) / (x + y)`` requests/s per worker; the best ratio ``x : y`` is about
  ``lam_d : lam_p``. Over a link of ``t_x`` seconds per cache, at most ``min(x, y) / t_x`` requests/s cross it:
  every worker has one NIC, held for a whole transfer at both ends (:mod:`splitlab.serving.nic`), so at most
  ``min(x, y)`` transfers run at once (:func:`link_capacity`).
"""
from __future__ import annotations

import math
import numbers
from typing import Sequence

import numpy as np

__all__ = ["prefill_capacity", "decode_capacity", "colocated_capacity", "split_capacity", "link_capacity",
           "first_guess"]


def prefill_capacity(cost, prompt_tokens: Sequence[int], ttft_slo_s: float, max_prefill_tokens: int = 2048) -> float:
    """Requests/s one prefill worker serves with each batch's forward within ``ttft_slo_s`` (0 if even one
    mean prompt takes longer; inf on a cost model whose prefill takes 0 s)."""
    mean, sq = float(np.mean(prompt_tokens)), float(np.mean(np.square(prompt_tokens)))
    best = 0.0
    for k in range(1, max(1, int(max_prefill_tokens // mean)) + 1):
        s = cost.prefill_s(k * mean, k * sq)
        if s > ttft_slo_s:
            break
        if s <= 0:  # a free prefill (an idealised cost model): any rate
            return math.inf
        best = max(best, k / s)
    return best


def decode_capacity(cost, prompt_tokens: Sequence[int], output_tokens: Sequence[int], tpot_slo_s: float,
                    max_batch: int = 16) -> float:
    """Requests/s one decode worker serves with every step within ``tpot_slo_s`` (0 if even batch 1 is slower; inf
    on a cost model whose decode steps take 0 s)."""
    context, out = float(np.mean(prompt_tokens)) + float(np.mean(output_tokens)) / 2, float(np.mean(output_tokens))
    best = 0.0
    for b in range(1, max_batch + 1):
        step = cost.decode_s(b, b * context)
        if step > tpot_slo_s:
            break
        if step <= 0:  # a free decode: any rate
            return math.inf
        best = b / (step * out)
    return best


def colocated_capacity(cost, prompt_tokens: Sequence[int], output_tokens: Sequence[int], ttft_slo_s: float,
                       tpot_slo_s: float, max_batch: int = 16) -> float:
    """Requests/s one colocated worker serves within both SLOs by the module's formulas (0 if none)."""
    t_p = float(np.mean([cost.prefill_s(n) for n in prompt_tokens]))
    context, out = float(np.mean(prompt_tokens)) + float(np.mean(output_tokens)) / 2, float(np.mean(output_tokens))

    def ok(lam: float) -> bool:
        rho = lam * t_p
        if rho >= 1 or t_p + rho * t_p / (2 * (1 - rho)) > ttft_slo_s:
            return False
        tpot = cost.decode_s(1, context) / (1 - rho)
        for _ in range(50):  # the batch depends on TPOT and TPOT on the batch: iterate to the fixed point
            b = max(1.0, lam * out * tpot)
            if b > max_batch:
                return False
            tpot = cost.decode_s(b, b * context) / (1 - rho)
        return tpot <= tpot_slo_s

    # rho < 1 bounds the rate, or with a free prefill (t_p = 0) the decode batch: lam x out x step <= max_batch
    lo, hi = 0.0, 1.0 / t_p if t_p > 0 else 2.0 * max_batch / (out * cost.decode_s(1, context))
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def split_capacity(prefill_rps: float, decode_rps: float, prefill_workers: int, decode_workers: int) -> float:
    """Requests/s per worker of an xPyD split whose workers serve ``prefill_rps`` and ``decode_rps`` each."""
    return min(prefill_workers * prefill_rps, decode_workers * decode_rps) / (prefill_workers + decode_workers)


def link_capacity(transfer_s: float, prefill_workers: int, decode_workers: int) -> float:
    """Requests/s per worker that the NICs of an xPyD split carry when each cache takes ``transfer_s`` seconds on
    the link: ``min(x, y) / transfer_s / (x + y)`` (module docstring; inf for a free link). An upper bound: it
    leaves out the TTFT the transfer uses up and the queueing of one decode worker's ingress.

    Raises:
        ValueError: ``transfer_s`` negative or NaN; a worker count not an integer >= 1."""
    if not transfer_s >= 0:
        raise ValueError(f"transfer_s must be a time >= 0 s, got {transfer_s!r}")
    if not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1
               for n in (prefill_workers, decode_workers)):
        raise ValueError(f"prefill_workers and decode_workers must be integers >= 1, got {prefill_workers!r} and "
                         f"{decode_workers!r}")
    if transfer_s == 0:
        return math.inf
    return min(prefill_workers, decode_workers) / transfer_s / (prefill_workers + decode_workers)


def first_guess(cost, prompt_tokens: Sequence[int], output_tokens: Sequence[int], ttft_slo_s: float,
                tpot_slo_s: float, max_workers: int, max_batch: int = 16, max_prefill_tokens: int = 2048) -> dict:
    """The closed-form answer: ``prefill_rps`` and ``decode_rps`` (one worker of each pool), ``colocated_rps``,
    the best split up to ``max_workers`` (``prefill_workers``, ``decode_workers``, ``split_rps_per_worker``), all
    requests/s per worker, and ``prefill_per_decode`` = decode_rps / prefill_rps, the balanced ratio x / y."""
    lam_p = prefill_capacity(cost, prompt_tokens, ttft_slo_s, max_prefill_tokens)
    lam_d = decode_capacity(cost, prompt_tokens, output_tokens, tpot_slo_s, max_batch)
    best = max(((x, n - x) for n in range(2, max_workers + 1) for x in range(1, n)),
               key=lambda xy: (split_capacity(lam_p, lam_d, *xy), -sum(xy)))
    return dict(prefill_rps=lam_p, decode_rps=lam_d,
                colocated_rps=colocated_capacity(cost, prompt_tokens, output_tokens, ttft_slo_s, tpot_slo_s,
                                                 max_batch),
                prefill_workers=best[0], decode_workers=best[1],
                split_rps_per_worker=split_capacity(lam_p, lam_d, *best),
                prefill_per_decode=lam_d / lam_p if lam_p > 0 else math.inf)
