"""Tensor parallelism in the analytic cost model (issue 23 item 3): known answers computed by hand, and clear
errors for impossible combinations."""
import pytest

from splitlab.costmodel import RooflineCostModel, TensorParallel, reshard, roofline_cost_model
from splitlab.costmodel.parallel import check_tp
from splitlab.serving import CostModelExecutor, PoolCostExecutor, ServingConfig, run
from splitlab.serving.request import Request
from splitlab.sizing import GPUS, LINKS


def test_tp2_prefill_halves_the_compute_and_adds_the_all_reduce():
    one = roofline_cost_model("Llama-3-8B", "H100")
    two = roofline_cost_model("Llama-3-8B", "H100", tp=TensorParallel(2, latency_s=0.0))
    n = 2048  # compute-bound on both
    flops = 2 * 8.03e9 * n + 2 * 32 * 32 * 128 * n * n
    assert one.prefill_s(n) == pytest.approx(flops / (989e12 * 0.6))
    # 2 all-reduces per layer x 32 layers x 2(tp-1)/tp = 1 x tokens x hidden 4096 x 2 bytes over NVLink 4 at 0.7
    comm = 2 * 32 * 1.0 * n * 4096 * 2 / (450e9 * 0.7)
    assert two.prefill_s(n) == pytest.approx(one.prefill_s(n) / 2 + comm)
    assert two.tp == 2 and "TP2" in two.source and "NVLink 4" in two.source


def test_tp_latency_counts_once_per_all_reduce_and_decode_reads_half_the_weights_per_device():
    one = roofline_cost_model("Llama-3-8B", "H100")
    four = roofline_cost_model("Llama-3-8B", "H100", tp=TensorParallel(4, latency_s=1e-5))
    comm = 2 * 32 * (1e-5 + 1.5 * 1 * 4096 * 2 / (450e9 * 0.7))  # one decode token, 64 all-reduces
    assert four.decode_s(1, 1000) == pytest.approx(one.decode_s(1, 1000) / 4 + comm)
    assert four.memory_bytes == 4 * 80e9 and four.transfer_bytes_per_s == 4 * 50e9  # one NIC per device
    assert four.decode_run_s(1, 1000, 3)[0] == pytest.approx(four.decode_s(1, 1000))


def test_a_decode_pool_with_twice_the_bandwidth_halves_decode_and_leaves_prefill():
    slow = RooflineCostModel(flops_per_token=1e9, attn_flops_per_square=0.0, peak_flops_per_s=1e14,
                             bandwidth_bytes_per_s=1e12, weight_bytes=1e10, kv_bytes_per_token=1000,
                             memory_bytes=None, transfer_bytes_per_s=1e10)
    fast = slow.with_(bandwidth_bytes_per_s=2e12)
    ex = PoolCostExecutor(slow, fast)
    assert ex.decode_seconds(1, 0) == pytest.approx(0.005) == CostModelExecutor(slow).decode_seconds(1, 0) / 2
    assert ex.decode_run_seconds(2, 10, 3) == CostModelExecutor(fast).decode_run_seconds(2, 10, 3)
    reqs = [Request(id=0, prompt=[1] * 100, max_new_tokens=5, arrival_s=0.0)]
    res = run(reqs, ServingConfig.disaggregated(1, 1), ex)
    r = res.requests[0]
    prefill = max(1e9 * 100 / 1e14, (1e10 + 1000 * 100) / 1e12)  # 0.01 s: memory-bound at 100 tokens
    # TTFT: prefill (slow pool) + hand-off (transfer_base_s 1e-4 + 100 x 1000 B at 1e10 B/s) + first token on
    # arrival (vLLM's proxy)
    assert r.first_token_s == pytest.approx(prefill + 1e-4 + 1e-5, rel=1e-6)
    step = (1e10 + 1000 * 100) / 2e12  # the first decode step on the fast pool
    assert r.token_times_s[1] - r.token_times_s[0] == pytest.approx(step, rel=1e-6)


def test_pool_executor_budget_is_the_decode_pools():
    two = roofline_cost_model("Llama-3-70B", "H100", tp=2)
    four = roofline_cost_model("Llama-3-70B", "A100-80GB", tp=4)
    assert PoolCostExecutor(two, four).auto_kv_budget() == int(0.9 * 320e9) - int(141.2e9)


def test_pool_executor_refuses_two_models_and_hybrid_steps():
    a = roofline_cost_model("Llama-3-8B", "H100")
    with pytest.raises(ValueError, match="one model"):
        PoolCostExecutor(a, roofline_cost_model("Mistral-7B", "H100", dtype="fp32"))
    with pytest.raises(ValueError, match="colocated"):
        PoolCostExecutor(a, a).hybrid_outcome([], [], 1, 10)


def test_reshard_moves_the_heads_that_land_on_the_wrong_device():
    assert reshard(800, 8, 1, 4) == dict(lanes=1, moved_share=0.75, moved_bytes=600.0)
    assert reshard(800, 8, 2, 4)["moved_share"] == 0.5
    assert reshard(800, 8, 4, 1) == dict(lanes=1, moved_share=0.0, moved_bytes=0.0)
    assert reshard(800, 8, 4, 4) == dict(lanes=4, moved_share=0.0, moved_bytes=0.0)


def test_impossible_tp_degrees_say_which_divide():
    with pytest.raises(ValueError, match="TP 3 does not divide .*32 attention heads and 8 KV heads.*1, 2, 4, 8"):
        roofline_cost_model("Llama-3-8B", "H100", tp=3)
    with pytest.raises(ValueError, match="TP 16 does not divide"):
        roofline_cost_model("Llama-3-8B", "H100", tp=16)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="integer >= 1"):
            check_tp(bad, 32, 8)


def test_a_shard_that_does_not_fit_names_the_tp_that_would():
    with pytest.raises(ValueError, match=r"does not fit one H100 .*141\.2 GB of weights.*TP 2 would fit"):
        roofline_cost_model("Llama-3-70B", "H100")
    two = roofline_cost_model("Llama-3-70B", "H100", tp=2)
    assert two.weight_bytes == 70.6e9 * 2 and two.memory_bytes == 160e9
    with pytest.raises(ValueError, match="unknown GPU 'B300'; choose one of T4, L4, A100-40GB"):
        roofline_cost_model("Llama-3-8B", "B300")


def test_tp_on_a_gpu_without_a_gpu_link_asks_for_one():
    with pytest.raises(ValueError, match="T4 has no GPU-to-GPU link"):
        roofline_cost_model("Llama-2-7B", "T4", dtype="int8", tp=2)
    pcie = roofline_cost_model("Llama-2-7B", "T4", dtype="int8", tp=TensorParallel(2, link="PCIe 4.0 x16"))
    assert "PCIe 4.0 x16" in pcie.source
    with pytest.raises(ValueError, match="efficiency must be in"):
        roofline_cost_model("Llama-3-8B", "H100", tp=TensorParallel(2, efficiency=0))


def test_gpu_table_cites_power_and_price():
    for name, g in GPUS.items():
        assert g["tdp_w"] > 0 and "datasheet" in g["tdp_source"], name
        assert g["price_per_hour"] is None or g["price_per_hour"] > 0
        assert "assumption" in g["price_source"] or "none recorded" in g["price_source"]
        assert g["tp_link"] is None or g["tp_link"] in LINKS
    assert GPUS["H100"]["price_per_hour"] == 38 / 8 and GPUS["A100-80GB"]["price_per_hour"] == 17.6 / 8
