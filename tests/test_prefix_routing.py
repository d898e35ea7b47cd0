"""Prefix caching in the serving path and prefix-aware routing (issue 23 item 4): known answers on crafted cost
models and workloads, the load bound, the fast path against the step-by-step run, bad input, the command line."""
from __future__ import annotations

import json
import math

import pytest

from conftest import cli
from splitlab.costmodel import CostModel
from splitlab.serving import (CostModelExecutor, Executor, Request, ServingConfig, make_workload, prefix_stats, run,
                              system_prompt_ids, with_system_prompts)
from splitlab.serving.prefix_router import check_prefix_backend

#: a prefill costs 1 ms + 1 ms per token computed (no attention term), a decode step 1 ms: TTFTs are exact
COST = CostModel(prefill_base_s=1e-3, prefill_per_token_s=1e-3, prefill_per_token2_s=0.0, decode_base_s=1e-3,
                 decode_per_seq_s=0.0, decode_per_token_s=0.0, transfer_base_s=0.0, transfer_bytes_per_s=math.inf)
S, U = 64, 32  # system prompt and user part, in tokens (4 and 2 blocks of 16)


def _alternating(n: int, gap_s: float = 10.0, max_new_tokens: int = 4) -> list[Request]:
    """Requests i = 0, 1, ... under system prompts A, B, A, B, ..., each with its own user part, ``gap_s`` apart."""
    a, b = system_prompt_ids(2, S, seed=5)
    return [Request(i, i * gap_s, (a if i % 2 == 0 else b) + [100 + i] * U, max_new_tokens) for i in range(n)]


def _serve(reqs, routing: str, workers: int = 2, cache: int | float = S + U, faults=None, **kw):
    cfg = ServingConfig.colocated(workers, prefix_cache_tokens=cache, routing=routing, **kw)
    return run(reqs, cfg, CostModelExecutor(COST), faults=faults)


def test_two_system_prompts_two_workers_known_answer():
    """Caches of one prompt each: prefix-aware routing keeps A on W0 and B on W1 and hits on every request but the
    first per worker; least-loaded sends every (idle-time) request to W0, whose cache then turns over each time."""
    aware = _serve(_alternating(8), "prefix-aware")
    assert [r.prefill_worker for r in aware.requests] == ["W0", "W1"] * 4
    assert [r.cached_tokens for r in aware.requests] == [0, 0] + [S] * 6
    # a hit computes U tokens, a miss S + U: TTFT = 1 ms + 1 ms per computed token, exactly
    assert [round(r.first_token_s - r.arrival_s, 9) for r in aware.requests[:3]] == [0.097, 0.097, 0.033]
    stats = prefix_stats(aware)
    assert stats["prefix_hit_rate"] == pytest.approx(6 * S / (8 * (S + U)))
    assert stats["prefix_hit_requests"] == 0.75 and stats["cached_tokens"] == 6 * S
    plain = _serve(_alternating(8), "least-loaded")
    assert {r.prefill_worker for r in plain.requests} == {"W0"}
    assert [r.cached_tokens for r in plain.requests] == [0] * 8 and prefix_stats(plain)["prefix_hit_rate"] == 0
    # one system prompt: least-loaded hits too (its one worker holds it) but never more than prefix-aware
    one = [Request(i, i * 10.0, system_prompt_ids(1, S)[0] + [7 + i] * U, 4) for i in range(6)]
    assert [r.cached_tokens for r in _serve(one, "least-loaded").requests] == [0] + [S] * 5
    assert [r.cached_tokens for r in _serve(one, "prefix-aware").requests] == [0] + [S] * 5


def test_without_a_cache_the_run_is_unchanged_and_unlimited_caches_keep_everything():
    reqs = _alternating(6)
    plain = run(reqs, ServingConfig.colocated(2), CostModelExecutor(COST))
    assert all(r.cached_tokens == 0 for r in plain.requests)
    both = _serve(reqs, "least-loaded", cache=math.inf)  # W0 serves all and keeps A and B
    assert [r.cached_tokens for r in both.requests] == [0, 0] + [S] * 4


def test_the_load_bound_sends_a_request_away_from_its_prefix():
    """Request 1 arrives while W0 still decodes request 0 (it owes output tokens): with no imbalance allowed it goes
    to the idle W1 and misses; with an unbounded imbalance it stays with its prefix on W0 and hits."""
    a = system_prompt_ids(1, S)[0]
    reqs = [Request(0, 0.0, a + [1] * U, 50), Request(1, 0.12, a + [2] * U, 50)]
    tight = _serve(reqs, "prefix-aware", prefix_balance_tokens=0)
    assert [r.prefill_worker for r in tight.requests] == ["W0", "W1"] and tight.requests[1].cached_tokens == 0
    loose = _serve(reqs, "prefix-aware", prefix_balance_tokens=math.inf)
    assert [r.prefill_worker for r in loose.requests] == ["W0", "W0"] and loose.requests[1].cached_tokens == S


def test_split_fast_path_and_step_by_step_agree():
    """A 2P+1D split routes by prefix over the prefill pool; the fast path (heap of loads) and the step-by-step run
    (a fault hook that never fires) make the same decisions, token time for token time."""
    base = make_workload("chat", 300, 30.0, seed=3)
    reqs = with_system_prompts(base, 4, 256, seed=3, max_context=2048)
    cfg = ServingConfig.disaggregated(2, 1, prefix_cache_tokens=2048, routing="prefix-aware")
    fast = run(reqs, cfg, CostModelExecutor())
    slow = run(reqs, cfg, CostModelExecutor(), faults=lambda event, worker, ids: None)
    assert [r.token_times_s for r in fast.requests] == [r.token_times_s for r in slow.requests]
    assert [r.cached_tokens for r in fast.requests] == [r.cached_tokens for r in slow.requests]
    assert all(r.state.value == "finished" for r in fast.requests)
    plain = run(reqs, cfg.with_(routing="least-loaded"), CostModelExecutor())
    assert prefix_stats(fast)["prefix_hit_rate"] > prefix_stats(plain)["prefix_hit_rate"]
    # least-loaded by the heap of loads (which must hear of the load a cached prefix takes off at admission)
    slow = run(reqs, cfg.with_(routing="least-loaded"), CostModelExecutor(), faults=lambda event, worker, ids: None)
    assert [r.token_times_s for r in plain.requests] == [r.token_times_s for r in slow.requests]
    assert [r.prefill_worker for r in plain.requests] == [r.prefill_worker for r in slow.requests]


def test_shared_system_prompt_workload():
    base = make_workload("code", 20, 5.0, seed=1)
    reqs = with_system_prompts(base, 3, 100, seed=1)
    prompts = system_prompt_ids(3, 100, seed=1)
    assert len({tuple(p) for p in prompts}) == 3 and all(len(p) == 100 for p in prompts)
    assert all(r.prompt[:100] in prompts and r.prompt[100:] == b.prompt and r.id == b.id and
               r.arrival_s == b.arrival_s and r.max_new_tokens == b.max_new_tokens for r, b in zip(reqs, base))
    assert [r.prompt for r in reqs] == \
        [r.prompt for r in with_system_prompts(base, 3, 100, seed=1)]
    with pytest.raises(ValueError, match="exceed the model's context of 200"):
        with_system_prompts(base, 3, 100, max_context=200)
    for n, s in ((0, 10), (2, 0), (1.5, 10), (True, 10)):
        with pytest.raises(ValueError, match="must be an integer >= 1"):
            with_system_prompts(base, n, s)
    with pytest.raises(TypeError, match="list of splitlab.serving.Request"):
        with_system_prompts("abc", 1, 1)
    with pytest.raises(ValueError, match="at least one request"):
        with_system_prompts([], 1, 1)


@pytest.mark.parametrize("kw, message", [
    (dict(routing="sticky"), "routing must be one of"),
    (dict(routing="prefix-aware"), "needs prefix_cache_tokens"),
    (dict(prefix_cache_tokens=8), r"prefix_cache_tokens must be a number of tokens >= prefix_block_tokens \(16\)"),
    (dict(prefix_cache_tokens=-1.0), "prefix_cache_tokens must be"),
    (dict(prefix_cache_tokens=64, prefix_block_tokens=0), "prefix_block_tokens must be an integer >= 1"),
    (dict(prefix_cache_tokens=64, prefix_balance_tokens=-1), "prefix_balance_tokens must be"),
    (dict(prefix_cache_tokens=64, prefix_balance_tokens=float("nan")), "prefix_balance_tokens must be"),
])
def test_bad_configs_are_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        ServingConfig.colocated(2, **kw)


def test_conditional_and_real_model_back_ends_are_refused():
    with pytest.raises(ValueError, match="conditional split's decode workers keep no prefix cache"):
        ServingConfig.disaggregated(1, 1, prefix_cache_tokens=64, local_prefill_tokens=10)

    class RealModel(Executor):  # stands for the emulated back end: an executor without a cost model
        name = "emulated"
        kv_bytes_per_token, max_context = 1, 100
        prefill = decode = transfer = None

    cfg = ServingConfig.colocated(1, prefix_cache_tokens=64)
    with pytest.raises(ValueError, match="simulated back end only: the emulated back end runs a real model"):
        check_prefix_backend(cfg, RealModel())
    with pytest.raises(ValueError, match="simulated back end only"):
        run(_alternating(1), cfg, RealModel())
    check_prefix_backend(ServingConfig.colocated(1), RealModel())  # no prefix cache: nothing to refuse


def test_cli_routing_and_system_prompts():
    common = ("simulate", "--workers", "2", "--requests", "120", "--rate", "20", "--system-prompts", "2",
              "--system-prompt-tokens", "512", "--prefix-cache-tokens", "1024", "--ttft-slo", "0.5", "--tpot-slo",
              "0.05", "--json")
    rates = {}
    for routing in ("least-loaded", "prefix-aware"):
        status, out, err = cli(*common, "--routing", routing)
        data = json.loads(out)["colocated"]
        assert status == 0 and data["routing"] == routing and data["completed"] == 120, err
        rates[routing] = data["prefix_hit_rate"]
    assert 0 <= rates["least-loaded"] < rates["prefix-aware"] <= 1
    status, out, err = cli("simulate", "--requests", "5", "--system-prompts", "2")
    assert status == 2 and "--system-prompts N and --system-prompt-tokens S go together" in err
    status, out, err = cli("simulate", "--requests", "5", "--prefix-cache-tokens", "8")
    assert status == 2 and "--prefix-cache-tokens must be at least 16 (one block), got 8" in err
    status, out, err = cli("simulate", "--layout", "disaggregated", "--requests", "5", "--routing", "prefix-aware",
                           "--local-prefill-queue", "1")
    assert status == 2 and "--routing does not go with --local-prefill-queue" in err  # only the flags given
    status, out, err = cli("serve", "--requests", "5", "--routing", "prefix-aware")
    assert status == 2 and "simulated back end only" in err
    status, out, err = cli("simulate", "--requests", "5", "--system-prompts", "2", "--system-prompt-tokens", "50")
    assert status == 2 and "with --system-prompts give --rate, --ttft-slo and --tpot-slo" in err
    status, out, err = cli("simulate", "--requests", "5", "--system-prompts", "2", "--system-prompt-tokens", "5000",
                           "--rate", "1", "--ttft-slo", "1", "--tpot-slo", "1")
    assert status == 2 and "exceed the model's context of 2048" in err  # a usage error
