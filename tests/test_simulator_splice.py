"""A hand-off spliced into a decode stretch (splitlab.serving.splice) changes no decision: a split's run with
splices gives the step-by-step run's token times, admissions and workers, with the arrival falling inside the
stretch or after it, batches that fill up, prefill workers kept waiting for the memory of caches on the link,
first tokens on either side, layer-wise transfers and exact ties between arrivals and step ends."""
from __future__ import annotations

import numpy as np
import pytest

from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, Request, ServingConfig, make_workload
from splitlab.serving import splice
from splitlab.serving.cluster import Cluster

from test_simulator_fast_path import COST, TIES, StepByStep, outcome

SPLITS = [dict(prefill_workers=1, decode_workers=3),
          dict(prefill_workers=2, decode_workers=2, first_token_on="prefill"),
          dict(prefill_workers=2, decode_workers=3, max_batch=3),
          dict(prefill_workers=1, decode_workers=2, transfer_mode="layerwise"),
          # a slow link: caches arrive after the stretch's last step, and fill the prefill workers' memory
          dict(prefill_workers=2, decode_workers=2, link_bytes_per_s=4e7, kv_budget_bytes=2048 * 1500),
          dict(prefill_workers=3, decode_workers=9, kv_budget_bytes=2048 * 900, max_batch=6)]


def runs(reqs, cost, **options):
    """The step-by-step run, the fast one, and what the fast one spliced and woke: ``(slow, fast, counts)``."""
    slow = Cluster(StepByStep(cost), ServingConfig.disaggregated(trace=True, **options)).run([r.fresh() for r in reqs])
    cluster = Cluster(CostModelExecutor(cost), ServingConfig.disaggregated(trace=False, **options))
    counts = dict(spliced=0, ordinary=0, woken=0)
    join, wake = splice.join, cluster.on_wake

    def counted_join(*args):
        done = join(*args)
        counts["spliced" if done else "ordinary"] += 1
        return done

    def counted_wake(*args):
        counts["woken"] += 1
        return wake(*args)

    cluster.on_wake = counted_wake
    splice.join, saved = counted_join, splice.join
    try:
        fast = cluster.run([r.fresh() for r in reqs])
    finally:
        splice.join = saved
    return slow, fast, counts


@pytest.mark.parametrize("options", SPLITS, ids=str)
@pytest.mark.parametrize("workload, rate", [("chat", 40.0), ("code", 400.0)])
def test_spliced_runs_make_the_step_by_step_decisions(options, workload, rate):
    reqs = make_workload(workload, 300, rate, seed=5)
    slow, fast, counts = runs(reqs, COST, **options)
    assert outcome(slow) == outcome(fast)
    assert [r.transfer_end_s for r in slow.requests] == [r.transfer_end_s for r in fast.requests]
    assert counts["spliced"] > 0, counts  # the splice ran, not only the ordinary hand-off


def test_a_prefill_worker_waiting_for_memory_is_woken_when_a_spliced_cache_arrives():
    """The prefill worker holds four prompts: the fifth waits until a cache on the slow link has arrived, which no
    event marks when the cache was spliced; the wake does, at the arrival's time."""
    options = dict(prefill_workers=1, decode_workers=3, link_bytes_per_s=1e7, kv_budget_bytes=2048 * 450)
    rng = np.random.default_rng(0)
    reqs = [Request(i, i * 0.002, [1] * 100, int(rng.integers(20, 120))) for i in range(80)]
    slow, fast, counts = runs(reqs, COST, **options)
    assert outcome(slow) == outcome(fast)
    assert counts["spliced"] > 0 and counts["woken"] > 0, counts


@pytest.mark.parametrize("first_token_on", ["decode", "prefill"])
def test_splices_at_exact_ties_between_arrivals_and_step_ends(first_token_on):
    """Binary round numbers: caches arrive exactly at decode step ends and hand-offs fall on the step where a
    splice joins (a hand-off there sees the step ended, not yet the join)."""
    rng = np.random.default_rng(1)
    reqs = [Request(i, float(rng.integers(0, 60)) / 64, [1] * int(rng.integers(4, 60)), int(rng.integers(2, 60)))
            for i in range(120)]
    slow, fast, counts = runs(reqs, TIES, prefill_workers=2, decode_workers=2, first_token_on=first_token_on)
    assert outcome(slow) == outcome(fast)
    assert counts["spliced"] > 0, counts


def test_a_split_costs_fewer_events_with_splices():
    """The point of splicing: most hand-offs to a worker in a decode stretch need no event of their own (the
    arrival, the cut step, the step that takes the cache in), so a split below capacity runs about three events per
    request, not five."""
    reqs = make_workload("chat", 2000, 150.0, seed=0)
    cluster = Cluster(CostModelExecutor(CostModel()), ServingConfig.disaggregated(4, 12, trace=False))
    cluster.run(reqs)
    assert next(cluster.clock.seq) < 3.6 * len(reqs)


def test_a_one_token_request_on_the_link_does_not_hold_back_a_later_splice():
    """A request whose only token is its first is done when its cache arrives: it never joins the batch. On its way
    it blocked every later splice into a stretch that already held one, and those hand-offs then joined at the
    stretch's end, steps after the step where step by step they join (break30: 3 of 80 requests a step late)."""
    rng = np.random.default_rng(0)
    reqs = [Request(i, float(rng.integers(0, 30)) / 64, [1] * int(rng.integers(1, 60)), int(rng.integers(1, 60)))
            for i in range(80)]
    assert any(r.max_new_tokens == 1 for r in reqs)
    slow, fast, counts = runs(reqs, TIES, prefill_workers=1, decode_workers=2, kv_budget_bytes=2048 * 2100)
    assert outcome(slow) == outcome(fast)
    assert counts["spliced"] > 0, counts
