"""Real prefill and decode processes serving a workload: every request gets the tokens it gets alone, with
client-side wall-clock metrics, for whole and layer-wise transfers."""
from __future__ import annotations

import math

import pytest

from splitlab import serving
from splitlab.serving.distributed.router import Cluster


@pytest.fixture(scope="module")
def workload(lm):
    reqs = serving.make_workload("chat", 5, rate_per_s=10, model=lm, seed=2, scale=0.08)
    return reqs, serving.reference_tokens(lm, reqs)


@pytest.fixture(scope="module")
def cluster():
    with Cluster("tiny", prefill_workers=1, decode_workers=1, timeout_s=30) as c:
        yield c


@pytest.mark.parametrize("mode, first_token_on", [("whole", "prefill"), ("layerwise", "decode")])
def test_split_tokens_equal_local_tokens_with_wall_clock_metrics(cluster, workload, lm, mode, first_token_on):
    reqs, reference = workload
    res = cluster.serve(reqs, mode=mode, first_token_on=first_token_on)
    assert res.failures == [] and res.tokens() == reference
    m = res.metrics(ttft_slo_s=None, tpot_slo_s=None)
    assert m["completed"] == len(reqs) and m["failed"] == 0 and m["slo_attainment"] == 1.0
    assert m["ttft_s"]["p50"] > 0 and m["tpot_s"]["p50"] > 0 and math.isfinite(m["itl_s"]["p90"])
    per_token = 2 * lm.geometry.layers * lm.geometry.kv_heads * lm.geometry.head_dim * 4
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
    assert {("P0", "prefill"), ("D0", "decode")} <= kinds


def test_a_reused_cluster_serves_the_same_request_ids_again(cluster, lm):
    """The decode worker's batch outlives a run: request 0 of the next run must not decode on the cache of the
    last run's request 0 (it did, and gave other tokens)."""
    reqs = [serving.Request(0, 0.0, [1, 2, 3], 4)]
    reference = serving.reference_tokens(lm, reqs)
    for _ in range(2):
        assert cluster.serve(reqs).tokens() == reference


def test_serve_refuses_sampling_and_bad_modes(cluster, workload):
    reqs, _ = workload
    with pytest.raises(ValueError, match="mode must be"):
        cluster.serve(reqs, mode="bytewise")
    sampled = [r.fresh() for r in reqs]
    sampled[0].sampling = serving.workload.SamplingParams(temperature=0.7, seed=1)
    with pytest.raises(ValueError, match="greedily"):
        cluster.serve(sampled)
    with pytest.raises(ValueError, match="request id 0 appears more than once"):  # one of them was lost
        cluster.serve([serving.Request(0, 0.0, [1, 2], 2), serving.Request(0, 0.0, [3, 4], 2)])


def test_one_group_per_process(cluster):
    from splitlab.transfer.group import DistributedError
    from splitlab.transfer.peer import Peer
    with pytest.raises(DistributedError, match="close that one first"):
        Peer().start()
