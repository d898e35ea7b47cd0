"""The link between the pools (splitlab.serving.nic and .handoff): one NIC per worker, layer-wise transfers that
overlap their prefill, the first token at the decode worker's admission, and a split that loses because of its
link, said so in the binding column. Cost models with round numbers; no model runs."""
from __future__ import annotations

import math

import pytest

import splitlab as sl
from splitlab import sizing
from splitlab.costmodel import CostModel
from splitlab.serving import (CostModelExecutor, Fixed, Request, ServingConfig, WorkloadSpec, make_workload, run,
                              workload_requests)
from splitlab.serving import metrics as M
from splitlab.serving.nic import DEFAULT_KV_LAYERS, link_fields
from test_simulator_fast_path import both, outcome

# prefill 1 ms per prompt token, a decode step 10 ms, a transfer 5 ms (no bytes term): test_serving_scheduler's
COST = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-3, decode_base_s=0.01, decode_per_seq_s=0.0,
                 decode_per_token_s=0.0, transfer_base_s=0.005, transfer_bytes_per_s=float("inf"))
SLOW = dict(link_bytes_per_s=2048 * 100 / 0.05)  # a 100-token cache (2,048 bytes a token) takes 50 ms


def serve(reqs, cost=COST, **kw):
    return run(reqs, ServingConfig(**kw), CostModelExecutor(cost))


def busy_intervals(res, end: str, worker: str) -> list[tuple[float, float]]:
    t = res.transfers
    rows = t[t[end] == worker].sort_values("start_s")
    return list(zip(rows.start_s, rows.end_s))


@pytest.mark.parametrize("prefill_workers, decode_workers, end", [(4, 1, "dst"), (1, 4, "src")])
def test_ingest_into_a_decode_worker_never_exceeds_its_nic(prefill_workers, decode_workers, end):
    """Four prefill workers finishing at once used to push four caches into one decode worker at once (a link per
    pair: 4x its NIC); now its ingress takes one at a time, and so does one prefill worker's egress."""
    reqs = [Request(i, 0.0, [1] * 100, 3) for i in range(8)]
    res = serve(reqs, layout="disaggregated", prefill_workers=prefill_workers, decode_workers=decode_workers, **SLOW)
    worker = "D0" if end == "dst" else "P0"
    spans = busy_intervals(res, end, worker)
    assert len(spans) == 8
    for (_, e1), (s2, _) in zip(spans, spans[1:]):
        assert s2 >= e1 - 1e-12  # one transfer at a time through the NIC
    nbytes = res.transfers[res.transfers[end] == worker].nbytes.sum()
    assert nbytes / (spans[-1][1] - spans[0][0]) <= SLOW["link_bytes_per_s"] * (1 + 1e-9)
    assert spans[-1][1] == pytest.approx(spans[0][0] + 8 * 0.05)  # and the link never idles while caches wait


def test_nics_hold_on_a_random_workload_in_overload():
    res = serve(make_workload("research", 150, 40.0, seed=1), CostModel(), layout="disaggregated", prefill_workers=3,
                decode_workers=2, link_bytes_per_s=2e8, link_latency_s=1e-4)
    for end in ("src", "dst"):
        for worker in set(res.transfers[end]):
            spans = busy_intervals(res, end, worker)
            assert all(s2 >= e1 - 1e-12 for (_, e1), (s2, _) in zip(spans, spans[1:]))


def test_layerwise_ttft_is_below_whole_on_a_slow_link():
    """One 100-token prompt: a 0.1 s prefill, a 50 ms transfer over the slow link. Whole: the cache leaves when the
    prefill ends. Layer-wise: layer i leaves once computed, so only one layer's share is left after the prefill
    (sizing.streamed_exposed_s, the same model)."""
    reqs = [Request(0, 0.0, [1] * 100, 4)]
    whole = serve([r.fresh() for r in reqs], layout="disaggregated", **SLOW).requests[0]
    layered = serve([r.fresh() for r in reqs], layout="disaggregated", transfer_mode="layerwise", **SLOW).requests[0]
    assert M.ttft_s(whole) == pytest.approx(0.1 + 0.05)
    exposed = sizing.streamed_exposed_s(0.1, 100 * 2048, DEFAULT_KV_LAYERS, SLOW["link_bytes_per_s"])
    assert M.ttft_s(layered) == pytest.approx(0.1 + exposed) == pytest.approx(0.1 + 0.05 / DEFAULT_KV_LAYERS)
    assert M.ttft_s(layered) < M.ttft_s(whole)
    assert layered.token_times_s[0] >= layered.transfer_end_s > layered.prefill_end_s


def test_layerwise_equals_whole_on_an_infinitely_fast_link():
    free = COST.with_(transfer_base_s=0.0)
    reqs = make_workload("research", 40, 5.0, seed=2)
    runs = [serve([r.fresh() for r in reqs], free, layout="disaggregated", prefill_workers=2, transfer_mode=mode)
            for mode in ("whole", "layerwise")]
    assert [M.ttft_s(r) for r in runs[0].requests] == [M.ttft_s(r) for r in runs[1].requests]
    assert outcome(runs[0]) == outcome(runs[1])


def test_a_layerwise_cache_that_waited_for_room_does_not_overlap_its_prefill():
    """A decode worker with room for one request: the second cache waits on its prefill worker, then crosses whole,
    layer after layer (no overlap with a prefill that ended long before)."""
    reqs = [Request(0, 0.0, [1] * 100, 30), Request(1, 0.0, [1] * 100, 30)]
    res = serve(reqs, layout="disaggregated", transfer_mode="layerwise", kv_budget_bytes=2048 * 140, **SLOW)
    second = max(res.requests, key=lambda r: r.transfer_start_s)
    assert second.transfer_start_s > second.prefill_end_s
    assert second.transfer_end_s - second.transfer_start_s == pytest.approx(0.05)


def test_the_first_token_leaves_when_the_decode_worker_admits_the_request():
    """max_batch=1: the second request's cache arrives at 25 ms + 5 ms but waits for the first request to finish
    (4 decode steps of 10 ms from 25 ms); its first token leaves when it is admitted, at 65 ms, not on arrival."""
    reqs = [Request(0, 0.0, [1] * 10, 5), Request(1, 0.0, [1] * 10, 5)]
    a, b = serve(reqs, layout="disaggregated", max_batch=1).requests
    assert a.prefill_end_s == b.prefill_end_s == pytest.approx(0.02)
    assert a.transfer_end_s == pytest.approx(0.025) and b.transfer_end_s == pytest.approx(0.03)  # one NIC
    assert a.token_times_s[0] == pytest.approx(0.025) and a.finish_s == pytest.approx(0.065)
    assert b.token_times_s[0] == pytest.approx(0.065) and b.token_times_s[0] > b.transfer_end_s
    assert b.token_times_s[1] == pytest.approx(0.075)
    on_prefill = serve([r.fresh() for r in reqs], layout="disaggregated", max_batch=1, first_token_on="prefill")
    assert on_prefill.requests[1].token_times_s[0] == pytest.approx(0.02)  # DistServe's convention: unchanged


def test_a_one_token_request_is_done_when_its_cache_arrives():
    r = serve([Request(0, 0.0, [1] * 10, 1)], layout="disaggregated").requests[0]
    assert r.state.value == "finished" and r.token_times_s == [pytest.approx(0.015)]


@pytest.mark.parametrize("options", [
    dict(prefill_workers=3, decode_workers=1, transfer_mode="layerwise", link_bytes_per_s=3e7, max_batch=4),
    dict(prefill_workers=2, decode_workers=2, link_bytes_per_s=3e7, link_latency_s=1e-3, max_batch=2),
    dict(prefill_workers=1, decode_workers=3, transfer_mode="layerwise", kv_budget_bytes=2048 * 600)],
    ids=["3P1D-layerwise", "2P2D-latency", "1P3D-budget"])
def test_fast_path_agrees_with_step_by_step_on_nics_and_admission(options):
    reqs = make_workload("research", 100, 20.0, seed=4)
    slow, fast = both(reqs, CostModel(decode_per_token_s=3e-7), layout="disaggregated", **options)
    assert outcome(slow) == outcome(fast)


# --- a split that loses because of its link ----------------------------------------------------------------------
# Llama-3-8B-like on an H100: 4,000-token prompts prefill in ~0.11 s; their 524 MB of fp16 KV take 0.17 s over
# 25 Gb/s Ethernet, longer than the prefill, so a decode worker's NIC takes fewer caches per second than a prefill
# worker makes (over NVLink the same cache takes 1.2 ms).
LONG = CostModel(prefill_base_s=0.0, prefill_per_token_s=2.7e-5, decode_base_s=0.006, decode_per_seq_s=1e-5,
                 decode_per_token_s=4e-8, transfer_base_s=0.0, transfer_bytes_per_s=1e12, kv_bytes_per_token=131072,
                 max_context=8192, source="crafted: long prompts")
LONG_WORK = WorkloadSpec("long prompts", Fixed(4000), Fixed(32))
SLOS = dict(ttft_slo_s=0.5, tpot_slo_s=0.05)


def test_the_simulator_shows_the_split_losing_because_of_the_transfer():
    reqs = workload_requests(LONG_WORK, 200, 8.0, CostModelExecutor(LONG), 0, 1.0)  # 4 per worker, 2 workers
    colocated = serve([r.fresh() for r in reqs], LONG, workers=2, trace=False)
    split = serve([r.fresh() for r in reqs], LONG.over_link("25 Gb/s network"), layout="disaggregated", trace=False)
    assert colocated.metrics(**SLOS)["slo_attainment"] >= 0.9 > split.metrics(**SLOS)["slo_attainment"]
    miss = M.slo_misses(split.requests, **SLOS)
    assert miss["transfer"] > (miss["ttft"] + miss["ttst"]) / 2 > 0  # the link caused most first-token misses
    fast = serve([r.fresh() for r in reqs], LONG.over_link("NVLink 4 (H100)"), layout="disaggregated", trace=False)
    assert fast.metrics(**SLOS)["slo_attainment"] >= 0.9  # the same split over NVLink keeps up


def test_the_planner_says_transfer_in_the_binding_column():
    slow = sl.planner.plan(LONG.over_link("25 Gb/s network"), LONG_WORK, max_workers=2, chunk_tokens=(),
                           max_requests=200, scale=1.0, progress=False, **SLOS)
    assert slow.best.layout == "colocated"
    split = slow.best_of("disaggregated")
    assert split.binding_slo == "transfer" and "KV transfer" in split.reason
    assert split.goodput_rps_per_worker < slow.best.goodput_rps_per_worker
    assert "transfer" in slow.table()["binding SLO"].tolist()
    fast = sl.planner.plan(LONG.over_link("NVLink 4 (H100)"), LONG_WORK, max_workers=2, chunk_tokens=(),
                           max_requests=200, scale=1.0, progress=False, **SLOS)
    nv = fast.best_of("disaggregated")
    assert nv.binding_slo != "transfer" and nv.goodput_rps_per_worker > split.goodput_rps_per_worker


def test_named_links_and_their_errors():
    assert link_fields("100 Gb/s network") == dict(link_bytes_per_s=12.5e9, link_latency_s=0.0)
    assert link_fields(2e9, 1e-4) == dict(link_bytes_per_s=2e9, link_latency_s=1e-4)
    assert sizing.LINKS["25 Gb/s network"]["bandwidth_bytes_per_s"] == 25e9 / 8
    over = CostModel().over_link("25 Gb/s network", latency_s=1e-5)
    assert over.transfer_s(3.125e9) == pytest.approx(1.0 + 1e-5) and "25 Gb/s network" in over.source
    for bad in ("10 Mb/s modem", 0, -1.0, math.inf, True):
        with pytest.raises(ValueError, match="link"):
            link_fields(bad)
    with pytest.raises(ValueError, match="latency_s"):
        CostModel().over_link("25 Gb/s network", latency_s=-1)


def test_plan_on_the_command_line_names_the_link_and_the_transfer_binding():
    """`--link` sets the link of any cost model (it was refused without --gpu); over 25 Gb/s Ethernet the long
    prompts of a Llama-3-8B on an H100 leave the split's binding column at "transfer"."""
    from conftest import cli
    status, out, err = cli("plan", "--max-workers", "2", "--link", "25 Gb/s network", "--chunk-tokens", "512")
    assert status == 0, err
    assert "KV over 25 Gb/s network" in out
    status, out, err = cli("plan", "--gpu", "H100", "--model-config", "Llama-3-8B", "--link", "25 Gb/s network",
                           "--workload", "research", "--scale", "4", "--ttft-slo", "0.5", "--tpot-slo", "0.05",
                           "--max-workers", "2", "--chunk-tokens", "512")
    assert status == 0, err
    split = next(line for line in out.splitlines() if line.startswith("1P+1D"))
    assert split.rstrip().endswith("transfer"), out
