"""Where a cell of chapter 7's map sits on this machine right now (:mod:`.map_steady`'s first step).

A shared CPU runs the same step slower or faster from one minute to the next, and prefill and decode drift by
different amounts (measured under nbval on a loaded 2-core machine: prefill 1.1x, decode 0.71x the cost model a
few minutes after its calibration). The map's axes are in decode steps, so such a drift moves a cell on the map,
and no single speed factor moves it back. So right before a cell's live runs:

- :func:`step_probe`: a few of the cell's requests through the live executor, prefill and decode timed apart
  against the cost model (:func:`step_ratios`);
- :func:`rescaled`: the cost model with its prefill and decode seconds times those two ratios;
- :func:`cell_now`: the prompt and SLOs that put the cell at its map coordinates (prefill cost and TPOT SLO in
  lone decode steps) on that rescaled model.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import replace

import numpy as np
import pandas as pd

from ...costmodel.model import HYBRID_TERMS
from .pools_live_args import cost_of

__all__ = ["STEP_KINDS", "step_ratios", "step_probe", "rescaled", "cell_now"]

#: the kinds of step an executor's ``step_log`` holds, in the order :func:`step_ratios` lists them
STEP_KINDS = ("prefill", "decode", "hybrid", "two-pass")


def step_ratios(cost, steps) -> pd.DataFrame:
    """The steps a run measured against ``cost``'s prediction of each: ``steps`` is an executor's ``step_log``
    (:func:`splitlab.serving.executor.run_step`). One row per kind of step ("prefill", "decode", "hybrid", and
    "two-pass": a hybrid step of a model that cannot fuse, whole; kinds not run left out): ``steps``,
    ``measured (ms)`` and ``predicted (ms)`` (medians) and ``measured / predicted`` (the median of the per-step
    ratios: a step the machine stalled once does not move it). ``cost`` None: the built-in model.

    Raises:
        TypeError: ``cost`` not a CostModel or None.
        ValueError: a step of a kind not above (its kind named: a KeyError of a missing field was all it said), a
        step ``cost`` predicts at 0 s or less (no ratio: a ZeroDivisionError)."""
    cost = cost_of(cost)
    rows = {}
    for r in steps:
        if not isinstance(r, dict) or r.get("kind") not in STEP_KINDS:
            got = repr(r.get("kind")) if isinstance(r, dict) else type(r).__name__
            raise ValueError(f"steps must be a step_log's dicts of a kind in {STEP_KINDS}, got a step of kind {got}")
        if r["kind"] == "decode":
            seconds, pred = r["step_s"], cost.decode_s(r["batch"], r["context_tokens"])
        elif r["kind"] == "prefill":
            seconds, pred = r["prefill_s"], cost.prefill_s(r["tokens"], r["squares"], r["masked_pairs"])
        else:  # a hybrid step, one fused forward or two passes (recorded whole after its two)
            form = cost.fused_hybrid_s if r["kind"] == "hybrid" else cost.two_pass_s
            seconds, pred = r["step_s"], form(*(r[k] for k in HYBRID_TERMS))
        if not pred > 0:
            raise ValueError(f"cost predicts {pred!r} s for a {r['kind']} step: no measured / predicted ratio")
        rows.setdefault(r["kind"], []).append((seconds, pred))
    out = {k: {"steps": len(v), "measured (ms)": 1e3 * float(np.median([a for a, _ in v])),
               "predicted (ms)": 1e3 * float(np.median([b for _, b in v])),
               "measured / predicted": float(np.median([a / b for a, b in v]))}
           for k, v in sorted(rows.items(), key=lambda kv: STEP_KINDS.index(kv[0]))}
    return pd.DataFrame.from_dict(out, orient="index")


def step_probe(lm, cost, prompt_tokens: int, output_tokens: int = 16, requests: int = 6) -> dict:
    """How many times ``cost``'s seconds this device's prefills and decode steps take now, apart: ``requests``
    requests of ``prompt_tokens`` prompt and ``output_tokens`` answer tokens arriving at once on one
    prefill-first worker of :class:`~splitlab.serving.ModelExecutor` (the live runs' executor; each prompt its own
    prefill, then a decode batch of them all), timed step by step (:func:`step_ratios`). Returns {"prefill": ratio,
    "decode": ratio, "steps": the table}.

    ``cost`` None: the built-in model.

    Raises:
        ValueError: prompt_tokens, output_tokens (>= 2) or requests not a whole number in range.
        TypeError: ``cost`` not a CostModel or None."""
    cost = cost_of(cost)
    from ...serving import ModelExecutor, ServingConfig, make_workload, run
    from ...serving.workload import Fixed, WorkloadSpec
    for name, v, low in (("prompt_tokens", prompt_tokens, 1), ("output_tokens", output_tokens, 2),
                         ("requests", requests, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    ex = ModelExecutor(lm)
    ex.step_log = []
    spec = WorkloadSpec("probe", Fixed(int(prompt_tokens)), Fixed(int(output_tokens)))
    run(make_workload(spec, requests, 1e6, seed=0, model=lm, scale=1.0),
        ServingConfig.colocated(1, max_prefill_tokens=int(prompt_tokens), trace=False), ex)
    table = step_ratios(cost, ex.step_log)
    return {"prefill": float(table.loc["prefill", "measured / predicted"]),
            "decode": float(table.loc["decode", "measured / predicted"]), "steps": table}


def rescaled(cost, prefill: float, decode: float):
    """``cost`` with every prefill term (and a fused hybrid step's, a prefill forward with decode rows riding in
    it) times ``prefill`` and every decode term times ``decode``: the cost model of a machine whose prefills take
    ``prefill`` x and whose decode steps ``decode`` x the calibration's (:func:`step_probe`). ``cost`` None: the
    built-in model.

    Raises:
        ValueError: a factor not a finite number > 0 (numpy's integers and floats are numbers: np.int64(2) was
        refused). TypeError: ``cost`` not a CostModel or None."""
    for name, f in (("prefill", prefill), ("decode", decode)):
        if isinstance(f, (bool, np.bool_)) or not isinstance(f, numbers.Real) or not 0 < float(f) < math.inf:
            raise ValueError(f"{name} must be a finite factor > 0, got {f!r}")
    cost, prefill, decode = cost_of(cost), float(prefill), float(decode)
    terms = {k: getattr(cost, k) * prefill for k in ("prefill_base_s", "prefill_per_token_s", "prefill_per_token2_s",
                                                     "prefill_masked_per_pair_s", "hybrid_per_row_s",
                                                     "hybrid_per_context_token_s")}
    terms.update({k: getattr(cost, k) * decode for k in ("decode_base_s", "decode_per_seq_s", "decode_per_token_s",
                                                        "decode_batched_s")})
    return replace(cost, **terms, source=f"{cost.source}; prefill x{prefill:.3g}, decode x{decode:.3g}")


def cell_now(m, cell, cost_now) -> tuple[int, float, float]:
    """(prompt tokens, TTFT SLO s, TPOT SLO s) of ``cell`` (a cell of the map ``m``) on ``cost_now``
    (:func:`rescaled`): the prompt whose prefill costs the cell's lone decode steps there (the nearest of the
    prompts the context holds with the map's answers), the map's SLO rules on it (``m.ttft_prefills`` of its
    prefills; the cell's TPOT steps of its lone decode step). ``cost_now`` None: the built-in model.

    Raises:
        ValueError: a cell whose prefill steps are not finite and > 0 (NaN placed it at the longest prompt in
        silence), a context the map's answers fill (the search had no prompt to return but 0 or less).
        TypeError: ``cost_now`` not a CostModel or None."""
    from ...planning.split_map import prefill_steps
    cost_now = cost_of(cost_now)
    if not (isinstance(cell.prefill_steps, numbers.Real) and 0 < cell.prefill_steps < math.inf):
        raise ValueError(f"the cell's prefill_steps must be finite and > 0, got {cell.prefill_steps!r}")
    a, b = 1, cost_now.max_context - m.output_tokens  # prefill_steps grows with the prompt
    if b < 2:
        raise ValueError(f"the map's answers of {m.output_tokens} tokens leave no prompt room in the cost model's "
                         f"context of {cost_now.max_context} tokens")
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if prefill_steps(cost_now, mid) < cell.prefill_steps else (a, mid)
    n = min((a, b), key=lambda p: abs(prefill_steps(cost_now, p) - cell.prefill_steps))
    return n, m.ttft_prefills * cost_now.prefill_s(n), cell.tpot_steps * cost_now.decode_s(1, n)
