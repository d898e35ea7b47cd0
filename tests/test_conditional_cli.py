"""Conditional disaggregation through the planner, the command line and the distributed back end."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest import cli
from splitlab import serving
from splitlab.planning.conditional_layouts import conditional_layouts, prompt_thresholds
from splitlab.planning.planner import plan
from splitlab.serving import ServingConfig


def test_thresholds_read_off_the_request_set():
    prompts = np.array([10, 20, 30, 40, 1000])
    assert prompt_thresholds(None, prompts) == []
    assert prompt_thresholds(["median", 64, math.inf, 30], prompts) == [30, 64, math.inf]
    assert prompt_thresholds("p75", prompts) == [40]
    with pytest.raises(ValueError, match="local_prefill_tokens must be prompt thresholds"):
        prompt_thresholds(["half"], prompts)
    with pytest.raises(ValueError, match="local_prefill_tokens must be prompt thresholds"):
        prompt_thresholds([-3], prompts)
    rows = conditional_layouts(3, [64])
    assert [(r[3], r[4]) for r in rows] == [(1, 1), (1, 2), (2, 1)] and rows[0][6] == {"local_prefill_tokens": 64}


def test_planner_ranks_conditional_contenders_and_threshold_zero_is_the_plain_split():
    p = plan(None, "chat", ttft_slo_s=0.2, tpot_slo_s=0.02, max_workers=2, chunk_tokens=(), max_requests=300,
             local_prefill_tokens=[0, "median"], progress=False)
    names = [c.name for c in p.candidates]
    assert "1P+1D" in names and "1P+1D (local if prompt <= 0)" in names and len(names) == 1 + 3
    by = {c.name: c for c in p.candidates}
    # the same runs at every rate; the two searches start apart (the planner's second search of a 1P+1D starts from
    # what the first learned), so their bisections stop at most about the search's tolerance (3%) apart
    assert by["1P+1D (local if prompt <= 0)"].goodput_rps_per_worker == pytest.approx(
        by["1P+1D"].goodput_rps_per_worker, rel=2 * 0.03)
    cond = [c for c in p.candidates if c.config.conditional]
    assert all(c.to_json()["local_prefill_tokens"] == c.config.local_prefill_tokens for c in cond)


def test_cli_serve_simulate_plan_take_the_thresholds():
    status, out, err = cli("simulate", "--layout", "disaggregated", "--decode-workers", "2", "--requests", "30",
                           "--local-prefill-tokens", "inf", "--json")
    data = json.loads(out)["disaggregated"]
    assert status == 0 and data["local_prefill_share"] == 1.0 and data["completed"] == 30
    assert data["conditional"] == "1P+2D (local if prompt <= inf)"
    status, out, err = cli("serve", "--backend", "simulated", "--layout", "disaggregated", "--requests", "20",
                           "--local-prefill-queue", "0")
    assert status == 0 and "conditional: 1P+1D (local if queue >= 0): 100% of prefills on a decode worker" in out
    status, out, err = cli("compare", "--backend", "simulated", "--requests", "10", "--local-prefill-tokens", "100",
                           "--json")
    assert status == 0 and "conditional" in json.loads(out)["disaggregated"]
    status, out, err = cli("plan", "--max-workers", "2", "--chunk-tokens", "128", "--ttft-slo", "0.2", "--tpot-slo",
                           "0.02", "--local-prefill-tokens", "median", "--json")
    names = [c["name"] for c in json.loads(out)["candidates"]]
    assert status == 0 and any(n.startswith("1P+1D (local if prompt <= ") for n in names)


@pytest.mark.parametrize("args", [
    ("simulate", "--local-prefill-tokens", "10"),  # colocated
    ("simulate", "--layout", "disaggregated", "--local-prefill-tokens", "-1"),
    ("simulate", "--layout", "disaggregated", "--local-prefill-tokens", "ten"),
    ("serve", "--layout", "disaggregated", "--local-prefill-queue", "1.5"),
    ("plan", "--local-prefill-tokens", "half"),
])
def test_bad_thresholds_fail_in_one_line(args):
    status, out, err = cli(*args)
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "local-prefill" in err


def test_distributed_local_prefills_give_the_reference_tokens(lm):
    reqs = serving.make_workload("chat", 5, rate_per_s=10, model=lm, seed=2, scale=0.08)
    threshold = sorted(r.prompt_len for r in reqs)[2]
    with serving.DistributedBackend("tiny", timeout_s=60) as backend:
        res = serving.run(reqs, ServingConfig.disaggregated(1, 1, local_prefill_tokens=threshold), backend)
    assert res.backend == "distributed" and res.tokens() == serving.reference_tokens(lm, reqs)
    local = {r.id for r in res.requests if r.prefill_worker == "D0"}
    assert local == {r.id for r in reqs if r.prompt_len <= threshold}
    assert set(res.transfers.request_id) == {r.id for r in reqs} - local
