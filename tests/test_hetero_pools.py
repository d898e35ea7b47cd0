"""Heterogeneous pools in the planner (issue 23 item 2): prices, power, rankings computed by hand, the hand-off of a
TP mismatch, clear errors, and the command line."""
import json
import math

import pytest

from splitlab.cli import main
from splitlab.costmodel import roofline_cost_model
from splitlab.planning.hetero import plan_pools
from splitlab.planning.pools import Pool, cluster_costs, handoff


def test_cost_per_million_tokens_and_tokens_per_joule_by_hand():
    c = cluster_costs([(Pool("H100"), 1), (Pool("A100-80GB", tp=2), 3)], rps=2.0, mean_output_tokens=100)
    price = 38 / 8 + 3 * 2 * 17.6 / 8          # 1 H100 + 3 workers of 2 A100s = 7 devices
    assert c["devices"] == 7 and c["price_per_hour"] == pytest.approx(price)
    assert c["cost_per_million_tokens"] == pytest.approx(price / 3600 / 200 * 1e6)
    assert c["power_w"] == 700 + 6 * 400 and c["tokens_per_joule"] == pytest.approx(200 / 3100)
    assert c["rps_per_device"] == pytest.approx(2 / 7) and c["tokens_per_s_per_kw"] == pytest.approx(200 / 3.1)
    assert math.isinf(cluster_costs([(Pool("H100"), 2)], 0.0, 100)["cost_per_million_tokens"])
    given = Pool("L4", price_per_hour=0.5, power_w=60)
    assert given.device_price_per_hour == 0.5 and given.price_source == "given" and given.device_power_w == 60


def test_pool_errors_name_the_problem():
    with pytest.raises(ValueError, match="unknown GPU 'B200'; choose one of T4, L4, A100-40GB, A100-80GB, H100, H200"):
        Pool("B200")
    with pytest.raises(ValueError, match="records no price for L4"):
        Pool("L4").device_price_per_hour
    with pytest.raises(ValueError, match="price_per_hour of a H100 device must be a number > 0"):
        Pool("H100", price_per_hour=-1)


def test_handoff_charges_the_reshard_of_a_tp_mismatch():
    cost = roofline_cost_model("Llama-3-8B", "H100")
    same, info = handoff("Llama-3-8B", cost, Pool("H100"), Pool("A100-80GB"))
    assert info["moved_share"] == 0 and same.transfer_bytes_per_s == 50e9
    mism, info = handoff("Llama-3-8B", cost, Pool("H100"), Pool("A100-80GB", tp=4))
    assert info == dict(lanes=1, moved_share=0.75, reshard_link="NVLink 3 (A100)", link="400 Gb/s network",
                        seconds_per_gb=pytest.approx(1e9 / 50e9 + 0.75 * 1e9 / 300e9))
    assert mism.transfer_s(1e9) == pytest.approx(1 / 50 + 0.75 / 300)


@pytest.fixture(scope="module")
def small_plan():
    return plan_pools("Llama-3-8B", "H100", "A100-80GB", tps=(1,), max_devices=3, ttft_slo_s=0.3,
                      tpot_slo_s=0.03, max_requests=300)


def test_plan_pools_ranks_by_cost_and_by_power_with_consistent_numbers(small_plan):
    p = small_plan
    names = {c.name for c in p.candidates}
    assert {"3 colocated (H100)", "3 colocated (A100-80GB)", "3 colocated chunked 512 (H100)",
            "3 colocated chunked 512 (A100-80GB)", "1P(H100)+1D(A100-80GB)", "1P(H100)+2D(A100-80GB)",
            "2P(H100)+1D(A100-80GB)"} == names
    by_cost = [c.costs["cost_per_million_tokens"] for c in p.ranked("cost")]
    assert by_cost == sorted(by_cost)
    by_power = [c.costs["tokens_per_joule"] for c in p.ranked("power")]
    assert by_power == sorted(by_power, reverse=True)
    for c in p.candidates:
        price = sum(pool.tp * w * pool.device_price_per_hour for _, pool, w in c.pools)
        if c.goodput_rps > 0:
            assert c.costs["cost_per_million_tokens"] == pytest.approx(
                price / 3600 / (c.goodput_rps * p.mean_output_tokens) * 1e6)
    split = next(c for c in p.candidates if c.name == "1P(H100)+2D(A100-80GB)")
    assert split.handoff["lanes"] == 1 and split.handoff["moved_share"] == 0 and split.goodput_rps > 0
    data = json.loads(json.dumps(p.to_json()))
    assert data["by_cost"][0]["name"] == p.ranked("cost")[0].name and len(data["by_power"]) == 7
    assert data["by_cost"][0]["pools"][0]["price_source"].startswith("splitlab's stated assumption")
    assert list(p.table("power").index) == data["by_power"]


def test_plan_pools_tries_chunked_prefill_colocated_under_its_own_batch_bound(small_plan):
    """The colocated contender vLLM and Sarathi-Serve run by default (chunked prefill) is ranked beside the split,
    its batch bound its own (at most chunk - 1 rows); chunk_tokens=() leaves prefill-first colocated clusters only."""
    chunked = next(c for c in small_plan.candidates if c.name == "3 colocated chunked 512 (H100)")
    assert chunked.layout == "colocated" and chunked.result is not None and chunked.handoff is None
    assert chunked.batch["batch"] <= 511 and chunked.batch["pool"] == "H100"
    assert chunked.costs["devices"] == 3
    p = plan_pools("Llama-3-8B", "H100", "H100", tps=(1,), max_devices=2, ttft_slo_s=0.3, tpot_slo_s=0.03,
                   max_requests=100, chunk_tokens=())
    assert {c.name for c in p.candidates} == {"2 colocated (H100)", "1P(H100)+1D(H100)"}
    for bad in ((1,), (512.0,), (True,)):
        with pytest.raises(ValueError, match="chunk_tokens must be integers above 1"):
            plan_pools("Llama-3-8B", "H100", "H100", max_devices=2, chunk_tokens=bad)
    with pytest.raises(ValueError, match="above max_batch \\(16\\)"):
        plan_pools("Llama-3-8B", "H100", "H100", max_devices=2, max_batch=16, chunk_tokens=(16,))


def test_plan_pools_skips_a_tp_that_cannot_hold_the_model_and_refuses_when_none_can():
    with pytest.raises(ValueError, match="no TP degree of \\[3\\] serves Llama-3-8B on H100: TP 3 does not divide"):
        plan_pools("Llama-3-8B", "H100", "A100-80GB", tps=(3,), max_devices=6)
    with pytest.raises(ValueError, match="a plan of pools searches from 2 devices .* to 16, got 1 devices"):
        plan_pools("Llama-3-8B", "H100", "A100-80GB", max_devices=1)
    with pytest.raises(ValueError, match="a split needs two workers of at least TP 4: 8 devices, more than the 6 "):
        plan_pools("Llama-3-8B", "H100", "A100-80GB", tps=(4,), max_devices=6)
    p = plan_pools("Llama-3-70B", "H100", "H100", tps=(1, 2), max_devices=4, ttft_slo_s=2.0, tpot_slo_s=0.2,
                   max_requests=200)
    assert "does not fit one H100" in p.sources["refused prefill TP1"]
    assert {c.name for c in p.candidates} == {"2 colocated (H100 TP2)", "2 colocated chunked 512 (H100 TP2)",
                                              "1P(H100 TP2)+1D(H100 TP2)"}
    split = next(c for c in p.candidates if c.layout == "disaggregated")
    assert split.costs["devices"] == 4 and split.handoff["lanes"] == 2
    kv = 80 * 8 * 128 * 2 * 2  # bytes per token of Llama-3-70B in bf16
    assert split.handoff["prefill_kv_room_requests"] == pytest.approx(
        (int(0.9 * 160e9) - int(141.2e9)) / (p.mean_prompt_tokens * kv), rel=1e-6)


def test_cli_plan_with_pools(capsys):
    rc = main(["plan", "--prefill-gpu", "H100", "--decode-gpu", "A100-80GB", "--model-config", "Llama-3-8B",
               "--max-workers", "2", "--ttft-slo", "0.3", "--tpot-slo", "0.03", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(data["by_cost"]) == 5 and data["max_devices"] == 2  # 2 GPUs x (prefill-first, chunked), 1P1D
    assert {c["name"] for c in data["by_cost"] if " chunked " in c["name"]} == {
        "2 colocated chunked 512 (H100)", "2 colocated chunked 512 (A100-80GB)"}
    assert set(data["batches"]) == {"H100", "A100-80GB"} and data["batches"]["H100"]["binds"] == "KV memory"
    split = next(c for c in data["by_cost"] if c["layout"] == "disaggregated")
    assert split["batch"] == data["batches"]["A100-80GB"] and split["batch"]["max_batch"] is None
    assert main(["plan", "--prefill-gpu", "H100", "--decode-gpu", "A100-80GB", "--model-config", "Llama-3-8B",
                 "--max-workers", "2", "--ttft-slo", "0.3", "--tpot-slo", "0.03", "--max-batch", "8"]) == 0
    text = capsys.readouterr().out
    assert "A100-80GB: decode batch: KV budget" in text and "max_batch 8 binds: at most 8 requests per worker" in text
    header = next(line for line in text.splitlines() if line.startswith("cluster"))
    assert all(k in header for k in ("cost/1M", "tok/J", "batch")) and "8 (cap)" in text
    with pytest.raises(SystemExit) as e:  # a usage error, as --gpu H9000 is
        main(["plan", "--prefill-gpu", "H9000", "--decode-gpu", "H100", "--model-config", "Llama-3-8B"])
    assert e.value.code == 2 and "--prefill-gpu: invalid choice: 'H9000' (choose from" in capsys.readouterr().err
    assert main(["plan", "--prefill-gpu", "L4", "--decode-gpu", "H100", "--model-config", "Llama-3-8B"]) == 1
    assert "records no price for L4" in capsys.readouterr().err
    assert main(["plan", "--tp", "1,2", "--model-config", "Llama-3-8B"]) == 2
    assert "a GPU for each pool" in capsys.readouterr().err
    assert main(["plan", "--gpu", "H100", "--tp", "2", "--cost", "x.json", "--model-config", "Llama-3-8B"]) == 2
    assert "not --cost" in capsys.readouterr().err


def test_cli_simulate_with_pools(capsys):
    rc = main(["simulate", "--layout", "disaggregated", "--prefill-gpu", "H100", "--decode-gpu", "A100-80GB",
               "--decode-tp", "4", "--model-config", "Llama-3-8B", "--requests", "100", "--rate", "2",
               "--ttft-slo", "0.5", "--tpot-slo", "0.05", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["disaggregated"]["completed"] == 100
    assert "A100-80GB x TP4" in data["decode_cost_source"] and "on H100," in data["cost_source"]
    assert data["handoff"]["moved_share"] == 0.75 and data["handoff"]["reshard_link"] == "NVLink 3 (A100)"
    assert main(["simulate", "--prefill-gpu", "H100", "--decode-gpu", "H100", "--model-config", "Llama-3-8B"]) == 2
    assert "use --layout disaggregated" in capsys.readouterr().err
    assert main(["simulate", "--layout", "disaggregated", "--gpu", "H100", "--decode-tp", "3",
                 "--model-config", "Llama-3-8B"]) == 2
    assert "--decode-tp 3 on H100: TP 3 does not divide" in capsys.readouterr().err


def test_cli_tp_options_refuse_empty_and_zero(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", "--tp", "", "--gpu", "H100", "--model-config", "Llama-3-8B"])
    assert e.value.code == 2 and "give at least one TP degree" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["simulate", "--decode-tp", "0", "--gpu", "H100", "--model-config", "Llama-3-8B"])
    assert e.value.code == 2 and "must be a positive integer" in capsys.readouterr().err


TINY = dict(model_type="llama", hidden_size=512, num_attention_heads=8, num_key_value_heads=8, num_hidden_layers=4,
            intermediate_size=1024, max_position_embeddings=4096, vocab_size=1000, n_params=50_000_000)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "config.json"
    path.write_text(json.dumps(TINY))
    return str(path)


def test_each_pool_bounds_its_batch_by_its_own_kv_memory(tiny_model):
    """Issue 20 item 3: no default cap; a decode GPU with half the memory (A100-40GB against A100-80GB) holds about
    half the requests, each pool's bound is stated, and a split's decode workers run with the decode pool's."""
    from splitlab.serving import Fixed, WorkloadSpec
    from splitlab.sizing import activation_bytes_per_token
    spec = WorkloadSpec("fixed", Fixed(1000), Fixed(100))
    p = plan_pools(tiny_model, "A100-80GB", "A100-40GB", max_devices=2, workload=spec, scale=1.0,
                   max_requests=100, tolerance=0.1, prefill_price=2.0, decode_price=1.0)
    big, small = p.batches["A100-80GB"], p.batches["A100-40GB"]
    kv_token = 2 * 4 * 8 * 64 * 2  # K and V x layers x KV heads x head dim x bf16 bytes
    for b, memory in ((big, 80e9), (small, 40e9)):
        budget = int(0.9 * memory - 100e6 - activation_bytes_per_token(TINY, "bf16") * 2048)
        assert b["kv_budget_bytes"] == budget and b["request_bytes"] == 1100 * kv_token
        assert b["kv_requests"] == budget // (1100 * kv_token) and b["binds"] == "KV memory"
        assert b["max_batch"] is None
    assert small["kv_requests"] / big["kv_requests"] == pytest.approx(0.5, rel=0.01)
    by_name = {c.name: c for c in p.candidates}
    assert by_name["1P(A100-80GB)+1D(A100-40GB)"].batch == small
    assert by_name["2 colocated (A100-80GB)"].batch == big and by_name["2 colocated (A100-40GB)"].batch == small
    gib = big["kv_budget_bytes"] / 2 ** 30
    assert p.batch_lines()[0].startswith(f"A100-80GB: decode batch: KV budget {gib:.3g} GiB per worker")
    assert "no cap: KV memory bounds the batch" in p.batch_lines()[1]
    assert p.table().loc["1P(A100-80GB)+1D(A100-40GB)", "batch bound"] == f"{small['kv_requests']:.0f} (KV)"
    capped = plan_pools(tiny_model, "A100-80GB", "A100-40GB", max_devices=2, workload=spec, scale=1.0,
                        max_requests=100, tolerance=0.1, max_batch=4, prefill_price=2.0, decode_price=1.0)
    assert all(c.batch["binds"] == "max_batch" and c.batch["batch"] == 4 for c in capped.candidates)
    assert "max_batch 4 binds: at most 4 requests per worker" in capped.batch_lines()[1]
    assert capped.table().iloc[0]["batch bound"] == "4 (cap)"
    assert json.loads(json.dumps(capped.to_json()))["batches"]["A100-40GB"]["batch"] == 4


def test_a_tp_worker_budget_is_its_devices_memory_less_the_whole_weights_and_the_group_activations():
    """A TP t worker holds t x 0.9 x memory - the weights (t shards of 1/t) - the activations of its devices
    (each holds the residual stream whole and 1/t of the heads and the MLP): more than t x a TP 1 worker's."""
    from splitlab.serving import CostModelExecutor
    from splitlab.sizing import activation_bytes_per_token
    # Llama-3-8B: (tp x 3 x 4096 + 32 x 128 + 2 x 8 x 128 + 3 x 14336) x 2 bytes
    assert activation_bytes_per_token("Llama-3-8B", "bf16", 8) == (8 * 3 * 4096 + 4096 + 2048 + 3 * 14336) * 2
    with pytest.raises(ValueError, match="tensor-parallel degree must be an integer >= 1, got 0"):
        activation_bytes_per_token("Llama-3-8B", "bf16", 0)
    budgets = {}
    for tp in (1, 2):
        cost = roofline_cost_model("Llama-3-8B", "A100-40GB", tp=tp)
        act = (tp * 3 * 4096 + 4096 + 2048 + 3 * 14336) * 2
        budgets[tp] = CostModelExecutor(cost).auto_kv_budget(0.9, 2048)
        assert budgets[tp] == int(tp * 0.9 * 40e9 - cost.weight_bytes - act * 2048)
    assert budgets[2] > 2 * budgets[1] + 15e9  # the weights are held once, not twice
