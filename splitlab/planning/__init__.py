"""Searches over serving runs: how many prefill and decode workers, and which layout, for a workload and its SLOs.

- :mod:`.planner`: :func:`plan` ranks colocated (prefill-first, chunked) and every xPyD split by simulated goodput
  per worker and cost per million output tokens (``sl.planner.plan``).
- :mod:`.closed_form`: the first guess from the cost model alone (prefill throughput at the TTFT SLO, decode
  throughput at the TPOT SLO).
- :mod:`.defaults`: SLOs and a rate from the device's costs where the user gives none (chapter 6's rule).
- :mod:`.split_map`: the map of where the split pays off (``split_map.split_map``: the winner in goodput per worker of
  the best xPyD split, colocated prefill-first and chunked over the prefill cost and the TPOT SLO, both in decode
  steps, for a fixed cluster; :mod:`.map_result` holds its cells), and :mod:`.rule_of_thumb` (where a map's rows
  say the split wins, loses and ties, a threshold where a row has one, applied to GPU rows).
- :mod:`.hetero`: :func:`plan_pools`, two pools of their own GPU and tensor parallelism ranked by cost per million
  output tokens and output tokens per joule; :mod:`.pools`: a pool's price, power and hand-off.

The goodput search itself is :func:`splitlab.serving.goodput`. Names are imported on first use.
"""
from __future__ import annotations

import importlib

_EXPORTS = {"planner": ["plan", "Plan", "Candidate"],
            "closed_form": ["first_guess", "prefill_capacity", "decode_capacity", "colocated_capacity",
                            "split_capacity"],
            "defaults": ["choose_defaults", "Chosen"],
            "split_map": ["geometric_axis"], "map_result": ["SplitMap", "Cell"],
            "rule_of_thumb": ["split_threshold", "apply_rule", "order_words"],
            "hetero": ["plan_pools", "PoolPlan", "PoolCandidate"], "pools": ["Pool", "cluster_costs"]}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    if name in _EXPORTS:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE) | set(_EXPORTS))
