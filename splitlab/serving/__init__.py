"""Serving: requests arriving over time, workers batching them, colocated or split into prefill and decode pools.

Entry points: :func:`run` and :func:`compare` with a :class:`ServingConfig`, :func:`make_workload`; metrics in
:mod:`splitlab.serving.metrics`; :func:`goodput` (:mod:`.goodput_search`) bisects the rate to the SLO boundary. One
scheduler (:mod:`.cluster`, :mod:`.router`, :mod:`.scheduler`, :mod:`.memory`) serves on three back ends: emulated
(:mod:`.emulated`: the real model, virtual clocks), simulated (:mod:`.simulated`: a cost model) and distributed
(:mod:`.distributed`: worker processes, wall clocks).
Names are imported on first use: a simulated (cost-model) run never imports torch or a model.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "cluster": ["Cluster"],
    "config": ["LAYOUTS", "POLICIES", "ROUTINGS", "TRANSFER_MODES", "ServingConfig"],
    "prefix_router": ["PrefixRouter", "prefix_stats"],
    "system_prompts": ["system_prompt_ids", "with_system_prompts"],
    "common.faults": ["KillWorker", "WorkerFault"],
    "simulated": ["CostModelExecutor"],
    "pools": ["PoolCostExecutor"],
    "executor": ["DecodeBatch", "Executor", "Slot"],
    "goodput_search": ["GoodputResult", "attainment_curve", "goodput", "workload_requests"],
    "validation": ["validate", "validation_contenders"],
    "emulated": ["ModelExecutor", "derive_kv_budget", "reference_tokens"],
    "distributed.backend": ["DistributedBackend"],
    "memory": ["KVMemory"],
    "nic": ["link_fields"],
    "request": ["Request", "State"],
    "result": ["ServingResult"],
    "runner": ["Comparison", "backend_for", "compare", "contenders", "run"],
    "workload": ["WORKLOADS", "Fixed", "LogNormal", "Uniform", "WorkloadSpec", "gamma_arrivals", "make_workload",
                 "poisson_arrivals"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
_SUBMODULES = ("cluster", "config", "emulated", "executor", "interference", "memory", "metrics", "paged", "prefix",
               "request", "result", "router", "runner", "scheduler", "simulated", "workload", "distributed", "fast",
               "inputs", "recovery", "virtual", "wall", "goodput_search", "validation", "nic", "handoff",
               "prefix_router", "system_prompts")
__all__ = sorted(_WHERE) + ["metrics", "CostModel"]


def __getattr__(name: str):
    if name == "CostModel":  # where serving code used to find it; it lives in splitlab.costmodel
        from ..costmodel import CostModel
        return CostModel
    if name in _WHERE:
        module = _WHERE[name]
        path = f"..{module}" if module.startswith("common.") else f".{module}"
        return getattr(importlib.import_module(path, __name__), name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE) | set(_SUBMODULES))
