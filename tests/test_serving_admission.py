"""KV memory budget: requests that do not fit wait, requests that never fit are rejected with a reason, and
every submitted request ends completed or rejected (cost-model executor, 2048 bytes per token)."""
from __future__ import annotations

import itertools

import pytest

from splitlab.serving import (CostModelExecutor, KVMemory, Request, ServingConfig, State, derive_kv_budget,
                              make_workload, run)

BPT = 2048  # the default cost model's KV bytes per token


def serve(reqs, **kw):
    return run(reqs, ServingConfig(**kw), CostModelExecutor())


def test_a_request_that_does_not_fit_now_waits_for_memory():
    reqs = [Request(0, 0.0, [1] * 100, 20), Request(1, 0.0, [1] * 50, 20)]
    res = serve(reqs, kv_budget_bytes=150 * BPT)              # 120 + 70 tokens do not fit together
    a, b = res.requests
    assert a.state == b.state == State.FINISHED
    assert b.prefill_start_s >= a.finish_s
    usage = res.kv_usage
    assert usage.reserved_bytes.max() <= 150 * BPT and usage.used_bytes.max() <= 150 * BPT
    assert usage.reserved_bytes.max() == 120 * BPT
    unlimited = serve([r.fresh() for r in reqs])
    assert unlimited.requests[1].prefill_start_s < a.finish_s


def test_requests_that_can_never_fit_are_rejected_with_their_reason():
    reqs = [Request(0, 0.0, [1] * 200, 20), Request(1, 0.1, [1] * 2040, 20), Request(2, 0.2, [1] * 10, 5)]
    res = serve(reqs, kv_budget_bytes=150 * BPT)
    big, long_, ok = res.requests
    assert big.state == State.REJECTED and "KV budget" in big.reject_reason and "220 tokens" in big.reject_reason
    assert long_.state == State.REJECTED and "context of 2048" in long_.reject_reason
    assert ok.state == State.FINISHED and ok.reject_reason is None
    m = res.metrics()
    assert (m["submitted"], m["completed"], m["rejected"]) == (3, 1, 2)
    assert big.finish_s == 0.0 and long_.finish_s == 0.1


def test_disaggregated_checks_prefill_and_decode_budgets():
    # the prompt fits a prefill worker, but prompt + output can never fit a decode worker
    res = serve([Request(0, 0.0, [1] * 140, 20)], layout="disaggregated", kv_budget_bytes=150 * BPT)
    assert res.requests[0].state == State.REJECTED and "KV budget" in res.requests[0].reject_reason


@pytest.mark.parametrize("layout", ["colocated", "disaggregated"])
def test_a_request_filling_the_budget_exactly_is_served_and_one_token_more_is_rejected(layout):
    # an arrival asks the budgets only past KVMemory.sure_tokens: the boundary must stay where never_fits puts it
    assert KVMemory(150 * BPT, BPT).sure_tokens() == 150 and KVMemory(None, BPT).sure_tokens() == float("inf")
    assert KVMemory(150 * BPT, BPT, kv_bytes=lambda n: n * BPT).sure_tokens() == 0  # not linear: always asked
    reqs = [Request(0, 0.0, [1] * 130, 20), Request(1, 0.0, [1] * 131, 20)]
    exact, over = serve(reqs, layout=layout, kv_budget_bytes=150 * BPT).requests
    assert exact.state == State.FINISHED and exact.reject_reason is None
    assert over.state == State.REJECTED and "151 tokens" in over.reject_reason and "KV budget" in over.reject_reason


def test_a_full_decode_pool_holds_prefilled_requests_on_the_prefill_worker():
    reqs = [Request(0, 0.0, [1] * 100, 30), Request(1, 0.0, [1] * 100, 30)]
    res = serve(reqs, layout="disaggregated", kv_budget_bytes=200 * BPT)  # one 130-token request at a time
    a, b = res.requests
    assert b.prefill_end_s < a.finish_s <= b.transfer_start_s             # waited, prefilled, for room
    p0 = res.kv_usage.query("worker == 'P0'")
    assert p0.used_bytes.max() == 200 * BPT                                # both prompts held on P0
    assert res.kv_usage.query("worker == 'D0'").reserved_bytes.max() <= 200 * BPT


LAYOUTS = [dict(layout="colocated", workers=2, policy=p) for p in ("prefill-first", "decode-first", "chunked")] + [
    dict(layout="disaggregated", prefill_workers=1, decode_workers=2),
    dict(layout="disaggregated", prefill_workers=2, decode_workers=1, first_token_on="decode")]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda d: "-".join(str(v) for v in d.values()))
def test_accounting_completed_plus_rejected_equals_submitted(layout):
    for name, budget, seed in itertools.product(("chat", "summarize", "code"), (None, 400_000, 2_500_000), (0, 1)):
        reqs = make_workload(name, 25, rate_per_s=20.0, seed=seed)
        res = serve(reqs, kv_budget_bytes=budget, max_batch=8, **layout)
        m = res.metrics()
        assert m["completed"] + m["rejected"] == m["submitted"] == 25
        for r in res.requests:
            assert r.done and (r.state == State.REJECTED) == (r.reject_reason is not None)
            assert "bug" not in (r.reject_reason or "")
            if r.state == State.FINISHED:
                assert len(r.output) == len(r.token_times_s) == r.max_new_tokens
                assert r.token_times_s == sorted(r.token_times_s) and r.token_times_s[0] >= r.arrival_s
        if budget is not None:
            assert res.kv_usage.reserved_bytes.max() <= budget and res.kv_usage.used_bytes.max() <= budget
        else:
            assert m["rejected"] == 0


def test_kv_memory_and_derived_budget():
    mem = KVMemory(10 * BPT, BPT)
    assert mem.can_reserve(10) and not mem.can_reserve(11)
    mem.reserve(1, 6)
    assert not mem.can_reserve(5) and mem.never_fits(11) and mem.never_fits(10) is None
    with pytest.raises(MemoryError):
        mem.reserve(2, 5)
    mem.release(1)
    assert mem.reserved_bytes == 0
    with pytest.raises(ValueError):
        KVMemory(0, BPT)
    assert derive_kv_budget(None, fraction=0.5, memory_bytes=1000) == 500
    with pytest.raises(ValueError):
        derive_kv_budget(None, fraction=1.5, memory_bytes=1000)
