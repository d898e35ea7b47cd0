"""Failures between processes end with a clear result inside a configurable timeout, never a hang: a peer that
never joins or dies mid-exchange, a Peer that timed out (broken from then on), bad Peer arguments refused on the
caller's side, a decode worker that dies (its request completes on the other one), a worker that stops answering
(its requests are served elsewhere), a launcher environment that is missing or points at nobody."""
from __future__ import annotations

import time

import pytest

import splitlab as sl
from splitlab import serving
from splitlab.common.faults import KillWorker, SlowWorker
from splitlab.serving import ServingConfig
from splitlab.transfer.group import DistributedError, PeerJoinTimeout, WorkerDied, free_port, join_from_env
from splitlab.transfer.peer import Peer, PeerBroken


def test_a_peer_that_never_joins_times_out_with_a_clear_error():
    t0 = time.time()
    with pytest.raises(PeerJoinTimeout, match=r"worker rank\(s\) \[1\] of 1 did not join within 3 s"):
        Peer(join_timeout_s=3, fault=KillWorker("rank1", "join", hang=True)).start()
    assert time.time() - t0 < 60  # 3 s plus starting the process (longer on a loaded machine); the child was killed


def test_joining_a_group_whose_rank_0_never_comes_times_out(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))  # nobody listens there
    t0 = time.time()
    with pytest.raises(PeerJoinTimeout, match=r"rank 1: the group of 2 did not form within 1.5 s \(the join window\)"):
        join_from_env(timeout_s=1.5, join_timeout_s=1.5)
    assert time.time() - t0 < 60  # 1.5 s plus trying to connect (seconds on a loaded machine): no hang


def test_join_from_env_says_what_is_missing(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(DistributedError, match="RANK is not set: start this with torchrun"):
        join_from_env()


def test_a_peer_that_dies_mid_exchange_is_reported_not_waited_for(lm):
    cache = sl.prefill(lm, [[1, 2, 3, 4]]).cache
    peer = Peer(timeout_s=120, fault=KillWorker("peer", "op", after=2)).start()
    try:
        peer.transfer(cache)
        t0 = time.time()
        with pytest.raises(WorkerDied, match="exited with code 17"):
            peer.transfer(cache)
        assert time.time() - t0 < 60  # seen when the child exits, not after the timeout (120 s)
        with pytest.raises(PeerBroken, match="this peer is broken .*WorkerDied"):
            peer.transfer(cache)  # refused here, not sent to a child that is gone
    finally:
        assert peer.close() == {1: 17}


def test_a_peer_that_times_out_is_broken_and_bad_arguments_never_reach_the_child(lm):
    cache = sl.prefill(lm, [[1, 2, 3, 4]]).cache
    with Peer(timeout_s=15, fault=KillWorker("peer", "op", after=2, hang=True)) as peer:  # the good op: 15 s
        for bad, error in ((dict(mode="bytewise"), ValueError), (dict(segments="all"), ValueError),
                           (dict(model=3), TypeError)):
            with pytest.raises(error):
                peer.transfer(cache, **bad)
        with pytest.raises(TypeError, match="cache must be a splitlab.KVCache"):
            peer.transfer(cache.keys)
        with pytest.raises(ValueError, match="n_tokens must be an integer >= 1"):
            peer.decode(cache, [1], 0, model="tiny")
        with pytest.raises(ValueError, match="raw needs at least one byte"):
            peer.raw(0)
        assert peer.transfer(cache)["nbytes"] == cache.nbytes  # the child is fine: nothing bad reached it
        with pytest.raises(DistributedError, match="did not answer"):
            peer.transfer(cache)  # the child hangs in its 2nd operation
        with pytest.raises(PeerBroken):
            peer.raw(1024)


def test_a_killed_decode_worker_s_request_completes_on_the_other_one(lm):
    reqs = serving.make_workload("chat", 4, rate_per_s=20, model=lm, seed=3, scale=0.05)
    victim = reqs[0].id
    reference = serving.reference_tokens(lm, reqs)
    with serving.DistributedBackend("tiny", timeout_s=20) as b:
        b.prepare(3)  # started first: at load 20 starting workers alone took over a minute
        t0 = time.time()
        res = serving.run(reqs, ServingConfig.disaggregated(1, 2), b,
                          faults=KillWorker("D0", "step", after=2, request=victim))
        codes = b.close()
    assert time.time() - t0 < 150  # no hang (a loaded 2-core machine took 66 s, starting the workers included)
    by_id = {r.id: r for r in res.requests}
    assert all(r.state == serving.State.FINISHED for r in res.requests)
    assert by_id[victim].decode_worker == "D1" and by_id[victim].retries == 1
    assert res.tokens() == reference  # served again from its prompt and emitted tokens: the same tokens
    assert any("D0 lost" in n and "exited with code 17" in n for n in res.notes)
    assert codes[2] == -9 or codes[2] == 17


def test_a_silent_worker_is_lost_after_the_timeout_and_its_requests_are_served_elsewhere(lm):
    reqs = serving.make_workload("chat", 3, rate_per_s=20, model=lm, seed=4, scale=0.05)
    # 3 workers: the group forms in the join window, not in timeout_s; every step of the healthy workers answers
    # within 15 s even on a loaded machine (at 2 s, 13 of 24 requests failed at load 12: test_queueing_is_not_a_stall)
    with serving.DistributedBackend("tiny", timeout_s=15) as b:
        b.prepare(3)  # started first: at load 20 starting workers alone took over a minute
        t0 = time.time()
        res = serving.run(reqs, ServingConfig.disaggregated(2, 1), b,
                          faults=KillWorker("P0", "step", request=reqs[0].id, hang=True))
    assert time.time() - t0 < 150  # no hang (a loaded 2-core machine took 66 s, starting the workers included)
    assert all(r.state == serving.State.FINISHED for r in res.requests)
    assert any("P0 lost" in n and "no answer for 15 s" in n for n in res.notes)
    assert {r.prefill_worker for r in res.requests} == {"P1"}


def test_every_request_fails_with_its_reason_when_a_pool_is_gone(lm):
    reqs = serving.make_workload("chat", 3, rate_per_s=50, model=lm, seed=5, scale=0.05)
    with serving.DistributedBackend("tiny", timeout_s=20) as b:
        res = serving.run(reqs, ServingConfig.disaggregated(1, 1), b, faults=KillWorker("D0", "receive"))
    assert all(r.done for r in res.requests) and len(res.failed) == len(reqs)
    assert all("no decode worker left" in r.reject_reason for r in res.failed)
    assert res.metrics()["failed"] == len(reqs)


def test_queueing_is_not_a_stall(lm):
    """Many long prompts at once: requests wait for the prefill worker and for batch places far longer than the
    timeout, and none of them fails (only a worker that holds work and says nothing stalls). The prefill worker
    pauses 0.5 s per step, so the queue outlasts the timeout however fast the machine is, while the timeout (8 s)
    stays far above a step even on a loaded machine (at 2 s, 13 of 24 requests failed at load average 12)."""
    reqs = [serving.Request(i, 0.0, sl.profiling.random_prompt(lm, 1000, seed=i), 4) for i in range(24)]
    with serving.DistributedBackend("tiny", timeout_s=8, join_timeout_s=120) as b:
        res = serving.run(reqs, ServingConfig.disaggregated(1, 1, max_batch=2, max_prefill_tokens=1000), b,
                          faults=SlowWorker("P0", "step", 0.5))
    assert res.metrics()["completed"] == len(reqs) and res.notes == []
    assert max(r.token_times_s[0] - r.arrival_s for r in res.requests) > 8  # the last ones waited past the timeout
