"""Serving on the real tiny model: every layout and policy gives every request exactly the tokens it gets when
it runs alone (greedy, and seeded sampling), chunked prefill builds the same cache as a whole prefill, and
the continuous batch really changes from step to step."""
from __future__ import annotations

import pytest
import torch

import splitlab as sl
from splitlab.serving import (ModelExecutor, ServingConfig, Slot, Uniform, WorkloadSpec, compare, contenders,
                              make_workload, reference_tokens, run)
from splitlab.serving.executor import DecodeBatch
from splitlab.serving.request import Request

SPEC = WorkloadSpec("test", Uniform(12, 60), Uniform(3, 8))
LAYOUTS = {
    "colocated-prefill-first": dict(layout="colocated", workers=2),
    "colocated-decode-first": dict(layout="colocated", workers=1, policy="decode-first"),
    "colocated-chunked": dict(layout="colocated", workers=1, policy="chunked", chunk_tokens=24, max_batch=4),
    "disaggregated": dict(layout="disaggregated", prefill_workers=1, decode_workers=2, max_prefill_tokens=80),
    "disaggregated-decode-emits": dict(layout="disaggregated", first_token_on="decode", transfer_mode="layerwise"),
}


@pytest.fixture(scope="module")
def executor(lm):
    return ModelExecutor(lm)


@pytest.fixture(scope="module")
def workload(lm):
    reqs = make_workload(SPEC, 6, rate_per_s=40.0, seed=5, model=lm)
    sampled = make_workload(SPEC, 2, rate_per_s=40.0, seed=6, model=lm,
                            sampling=sl.SamplingParams(temperature=0.8, top_k=50, seed=100))
    for i, r in enumerate(sampled):
        r.id, r.arrival_s = 100 + i, reqs[i].arrival_s + 0.001
    return reqs + sampled


@pytest.fixture(scope="module")
def alone(lm, workload):
    return reference_tokens(lm, workload)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_request_gets_its_solo_tokens(executor, workload, alone, name):
    res = run(workload, ServingConfig(kv_budget_bytes=None, **LAYOUTS[name]), executor)
    assert [r.state.value for r in res.requests] == ["finished"] * len(workload)
    assert res.tokens() == alone
    assert res.measured_s > 0 and res.wall_s > 0


def test_compare_reports_identical_tokens_and_both_layouts(executor, workload):
    cmp = compare(workload, contenders(kv_budget_bytes=None), executor)
    assert cmp.tokens_identical
    assert cmp.colocated.workers == ["W0", "W1"] and cmp.disaggregated.workers == ["P0", "D0"]
    m = cmp.metrics(ttft_slo_s=10, tpot_slo_s=10)
    assert m["colocated"]["slo_attainment"] == m["disaggregated"]["slo_attainment"] == 1.0
    table = cmp.table()
    assert list(table.columns) == ["colocated", "disaggregated"] and table.loc["completed"].tolist() == [8, 8]
    assert (cmp.disaggregated.transfers.method == "clone").all()
    assert (cmp.disaggregated.transfers.nbytes > 0).all()


def test_chunked_prefill_builds_the_cache_of_a_whole_prefill(lm, executor):
    prompt = list(range(3, 103))
    whole, chunked = Slot(Request(0, 0.0, prompt, 2)), Slot(Request(1, 0.0, prompt, 2))
    first = executor.prefill([whole], [100]).first_tokens[0]
    outs = [executor.prefill([chunked], [n]).first_tokens[0] for n in (30, 30, 40)]
    assert outs[:2] == [None, None] and outs[2] == first
    assert chunked.cache.seq_len == whole.cache.seq_len == 100
    for a, b in zip(whole.cache.keys + whole.cache.values, chunked.cache.keys + chunked.cache.values):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_the_decode_batch_changes_as_requests_join_and_leave(lm, executor):
    slots = [Slot(Request(i, 0.0, list(range(5, 5 + n)), 4)) for i, n in enumerate((10, 25, 17))]
    batch = DecodeBatch()
    for s, n in zip(slots, (10, 25, 17)):
        s.last_token = executor.prefill([s], [n]).first_tokens[0]
    batch.slots = slots[:2]
    assert len(executor.decode(batch).tokens) == 2
    batch.slots = [slots[1], slots[2]]                  # slot 0 left, slot 2 joined: rows 25 and 17 long
    executor.decode(batch)
    state_slots, cache = batch.state
    assert [s.request.id for s in state_slots] == [1, 2] and cache.batch_size == 2
    assert cache.lengths.tolist() == [26 + 1, 17 + 1]


def test_serving_needs_prompts_the_model_accepts(lm, executor):
    reqs = [Request(0, 0.0, [1] * 2000, 100)]
    res = run(reqs, ServingConfig(kv_budget_bytes="auto"), executor)
    assert res.requests[0].state.value == "rejected" and "context" in res.requests[0].reject_reason
    assert res.metrics()["completed"] == 0
