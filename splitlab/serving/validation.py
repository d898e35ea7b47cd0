"""Is the simulator right? The same requests served twice, emulated (the real model times every step) and
simulated (a calibrated cost model predicts every step), with the same scheduler, router and KV admission; their
TTFT and TPOT percentiles side by side.

    cal = sl.profiling.calibrate(lm)
    table = serving.validate(lm, cal.cost)            # 3 workloads x 3 contenders
    table[["workload", "contender", "metric", "emulated_s", "simulated_s", "error"]]

Vidur (Agrawal et al., MLSys'24) validates its simulator the same way, against real runs of the same traces
(within 9% there). Only what runs the steps differs, so a large error says the cost model is wrong (or the
device was busy with something else while the emulated run measured it).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from . import metrics as M
from .config import ServingConfig
from .runner import run
from .workload import make_workload

__all__ = ["validate", "validation_contenders", "summary", "default_rates", "METRICS"]

#: (metric, percentile) pairs compared
METRICS = (("ttft", 50), ("ttft", 90), ("tpot", 50), ("tpot", 90))


def validation_contenders(workers: int = 2, chunk_tokens: int = 256, **options) -> dict[str, ServingConfig]:
    """The three contenders on ``workers`` workers: colocated prefill-first, colocated chunked, and the split
    (``workers // 2`` prefill + the rest decode)."""
    p = max(1, workers // 2)
    return {"colocated prefill-first": ServingConfig.colocated(workers, **options),
            "colocated chunked": ServingConfig.colocated(workers, policy="chunked", chunk_tokens=chunk_tokens,
                                                         **options),
            "split": ServingConfig.disaggregated(p, workers - p, **options)}


def validate(lm, cost, workloads: Mapping[str, float] | None = None, contenders: Mapping[str, ServingConfig] |
             None = None, n_requests: int = 24, seed: int = 0, executor=None, scale: float | None = None
             ) -> pd.DataFrame:
    """Serve each workload's requests on each contender, emulated and simulated, and compare percentiles.

    Args:
        lm: the model (a :class:`splitlab.LoadedModel`) the emulated runs use and ``cost`` was calibrated on.
        cost: a :class:`~splitlab.costmodel.CostModel` (``calibrate(lm).cost``).
        workloads: workload name -> request rate (requests/s); default research, chat and code, each at a rate
            that keeps the cost model's colocated workers about half busy.
        contenders: name -> config (default :func:`validation_contenders`).
        n_requests, seed, scale: of every workload (``scale``: its lengths, default the model's).
        executor: an emulated executor to reuse (default: a new, warmed ``ModelExecutor(lm)``).

    Returns:
        one row per workload, contender and metric: ``emulated_s``, ``simulated_s``, ``error`` (simulated /
        emulated - 1) and ``abs_error``. :func:`summary` turns it into a table that fits a page.
    """
    from .emulated import ModelExecutor  # the real model: torch
    from .simulated import CostModelExecutor
    emu, sim = executor or ModelExecutor(lm), CostModelExecutor(cost)
    contenders = contenders or validation_contenders()
    workloads = workloads or default_rates(cost, lm, n_workers=min(c.n_workers for c in contenders.values()),
                                           scale=scale)
    rows = []
    for name, rate in workloads.items():
        reqs = make_workload(name, n_requests, rate, seed=seed, model=lm, scale=scale)
        for label, cfg in contenders.items():
            runs = {"emulated": run(reqs, cfg, emu), "simulated": run(reqs, cfg.with_(trace=False), sim)}
            values = {k: {m: [f(r) for r in res.completed] for m, f in (("ttft", M.ttft_s), ("tpot", M.tpot_s))}
                      for k, res in runs.items()}
            for metric, q in METRICS:
                e, s = (M.percentiles(values[k][metric], (q,))[f"p{q}"] for k in ("emulated", "simulated"))
                rows.append(dict(workload=name, rate_per_s=rate, contender=label, metric=f"{metric}_p{q}",
                                 emulated_s=e, simulated_s=s, error=s / e - 1, abs_error=abs(s / e - 1)))
    return pd.DataFrame(rows)


def default_rates(cost, lm=None, n_workers: int = 2, busy: float = 0.5,
                  names: Sequence[str] = ("research", "chat", "code"), scale: float | None = None
                  ) -> dict[str, float]:
    """A rate per workload at which ``n_workers`` colocated workers are about ``busy`` of the time, by the cost
    model: busy / (mean prefill + mean output x decode step of a small batch) x workers."""
    out = {}
    for name in names:
        reqs = make_workload(name, 200, 1.0, seed=1, model=lm, scale=scale)
        prompt = np.array([r.prompt_len for r in reqs])
        output = np.array([r.max_new_tokens for r in reqs])
        per_request = np.mean([cost.prefill_s(n) for n in prompt]) + output.mean() * cost.decode_s(
            2, 2 * (prompt.mean() + output.mean() / 2)) / 2
        out[name] = float(round(busy * n_workers / per_request, 2))
    return out


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """The validation ``table`` as one row per workload, contender and metric: emulated and simulated (ms, 3
    significant digits) and the error (%, 1 decimal)."""
    out = table.assign(**{"emulated (ms)": table.emulated_s * 1e3, "simulated (ms)": table.simulated_s * 1e3,
                          "error (%)": 100 * table.error})
    out = out.set_index(["workload", "contender", "metric"])[["emulated (ms)", "simulated (ms)", "error (%)"]]
    return out.apply(lambda col: col.map(lambda v: float(f"{v:.3g}")) if col.name != "error (%)" else col.round(1))
