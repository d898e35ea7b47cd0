"""Chapter 6 (the split): its exercise checkers."""
from __future__ import annotations

import math
from typing import Any

from ... import sizing
from .verdict import verdict

__all__ = ['colocated_tpot', 'transfer_seconds', 'min_prefill_workers', 'split_rate_per_worker',
           'planner_winner']


def colocated_tpot(answer: Any, decode_step_s: float, rate_per_s: float, workers: int, mean_prefill_s: float) -> bool:
    """Ch. 6: predicted mean TPOT (s) on a colocated worker whose decode streams pause for every prefill there.

    Each of ``workers`` workers gets ``rate_per_s / workers`` requests/s, so a share
    rho = rate_per_s / workers x mean_prefill_s of its time goes to prefill; decode steps of ``decode_step_s`` fill
    the rest, so a stream gets one token per decode_step_s / (1 - rho) seconds.
    """
    rho = rate_per_s / workers * mean_prefill_s
    if rho >= 1:
        print(f"With these inputs a worker needs {rho:.2f} of its time for prefill alone: it never catches up, "
              f"and TPOT grows without bound. Pick a lower rate or more workers.")
        return False
    return verdict(answer, decode_step_s / (1 - rho), 0.01, "the predicted colocated TPOT in seconds",
                   "the share of a worker's time spent in prefill is rate / workers x mean prefill time; decode "
                   "gets the rest, so divide the decode step time by (1 - that share).")


def transfer_seconds(answer: Any, lm, prompt_tokens: int, link_bytes_per_s: float) -> bool:
    """Ch. 6: seconds to move the KV cache of a ``prompt_tokens``-token prompt of model ``lm`` (a
    :class:`splitlab.LoadedModel`, in its own dtype) over a link of ``link_bytes_per_s`` bytes/s."""
    per_token = sizing.kv_bytes_per_token(lm.geometry, lm.dtype)
    return verdict(answer, prompt_tokens * per_token / link_bytes_per_s, 0.01,
                   f"the transfer time of a {prompt_tokens}-token cache in seconds",
                   "KV bytes = prompt tokens x (2 x layers x KV heads x head_dim x bytes per element); divide by "
                   "the link's bytes per second.")


def min_prefill_workers(answer: Any, rate_per_s: float, mean_prefill_s: float, max_utilization: float = 0.7) -> bool:
    """Ch. 6: fewest prefill workers that keep each one busy at most ``max_utilization`` of the time when
    requests arrive at ``rate_per_s`` and a prefill takes ``mean_prefill_s`` on average (spread evenly)."""
    if not 0 < max_utilization <= 1:
        raise ValueError(f"max_utilization must be in (0, 1], got {max_utilization}")
    load = rate_per_s * mean_prefill_s  # busy prefill-seconds per second, in worker units
    expected = max(1, math.ceil(load / max_utilization - 1e-9))
    return verdict(answer, expected, 0, f"the number of prefill workers for {rate_per_s:.3g} requests/s",
                   "all prompts need rate x mean prefill time worker-seconds per second; each worker may give at "
                   "most max_utilization of a second per second. Round up.")



def split_rate_per_worker(answer: Any, prefill_rps: float, decode_rps: float, prefill_workers: int,
                          decode_workers: int) -> bool:
    """Ch. 6: requests/s per worker of a split of ``prefill_workers`` prefill workers serving ``prefill_rps`` each
    and ``decode_workers`` decode workers serving ``decode_rps`` each: the slower pool sets the pace, and both
    pools' workers count (:func:`splitlab.planning.split_capacity`)."""
    from ...planning.closed_form import split_capacity
    expected = split_capacity(prefill_rps, decode_rps, prefill_workers, decode_workers)
    return verdict(answer, expected, 0.01, f"the rate per worker of {prefill_workers}P+{decode_workers}D",
                   "the cluster serves min(P x prefill rate, D x decode rate) requests/s; divide by P + D.")


def planner_winner(answer: Any, plan) -> bool:
    """Ch. 6 and 7: which kind of layout won ``plan`` (a :class:`splitlab.planner.Plan` from the reader's own
    run): "split" or "colocated"."""
    if answer is None:
        print("Not answered yet: set answer to 'split' or 'colocated' and run the cell again.")
        return False
    kind = {"split": "disaggregated", "disaggregated": "disaggregated", "colocated": "colocated"}.get(
        str(answer).strip().lower())
    if kind is None:
        print(f"Answer 'split' or 'colocated', not {answer!r}.")
        return False
    best = plan.best
    if kind == best.layout:
        print(f"Correct: {best.name} wins, {best.goodput_rps_per_worker:.3g} requests/s per worker "
              f"(binding SLO: {best.binding_slo}).")
        return True
    print(f"Not this time: {best.name} wins in your run. Hint: look at which SLO binds each layout in "
          f"plan.table(), and at how many decode steps one prefill costs.")
    return False
