"""Chapter 6 (the split): its exercise checkers."""
from __future__ import annotations

import math
from typing import Any

from ... import sizing
from .verdict import verdict

__all__ = ['colocated_tpot', 'transfer_seconds', 'min_prefill_workers']


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
    return verdict(answer, expected, 0, f"the number of prefill workers for {rate_per_s:g} requests/s",
                   "all prompts need rate x mean prefill time worker-seconds per second; each worker may give at "
                   "most max_utilization of a second per second. Round up.")

