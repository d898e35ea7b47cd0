"""Conditional disaggregation (splitlab.serving.conditional): decode workers prefill the requests under a threshold
themselves. Known answers: threshold 0 is the plain split, an infinite threshold is colocated serving on the decode
workers (no transfer), a crafted workload where the conditional split beats every pure layout of up to three
workers in goodput per worker, the fast path equal to the step-by-step run, the emulated tokens those of a request
served alone, and every request ends finished, rejected or failed."""
from __future__ import annotations

import math

import numpy as np
import pytest

from splitlab.common.faults import KillWorker
from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, Request, ServingConfig, goodput, make_workload, run
from splitlab.serving.conditional import local_share, prefills_locally

from test_simulator_fast_path import COST, both, outcome

#: a KV transfer costs 20 ms and transfers on one link queue: a 1P+1D split moves at most 50 caches/s
LINK_BOUND = CostModel(prefill_base_s=1e-3, prefill_per_token_s=1e-4, decode_base_s=4e-3, decode_per_seq_s=1e-4,
                       decode_per_token_s=0.0, transfer_base_s=2e-2, transfer_bytes_per_s=float("inf"))


def split(x=1, y=2, **options):
    return ServingConfig.disaggregated(x, y, **options)


def ended(res) -> dict:
    return {s: sum(r.state.value == s for r in res.requests) for s in ("finished", "rejected", "failed")}


def test_threshold_zero_is_the_plain_split():
    reqs = make_workload("chat", 120, 40.0, seed=3)
    plain = run(reqs, split(), CostModelExecutor(COST))
    zero = run(reqs, split(local_prefill_tokens=0), CostModelExecutor(COST))
    assert outcome(zero) == outcome(plain) and local_share(zero) == 0.0
    assert len(zero.transfers) == len(reqs)


@pytest.mark.parametrize("policy", ["prefill-first", "chunked"])
def test_infinite_threshold_is_colocated_on_the_decode_workers(policy):
    """Every prefill on a decode worker: the run of 2 colocated workers, worker for worker (D0 is W0), with the
    prefill worker idle and no transfer."""
    reqs = make_workload("code", 150, 60.0, seed=5)
    opts = dict(policy=policy, chunk_tokens=64, max_batch=8)
    local = run(reqs, split(1, 2, local_prefill_tokens=math.inf, **opts), CostModelExecutor(COST))
    colo = run(reqs, ServingConfig.colocated(2, **opts), CostModelExecutor(COST))
    rename = [(i, s, out, times, p.replace("D", "W"), d.replace("D", "W"), f)
              for i, s, out, times, p, d, f in outcome(local)[0]]
    assert rename == outcome(colo)[0] and local.admissions == colo.admissions
    assert len(local.transfers) == 0 and local_share(local) == 1.0
    tl = local.timeline
    assert set(tl.kind[tl.worker == "P0"]) == {"idle"} and all(r.transfer_end_s is None for r in local.requests)


def test_prompt_threshold_splits_by_prompt_length():
    reqs = make_workload("chat", 200, 30.0, seed=1)
    res = run(reqs, split(1, 2, local_prefill_tokens=300), CostModelExecutor(COST))
    for r in res.requests:
        assert (r.prefill_worker == r.decode_worker) == (r.prompt_len <= 300), r.id
        assert (r.transfer_end_s is None) == (r.prompt_len <= 300)
    assert 0 < local_share(res) < 1 and ended(res)["finished"] == len(reqs)


def test_queue_threshold_sends_requests_to_decode_workers_when_the_prefill_queue_is_long():
    reqs = [Request(i, 0.0, list(range(400)), 4) for i in range(6)]  # all at once: the queue builds
    cfg = split(1, 1, local_prefill_queue=2, max_prefill_tokens=400)
    res = run(reqs, cfg, CostModelExecutor(COST))
    # arrivals at one time are routed before any step starts: two wait on P0, then its queue holds 2: local
    assert [r.prefill_worker for r in sorted(res.requests, key=lambda r: r.id)] == ["P0"] * 2 + ["D0"] * 4
    assert ended(res)["finished"] == 6
    never = run(reqs, split(1, 1, max_prefill_tokens=400), CostModelExecutor(COST))
    assert {r.prefill_worker for r in never.requests} == {"P0"}


def test_the_rule_reads_the_config():
    r = Request(0, 0.0, list(range(10)), 4)
    assert not prefills_locally(split(), r, None)  # the plain split: never
    assert prefills_locally(split(local_prefill_tokens=10), r, None)
    assert not prefills_locally(split(local_prefill_tokens=9, local_prefill_queue=5), r,
                                type("W", (), {"queue": [1, 2]})())
    assert prefills_locally(split(local_prefill_queue=0), r, type("W", (), {"queue": []})())


@pytest.mark.parametrize("options", [dict(local_prefill_tokens=300), dict(local_prefill_queue=1),
                                     dict(local_prefill_tokens=200, policy="chunked", chunk_tokens=64, max_batch=8),
                                     dict(local_prefill_tokens=500, policy="decode-first", kv_budget_bytes=2048 * 900),
                                     dict(local_prefill_tokens=math.inf, max_batch=4)],
                         ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("rate, traced", [(40.0, True), (400.0, False)])  # below capacity, and in overload
def test_fast_path_equals_step_by_step(options, rate, traced):
    reqs = make_workload("chat", 150, rate, seed=3)
    slow, fast = both(reqs, COST, traced=traced, layout="disaggregated", prefill_workers=1, decode_workers=2,
                      **options)
    assert outcome(slow) == outcome(fast)
    if traced:
        assert slow.timeline.equals(fast.timeline)


def test_conditional_beats_both_pure_layouts_where_the_link_binds():
    """90% of prompts are 20 tokens, 10% are 1,000; a transfer takes 20 ms and one link carries one at a time.
    Colocated, a 1,000-token prefill (0.1 s) stalls the decodes past the TPOT SLO; split, every request queues on
    the link (1P+1D: <= 50 caches/s, 25 per worker). Conditional (short prompts on the decode worker) moves only
    the long prompts' caches and keeps the long prefills off the decode worker. Measured: 52.6 requests/s per
    worker against 28.4 for the best pure layout (3 colocated); 1P+1D 23.8 and 2P+1D 16.5 (D0's NIC takes one
    cache at a time), both bound by the link."""
    rng = np.random.default_rng(0)
    arrivals = np.cumsum(rng.exponential(1.0, 600))
    reqs = [Request(i, float(t), list(range(1000 if rng.random() < 0.1 else 20)), 32) for i, t in enumerate(arrivals)]
    ex = CostModelExecutor(LINK_BOUND)
    slo = dict(ttft_slo_s=0.5, tpot_slo_s=0.012, max_requests=600, min_requests=300)
    layouts = {"2 colocated": ServingConfig.colocated(2), "3 colocated": ServingConfig.colocated(3),
               "1P+1D": split(1, 1), "2P+1D": split(2, 1), "1P+2D": split(1, 2),
               "conditional": split(1, 1, local_prefill_tokens=20)}
    g = {k: goodput(reqs, cfg, ex, **slo) for k, cfg in layouts.items()}
    rate = {k: v.goodput_rps_per_worker for k, v in g.items()}
    best_pure = max(v for k, v in rate.items() if k != "conditional")
    assert rate["conditional"] > 1.5 * best_pure, rate
    assert rate["1P+1D"] <= 25 * 1.05 and g["1P+1D"].binding_slo == "transfer"  # the link's bound
    assert g["2 colocated"].binding_slo == "tpot"


def test_every_request_ends_finished_rejected_or_failed_with_a_lost_worker_and_a_small_budget():
    reqs = make_workload("chat", 80, 50.0, seed=4) + [Request(1000, 0.5, list(range(1900)), 100)]
    cfg = split(1, 2, local_prefill_tokens=300, kv_budget_bytes=2048 * 1500, max_retries=1)
    res = run(reqs, cfg, CostModelExecutor(COST), faults=KillWorker("D1", after=5))
    counts = ended(res)
    assert sum(counts.values()) == len(reqs) and counts["rejected"] >= 1  # the 2,000-token request never fits
    assert all(r.reject_reason for r in res.requests if r.state.value != "finished")
    assert any("D1 lost" in n for n in res.notes)
    lost_p = run(reqs, cfg, CostModelExecutor(COST), faults=KillWorker("P0", after=2))
    assert sum(ended(lost_p).values()) == len(reqs)
    assert ended(lost_p)["finished"] >= len(reqs) - 3  # with P0 gone, the decode workers prefill everything


def test_emulated_local_prefills_give_the_tokens_of_colocated(lm):
    reqs = make_workload("chat", 6, rate_per_s=20, model=lm, seed=2, scale=0.08)
    threshold = sorted(r.prompt_len for r in reqs)[3]
    cond = run(reqs, split(1, 1, local_prefill_tokens=threshold), model=lm)
    colo = run(reqs, ServingConfig.colocated(1), model=lm)
    assert cond.tokens() == colo.tokens()
    local = [r for r in cond.requests if r.prefill_worker == "D0"]
    assert local and all(r.prompt_len <= threshold and r.transfer_end_s is None for r in local)
    assert len(cond.transfers) == len(reqs) - len(local)


@pytest.mark.parametrize("options, message", [
    (dict(local_prefill_tokens=-1), "local_prefill_tokens must be"),
    (dict(local_prefill_tokens=2.5), "local_prefill_tokens must be"),
    (dict(local_prefill_tokens=True), "local_prefill_tokens must be"),
    (dict(local_prefill_queue=-2), "local_prefill_queue must be"),
    (dict(local_prefill_queue=math.inf), "local_prefill_queue must be"),
    (dict(layout="colocated", local_prefill_tokens=10), "need layout='disaggregated'"),
])
def test_bad_thresholds_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        ServingConfig(**{"layout": "disaggregated", **options})


def test_name_says_the_rule():
    assert split(1, 3, local_prefill_tokens=512).name == "1P+3D (local if prompt <= 512)"
    assert split(2, 2, local_prefill_queue=4).name == "2P+2D (local if queue >= 4)"
