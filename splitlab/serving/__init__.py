"""Serving: requests arriving over time, workers batching them, colocated or split into prefill and decode pools.

Entry points: :func:`run`, :func:`compare`, :func:`make_workload`; metrics in :mod:`splitlab.serving.metrics`.
"""
from . import metrics
from .cluster import LAYOUTS, Cluster, ClusterConfig
from .cost_model import CostModel, CostModelExecutor
from .executors import DecodeBatch, Executor, ModelExecutor, Slot
from .memory import KVMemory, derive_kv_budget
from .request import Request, State
from .result import ServingResult
from .runner import Comparison, compare, reference_tokens, run
from .scheduler import POLICIES, SchedulerConfig
from .workload import (WORKLOADS, Fixed, LogNormal, Uniform, WorkloadSpec, gamma_arrivals, make_workload,
                       poisson_arrivals)

__all__ = ["run", "compare", "Comparison", "reference_tokens", "ServingResult", "Request", "State", "make_workload",
           "WORKLOADS", "WorkloadSpec", "Fixed", "Uniform", "LogNormal", "poisson_arrivals", "gamma_arrivals",
           "Cluster", "ClusterConfig", "LAYOUTS", "SchedulerConfig", "POLICIES", "Executor", "ModelExecutor",
           "CostModel", "CostModelExecutor", "Slot", "DecodeBatch", "KVMemory", "derive_kv_budget", "metrics"]
