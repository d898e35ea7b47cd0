"""Chapter 6's live comparisons over seeds, paired: each seed's request set is served by every layout, so a
layout's lead is measured seed by seed, on the very same requests, and set against its own spread.

- :func:`paired_runs`: one request set per seed, each served by every layout; SLO attainment per (seed, layout),
  the first seed's :class:`~splitlab.serving.Comparison` kept whole for the page's tables and timelines.
- :func:`widest_gap_rate`: of some rates, the one where the simulator predicts the widest paired gap between two
  layouts (a live run there is most likely to be decisive).
- :func:`paired_gaps`: the gap in SLO attainment between two layouts, seed by seed (percentage points), its mean,
  range and 95% confidence interval over the seeds (Student's t), and whether the verdict is outside the runs' own
  spread (that interval clear of zero: chapters 6 and 7 judge alike).
- :func:`attainment_table`: one column per seed and the mean, one row per layout (%) and per gap (points).
- :func:`paired_verdict`: that comparison in a sentence.
- :func:`hybrid_note`: how the chunked runs' hybrid steps ran on the real model (one fused forward, or two passes
  on a family that cannot fuse, beside the cost model's fused prediction), in a sentence.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ...costmodel.model import HYBRID_TERMS
from .split_tables import short_name
from .style import fmt3, sig3

__all__ = ["PairedRuns", "paired_runs", "widest_gap_rate", "paired_gaps", "attainment_table", "paired_verdict",
           "hybrid_note", "rate_multiples", "T975", "t_interval"]

#: the 97.5% quantile of Student's t with 1 .. 10 degrees of freedom (any table of it, e.g. NIST/SEMATECH
#: e-Handbook of Statistical Methods, 1.3.6.7.2): a two-sided 95% interval's half-width in standard errors
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


@dataclass
class PairedRuns:
    """What :func:`paired_runs` served: ``attainment`` (DataFrame, index the seeds, one column per layout name:
    the share of that seed's requests within both SLOs, in %), ``first`` (the first seed's Comparison, every
    run traced), ``n_requests`` (per seed), ``rate_per_s``, ``tokens_identical`` (every seed's layouts
    produced the same tokens) and ``hybrid_steps`` (the executor's records of every hybrid step the runs took,
    kind "hybrid" or "two-pass", :func:`splitlab.serving.executor.run_step`; none on the simulator's fast path)."""

    attainment: pd.DataFrame
    first: object
    n_requests: int
    rate_per_s: float
    tokens_identical: bool
    hybrid_steps: list = field(default_factory=list)


def paired_runs(workload, n_requests: int, rate_per_s: float, configs: Mapping[str, object], executor,
                ttft_slo_s: float, tpot_slo_s: float, seeds: Sequence[int] = (0, 1, 2), model=None,
                scale: float | None = None) -> PairedRuns:
    """Serve ``n_requests`` requests of ``workload`` (a name or WorkloadSpec; Poisson arrivals at ``rate_per_s``,
    lengths scaled by ``scale``) once per seed, each seed's set on every layout of ``configs`` (name ->
    ServingConfig) on ``executor`` (a ModelExecutor: the real model; a CostModelExecutor simulates). Runs after
    the first seed keep metrics only (``trace=False``).

    Raises:
        ValueError: no seeds, a seed twice, fewer than two layouts, no requests; those of
            :func:`splitlab.serving.make_workload` and :func:`splitlab.serving.compare`.
        TypeError: ``configs`` not a mapping of names to configs."""
    from ... import serving
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {seeds!r}")
    _check_configs(configs)
    if not isinstance(n_requests, (int, np.integer)) or n_requests < 1:
        raise ValueError(f"n_requests must be a whole number >= 1 (no requests, no attainment), got {n_requests!r}")
    rows, first, same = {}, None, True
    kept = getattr(executor, "step_log", None)  # the caller's record goes on; else one for these runs only
    log = [] if kept is None else kept
    start, executor.step_log = len(log), log
    try:
        for i, seed in enumerate(seeds):
            reqs = serving.make_workload(workload, n_requests, rate_per_s, seed=seed, model=model, scale=scale)
            cfgs = dict(configs) if i == 0 else {k: dataclasses.replace(c, trace=False) for k, c in configs.items()}
            cmp = serving.compare(reqs, cfgs, executor)
            same = same and cmp.tokens_identical
            first = cmp if i == 0 else first
            rows[seed] = {k: 100 * r.metrics(ttft_slo_s, tpot_slo_s)["slo_attainment"]
                          for k, r in cmp.results.items()}
    finally:
        executor.step_log = kept
    att = pd.DataFrame.from_dict(rows, orient="index")
    att.index.name = "seed"
    hybrid = [r for r in log[start:] if r.get("kind") in ("hybrid", "two-pass")]
    return PairedRuns(att, first, n_requests, rate_per_s, same, hybrid)


def widest_gap_rate(workload, n_requests: int, rates: Sequence[float], configs: Mapping[str, object], cost,
                    ttft_slo_s: float, tpot_slo_s: float, a: str, b: str, seeds: Sequence[int] = (0, 1, 2),
                    model=None, scale: float | None = None) -> tuple[float, pd.Series]:
    """Of ``rates`` (requests/s), the one where the simulator (``cost``, a CostModel: the same scheduler, the
    cost model's seconds) predicts the widest mean paired gap ``a`` - ``b`` in SLO attainment on the requests a
    live :func:`paired_runs` with the same arguments would serve. Returns (that rate, the predicted mean gap in
    points per rate: a Series indexed by rate).

    Raises:
        ValueError: no rates, a rate that is not finite and > 0, ``a`` or ``b`` not a name of ``configs`` or
            both the same; and those of :func:`paired_runs`."""
    from ...serving import CostModelExecutor
    if isinstance(rates, (str, bytes)) or np.ndim(rates) != 1 or not len(rates):
        raise ValueError(f"widest_gap_rate needs at least one rate (a list of requests/s), got {rates!r}")
    bad = [r for r in rates if not isinstance(r, (int, float, np.number)) or not np.isfinite(r) or r <= 0]
    if bad:
        raise ValueError(f"rates must each be finite and > 0 requests/s, got {[str(r) for r in bad]} of {len(rates)}")
    _check_configs(configs)
    _check_pair(list(configs), a, b, "configs")
    ex = CostModelExecutor(cost)
    gaps = pd.Series({float(r): paired_gaps(paired_runs(workload, n_requests, r, configs, ex, ttft_slo_s, tpot_slo_s,
                                                        seeds, model, scale).attainment, a, b)["mean"]
                      for r in rates}, name="predicted gap (pp)")
    return float(gaps.idxmax()), gaps


def _check_configs(configs) -> None:
    if not isinstance(configs, Mapping):
        raise TypeError(f"configs must map layout names to ServingConfigs, got {type(configs).__name__}")
    if len(configs) < 2:
        raise ValueError(f"a paired comparison needs two or more layouts in configs, got {list(configs)}")


def _check_pair(names: list, a: str, b: str, where: str, args: tuple[str, str] = ("a", "b")) -> None:
    """``a`` and ``b`` (the caller's arguments ``args``) must be two different names of ``names`` (the layouts of
    ``where``)."""
    for arg, name in zip(args, (a, b)):
        if name not in names:
            raise KeyError(f"{arg}={name!r} is not a layout of {where}; its layouts: {names}")
    if a == b:
        raise ValueError(f"{args[0]} and {args[1]} must be two different layouts, got {a!r} twice")


def paired_gaps(attainment: pd.DataFrame, a: str, b: str) -> dict:
    """``a``'s lead over ``b`` in SLO attainment, seed by seed (points; ``attainment`` in %, one row per seed):
    ``gaps`` (list), ``seeds`` (how many), ``mean``, ``low``, ``high`` (range over the seeds), ``spread`` (high -
    low), ``ci_low``, ``ci_high`` (the mean's 95% confidence interval, mean -/+ t x sd / sqrt(seeds), t of
    :data:`T975`, beyond 11 seeds the 10 degrees of freedom's, a little wider than the true one; clipped to +-100
    points, the widest a gap in attainment can be; unbounded for one seed), ``decisive`` (that interval clear of
    zero: the verdict lies outside the runs' own spread; three seeds all on one side of zero are not enough when
    their gaps scatter, and one seed has no spread to lie outside), ``leader`` (a or b by the mean; None at a mean
    of 0).

    Raises:
        KeyError: a or b not a column of ``attainment``.
        ValueError: a and b the same; no seeds; a NaN attainment (a seed that served no requests)."""
    _check_pair(list(attainment.columns), a, b, "attainment")
    if not len(attainment):
        raise ValueError("attainment has no seeds: nothing to compare")
    nan = attainment.index[attainment[[a, b]].isna().any(axis=1)].tolist()
    if nan:
        raise ValueError(f"attainment is NaN for seed(s) {nan} (no requests served?): a gap needs both layouts' "
                         f"attainment")
    gaps = (attainment[a] - attainment[b]).to_numpy(float)
    low, high, mean, n = float(gaps.min()), float(gaps.max()), float(gaps.mean()), len(gaps)
    ci_low, ci_high = t_interval(gaps, T975)
    return dict(gaps=list(gaps), seeds=n, mean=mean, low=low, high=high, spread=high - low, ci_low=ci_low,
                ci_high=ci_high, decisive=bool(n >= 2 and (ci_low > 0 or ci_high < 0)),
                leader=a if mean > 0 else b if mean < 0 else None)


def t_interval(gaps, table: Sequence[float]) -> tuple[float, float]:
    """The mean of ``gaps`` (points) -/+ t x sd / sqrt(n), t read off ``table`` (a quantile of Student's t for 1 ..
    10 degrees of freedom, :data:`T975` for a 95% interval; beyond 11 gaps the 10 degrees of freedom's, a little
    wider than the true one), clipped to +-100 points (the widest a gap in attainment can be); unbounded for one
    gap."""
    gaps = np.asarray(gaps, dtype=float)
    n, mean = len(gaps), float(gaps.mean())
    if n < 2:
        return -math.inf, math.inf
    with np.errstate(invalid="ignore"):  # an infinite attainment gives a NaN spread here; gap_interval refuses it
        half = table[min(n - 1, len(table)) - 1] * float(gaps.std(ddof=1)) / math.sqrt(n)
    return max(mean - half, -100.0), min(mean + half, 100.0)


def attainment_table(runs: PairedRuns, pairs: Sequence[tuple[str, str]] = ()) -> pd.DataFrame:
    """Columns: each seed (headed by its number, under the header "seed"), then the mean; rows: each layout's SLO
    attainment (%, short names), then for each (a, b) of ``pairs`` the paired gap a - b (points). 3 significant
    digits. Seeds across and layouts down, so that three layouts and two gaps fit a 412 px phone even with no
    header wrapped (layouts across lost the last gap past its edge).

    Raises:
        KeyError: a name of ``pairs`` not a layout of ``runs``. ValueError: a pair of one layout twice."""
    att = runs.attainment
    for i, (a, b) in enumerate(pairs):
        _check_pair(list(att.columns), a, b, "runs.attainment", (f"pairs[{i}][0]", f"pairs[{i}][1]"))
    table = att.rename(columns=short_name)
    for a, b in pairs:
        table[f"{short_name(a)} - {short_name(b)} (pp)"] = att[a] - att[b]
    table.loc["mean"] = table.mean()
    out = table.T.astype(object)
    out.columns.name = "seed"  # its header cell above the layouts; the seeds' numbers head their columns
    for row in out.index:  # row by row: a column of floats would print 100 as 100.0
        out.loc[row] = [sig3(v) for v in table[row]]
    return out


def _pct(values) -> str:
    return " / ".join(f"{v:.0f}" for v in values) + "%"


def paired_verdict(attainment: pd.DataFrame, a: str, b: str, n_requests: int) -> str:
    """One sentence: each seed's attainment of ``a`` and ``b``, the paired gap's range and mean, and whether the
    verdict (who leads) is outside that range or these runs cannot tell the two apart."""
    g = paired_gaps(attainment, a, b)
    sa, sb, k = short_name(a), short_name(b), len(attainment)
    head = (f"Over {k} seed{'' if k == 1 else 's'} of {n_requests} requests each, {sa} met both SLOs for "
            f"{_pct(attainment[a])} of them and {sb} for {_pct(attainment[b])}")
    if g["decisive"]:
        lead, other, sign = (sa, sb, 1) if g["mean"] > 0 else (sb, sa, -1)
        lo, hi = sorted((sign * g["low"], sign * g["high"]))
        spread = (f"by {lo:.0f} points in every seed" if lo == hi else
                  f"by {lo:.0f} to {hi:.0f} points (mean {sign * g['mean']:.0f})" if lo > 0 else
                  f"by {sign * g['mean']:.0f} points on average ({lo:+.0f} to {hi:+.0f} seed by seed)")
        clo, chi = sorted((sign * g["ci_low"], sign * g["ci_high"]))
        return (f"{head}: {lead} led {other} {spread}; the lead's 95% interval over the seeds, {clo:.0f} to "
                f"{chi:.0f} points, is clear of zero, so the verdict lies outside the runs' own spread.")
    if k == 1:
        return (f"{head}: a gap of {g['mean']:+.0f} points from one seed, which has no spread to judge it "
                f"against, so this run cannot tell the two layouts apart (run two seeds or more).")
    if g["low"] == g["high"] == 0:
        return f"{head}: the two layouts tied in every seed, so these runs cannot tell the two layouts apart."
    return (f"{head}: seed by seed, the gap {sa} - {sb} ranged from {g['low']:+.0f} to {g['high']:+.0f} points "
            f"(mean {g['mean']:+.0f}), and its 95% interval over the seeds, {g['ci_low']:+.0f} to {g['ci_high']:+.0f}, "
            f"holds zero, so these runs cannot tell the two layouts apart.")


def hybrid_note(runs: PairedRuns, cost, tolerance: float = 0.2) -> str:
    """One sentence on how the chunked runs' hybrid steps (decode rows riding with a prompt chunk) ran: as one fused
    forward each, their median measured against ``cost``'s prediction; or, where the model's family cannot fuse
    (``run.hybrid_path`` "two-pass", the reason ``cost.two_pass_reason``), in two passes, whether the simulator
    charges two passes too (``cost.hybrid_path``), and what a fused engine's step would cost by the fused form
    (``cost.fused_hybrid_s``) against the median measured; fused, whether the median is within ``tolerance`` of the
    prediction. "" when no layout of the runs was chunked."""
    chunked = [r for r in runs.first.results.values() if r.config.policy == "chunked"]
    if not chunked:
        return ""
    steps = runs.hybrid_steps
    if not steps:
        return "No step of the chunked runs carried decode rows and a prompt chunk together."
    m_s = float(np.median([r["step_s"] for r in steps]))
    f_s = float(np.median([cost.fused_hybrid_s(*(r[k] for k in HYBRID_TERMS)) for r in steps]))
    measured, fused = fmt3(1e3 * m_s), fmt3(1e3 * f_s)
    if chunked[0].hybrid_path == "fused":
        off = m_s / f_s - 1
        judged = (f"{off:+.0%}, within the {tolerance:.0%} we allow a prediction" if round(abs(off) * 100) <=
                  round(tolerance * 100) else f"{off:+.0%}, beyond the {tolerance:.0%} we allow a prediction: a chunk "
                  f"budget sized on the prediction (the 'tpot' budget) gives steps {'longer' if off > 0 else 'shorter'}"
                  " than it planned")
        return (f"The chunked runs' {len(steps)} hybrid steps (a prompt chunk with the decode rows riding in its "
                f"forward) ran as one fused forward each: {measured} ms "
                f"measured, {fused} ms predicted (medians, {judged}).")
    why = (cost.two_pass_reason or "one splitlab cannot pack into one forward").split(" (")[0]  # its gist
    sim = ("the simulator charges two passes too" if cost.hybrid_path == "two-pass" else
           "but this cost model charges one fused forward (a calibration from before it recorded the path)")
    return (f"This model's family ({why}) runs hybrid steps in two passes, and {sim}: the chunked runs' "
            f"{len(steps)} hybrid steps took {measured} ms (median), where a fused engine's step would cost {fused} "
            f"ms (the fused form's prediction).")


def rate_multiples(rate_per_worker: float, candidates: Sequence) -> str:
    """"20.5 requests/s per worker: 1.25x 3P+1D's simulated goodput (16.4), 2.36x 4 colocated's (8.67)": a live
    run's rate against each plan candidate's goodput per worker (``candidates``: objects with ``name`` and
    ``goodput_rps_per_worker``), so that a reader sees how far past a layout's goodput a short run was served.
    A candidate of goodput 0 is said to serve no rate. Raises ValueError for a rate that is not a finite number > 0."""
    if not (isinstance(rate_per_worker, (int, float, np.floating)) and 0 < rate_per_worker < np.inf):
        raise ValueError(f"rate_per_worker must be a finite number > 0 (requests/s), got {rate_per_worker!r}")
    parts = []
    for i, c in enumerate(candidates):
        g, name = c.goodput_rps_per_worker, short_name(c.name)
        parts.append(f"{name} serves no rate within the SLOs" if g <= 0 else
                     f"{fmt3(rate_per_worker / g)}x {name}'s simulated goodput ({fmt3(g)})" if i == 0 else
                     f"{fmt3(rate_per_worker / g)}x {name}'s ({fmt3(g)})")
    return f"{fmt3(rate_per_worker)} requests/s per worker: " + ", ".join(parts)
