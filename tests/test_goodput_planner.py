"""Goodput (bisection to the SLO boundary) against a closed-form answer, the backlog trap, the planner's pick on
crafted cost models, and bad inputs."""
from __future__ import annotations

import math

import pytest

from splitlab.costmodel import CostModel
from splitlab.planning import closed_form
from splitlab.serving import CostModelExecutor, Fixed, Request, ServingConfig, WorkloadSpec, goodput, metrics as M
from splitlab.serving import make_workload, run

# a decode step costs 10 ms whatever the batch; prefill and transfers are free
FLAT = CostModel(prefill_base_s=0.0, prefill_per_token_s=0.0, decode_base_s=0.01, decode_per_seq_s=0.0,
                 decode_per_token_s=0.0, transfer_base_s=0.0, transfer_bytes_per_s=math.inf)


def test_goodput_bisects_to_the_closed_form_boundary():
    """One worker, batches of B = 4, every request 20 tokens (the first from the free prefill, 19 decode steps of
    10 ms): it serves mu = B / (19 x 10 ms) = 21.05 requests/s. Above mu, request i of N evenly spaced ones waits
    i (1/mu - 1/rate), so 90% of them wait <= SLO iff 1/rate >= 1/mu - SLO / (0.9 N): the boundary rate is
    1 / (1/mu - SLO / (0.9 N))."""
    n, slo, mu = 1000, 0.5, 4 / (19 * 0.01)
    reqs = [Request(i, i / 10.0, [1, 2, 3], 20) for i in range(n)]  # evenly spaced; goodput rescales the times
    res = goodput(reqs, ServingConfig.colocated(1, max_batch=4), CostModelExecutor(FLAT), ttft_slo_s=slo,
                  tpot_slo_s=1.0, tolerance=0.01, start_rate_per_worker=5.0)
    boundary = 1 / (1 / mu - slo / (0.9 * n))
    assert boundary * 0.97 <= res.goodput_rps_per_worker <= boundary * 1.005
    assert res.binding_slo == "ttft" and res.goodput_rps == res.goodput_rps_per_worker
    curve = res.curve()
    assert curve.rate_per_worker.is_monotonic_increasing and curve.passed.any() and not curve.passed.all()
    assert (curve.loc[curve.passed, "attainment"] >= 0.9).all()
    assert (curve.loc[~curve.passed, "attainment"] < 0.9).all()


def test_the_backlog_trap_is_caught_by_the_second_token_bound():
    """The issue's measurement: 1P+3D with DistServe's convention answers the first token at once (TTFT P90 0.07 s)
    and then leaves requests waiting for a decode slot; without the second-token bound it 'reached 100%'. By default
    the first token leaves when a decode worker admits the request, so TTFT itself holds the wait. The slots are 16
    per decode worker (max_batch=16, the old default cap): the built-in model's KV budget alone would hold every
    request."""
    reqs = make_workload("code", 400, 256, seed=0)
    default = run(reqs, ServingConfig.disaggregated(1, 3, max_batch=16, trace=False)).metrics(2.0, 0.2)
    assert default["ttft_s"]["p90"] > 2.2 and default["slo_attainment"] < 0.9
    split = run(reqs, ServingConfig.disaggregated(1, 3, max_batch=16, trace=False, first_token_on="prefill"))
    m = split.metrics(2.0, 0.2)
    assert m["ttft_s"]["p90"] < 0.2 and m["tpot_s"]["p90"] < 0.2      # both SLOs look met ...
    assert m["ttst_s"]["p90"] > 2.2                                    # ... but the stream starts seconds later
    misses = M.slo_misses(split.requests, 2.0, 0.2)
    assert misses["ttst"] > 100 and m["slo_attainment"] < 0.9
    assert M.slo_misses(split.requests, 2.0, None)["ttst"] == 0        # one SLO alone: no second-token bound


def test_goodput_refuses_bad_slos_and_settings():
    cfg = ServingConfig.colocated(1)
    for kw in (dict(ttft_slo_s=0, tpot_slo_s=0.1), dict(ttft_slo_s=1.0, tpot_slo_s=-1),
               dict(ttft_slo_s=float("nan"), tpot_slo_s=0.1), dict(ttft_slo_s=None, tpot_slo_s=0.1)):
        with pytest.raises(ValueError, match="(?i)slo"):
            goodput("chat", cfg, **kw)
    with pytest.raises(ValueError, match="target"):
        goodput("chat", cfg, ttft_slo_s=1, tpot_slo_s=0.1, target=1.5)
    with pytest.raises(ValueError, match="start_rate"):
        goodput("chat", cfg, ttft_slo_s=1, tpot_slo_s=0.1, start_rate_per_worker=0)


SPEC = WorkloadSpec("long prompts", Fixed(400), Fixed(20))


def test_planner_picks_the_split_where_prefills_would_stall_a_tight_tpot():
    """400-token prompts take 40 ms, decode steps 2 ms: a colocated stream loses 20 steps to every prefill on its
    worker, so a TPOT SLO of 4 ms leaves colocated workers almost no room; decode is cheap, so the best split puts
    most workers on prefill."""
    import splitlab as sl
    cost = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-4, decode_base_s=2e-3, decode_per_seq_s=0.0,
                     decode_per_token_s=0.0, transfer_base_s=0.0, transfer_bytes_per_s=math.inf)
    p = sl.planner.plan(cost, SPEC, ttft_slo_s=0.2, tpot_slo_s=0.004, max_workers=3, chunk_tokens=(64,),
                        progress=False, max_requests=600)
    assert p.best.name == "2P+1D" and p.best.layout == "disaggregated"
    assert p.first_guess["prefill_workers"] == 2 and p.first_guess["decode_workers"] == 1
    colocated = [c for c in p.candidates if c.layout == "colocated"]
    assert all(c.goodput_rps_per_worker < p.best.goodput_rps_per_worker for c in colocated)
    data = p.to_json()
    assert data["best"]["name"] == "2P+1D" and len(data["candidates"]) == 2 + 3  # 2 colocated, 3 splits
    assert {"layout", "policy", "workers", "prefill_workers", "decode_workers", "goodput_rps_per_worker",
            "cost_per_million_tokens", "binding_slo"} <= set(data["candidates"][0])
    assert "2P+1D wins" in p.why()
    best = p.best
    assert best.cost_per_million_tokens == pytest.approx(2.0 / 3600 / (best.goodput_rps_per_worker * 20) * 1e6)


def test_planner_picks_colocated_where_prompts_are_cheap():
    cost = CostModel(prefill_base_s=1e-3, prefill_per_token_s=1e-6, decode_base_s=5e-3, decode_per_seq_s=5e-4,
                     decode_per_token_s=0.0, transfer_base_s=0.0, transfer_bytes_per_s=math.inf)
    import splitlab as sl
    p = sl.planner.plan(cost, WorkloadSpec("short", Fixed(20), Fixed(100)), ttft_slo_s=0.5, tpot_slo_s=0.05,
                        max_workers=3, chunk_tokens=(), progress=False, max_requests=600)
    assert p.best.layout == "colocated"


def test_planner_refuses_bad_inputs():
    import splitlab as sl
    for kw, match in ((dict(max_workers=1), "max_workers"), (dict(ttft_slo_s=0), "ttft_slo_s"),
                      (dict(tpot_slo_s=-0.1), "tpot_slo_s"), (dict(price_per_hour=0), "price_per_hour"),
                      (dict(chunk_tokens=(8,), max_batch=16), "chunk sizes"), (dict(chunk_tokens=(1,)), "chunk sizes")):
        with pytest.raises(ValueError, match=match):
            sl.planner.plan(**kw)


def test_closed_form_capacities():
    cost = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-4, decode_base_s=0.01, decode_per_seq_s=0.0,
                     decode_per_token_s=0.0)
    assert closed_form.decode_capacity(cost, [100], [50], tpot_slo_s=0.02, max_batch=8) == pytest.approx(8 / 0.5)
    assert closed_form.prefill_capacity(cost, [100], ttft_slo_s=0.05, max_prefill_tokens=2048) == pytest.approx(100)
    assert closed_form.split_capacity(100, 16, 1, 3) == pytest.approx(12)
