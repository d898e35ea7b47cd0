"""The planner's conditional contenders: every xPyD split again, with its decode workers prefilling the prompts of
at most a threshold's tokens themselves (:mod:`splitlab.serving.conditional`), for a few thresholds read off the
request set (the median prompt by default) or given.

The map's conditional contender (:func:`~.split_map.split_map` with ``conditional_queues``): every request of a map
cell has the same prompt, so a prompt threshold would send all of them or none to the decode workers; there the
rule is the prefill queue (Dynamo's ``max_prefill_queue_size``): a cell's best split again, its decode workers
prefilling a request themselves when ``Q`` requests already wait at the prefill worker it would join.
:func:`conditional_wins` lists the cells where that beats both the best pure split and the best colocated layout."""
from __future__ import annotations

import math
import numbers
from dataclasses import replace
from typing import Sequence

import numpy as np

__all__ = ["prompt_thresholds", "conditional_layouts", "conditional_contenders", "conditional_wins", "check_queues",
           "MAP_QUEUES"]

#: the prefill-queue thresholds of ``python -m splitlab map --conditional`` without values (requests waiting)
MAP_QUEUES = (1, 2)

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


def check_queues(queues) -> tuple[int, ...]:
    """``queues`` as a sorted tuple of prefill-queue thresholds (requests waiting, integers >= 0, no repeats).

    Raises:
        ValueError: a value that is not an integer >= 0, or one given twice."""
    if isinstance(queues, (str, bytes)) or not hasattr(queues, "__iter__"):
        raise ValueError(f"conditional_queues must be a sequence of integers >= 0 (requests waiting), got {queues!r}")
    queues = tuple(queues)
    for q in queues:
        if isinstance(q, bool) or not isinstance(q, numbers.Integral) or q < 0:
            raise ValueError(f"conditional_queues must hold integers >= 0 (requests waiting), got {q!r}")
    if len(set(queues)) != len(queues):
        raise ValueError(f"conditional_queues holds a value twice: {list(queues)}")
    return tuple(sorted(int(q) for q in queues))


def conditional_contenders(split, queues: Sequence[int]) -> list:
    """The map's conditional contenders of a cell: ``split`` (its best pure split, a ServingConfig, or None:
    nothing) with ``local_prefill_queue`` = each of ``queues``."""
    return [] if split is None else [replace(split, local_prefill_queue=q) for q in queues]


def conditional_wins(split_map, tolerance: float | None = None) -> list[dict]:
    """The cells of ``split_map`` (a :class:`~.map_result.SplitMap` made with ``conditional_queues``) where the
    conditional split beats both the best pure split and the best colocated layout by more than ``tolerance``
    (a share of its goodput; None: the map's tie tolerance).

    Returns:
        One dict per such cell: ``prompt_tokens``, ``prefill_steps``, ``tpot_steps``, ``layout`` (the conditional
        split), ``local_prefill_queue``, ``goodput_rps_per_worker``, ``split_goodput_rps_per_worker``,
        ``colocated_layout``, ``colocated_goodput_rps_per_worker``, ``margin_over_split`` and
        ``margin_over_colocated`` (1 - other / conditional goodput, the map's margin). Empty when it wins nowhere.

    Raises:
        ValueError: a map without conditional contenders, or a tolerance outside [0, 1)."""
    tol = split_map.tie_tolerance if tolerance is None else tolerance
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not 0 <= tol < 1:
        raise ValueError(f"tolerance must be a share in [0, 1), got {tolerance!r}")
    if not any(c.conditional for c in split_map.cells):
        raise ValueError("this map has no conditional contender: make it with conditional_queues (map --conditional)")
    out = []
    for c in split_map.cells:
        g = c.conditional.get("goodput_rps_per_worker", 0.0)
        colocated = max(("prefill-first", "chunked"), key=lambda k: c.goodput[k])
        if g <= 0:
            continue
        over_split, over_colocated = 1 - c.goodput["split"] / g, 1 - c.goodput[colocated] / g
        if min(over_split, over_colocated) > tol:
            out.append(dict(prompt_tokens=c.prompt_tokens, prefill_steps=c.prefill_steps, tpot_steps=c.tpot_steps,
                            layout=c.conditional["layout"], local_prefill_queue=c.conditional["local_prefill_queue"],
                            goodput_rps_per_worker=g, split_goodput_rps_per_worker=c.goodput["split"],
                            colocated_layout=c.names[colocated],
                            colocated_goodput_rps_per_worker=c.goodput[colocated],
                            margin_over_split=over_split, margin_over_colocated=over_colocated))
    return out
