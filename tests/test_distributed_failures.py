"""Failures between processes end with a clear error inside a configurable timeout, never a hang: a peer that
never joins, a peer that dies mid-exchange, a decode worker that dies with a request in flight (reported FAILED,
not lost), a worker that stops answering, a launcher environment that is missing or points at nobody."""
from __future__ import annotations

import time

import pytest

import splitlab as sl
from splitlab import serving
from splitlab.serving.distributed.router import Cluster
from splitlab.transfer.group import DistributedError, PeerJoinTimeout, WorkerDied, free_port, join_from_env
from splitlab.transfer.peer import Peer


def test_a_peer_that_never_joins_times_out_with_a_clear_error():
    t0 = time.time()
    with pytest.raises(PeerJoinTimeout, match=r"worker rank\(s\) \[1\] of 1 did not join within 3 s"):
        Peer(join_timeout_s=3, fault={"rank": 1, "kind": "never-join"}).start()
    assert time.time() - t0 < 15  # 3 s plus starting the process; the sleeping child was killed


def test_joining_a_group_whose_rank_0_never_comes_times_out(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))  # nobody listens there
    t0 = time.time()
    with pytest.raises(PeerJoinTimeout, match="rank 1: the group of 2 did not form within 1.5 s"):
        join_from_env(timeout_s=1.5)
    assert time.time() - t0 < 12


def test_join_from_env_says_what_is_missing(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(DistributedError, match="RANK is not set: start this with torchrun"):
        join_from_env()


def test_a_peer_that_dies_mid_exchange_is_reported_not_waited_for(lm):
    cache = sl.prefill(lm, [[1, 2, 3, 4]]).cache
    peer = Peer(timeout_s=20, fault={"rank": 1, "kind": "exit", "after": 2}).start()
    try:
        peer.transfer(cache)
        t0 = time.time()
        with pytest.raises(WorkerDied, match="exited with code 17"):
            peer.transfer(cache)
        assert time.time() - t0 < 10
    finally:
        assert peer.close() == {1: 17}


def test_a_decode_worker_that_dies_fails_its_request_and_the_run_ends_cleanly(lm):
    reqs = serving.make_workload("chat", 4, rate_per_s=20, model=lm, seed=3, scale=0.05)
    victim = reqs[1].id
    cluster = Cluster("tiny", 1, 1, timeout_s=20, fault={"rank": 2, "kind": "exit", "request": victim,
                                                          "stage": "decode"}).start()
    t0 = time.time()
    res = cluster.serve(reqs)
    assert time.time() - t0 < 25
    assert cluster.group is None  # stopped: every worker process has exited
    by_id = {r.id: r for r in res.requests}
    assert len(by_id) == len(reqs) and all(r.done for r in res.requests)  # none lost
    dead = by_id[victim]
    assert dead.state == serving.State.FAILED and "worker D0 (rank 2) died with exit code 17" in dead.reject_reason
    assert len(dead.output) >= 1  # it was in flight: tokens had reached the client
    assert {r.state for r in res.requests} <= {serving.State.FINISHED, serving.State.FAILED}
    assert res.metrics()["failed"] == sum(r.state == serving.State.FAILED for r in res.requests)
    assert any("exit codes {1: 0, 2: 17}" in f for f in res.failures)  # the prefill worker exited cleanly


def test_a_silent_worker_fails_its_request_after_the_progress_timeout(lm):
    """What torchrun runs rely on (no process handles there): no news of a request for timeout_s fails it."""
    reqs = serving.make_workload("chat", 3, rate_per_s=20, model=lm, seed=4, scale=0.05)
    t0 = time.time()
    cluster = Cluster("tiny", 1, 1, timeout_s=3, join_timeout_s=30,
                      fault={"rank": 1, "kind": "hang", "request": reqs[0].id, "stage": "prefill"})
    res = cluster.start().serve(reqs)
    assert time.time() - t0 < 40
    hung = next(r for r in res.requests if r.id == reqs[0].id)
    assert hung.state == serving.State.FAILED and "no progress for 3 s while prefilling on P0/D0" in hung.reject_reason
    assert all(r.done for r in res.requests) and cluster.group is None
    assert any("2: 0" in f for f in res.failures)  # the decode worker exited cleanly (the hung one was killed)
