"""One call to serve a workload: :func:`run` (one layout) and :func:`compare` (both layouts, same requests).

    import splitlab as sl
    from splitlab import serving
    lm = sl.load_model("tiny")
    res = serving.run("colocated", "chat", model=lm, rate_per_s=4, n_requests=16, workers=2)
    res.metrics(ttft_slo_s=0.5, tpot_slo_s=0.05); res.timeline; res.kv_usage; res.request_table()
    cmp = serving.compare("summarize", model=lm, rate_per_s=2, n_requests=8)   # 2 colocated vs 1P + 1D
    cmp.tokens_identical, cmp.table()
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from . import metrics as M
from .cluster import Cluster, ClusterConfig
from .executor import Executor
from .request import Request, State
from .simulated import CostModelExecutor
from .result import ServingResult
from .scheduler import SchedulerConfig
from .workload import WorkloadSpec, make_workload

__all__ = ["run", "compare", "Comparison"]


def _model_executor(model):
    from .emulated import ModelExecutor  # imports torch and the model code: only for emulated runs
    return ModelExecutor(model)


def _auto_budget(executor) -> int | None:
    """Device memory minus weights for an executor that runs a real model; unlimited for a cost model."""
    if getattr(executor, "lm", None) is None:
        return None
    from .emulated import derive_kv_budget
    return derive_kv_budget(executor.lm)


def _requests(workload, n_requests: int, rate_per_s: float, seed: int, model, arrival: str, cv: float):
    if isinstance(workload, (str, WorkloadSpec)):
        return make_workload(workload, n_requests, rate_per_s, seed=seed, model=model, arrival=arrival, cv=cv)
    return [r.fresh() for r in workload]


def run(layout: str = "colocated", workload: str | WorkloadSpec | Sequence[Request] = "chat",
        model=None, *, executor: Executor | None = None, rate_per_s: float = 2.0,
        n_requests: int = 16, seed: int = 0, arrival: str = "poisson", cv: float = 2.0, workers: int = 1,
        prefill_workers: int = 1, decode_workers: int = 1, policy: str = "prefill-first", max_batch: int = 16,
        max_prefill_tokens: int = 2048, chunk_tokens: int = 256, kv_budget_bytes: int | str | None = "auto",
        first_token_on: str = "prefill", transfer_mode: str = "whole", link_bytes_per_s: float | None = None,
        link_latency_s: float = 0.0) -> ServingResult:
    """Serve a workload on a simulated cluster and return a :class:`ServingResult`.

    Args:
        layout: "colocated" (``workers`` workers, ``policy``) or "disaggregated" (``prefill_workers`` +
            ``decode_workers``).
        workload: a named workload (see :mod:`.workload`; built with ``n_requests``, ``rate_per_s`` req/s,
            ``seed``, ``arrival`` "poisson"/"gamma" and ``cv``), a :class:`WorkloadSpec`, or a list of Requests
            (fresh copies are served; the list is not modified).
        model: runs the real model (emulated mode, measured times). Ignored if ``executor`` is given. With
            neither, a :class:`CostModelExecutor` with default coefficients predicts the times.
        policy, max_batch, max_prefill_tokens, chunk_tokens: see :class:`SchedulerConfig`.
        kv_budget_bytes: per-worker KV budget in bytes; "auto" = device memory minus weights for a real model
            (:func:`derive_kv_budget`) and unlimited for a cost model; None = unlimited.
        first_token_on, transfer_mode, link_bytes_per_s, link_latency_s: see :mod:`.cluster`.

    Raises:
        ValueError: an unknown layout, policy or option value, or two requests with the same id; KeyError: an
            unknown workload name.
    """
    if executor is None:
        executor = _model_executor(model) if model is not None else CostModelExecutor()
    if kv_budget_bytes == "auto":
        kv_budget_bytes = _auto_budget(executor)
    sched = SchedulerConfig(policy, max_batch, max_prefill_tokens, chunk_tokens)
    cfg = ClusterConfig(layout, workers, prefill_workers, decode_workers, sched, kv_budget_bytes, first_token_on,
                        transfer_mode, link_bytes_per_s, link_latency_s)
    lm = getattr(executor, "lm", model)
    return Cluster(executor, cfg).run(_requests(workload, n_requests, rate_per_s, seed, lm, arrival, cv))


@dataclass
class Comparison:
    """Both layouts on the same requests. ``tokens_identical``: the same requests completed in both, with the
    same output tokens; ``tokens_compared``: how many requests that is (0: the check compared nothing)."""

    colocated: ServingResult
    disaggregated: ServingResult

    @property
    def tokens_identical(self) -> bool:
        a, b = self.colocated, self.disaggregated
        done_a = {r.id: r.output for r in a.requests if r.state == State.FINISHED}
        done_b = {r.id: r.output for r in b.requests if r.state == State.FINISHED}
        return done_a == done_b

    @property
    def tokens_compared(self) -> int:
        """Requests that completed in both layouts (their tokens are what ``tokens_identical`` compares)."""
        done_a = {r.id for r in self.colocated.requests if r.state == State.FINISHED}
        return sum(r.state == State.FINISHED and r.id in done_a for r in self.disaggregated.requests)

    def metrics(self, ttft_slo_s: float | None = M.DEFAULT_TTFT_SLO_S,
                tpot_slo_s: float | None = M.DEFAULT_TPOT_SLO_S) -> dict:
        """``{"colocated": {...}, "disaggregated": {...}, "tokens_identical": bool, "tokens_compared": int}``."""
        return dict(colocated=self.colocated.metrics(ttft_slo_s, tpot_slo_s),
                    disaggregated=self.disaggregated.metrics(ttft_slo_s, tpot_slo_s),
                    tokens_identical=self.tokens_identical, tokens_compared=self.tokens_compared)

    def table(self, ttft_slo_s: float | None = M.DEFAULT_TTFT_SLO_S,
              tpot_slo_s: float | None = M.DEFAULT_TPOT_SLO_S) -> pd.DataFrame:
        """Side-by-side headline numbers, one column per layout."""
        rows = {}
        for name, res in (("colocated", self.colocated), ("disaggregated", self.disaggregated)):
            m = res.metrics(ttft_slo_s, tpot_slo_s)
            rows[name] = {"workers": len(m["workers"]), "completed": m["completed"], "rejected": m["rejected"],
                          **{f"ttft_{k}_s": v for k, v in m["ttft_s"].items() if k != "mean"},
                          **{f"tpot_{k}_s": v for k, v in m["tpot_s"].items() if k != "mean"},
                          "slo_attainment": m["slo_attainment"],
                          "throughput_tokens_per_s": m["throughput_tokens_per_s"]}
        return pd.DataFrame(rows)


def compare(workload: str | WorkloadSpec | Sequence[Request] = "chat", model=None, *,
            workers: int | None = None, prefill_workers: int = 1, decode_workers: int = 1,
            executor: Executor | None = None, rate_per_s: float = 2.0, n_requests: int = 16, seed: int = 0,
            arrival: str = "poisson", cv: float = 2.0, **options) -> Comparison:
    """Serve the same requests colocated (``workers``, default ``prefill_workers + decode_workers`` so both
    layouts get the same number of workers) and disaggregated. ``options`` go to both :func:`run` calls."""
    if executor is None:
        executor = _model_executor(model) if model is not None else CostModelExecutor()
    lm = getattr(executor, "lm", model)
    reqs = _requests(workload, n_requests, rate_per_s, seed, lm, arrival, cv)
    colo = run("colocated", reqs, executor=executor, workers=workers or prefill_workers + decode_workers, **options)
    disagg = run("disaggregated", reqs, executor=executor, prefill_workers=prefill_workers,
                 decode_workers=decode_workers, **options)
    return Comparison(colo, disagg)
