"""The distributed back end: real worker processes run the very scheduler of the emulated back end. Every
request gets the tokens it gets alone (greedy and sampled), admission happens in the same order as emulated,
a small decode budget serves requests one after the other in both, and client-side wall-clock metrics come back
as the same ServingResult."""
from __future__ import annotations

import math

import pytest

import splitlab as sl
from splitlab import serving
from splitlab.serving import ServingConfig


@pytest.fixture(scope="module")
def workload(lm):
    reqs = serving.make_workload("chat", 5, rate_per_s=10, model=lm, seed=2, scale=0.08)
    sampled = serving.make_workload("chat", 2, rate_per_s=10, model=lm, seed=3, scale=0.08,
                                    sampling=sl.SamplingParams(temperature=0.8, top_k=50, seed=7))
    for i, r in enumerate(sampled):
        r.id = 100 + i
    reqs += sampled
    return reqs, serving.reference_tokens(lm, reqs)


@pytest.fixture(scope="module")
def backend():
    with serving.DistributedBackend("tiny", timeout_s=30) as b:
        yield b


@pytest.mark.parametrize("mode, first_token_on", [("whole", "prefill"), ("layerwise", "decode")])
def test_split_tokens_equal_local_tokens_with_wall_clock_metrics(backend, workload, lm, mode, first_token_on):
    reqs, reference = workload
    res = serving.run(reqs, ServingConfig.disaggregated(1, 1, transfer_mode=mode, first_token_on=first_token_on),
                      backend)
    assert res.backend == "distributed" and res.notes == [] and res.tokens() == reference
    m = res.metrics(ttft_slo_s=None, tpot_slo_s=None)
    assert m["completed"] == len(reqs) and m["failed"] == 0 and m["slo_attainment"] == 1.0
    assert m["ttft_s"]["p50"] > 0 and m["tpot_s"]["p50"] > 0 and math.isfinite(m["itl_s"]["p90"])
    per_token = sl.sizing.kv_bytes_per_token(lm.geometry, lm.dtype)
    t = res.transfers
    assert sorted(t.request_id) == sorted(r.id for r in reqs)
    assert all(t.nbytes == [per_token * next(r.prompt_len for r in reqs if r.id == i) for i in t.request_id])
    assert set(t.method) == {f"gloo-{mode}"} and (t.end_s >= t.start_s).all()
    for r in res.requests:
        assert r.prefill_worker == "P0" and r.decode_worker == "D0"
        assert r.prefill_start_s <= r.prefill_end_s <= r.transfer_end_s
        if first_token_on == "decode":
            assert r.token_times_s[0] >= r.transfer_end_s  # TTFT includes the hand-off
    kinds = set(zip(res.timeline.worker, res.timeline.kind))
    assert {("P0", "prefill"), ("D0", "decode"), ("P0->D0", "transfer")} <= kinds


def test_same_tokens_and_admission_order_as_emulated(backend, lm):
    """A deterministic workload (all at once, a batch limit that queues them): the same decisions. (Across two
    workers, which one frees a place first depends on timing; each worker's own order does not.)"""
    reqs = [serving.Request(i, 0.0, sl.profiling.random_prompt(lm, 20 + 7 * i, seed=i), 6) for i in range(6)]
    reference = serving.reference_tokens(lm, reqs)
    for cfg in (ServingConfig.colocated(2, max_batch=2), ServingConfig.disaggregated(1, 1, max_batch=2),
                ServingConfig.colocated(1, policy="chunked", chunk_tokens=24, max_batch=3)):
        emulated = serving.run(reqs, cfg, model=lm)
        distributed = serving.run(reqs, cfg, backend)
        assert distributed.tokens() == emulated.tokens() == reference
        where = {r.id: r.prefill_worker for r in emulated.requests}
        assert where == {r.id: r.prefill_worker for r in distributed.requests}
        for w in set(where.values()):
            order = [[i for i in res.admissions if where[i] == w] for res in (emulated, distributed)]
            assert order[0] == order[1] == sorted(order[0])  # first come, first served


def test_a_small_decode_budget_serves_one_request_after_the_other(backend, lm):
    per_token = backend.kv_bytes_per_token
    reqs = [serving.Request(i, 0.0, [1 + i] * 30, 8) for i in range(2)]
    cfg = ServingConfig.disaggregated(1, 1, kv_budget_bytes=int(1.5 * 38 * per_token))  # room for one at a time
    for res in (serving.run(reqs, cfg, model=lm), serving.run(reqs, cfg, backend)):
        a, b = sorted(res.requests, key=lambda r: r.transfer_start_s)
        assert a.state == b.state == serving.State.FINISHED
        assert b.transfer_start_s >= a.finish_s - 1e-9  # back-pressure: its cache waits for room
        assert b.token_times_s[1] >= a.finish_s


def test_a_reused_backend_serves_the_same_request_ids_again(backend, lm):
    """Request 0 of the next run must not decode on the cache of the last run's request 0."""
    reqs = [serving.Request(0, 0.0, [1, 2, 3], 4)]
    reference = serving.reference_tokens(lm, reqs)
    for _ in range(2):
        assert serving.run(reqs, ServingConfig.disaggregated(1, 1), backend).tokens() == reference


def test_prompts_outside_the_vocabulary_are_rejected_at_arrival(backend):
    reqs = [serving.Request(0, 0.0, [1, 2, 3], 3), serving.Request(1, 0.0, [4, 999], 3)]
    res = serving.run(reqs, ServingConfig.disaggregated(1, 1), backend)
    assert [r.state.value for r in res.requests] == ["finished", "rejected"]
    assert res.requests[1].reject_reason == "prompt token id 999 is outside the model's vocabulary 0..258"


def test_one_group_per_process(backend):
    from splitlab.transfer.group import DistributedError
    backend.prepare(2)
    from splitlab.transfer.peer import Peer
    with pytest.raises(DistributedError, match="close that one first"):
        Peer().start()
