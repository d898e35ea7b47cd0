"""Issue 23's options broken on purpose (QA of 2026-12-03): pools, TP, --memory-utilization, conditional
thresholds, system prompts and prefix-aware routing given bad values or odd combinations. Each case failed before
its fix (a traceback-free but wrong exit status, a flag the caller lacks, a value dropped without a word, or a
plan that stopped where it should have skipped a TP)."""
from __future__ import annotations

import json

import pytest

from conftest import cli
from splitlab.planning.hetero import NoPool, plan_pools

POOLS = ("--model-config", "Llama-3-8B", "--prefill-gpu", "H100", "--decode-gpu", "A100-80GB",
         "--ttft-slo", "1", "--tpot-slo", "0.1")
SPLIT = ("simulate", "--layout", "disaggregated", "--model-config", "Llama-3-8B", "--requests", "8", "--rate", "2",
         "--ttft-slo", "1", "--tpot-slo", "0.1")
SIM = ("simulate", "--requests", "8", "--rate", "2", "--ttft-slo", "1", "--tpot-slo", "0.1")


def test_plan_pools_skips_a_tp_whose_devices_leave_no_kv_room():
    # was: ValueError "no room for a KV cache" out of the whole plan at TP 1, though TP 2 has room
    p = plan_pools("Llama-3-8B", "H100", "A100-80GB", tps=(1, 2), max_devices=4, ttft_slo_s=1.0, tpot_slo_s=0.1,
                   memory_utilization=0.2, max_requests=200, chunk_tokens=())
    assert p.sources["refused prefill TP1"].startswith("no room for a KV cache: 0.2 x 80,000,000,000 bytes")
    assert {c.name for c in p.candidates} == {"2 colocated (H100 TP2)", "2 colocated (A100-80GB TP2)",
                                              "1P(H100 TP2)+1D(A100-80GB TP2)"}
    with pytest.raises(NoPool, match=r"no TP degree of \[1, 2\] serves Llama-3-8B on H100: TP 1: no room for a KV "
                                     r"cache.*; TP 2: no room for a KV cache"):
        plan_pools("Llama-3-8B", "H100", "A100-80GB", tps=(1, 2), max_devices=4, memory_utilization=0.1)


@pytest.mark.parametrize("argv, message", [
    (("--tp", "1,,2"), "argument --tp: '1,,2' has an empty item"),  # was: planned TP 1,2 without a word
    (("--tp", "2,"), "argument --tp: '2,' has an empty item"),
    (("--prefill-gpu", "B200"), "argument --prefill-gpu: invalid choice: 'B200'"),  # was: exit status 1
    (("--tp", "4", "--max-workers", "6"),  # was: exit 1, "more than the 6 allowed" without the flag's name
     "--max-workers counts devices with pool options: from 2 x the smallest --tp (8"),
    (("--tp", "3", "--max-workers", "8"), "--tp 3: no TP degree of [3] serves Llama-3-8B on H100: TP 3 does not"),
    (("--tp", "1,2", "--memory-utilization", "0.1"), "--tp 1,2: no TP degree of [1, 2] serves Llama-3-8B on H100: "
                                                     "TP 1: no room for a KV cache: 0.1 x"),
    (("--local-prefill-tokens", "median"), "a plan of pools ranks no conditional splits: leave "
                                           "--local-prefill-tokens out"),  # was: dropped without a word
    (("--chunk-tokens", "128"), "pools plan chunked colocated clusters at 512-token chunks: leave --chunk-tokens out"),
])
def test_plan_with_pools_refuses_bad_input_as_a_usage_error(argv, message):
    status, out, err = cli("plan", *POOLS, *argv)
    assert status == 2 and message in err and "Traceback" not in err and out == ""
    if "--chunk-tokens" in argv:  # names only the flag the caller gave
        assert "--price-per-hour" not in err


def test_plan_thresholds_refuse_an_empty_item():
    status, _, err = cli("plan", "--local-prefill-tokens", "median,,512")
    assert status == 2 and "argument --local-prefill-tokens: 'median,,512' has an empty item" in err


@pytest.mark.parametrize("argv, message", [
    (("--prefill-gpu", "H100", "--decode-gpu", "H100", "--prefill-tp", "3"),  # was: exit 1, no flag named
     "--prefill-tp 3 on H100: TP 3 does not divide Llama-3-8B's 32 attention heads"),
    (("--prefill-gpu", "L4", "--decode-gpu", "T4", "--decode-tp", "2"),  # was: "name the link", an API argument
     "--decode-tp 2: splitlab's GPU table gives T4 no GPU-to-GPU link for a TP group to all-reduce over; use TP 1"),
    (("--prefill-gpu", "H100", "--decode-gpu", "H100", "--memory-utilization", "0.1"),  # was: exit 1, no flag
     "--memory-utilization 0.1: no room for a KV cache: 0.1 x 80,000,000,000 bytes of memory"),
])
def test_simulate_with_pools_refuses_bad_input_as_a_usage_error(argv, message):
    status, out, err = cli(*SPLIT, *argv)
    assert status == 2 and message in err and "name the link" not in err and out == ""


def test_memory_utilization_without_kv_room_is_a_usage_error_on_one_gpu_too():
    status, _, err = cli("simulate", "--gpu", "H100", "--model-config", "Llama-3-8B", "--requests", "4", "--rate",
                         "1", "--ttft-slo", "1", "--tpot-slo", "0.1", "--memory-utilization", "0.2")
    assert status == 2 and "--memory-utilization 0.2: no room for a KV cache" in err


def test_system_prompt_errors_name_the_flags():
    # was: exit 1 and "system_prompts must be at most", the API's name
    status, _, err = cli(*SIM, "--system-prompts", "100000000", "--system-prompt-tokens", "64")
    assert status == 2 and "--system-prompts must be at most 100,000, got 100,000,000" in err
    status, _, err = cli(*SIM, "--system-prompts", "2", "--system-prompt-tokens", "100000")  # was: exit 1
    assert status == 2 and "--system-prompt-tokens 100000: a system prompt of 100000 tokens" in err
    assert "exceed the model's context of 2048" in err
    status, out, _ = cli(*SIM, "--system-prompts", "2", "--system-prompt-tokens", "64", "--routing", "prefix-aware",
                         "--json")
    assert status == 0 and json.loads(out)["colocated"]["completed"] == 8


def test_prefix_refusals_name_only_the_flags_given():
    status, _, err = cli("serve", "--requests", "4", "--routing", "prefix-aware")  # emulated: refused before loading
    assert status == 2 and "--routing runs on the simulated back end only" in err
    assert "--prefix-cache-tokens" not in err
    status, _, err = cli(*SIM, "--layout", "disaggregated", "--prefix-cache-tokens", "64", "--local-prefill-queue", "1")
    assert status == 2 and "--prefix-cache-tokens does not go with --local-prefill-queue: a conditional split" in err
    assert "--routing" not in err and "--local-prefill-tokens" not in err


def test_a_pool_plan_that_no_cluster_serves_names_no_cheapest():
    # was: "cheapest per million output tokens (iso-cost): 1P(H100)+1D(A100-80GB)" at goodput 0 everywhere
    status, out, err = cli("plan", *POOLS[:6], "--max-workers", "2", "--ttft-slo", "1e-6", "--tpot-slo", "1e-6")
    assert status == 0 and "no cluster serves any rate within the SLOs (*): none is cheapest" in out
    assert "cheapest per million output tokens (iso-cost):" not in out
    # every cluster ranked, goodput 0, with its reason: 2 prefill-first and 2 chunked colocated, 1P+1D
    assert out.count("no rate meets a TTFT SLO of 1e-06 s") == 5
