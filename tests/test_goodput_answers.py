"""A goodput search always ends with an answer (issue 18, item 2 and QA F2): a layout that meets the SLOs at no rate
gets goodput 0 and the reason, SLOs no rate breaks a lower bound that says so, and neither ``goodput``, ``plan``
nor ``python -m splitlab plan`` raises "did not converge ... pass goodput() a larger max_runs"."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import splitlab as sl
from conftest import cli
from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, ServingConfig, goodput, workload_requests


@pytest.mark.parametrize("step", [2.0, 1.25])
def test_slos_no_rate_meets_give_goodput_0_and_why_at_any_step(step):
    # with step=1.25 the halving needed 42 runs to reach its floor of start x 1e-4 and raised after 40 (QA F2)
    res = goodput("research", ServingConfig.colocated(2), ttft_slo_s=0.05, tpot_slo_s=0.1, step=step,
                  max_requests=300)
    assert (res.goodput_rps_per_worker, res.outcome, res.binding_slo) == (0.0, "unmet", "ttft")
    # the start, one step down, the trickle; at a small step (a start meant to be near), down to 4x below the start
    # first (1.25, 1.25, 1.25^2, 1.25^4: a planner's near start that failed twice is not yet a sign of no rate)
    assert len(res.points) == (3 if step == 2.0 else 6)
    assert res.reason.startswith("no rate meets the SLOs: even at a trickle") and "missed TTFT" in res.reason
    assert "against 0.05 s" in res.reason


def test_the_trickle_serves_each_request_alone():
    """At the trickle every request's TTFT is its own prefill: the P90 the reason quotes is the P90 of the lone
    prefills of the cost model."""
    cost = CostModel()
    res = goodput("research", ServingConfig.colocated(2), CostModelExecutor(cost), ttft_slo_s=0.05, tpot_slo_s=0.1,
                  max_requests=300)
    trickle = res.points[-1]
    reqs = workload_requests("research", trickle["requests"], 1.0, CostModelExecutor(cost))
    lone = np.percentile([cost.prefill_s(r.prompt_len) for r in reqs], 90)
    assert trickle["ttft_p90_s"] == pytest.approx(lone, rel=1e-6)
    assert trickle["rate_per_worker"] * 2 * 1000 * (0.05 + 0.1 * max(r.max_new_tokens - 1 for r in reqs)) \
        == pytest.approx(1.0)  # a mean gap of 1000 x the longest a request may take within its SLOs


def test_a_goodput_far_below_the_start_is_found_not_zero():
    # the old halving stopped at start x 1e-4 and called everything below it 0
    near = goodput("chat", ServingConfig.colocated(1), max_requests=100, ttft_slo_s=1.0, tpot_slo_s=0.1)
    far = goodput("chat", ServingConfig.colocated(1), max_requests=100, ttft_slo_s=1.0, tpot_slo_s=0.1,
                  start_rate_per_worker=1e6)
    assert near.outcome == far.outcome == "found" and far.goodput_rps_per_worker > 0
    assert far.goodput_rps_per_worker == pytest.approx(near.goodput_rps_per_worker, rel=0.06)
    assert len(far.points) <= 25
    # TTFT or TTST with no batch cap; TPOT once the failing run goes on until its verdict is settled (goodput_spread)
    assert "met the SLOs at" in far.reason and "missed T" in far.reason


def test_the_cli_plan_of_qa_f2_answers_goodput_0_with_its_reason():
    status, out, err = cli("plan", "--workload", "research", "--ttft-slo", "0.05", "--tpot-slo", "0.1",
                           "--max-workers", "2", "--json")
    assert status == 0 and "max_runs" not in out + err and "did not converge" not in out + err
    data = json.loads(out)
    assert len(data["candidates"]) == 6  # 1P+1D, prefill-first, chunked at 128, 256, 512 and the TPOT budget
    for c in data["candidates"]:
        assert c["goodput_rps_per_worker"] == 0 and c["outcome"] == "unmet" and c["binding_slo"] == "ttft"
        assert c["reason"].startswith("no rate meets the SLOs") and c["cost_per_million_tokens"] is None
    status, out, err = cli("plan", "--workload", "research", "--ttft-slo", "0.05", "--tpot-slo", "0.1",
                           "--max-workers", "2")
    assert status == 0 and "No layout meets TTFT <= 0.05 s and TPOT <= 0.1 s at any rate" in out
    assert out.count("* ") >= 5  # each layout's reason under the table


def test_a_layout_that_meets_no_rate_ranks_last_instead_of_aborting_the_plan():
    # QA F2 with --ttft-slo 0.08: the 128-token chunked layout cannot meet it (its lone chunked prefills are
    # too slow) and aborted the whole plan
    p = sl.planner.plan(None, "research", ttft_slo_s=0.08, tpot_slo_s=0.1, max_workers=2, chunk_tokens=(128, 512),
                        progress=False)
    last = p.candidates[-1]
    assert last.name == "2 colocated (chunked, 128-token chunks)" and last.goodput_rps_per_worker == 0
    assert last.outcome == "unmet" and "even at a trickle" in last.reason
    assert all(c.goodput_rps_per_worker > 0 and c.outcome == "found" for c in p.candidates[:-1])
    table = p.table()
    assert table.loc[last.name, "why"] == last.reason and table["why"].str.len().min() > 0
    assert "wins:" in p.why()


def test_a_noisy_calibration_plans_to_the_end():
    """The quick tour's crash: a calibration taken under load (chunks through the masked attention path slow)
    left a chunked layout with no rate that meets the SLOs, and its search from a first guess near 1/s with
    steps of 1.25 ran out of runs ("did not converge in 40 runs (last rate 0.0001655/s per worker)")."""
    noisy = CostModel(prefill_base_s=0.02, prefill_per_token_s=2e-4, prefill_masked_per_pair_s=2e-6,
                      decode_base_s=0.004, decode_per_seq_s=1e-3, source="noisy")
    p = sl.planner.plan(noisy, "research", ttft_slo_s=0.5, tpot_slo_s=0.03, max_workers=2, chunk_tokens=(128,),
                        progress=False)
    chunked = p.best_of("colocated", "chunked")
    assert chunked.goodput_rps_per_worker == 0 and chunked.outcome == "unmet" and chunked is p.candidates[-1]
    assert all(len(c.result.points) <= 25 for c in p.candidates)
    assert p.best.goodput_rps_per_worker > 0


def test_every_search_ends_within_25_runs():
    """A few far starts, small and large steps, tight and loose SLOs: each ends with an answer, in few runs."""
    outcomes = set()
    for workload, cfg, slos, start, step in [
            ("chat", ServingConfig.colocated(2), (1.0, 0.1), 1e-5, 1.25),
            ("code", ServingConfig.disaggregated(1, 1), (0.5, 0.05), 1e5, 1.25),
            ("research", ServingConfig.colocated(1, policy="chunked", chunk_tokens=128), (0.06, 0.01), 1.0, 2.0),
            ("chat", ServingConfig.disaggregated(1, 1), (1e6, 1e6), 1e-3, 1.25)]:
        res = goodput(workload, cfg, ttft_slo_s=slos[0], tpot_slo_s=slos[1], start_rate_per_worker=start, step=step,
                      max_requests=150)
        assert len(res.points) <= 25 and res.reason, res
        outcomes.add(res.outcome)
    assert outcomes == {"found", "unmet", "unbounded"}


@pytest.mark.parametrize("step", [math.inf, 1e308, 101.0, 1.0, math.nan, "2", True])
def test_a_step_that_is_not_a_finite_factor_up_to_100_is_refused_before_running(step):
    # audit of issue 18 (bad input on F2's step): step=inf tried a rate of inf, then ran 40 runs to "did not end in
    # 40 runs ... lowest failed inf requests/s per worker"; step=1e308 bisected 1 .. 1e308 by means into the same
    with pytest.raises(ValueError, match=r"step a factor > 1 and at most 100, got 1.0 and"):
        goodput("research", ServingConfig.colocated(2), CostModelExecutor(CostModel()), ttft_slo_s=0.5,
                tpot_slo_s=0.1, step=step)


def test_a_plan_whose_searches_cannot_end_names_plans_own_argument():
    """QA (issue 18): plan(tolerance=1e-12) said "pass goodput() a larger max_runs or tolerance, or a
    start_rate_per_worker nearer the answer", arguments plan() does not have."""
    with pytest.raises(ValueError, match=r"pass plan\(\) a larger tolerance") as caught:
        sl.planner.plan(max_workers=2, tolerance=1e-12, progress=False)
    assert "goodput()" not in str(caught.value) and "max_runs" not in str(caught.value)
