"""Scheduler and cluster decisions on small hand-made traces, timed by a cost model with round numbers:
prefill 1 ms per prompt token, a decode step 10 ms, a transfer 5 ms. No model runs."""
from __future__ import annotations

import pytest

from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, Request, ServingConfig, run
from splitlab.serving import metrics as M

COST = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-3, decode_base_s=0.01, decode_per_seq_s=0.0,
                 decode_per_token_s=0.0, transfer_base_s=0.005, transfer_bytes_per_s=float("inf"))


def trace() -> list[Request]:
    """A streams 20 tokens of a short prompt; B's long prompt arrives while A is being prefilled."""
    return [Request(0, 0.0, [1] * 100, 20), Request(1, 0.05, [1] * 500, 2)]


def serve(reqs=None, **kw):
    return run(reqs if reqs is not None else trace(), ServingConfig(**kw), CostModelExecutor(COST))


def test_prefill_first_stalls_the_running_stream_for_the_new_prompt():
    res = serve(policy="prefill-first")
    a, b = res.requests
    assert a.token_times_s[:2] == pytest.approx([0.1, 0.61])          # B's 0.5 s prefill lands between them
    assert M.itl_s(a).max() == pytest.approx(0.51)
    assert M.ttft_s(b) == pytest.approx(0.55)
    steps = res.timeline.query("worker == 'W0' and kind != 'idle'")
    assert steps.kind.tolist()[:3] == ["prefill", "prefill", "decode"]
    assert steps.request_ids.tolist()[2] == [0, 1]                     # B joined A's decode batch


def test_decode_first_finishes_the_stream_before_the_new_prompt():
    res = serve(policy="decode-first")
    a, b = res.requests
    assert M.itl_s(a).max() == pytest.approx(0.01)
    assert a.finish_s == pytest.approx(0.29) and b.prefill_start_s == pytest.approx(0.29)
    assert M.ttft_s(b) == pytest.approx(0.74)


def test_chunked_prefill_bounds_the_stall_by_the_token_budget():
    res = serve(policy="chunked", chunk_tokens=101)
    a, b = res.requests
    prefills = res.timeline.query("kind == 'prefill'")
    assert prefills.tokens.max() <= 101 and (prefills.request_ids.map(tuple) == (1,)).sum() == 5  # 5 chunks of 100
    # one fused forward: A's decode token rides along in the 100-token chunk's pass (101 tokens x 1 ms; the
    # 10 ms decode step is not paid on top)
    assert M.itl_s(a).max() == pytest.approx(0.101)
    assert M.ttft_s(b) == pytest.approx(0.1 + 5 * 0.101 - 0.05)
    assert len(b.output) == 2 and len(a.output) == 20


def test_disaggregated_keeps_the_stream_smooth_and_charges_the_transfer():
    res = serve(layout="disaggregated", first_token_on="prefill")
    a, b = res.requests
    assert (a.prefill_worker, a.decode_worker) == ("P0", "D0")
    assert a.token_times_s[:2] == pytest.approx([0.1, 0.115])          # first token at prefill; transfer 5 ms
    assert M.itl_s(a).max() == pytest.approx(0.015)
    assert M.ttft_s(b) == pytest.approx(0.55)
    tr = res.transfers
    assert tr.request_id.tolist() == [0, 1] and tr.charged_s.tolist() == pytest.approx([0.005, 0.005])
    assert set(res.timeline.worker) == {"P0", "D0", "P0->D0"}
    assert set(res.timeline.query("worker == 'P0'").kind) == {"prefill", "idle"}


def test_first_token_on_decode_puts_the_transfer_into_ttft():
    on_prefill = serve(layout="disaggregated", first_token_on="prefill").requests[0]  # DistServe's convention
    on_decode = serve(layout="disaggregated", first_token_on="decode").requests[0]
    assert M.ttft_s(on_decode) - M.ttft_s(on_prefill) == pytest.approx(0.005)
    assert on_decode.output and len(on_decode.output) == 20


def test_the_first_token_leaves_after_the_transfer_by_default():
    assert ServingConfig().first_token_on == "decode"
    for r in serve(layout="disaggregated").requests:
        assert r.transfer_end_s is not None and r.token_times_s[0] >= r.transfer_end_s > r.prefill_end_s
        assert M.ttft_s(r) == pytest.approx(r.transfer_end_s - r.arrival_s)


def test_link_bandwidth_models_a_slower_network():
    res = serve(layout="disaggregated", link_bytes_per_s=2048 * 100 / 0.05, link_latency_s=0.001)
    tr = res.transfers.iloc[0]
    assert tr["nbytes"] == 100 * 2048 and tr["charged_s"] == pytest.approx(0.051)
    assert res.requests[0].token_times_s[1] == pytest.approx(0.1 + 0.051 + 0.01)


def test_router_sends_simultaneous_requests_to_different_workers():
    reqs = [Request(i, 0.0, [1] * 50, 5) for i in range(4)]
    res = serve(reqs, workers=2)
    assert sorted(r.prefill_worker for r in res.requests) == ["W0", "W0", "W1", "W1"]
    res = serve([r.fresh() for r in reqs], layout="disaggregated", prefill_workers=2, decode_workers=2)
    assert {r.prefill_worker for r in res.requests} == {"P0", "P1"}
    assert {r.decode_worker for r in res.requests} == {"D0", "D1"}


def test_max_batch_holds_back_the_third_request():
    reqs = [Request(i, 0.0, [1] * 10, 5) for i in range(3)]
    res = serve(reqs, max_batch=2)
    first, second, third = res.requests
    assert first.prefill_start_s == second.prefill_start_s == 0.0
    assert third.prefill_start_s >= min(first.finish_s, second.finish_s)
    assert res.timeline.query("kind == 'decode'").batch.max() == 2


def test_prefill_batches_prompts_up_to_the_token_limit():
    reqs = [Request(i, 0.0, [1] * 300, 2) for i in range(3)]
    res = serve(reqs, max_prefill_tokens=600)
    prefills = res.timeline.query("kind == 'prefill'")
    assert prefills.batch.tolist() == [2, 1] and prefills.tokens.tolist() == [600, 300]


def test_timeline_tiles_each_worker_without_overlap():
    res = serve(workers=1)
    for _, rows in res.timeline.groupby("worker"):
        rows = rows.sort_values("start_s")
        assert (rows.start_s.iloc[1:].values >= rows.end_s.iloc[:-1].values - 1e-12).all()
        assert rows.start_s.iloc[0] == 0.0 and rows.end_s.iloc[-1] == pytest.approx(res.end_s)
    table = res.worker_table()
    assert table.loc["W0", "prefill_s"] == pytest.approx(0.6)
    assert 0 < table.loc["W0", "utilization"] <= 1


def test_token_table_lists_every_token_with_its_gap():
    res = serve(policy="prefill-first")
    tokens = res.token_table()
    assert len(tokens) == 22 and tokens.gap_s.isna().sum() == 2
    a = tokens.query("request_id == 0")
    assert a.gap_s.max() == pytest.approx(0.51) and a.since_arrival_s.iloc[0] == pytest.approx(0.1)
