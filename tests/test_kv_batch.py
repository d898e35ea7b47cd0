"""Issue 20 item 3: the decode batch is bounded by KV memory (a share of the device's memory less weights and
activations, as vLLM sizes its cache), not by a constant; ``max_batch`` stays a cap, and one that binds is said."""
from __future__ import annotations

import math

import numpy as np
import pytest

import splitlab as sl
from splitlab import serving
from splitlab.planning.batch import batch_bound
from splitlab.serving import CostModelExecutor, Fixed, ServingConfig, WorkloadSpec, make_workload, run
from splitlab.sizing import CPU_MEMORY_BYTES, activation_bytes_per_token, kv_budget_bytes

H100_LLAMA = sl.costmodel.roofline_cost_model("Llama-3-8B", "H100", "bf16")


def test_the_default_batch_of_an_h100_llama_3_8b_worker_is_the_hand_computation():
    # by hand: 0.9 x 80e9 bytes - 8.03e9 params x 2 bytes - activations of a 2,048-token forward, each token
    # (3 x 4096 + 32 x 128 + 2 x 8 x 128 + 3 x 14336) x 2 bytes = 122,880 bytes; a request of 4,000 + 96 tokens
    # reserves 4,096 x 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 536,870,912 bytes
    budget = int(0.9 * 80e9 - 8.03e9 * 2 - 2048 * 122_880)
    assert activation_bytes_per_token("Llama-3-8B", "bf16") == 122_880
    assert budget == 55_688_341_760
    bound = batch_bound(CostModelExecutor(H100_LLAMA), ServingConfig.disaggregated(1, 1), [4000], [96])
    assert bound.kv_budget_bytes == budget and bound.request_bytes == 536_870_912
    assert bound.kv_requests == budget // 536_870_912 == 103
    assert bound.batch == 103 and bound.binds == "KV memory" and bound.max_batch is None
    assert "103 requests" in bound.line() and "no cap" in bound.line()
    assert "GiB per worker (0.9 of its memory" in bound.line() and bound.tp == 1


def test_a_tp_groups_batch_is_stated_per_tp_group_not_per_worker():
    """Audit (issue 22): BatchBound.line() said "per worker" of a TP2 group's budget (its two devices' memory)."""
    tp2 = sl.costmodel.roofline_cost_model("Llama-3-8B", "H100", "bf16", tp=2)
    bound = batch_bound(CostModelExecutor(tp2), ServingConfig.disaggregated(1, 1, max_batch=8), [4000], [96])
    line = bound.line()
    assert bound.tp == 2 and bound.to_json()["tp"] == 2 and "per worker" not in line
    assert "GiB per TP2 group (0.9 of its 2 devices' memory" in line
    assert line.endswith("max_batch 8 binds: at most 8 requests per TP group")


def test_a_decode_workers_batch_never_exceeds_its_kv_budget():
    """Overloaded 1P+1D of the H100 model: the decode batch grows to what the budget holds (103 requests of 1,000 +
    3,096 tokens: the hand computation's 4,096), never past it, with no cap given."""
    ex = CostModelExecutor(H100_LLAMA)
    reqs = serving.workload_requests(WorkloadSpec("long", Fixed(1000), Fixed(3096)), 300, 100.0, ex, 0, 1.0)
    assert (reqs[0].prompt_len, reqs[0].max_new_tokens) == (1000, 3096)
    res = run(reqs, ServingConfig.disaggregated(1, 1), ex)
    assert res.metrics()["completed"] == 300 and res.batch_capped == {}
    decode = res.timeline.query("worker == 'D0' and kind == 'decode'")
    assert decode.batch.max() == 103                                # memory, not a constant, bounds the batch
    d0 = res.kv_usage.query("worker == 'D0'")
    assert d0.reserved_bytes.max() <= res.kv_budget_bytes and d0.used_bytes.max() <= res.kv_budget_bytes
    assert (d0.budget_bytes == res.kv_budget_bytes).all()


@pytest.mark.parametrize("cfg", [ServingConfig.colocated(1), ServingConfig.disaggregated(1, 1),
                                 ServingConfig.colocated(1, policy="chunked", chunk_tokens=64)], ids=str)
def test_a_small_budget_bounds_every_batch_and_memory_alone_binds(cfg):
    reqs = make_workload(WorkloadSpec("w", Fixed(100), Fixed(20)), 60, 1000.0, seed=1)
    budget = 5 * 120 * 2048                                         # five requests of 120 tokens, built-in model
    res = run(reqs, cfg.with_(kv_budget_bytes=budget), CostModelExecutor())
    steps = res.timeline.query("kind in ('decode', 'prefill')")
    assert steps.batch.max() <= 5 and res.kv_usage.reserved_bytes.max() <= budget
    assert res.batch_capped == {} and res.metrics()["completed"] == 60


def test_a_cap_that_binds_is_reported_in_the_run_and_the_plan():
    reqs = make_workload(WorkloadSpec("w", Fixed(100), Fixed(20)), 40, 1000.0, seed=1)
    res = run(reqs, ServingConfig.disaggregated(1, 1, max_batch=4), CostModelExecutor())
    assert res.timeline.query("worker == 'D0'").batch.max() == 4
    assert res.batch_capped.get("D0", 0) > 0 and res.metrics()["batch_capped"] == res.batch_capped
    assert any("batch cap of 4" in n and "D0" in n for n in res.notes)
    assert res.metrics()["max_batch"] == 4 and res.metrics()["kv_budget_bytes"] == res.kv_budget_bytes

    spec = WorkloadSpec("toy", Fixed(512), Fixed(64))
    kw = dict(ttft_slo_s=0.4, tpot_slo_s=0.04, max_workers=2, chunk_tokens=(), scale=1.0, max_requests=200,
              progress=False)
    capped = sl.planner.plan(H100_LLAMA, spec, max_batch=16, **kw)
    assert capped.batch["binds"] == "max_batch" and "max_batch 16 binds" in capped.batch_line
    assert capped.to_json()["batch"]["max_batch"] == 16 and capped.best.to_json()["batch_cap"] == 16
    free = sl.planner.plan(H100_LLAMA, spec, **kw)
    assert free.batch["binds"] == "KV memory" and free.batch["max_batch"] is None
    assert free.batch["kv_requests"] == free.batch["batch"] > 16 and free.best.batch_cap is None
    assert "batch cap" in free.table().columns


def test_budget_arithmetic_and_its_errors():
    assert kv_budget_bytes(1000, 100, 50, 0.5) == 350
    with pytest.raises(ValueError, match="no room for a KV cache.*weights.*activations"):
        kv_budget_bytes(1000, 900, 50, 0.9)
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        kv_budget_bytes(1000, 0, 0, 1.5)
    # a cost model without a memory size: the stated 16 GiB
    assert CostModelExecutor().auto_kv_budget() == int(0.9 * CPU_MEMORY_BYTES)
    with pytest.raises(ValueError, match="memory_utilization"):
        ServingConfig(memory_utilization=0)
    assert ServingConfig().batch_cap == math.inf and ServingConfig(max_batch=8).batch_cap == 8
    assert ServingConfig(policy="chunked", chunk_tokens=64).batch_cap == 63
    half = run(make_workload("chat", 4, 1.0, seed=0), ServingConfig(memory_utilization=0.5), CostModelExecutor())
    assert half.kv_budget_bytes == int(0.5 * CPU_MEMORY_BYTES)
    assert serving.ServingConfig(max_batch=None, policy="chunked", chunk_tokens=2).batch_cap == 1


def test_the_plan_and_the_map_state_the_chunked_cap_too():
    """Under chunked with no max_batch a worker holds at most chunk_tokens - 1 requests (ServingConfig.batch_cap):
    the plan's batch line and the map's batch words say so beside the KV budget."""
    from splitlab.planning.batch import chunked_cap_words
    from splitlab.planning.map_result import SplitMap
    p = sl.planner.plan(None, "chat", 0.3, 0.03, max_workers=2, chunk_tokens=(256, 64), progress=False)
    assert "no cap: KV memory bounds the batch" in p.batch_line
    assert "chunked layouts at most chunk_tokens - 1 requests per worker (63 with 64-token chunks, 255 with " \
        "256-token chunks)" in p.batch_line
    capped = sl.planner.plan(None, "chat", 0.3, 0.03, max_workers=2, chunk_tokens=(256,), max_batch=32,
                             progress=False)
    assert "chunk_tokens - 1" not in capped.batch_line
    assert chunked_cap_words((), None) == "" and chunked_cap_words((128,), 16) == ""
    words = SplitMap.__new__(SplitMap)
    words.max_batch, words.chunk_tokens = None, [256]
    assert words.batch_words == ("no cap, each worker's KV budget bounds it; but chunked layouts at most "
                                 "chunk_tokens - 1 requests per worker (255 with 256-token chunks)")


def test_a_chunk_size_given_twice_is_searched_and_stated_once():
    """A breaker's case: chunk_tokens=(64, 64) searched the 64-token chunked layout twice and stated its cap twice
    ("63 with 64-token chunks, 63 with 64-token chunks"); a bad max_batch is refused naming it."""
    from splitlab.planning.batch import chunked_cap_words
    from splitlab.planning.options import chunk_sizes
    assert chunk_sizes([64, 256, 64, np.int64(256)], None) == (64, 256)
    assert chunked_cap_words([64, 64, 2], None).endswith("(1 with 2-token chunks, 63 with 64-token chunks)")
    p = sl.planner.plan(None, "chat", 0.3, 0.03, max_workers=2, chunk_tokens=(64, 64), progress=False)
    assert p.batch_line.count("63 with 64-token chunks") == 1
    assert sum(c.chunk_tokens == 64 for c in p.candidates) == 1
    for bad in (0, -1):
        with pytest.raises(ValueError, match=f"max_batch must be an integer >= 1 or None .*got {bad}"):
            sl.planner.plan(None, "chat", 0.3, 0.03, max_workers=2, max_batch=bad, progress=False)


def test_a_chunked_layouts_own_cap_is_named_as_such_not_as_max_batch():
    """validate_simulator printed 'max_batch None, requests a worker holds: research 255 (max_batch)' for chunked
    (a fresh reader, 2026-12-05): the cap of 255 is the layout's own, chunk_tokens - 1."""
    from splitlab.serving import CostModelExecutor, ServingConfig
    ex = CostModelExecutor()
    own = batch_bound(ex, ServingConfig.colocated(2, policy="chunked", chunk_tokens=256), [100] * 5, [50] * 5)
    assert own.binds == "chunk_tokens - 1" and own.batch == 255
    assert "no cap, but a chunked layout's own (chunk_tokens - 1) binds: at most 255 requests per worker" in own.line()
    capped = batch_bound(ex, ServingConfig.colocated(2, policy="chunked", chunk_tokens=256, max_batch=16), [100] * 5,
                         [50] * 5)
    assert capped.binds == "max_batch" and "max_batch 16 binds" in capped.line()
