"""The planner's conditional contenders: every xPyD split again, with its decode workers prefilling the prompts of
at most a threshold's tokens themselves (:mod:`splitlab.serving.conditional`), for a few thresholds read off the
request set (the median prompt by default) or given."""
from __future__ import annotations

import math
import numbers
from typing import Sequence

import numpy as np

__all__ = ["prompt_thresholds", "conditional_layouts"]

#: the names a threshold may take besides a number of tokens: quantiles of the request set's prompt lengths
QUANTILES = {"p25": 0.25, "median": 0.5, "p75": 0.75}


def prompt_thresholds(spec, prompts: np.ndarray) -> list[int | float]:
    """The prompt thresholds ``spec`` names, in tokens, sorted and without repeats.

    Args:
        spec: None or empty (no conditional contender), or a sequence of thresholds: integers >= 0, ``math.inf``,
            or names of :data:`QUANTILES` ("median": the median prompt length of ``prompts``, rounded down).
        prompts: prompt lengths of the planner's request set (tokens), shape (n,).

    Raises:
        ValueError: a threshold that is neither an integer >= 0, inf, nor a name of :data:`QUANTILES`.
    """
    if spec is None:
        return []
    if isinstance(spec, (str, numbers.Real)):
        spec = [spec]
    out = set()
    for s in spec:
        if isinstance(s, str) and s in QUANTILES:
            out.add(int(np.quantile(prompts, QUANTILES[s])))
        elif s == math.inf or (isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0):
            out.add(s)
        else:
            raise ValueError(f"local_prefill_tokens must be prompt thresholds: integers >= 0, inf or one of "
                             f"{sorted(QUANTILES)}, got {s!r}")
    return sorted(out)


def conditional_layouts(max_workers: int, thresholds: Sequence[int | float]) -> list[tuple]:
    """The planner's layout rows for every split xPyD (x + y <= ``max_workers``) at each threshold:
    ``("disaggregated", "prefill-first", x + y, x, y, None, {"local_prefill_tokens": threshold})``."""
    return [("disaggregated", "prefill-first", n, x, n - x, None, {"local_prefill_tokens": t})
            for t in thresholds for n in range(2, max_workers + 1) for x in range(1, n)]
