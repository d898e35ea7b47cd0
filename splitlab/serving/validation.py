"""Is the simulator right? The same requests served twice, emulated (the real model times every step) and
simulated (a calibrated cost model predicts every step), with the same scheduler, router and KV admission; their
TTFT and TPOT percentiles side by side.

    cal = sl.profiling.calibrate(lm)
    table = serving.validate(lm, cal.cost)            # 3 workloads x 3 contenders
    table[["workload", "contender", "metric", "emulated_s", "simulated_s", "error"]]
    # on a machine whose speed drifts: real runs repeated, calibrations before and after each workload
    table = serving.validate(lm, cal, repeats=2, recalibrate=lambda: sl.profiling.calibrate(lm))
    serving.validation.verdict(table)                 # within 15%? and how far real runs disagree

Vidur (Agrawal et al., MLSys'24) validates its simulator the same way, against real runs of the same traces
(within 9% there). Only what runs the steps differs, so a large error says the cost model is wrong, or the
device ran at another speed while the emulated run measured it: repeated emulated runs of the same requests
(``repeats``) measure that second cause, the noise floor of the check itself. ``in_run=True`` takes that cause
away: the cost model is fitted again on the steps the emulated runs themselves measured (their speed, drift and
all), so what error is left is the simulator's own (its scheduling, its queueing, its cost formula).
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..costmodel import Calibration, CostModel, combine, fit_decode, fit_prefill
from ..common.progress import progress_bar
from ..costmodel.fit import coefficients
from ..costmodel.model import HYBRID_TERMS, hybrid_fit_row
from . import metrics as M
from .config import ServingConfig
from .runner import run
from .simulated import CostModelExecutor
from .workload import make_workload

__all__ = ["validate", "validation_contenders", "summary", "verdict", "default_rates", "in_run_cost", "METRICS"]

#: (metric, percentile) pairs compared
METRICS = (("ttft", 50), ("ttft", 90), ("tpot", 50), ("tpot", 90))
#: fewest prefill and fewest decode forwards an in-run fit takes (:func:`in_run_cost`)
IN_RUN_MIN_FORWARDS = 4
#: fewest requests per workload ``validate(..., in_run=True)`` accepts: one prefill forward each at best (more
#: requests may still be needed when prompts share a prefill forward)
IN_RUN_MIN_REQUESTS = IN_RUN_MIN_FORWARDS


def validation_contenders(workers: int = 2, chunk_tokens: int = 256, **options) -> dict[str, ServingConfig]:
    """The three contenders on ``workers`` workers: colocated prefill-first, colocated chunked, and the split
    (``workers // 2`` prefill + the rest decode)."""
    p = max(1, workers // 2)
    return {"colocated prefill-first": ServingConfig.colocated(workers, **options),
            "colocated chunked": ServingConfig.colocated(workers, policy="chunked", chunk_tokens=chunk_tokens,
                                                         **options),
            "split": ServingConfig.disaggregated(p, workers - p, **options)}


def validate(lm, cost, workloads: Mapping[str, float] | None = None, contenders: Mapping[str, ServingConfig] |
             None = None, n_requests: int = 24, seed: int = 0, executor=None, scale: float | None = None,
             repeats: int = 1, recalibrate: Callable[[], Calibration] | None = None, in_run: bool = False,
             progress: bool | None = None) -> pd.DataFrame:
    """Serve each workload's requests on each contender, emulated and simulated, and compare percentiles.

    Args:
        lm: the model (a :class:`splitlab.LoadedModel`) the emulated runs use and ``cost`` was calibrated on.
        cost: a :class:`~splitlab.costmodel.CostModel` (``calibrate(lm).cost``), or the
            :class:`~splitlab.costmodel.Calibration` itself (needed with ``recalibrate``).
        workloads: workload name -> request rate (requests/s); default research, chat and code, each at a rate
            that keeps the cost model's colocated workers about half busy.
        contenders: name -> config (default :func:`validation_contenders`).
        n_requests, seed, scale: of every workload (``scale``: its lengths, default the model's).
        executor: an emulated executor to reuse (default: a new, warmed ``ModelExecutor(lm)``).
        repeats: emulated runs of each contender (all contenders once, then again: interleaved in time).
            ``emulated_s`` is their median; ``emulated_spread`` (max / min - 1 over the runs) is how far real runs
            of the very same requests disagree: the noise floor below which no simulator can be checked.
        recalibrate: a function returning a new Calibration of ``lm`` (e.g. ``lambda: sl.profiling.calibrate(lm)``),
            called after each workload's emulated runs; that workload is then simulated on the calibration
            before and the one after fitted as one (:func:`splitlab.costmodel.combine`): a shared machine whose
            speed drifts is measured over the span of the runs, not at one moment. The one after is the next
            workload's before.
        in_run: also simulate each workload on the cost model fitted to the steps its emulated runs measured
            (:func:`in_run_cost`): columns ``in_run_s`` and ``in_run_error``. The device's speed is then the one
            it had during those runs, so the error left is the simulator's, not the machine's drift.
        progress: a bar of the emulated runs on stderr: True, False or None (when stderr is a terminal).

    Returns:
        one row per workload, contender and metric: ``emulated_s``, ``simulated_s``, ``error`` (simulated /
        emulated - 1), ``abs_error`` and ``emulated_spread`` (NaN with one repeat); with ``in_run`` also
        ``in_run_s`` and ``in_run_error``. :func:`summary` turns it into
        a table that fits a page; :func:`verdict` counts what it says.

    Raises:
        ValueError: n_requests < 1 (or < :data:`IN_RUN_MIN_REQUESTS` with ``in_run``), repeats < 1, an empty
            ``workloads`` or ``contenders`` (None keeps the default), ``recalibrate`` without a Calibration as
            ``cost``, a bad workload (see :func:`~.workload.make_workload`: checked for every workload before
            any run), a contender that completes none of a workload's requests (nothing to compare), or, with
            ``in_run``, emulated runs that recorded fewer than :data:`IN_RUN_MIN_FORWARDS` prefill or decode
            forwards (:func:`in_run_cost`).
        TypeError: ``cost`` that is no CostModel or Calibration, a contender that is not a ServingConfig, or
            ``recalibrate`` returning no Calibration.
    """
    from .emulated import ModelExecutor  # the real model: torch
    from .simulated import CostModelExecutor
    if isinstance(n_requests, bool) or not isinstance(n_requests, numbers.Integral) or n_requests < 1:
        raise ValueError(f"n_requests must be a whole number >= 1 (requests served per workload), got "
                         f"{n_requests!r}")
    if in_run and n_requests < IN_RUN_MIN_REQUESTS:
        raise ValueError(f"in_run=True fits the cost model again on the emulated runs' steps, which needs at least "
                         f"{IN_RUN_MIN_FORWARDS} prefill and {IN_RUN_MIN_FORWARDS} decode forwards: n_requests must "
                         f"be >= {IN_RUN_MIN_REQUESTS}, got {n_requests}")
    if not isinstance(cost, (Calibration, CostModel)):  # None failed deep inside as 'has no attribute prefill_s'
        raise TypeError(f"cost must be a CostModel or a Calibration (sl.profiling.calibrate(lm)), got "
                        f"{type(cost).__name__}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1, got {repeats!r}")
    if recalibrate is not None and not isinstance(cost, Calibration):
        raise ValueError("recalibrate combines calibrations: pass the Calibration (calibrate(lm)) as cost, "
                         f"not a {type(cost).__name__}")
    for what, given, default in (("workloads", workloads, "default_rates()"),
                                 ("contenders", contenders, "validation_contenders()")):
        if given is not None and (not isinstance(given, Mapping) or not given):
            raise ValueError(f"{what} must be a non-empty mapping (or None: {default}), got {given!r}")
    for label, cfg in (contenders or {}).items():
        if not isinstance(cfg, ServingConfig):
            raise TypeError(f"contender {label!r} must be a ServingConfig, got {type(cfg).__name__}")
    before = cost if isinstance(cost, Calibration) else None
    cost = before.cost if before is not None else cost
    contenders = validation_contenders() if contenders is None else contenders
    if workloads is None:
        workloads = default_rates(cost, lm, n_workers=min(c.n_workers for c in contenders.values()), scale=scale)
    requests = {name: make_workload(name, n_requests, rate, seed=seed, model=lm, scale=scale)  # all checked first
                for name, rate in workloads.items()}
    bar = progress_bar(len(workloads) * repeats * len(contenders), "validate: emulated runs", progress, "run")
    emu = executor or ModelExecutor(lm)
    rows = []
    for name, rate in workloads.items():
        reqs = requests[name]
        emulated = {label: [] for label in contenders}
        emu.step_log = [] if in_run else None
        try:
            for _ in range(repeats):
                for label, cfg in contenders.items():
                    bar.set_postfix_str(f"{name}, {label}")
                    emulated[label].append(_percentiles(_served(run(reqs, cfg, emu, progress=False), name, label)))
                    bar.update()
        finally:
            steps, emu.step_log = emu.step_log, None
        in_run_sim = CostModelExecutor(in_run_cost(cost, steps)) if in_run else None
        if recalibrate is not None:
            after = recalibrate()
            if not isinstance(after, Calibration):
                raise TypeError(f"recalibrate returned a {type(after).__name__}, not a Calibration (it should "
                                f"return a new calibration of lm, e.g. lambda: sl.profiling.calibrate(lm))")
            cost, before = combine([before, after]).cost, after
        sim = CostModelExecutor(cost)
        for label, cfg in contenders.items():
            simulated = _percentiles(run(reqs, cfg.with_(trace=False), sim))
            again = _percentiles(run(reqs, cfg.with_(trace=False), in_run_sim)) if in_run else {}
            for metric, s in simulated.items():
                runs = [e[metric] for e in emulated[label]]
                e = float(np.median(runs))
                spread = max(runs) / min(runs) - 1 if repeats > 1 else math.nan
                rows.append(dict(workload=name, rate_per_s=rate, contender=label, metric=metric, emulated_s=e,
                                 simulated_s=s, error=s / e - 1, abs_error=abs(s / e - 1), emulated_spread=spread))
                if in_run:
                    rows[-1].update(in_run_s=again[metric], in_run_error=again[metric] / e - 1)
    bar.close()  # (an error on the way closes it when it is collected)
    return pd.DataFrame(rows)


def _served(result, workload: str, contender: str):
    """``result`` if it completed a request; else why not (its percentiles would all be NaN)."""
    if not result.completed:
        first = next((r for r in result.requests if r.reject_reason), None)
        why = f" (request {first.id} {first.state.value}: {first.reject_reason})" if first is not None else ""
        raise ValueError(f"contender {contender!r} completed none of the {len(result.requests)} {workload} "
                         f"requests{why}: no TTFT or TPOT to compare")
    return result


def in_run_cost(cost: CostModel, steps: Sequence[Mapping]) -> CostModel:
    """``cost`` with its prefill and decode coefficients fitted again (:func:`splitlab.costmodel.fit_prefill`,
    ``fit_decode``) on ``steps``: the records of the steps a run measured (an executor's ``step_log``, see
    :func:`~.executor.run_step`; a fused hybrid step enters the prefill fit as the prefill forward it is, with
    its decode rows' per-row columns, :func:`splitlab.costmodel.model.hybrid_fit_row`). Transfer, KV size and
    memory are kept.

    The fit is by plain (not relative) least squares: it predicts the *mean* step at given terms, what queues and
    TPOT add up. On single noisy steps a relative fit predicts low (measured here: decode steps of the tiny model
    with a coefficient of variation of 0.23-0.48 summed to 0.91 of the measured time by a relative fit, 1.00 by
    a plain one).

    Raises:
        ValueError: too few prefill or decode records to fit (4 of each), or a record without its columns.
        TypeError: ``steps`` not a list of records (dicts).
    """
    records = None if isinstance(steps, (str, bytes, Mapping)) or not hasattr(steps, "__iter__") else list(steps)
    if records is None or not all(isinstance(r, Mapping) for r in records):  # [1] was: 'int' has no attribute 'get'
        raise TypeError(f"steps must be a list of step records (dicts: an executor's step_log), got {steps!r:.80}")
    steps = records
    prefills = [r for r in steps if r.get("kind") == "prefill"] + [  # a fused hybrid step is one prefill forward
        dict(hybrid_fit_row(**{k: r[k] for k in HYBRID_TERMS}), prefill_s=r["step_s"])
        for r in steps if r.get("kind") == "hybrid"]
    decodes = [r for r in steps if r.get("kind") == "decode"]
    for kind, rows in (("prefill", prefills), ("decode", decodes)):
        if len(rows) < IN_RUN_MIN_FORWARDS:
            raise ValueError(f"an in-run fit needs at least {IN_RUN_MIN_FORWARDS} {kind} forwards from the emulated "
                             f"runs, got {len(rows)}: serve more requests")
    fits = [fit_prefill(prefills, relative=False), fit_decode(decodes, relative=False)]  # the mean step
    return dataclasses.replace(cost, **coefficients(fits))


def _percentiles(result) -> dict[str, float]:
    """TTFT and TPOT P50 and P90 (s) of a run's completed requests, keyed ``ttft_p50`` ... (:data:`METRICS`)."""
    values = {m: [f(r) for r in result.completed] for m, f in (("ttft", M.ttft_s), ("tpot", M.tpot_s))}
    return {f"{m}_p{q}": M.percentiles(values[m], (q,))[f"p{q}"] for m, q in METRICS}


def default_rates(cost, lm=None, n_workers: int = 2, busy: float = 0.5,
                  names: Sequence[str] = ("research", "chat", "code"), scale: float | None = None
                  ) -> dict[str, float]:
    """A rate per workload at which ``n_workers`` colocated workers are about ``busy`` of the time, by the cost
    model: busy / (mean prefill + mean output x decode step of a small batch) x workers, rounded to 0.01/s.
    ``cost`` None: the built-in cost model.

    Raises:
        ValueError: ``busy`` not a share in (0, 1], ``n_workers`` not an integer >= 1, or a rate that rounds to 0;
            KeyError: an unknown workload name."""
    if isinstance(busy, bool) or not isinstance(busy, numbers.Real) or not 0 < busy <= 1:
        raise ValueError(f"busy must be a share of the time in (0, 1], got {busy!r}")  # 0, -1, NaN gave such rates
    if isinstance(n_workers, bool) or not isinstance(n_workers, numbers.Integral) or n_workers < 1:
        raise ValueError(f"n_workers must be an integer >= 1, got {n_workers!r}")
    cost = CostModelExecutor(cost).cost  # None was an AttributeError on None.prefill_s
    out = {}
    for name in names:
        reqs = make_workload(name, 200, 1.0, seed=1, model=lm, scale=scale)
        prompt = np.array([r.prompt_len for r in reqs])
        output = np.array([r.max_new_tokens for r in reqs])
        per_request = np.mean([cost.prefill_s(n) for n in prompt]) + output.mean() * cost.decode_s(
            2, 2 * (prompt.mean() + output.mean() / 2)) / 2
        out[name] = float(round(busy * n_workers / per_request, 2))
        if out[name] == 0:
            raise ValueError(f"the {name} rate, {busy * n_workers / per_request:.3g} requests/s, rounds to 0: a "
                             f"larger busy share or more workers")
    return out


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """The validation ``table`` as one row per workload, contender and metric: emulated and simulated (ms, 3
    significant digits), the error and, with repeated emulated runs, their spread (%, 1 decimal)."""
    cols = {"emulated (ms)": table.emulated_s * 1e3, "simulated (ms)": table.simulated_s * 1e3,
            "error (%)": 100 * table.error}
    if "emulated_spread" in table and table.emulated_spread.notna().any():
        cols["spread (%)"] = 100 * table.emulated_spread
    if "in_run_error" in table:
        cols["in-run error (%)"] = 100 * table.in_run_error
    out = table.assign(**cols).set_index(["workload", "contender", "metric"])[list(cols)]
    return out.apply(lambda col: col.map(lambda v: float(f"{v:.3g}")) if "(ms)" in col.name else col.round(1))


def verdict(table: pd.DataFrame, tolerance: float = 0.15) -> dict:
    """What a validation ``table`` says, as numbers: ``values`` (how many compared), ``within`` (how many with
    |error| <= ``tolerance``), ``largest`` (the largest |error|, with its ``where``: workload, contender, metric),
    and, with repeated emulated runs, ``spread_median`` / ``spread_max`` (how far the real runs disagreed with
    each other) and ``within_spread`` (how many errors are no larger than that disagreement); else NaN / 0; with
    an in-run column (``validate(..., in_run=True)``) also ``in_run_within``, ``in_run_largest`` and
    ``in_run_where``: the same counts for the simulation on the runs' own step times.

    Raises:
        ValueError: ``tolerance`` not a share > 0; a table that is empty, has no ``abs_error`` column or no error
            that is a number."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real) or not (
            math.isfinite(tolerance) and tolerance > 0):  # NaN and -1 counted 0 within, True all
        raise ValueError(f"tolerance must be a finite share > 0 (0.15: 15%), got {tolerance!r}")
    if not isinstance(table, pd.DataFrame) or "abs_error" not in table:
        raise ValueError(f"table must be validate()'s DataFrame, with an abs_error column, got {type(table).__name__}")
    if table.empty:
        raise ValueError("table is empty: no value was compared")
    if table.abs_error.isna().all():
        raise ValueError("the table holds no error that is a number (every abs_error is NaN)")
    worst = table.loc[table.abs_error.idxmax()]
    spread = table.emulated_spread if "emulated_spread" in table else pd.Series(math.nan, index=table.index)
    return dict(values=len(table), tolerance=tolerance, within=int((table.abs_error <= tolerance).sum()),
                largest=float(worst.abs_error),
                where=", ".join(str(worst[c]) for c in ("workload", "contender", "metric") if c in table),
                spread_median=float(spread.median()), spread_max=float(spread.max()),
                within_spread=int((table.abs_error <= spread).sum()), **_in_run_verdict(table, tolerance))


def _in_run_verdict(table: pd.DataFrame, tolerance: float) -> dict:
    """:func:`verdict`'s in-run counts (empty without an ``in_run_error`` column)."""
    if "in_run_error" not in table:
        return {}
    errors = table.in_run_error.abs()
    worst = table.loc[errors.idxmax()]
    return dict(in_run_within=int((errors <= tolerance).sum()), in_run_largest=float(errors.max()),
                in_run_where=", ".join(str(worst[c]) for c in ("workload", "contender", "metric") if c in table))
