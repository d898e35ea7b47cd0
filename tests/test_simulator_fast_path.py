"""The simulator's fast path (lazy token records and decode stretches, splitlab.serving.fast) changes no decision:
every token time, admission and worker of a run is the same with it as step by step (an executor that hides the
cost model from the cluster), with a trace (the timeline and memory log too) and without, below capacity and in
overload."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, Request, ServingConfig, make_workload, run
from splitlab.serving.cluster import Cluster
from splitlab.serving.executor import Executor

COST = CostModel(decode_per_token_s=3e-7, prefill_per_token2_s=1e-9)
# round binary numbers, so that step ends and arrivals tie exactly: ties must be broken as step by step
TIES = CostModel(prefill_base_s=2 ** -7, prefill_per_token_s=2 ** -12, decode_base_s=2 ** -8, decode_per_seq_s=0.0,
                 decode_per_token_s=0.0, transfer_base_s=2 ** -9, transfer_bytes_per_s=float("inf"))


def outcome(res):
    return ([(r.id, r.state.value, r.output, r.token_times_s, r.prefill_worker, r.decode_worker, r.finish_s)
             for r in res.requests], res.admissions)


class StepByStep(Executor):
    """The cost model's seconds, one step at a time: without ``decode_seconds`` the cluster sees no cost model and
    takes no fast path (the reference every fast run is compared with)."""

    def __init__(self, cost):
        self.sim = CostModelExecutor(cost)

    def __getattr__(self, name):
        if name in ("decode_seconds", "decode_run_seconds", "sim"):
            raise AttributeError(name)
        return getattr(self.sim, name)

    def prefill(self, slots, n_tokens):
        return self.sim.prefill(slots, n_tokens)

    def decode(self, batch):
        return self.sim.decode(batch)

    def transfer(self, slot, mode="whole"):
        return self.sim.transfer(slot, mode)

    @property
    def hybrid_path(self):  # as the cost model charges a chunked step: one forward, or two passes
        return self.sim.hybrid_path

    def hybrid(self, batch, slots, n_tokens):
        return self.sim.hybrid(batch, slots, n_tokens)


def both(reqs, cost, traced=False, **options):
    """The step-by-step run and the fast one (``traced``: with a trace)."""
    slow = Cluster(StepByStep(cost), ServingConfig(trace=True, **options))
    assert not slow.fast
    slow = slow.run([r.fresh() for r in reqs])
    fast_cluster = Cluster(CostModelExecutor(cost), ServingConfig(trace=traced, **options))
    assert fast_cluster.fast
    fast = fast_cluster.run([r.fresh() for r in reqs])
    return slow, fast


CONFIGS = [dict(workers=3), dict(workers=2, policy="chunked", chunk_tokens=64, max_batch=8),
           dict(workers=2, policy="decode-first"), dict(layout="disaggregated", prefill_workers=1, decode_workers=3),
           dict(layout="disaggregated", prefill_workers=2, decode_workers=2, first_token_on="decode",
                kv_budget_bytes=2048 * 600),
           dict(workers=2, kv_budget_bytes=2048 * 400, max_batch=4)]


@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("workload, rate", [("chat", 40.0), ("code", 200.0), ("research", 5.0)])
def test_fast_path_gives_identical_results(options, workload, rate):
    reqs = make_workload(workload, 120, rate, seed=3)
    slow, fast = both(reqs, COST, **options)
    assert outcome(slow) == outcome(fast)
    assert slow.metrics(1.0, 0.1)["slo_attainment"] == fast.metrics(1.0, 0.1)["slo_attainment"]


@pytest.mark.parametrize("options", CONFIGS[:4], ids=str)
def test_ties_between_step_ends_and_arrivals(options):
    """Arrivals at multiples of 1/64 s meet decode step ends of 1/256 s exactly."""
    rng = np.random.default_rng(0)
    reqs = [Request(i, float(rng.integers(0, 40)) / 64, [1] * int(rng.integers(4, 60)), int(rng.integers(2, 40)))
            for i in range(60)]
    slow, fast = both(reqs, TIES, **options)
    assert outcome(slow) == outcome(fast)


def test_decode_run_equals_step_by_step():
    for batch, context, steps in itertools.product([1, 7], [0, 1234], [1, 50]):
        run_s = COST.decode_run_s(batch, context, steps)
        assert all(run_s[i] == COST.decode_s(batch, context + i * batch) for i in range(steps))


class Curved(CostModel):
    """A cost model whose decode step is not linear in its context: the executor computes it step by step."""

    def decode_s(self, batch, context_tokens):
        return super().decode_s(batch, context_tokens) + 1e-9 * context_tokens ** 1.5


@pytest.mark.parametrize("cost", [COST, Curved()], ids=["linear", "curved"])
def test_decode_run_seconds_table_gives_the_step_by_step_floats(cost, monkeypatch):
    """The executor keeps each batch size's step seconds in a table (grown as runs ask, a run a slice of it): every
    run equals decode_seconds step by step, after the table grew, past its size limit and for an empty batch."""
    ex = CostModelExecutor(cost)
    for batch, context, steps in [(1, 0, 5), (3, 100, 50), (3, 10, 400), (1, 7, 3000), (5, 4, 1), (0, 9, 4)]:
        assert ex.decode_run_seconds(batch, context, steps) == [
            cost.decode_s(batch, context + i * batch) for i in range(steps)], (batch, context, steps)
    monkeypatch.setattr("splitlab.serving.simulated.RUN_TABLE_ENTRIES", 100)  # no room left: computed each time
    assert ex.decode_run_seconds(2, 50_000, 10) == [cost.decode_s(2, 50_000 + 2 * i) for i in range(10)]
    assert max(len(table) for table in ex._runs.values()) < 50_000


@pytest.mark.parametrize("options", [dict(workers=16), dict(workers=12, policy="chunked", chunk_tokens=96),
                                     dict(layout="disaggregated", prefill_workers=4, decode_workers=12),
                                     dict(layout="disaggregated", prefill_workers=3, decode_workers=9,
                                          kv_budget_bytes=2048 * 900, max_batch=6)], ids=str)
def test_router_index_picks_what_a_scan_picks_on_large_pools(options):
    """The fast path's router keeps loads in a sorted list (router.LoadIndex); on pools of many workers, under light and
    heavy load, it sends every request where the step-by-step run's scan of the pool does."""
    for rate in (60.0, 600.0):
        reqs = make_workload("chat", 400, rate, seed=5)
        slow, fast = both(reqs, COST, **options)
        assert outcome(slow) == outcome(fast)


OVERLOAD = [dict(workers=2, max_batch=4), dict(workers=2, policy="decode-first", max_batch=4),
            dict(workers=2, policy="chunked", chunk_tokens=64, max_batch=6),
            dict(layout="disaggregated", prefill_workers=1, decode_workers=1, max_batch=4),
            dict(layout="disaggregated", prefill_workers=2, decode_workers=1, max_batch=8, first_token_on="decode"),
            dict(layout="disaggregated", prefill_workers=1, decode_workers=2, max_batch=4, kv_budget_bytes=2048 * 900)]


@pytest.mark.parametrize("options", OVERLOAD, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_fast_path_gives_identical_results_in_overload(options):
    """Far above capacity (queues and joining lists of hundreds): full batches run decode stretches that arrivals
    do not cut (fast.sealed), and every decision is still the step-by-step one."""
    reqs = make_workload("code", 400, 400.0, seed=7)
    slow, fast = both(reqs, COST, **options)
    assert outcome(slow) == outcome(fast)
    assert max(len(r.output) for r in slow.requests) > 1 and slow.metrics(1.0, 0.1)["slo_attainment"] < 0.5


@pytest.mark.parametrize("rate", [40.0, 300.0])
@pytest.mark.parametrize("options", CONFIGS + [OVERLOAD[0], OVERLOAD[3]], ids=str)
def test_traced_fast_path_writes_the_step_by_step_trace(options, rate):
    """With a trace, the fast path (its stretches writing their steps' rows) gives the same timeline, memory log and
    transfers."""
    reqs = make_workload("chat", 150, rate, seed=3)
    slow, fast = both(reqs, COST, traced=True, **options)
    assert outcome(slow) == outcome(fast)
    for table in ("timeline", "kv_usage", "transfers"):
        a, b = getattr(slow, table), getattr(fast, table)
        assert a.astype(str).equals(b.astype(str)), table


def test_overload_costs_events_per_request_not_per_step():
    """Issue 19: 1P+1D at 1.5x its capacity walked the waiting requests on every event (quadratic). Now a full batch
    runs one stretch from one finish to the next, so the events of a run grow with its requests, not its steps; and
    the bytes a worker holds, kept as running sums, equal the sum over its resident requests at every step."""
    from splitlab.serving import Fixed, WorkloadSpec
    reqs = make_workload(WorkloadSpec("256/128", Fixed(256), Fixed(128)), 3000, 27.0, seed=0)
    # batches of 16 (the old default cap): 27/s is 1.5x this split's capacity, whose full batch runs stretches
    cluster = Cluster(CostModelExecutor(), ServingConfig.disaggregated(1, 1, max_batch=16, trace=False))
    res = cluster.run([r.fresh() for r in reqs])
    steps = sum(len(w.clock) for w in cluster.workers)
    events = next(cluster.clock.seq)
    assert steps > 20_000 and events < 4 * len(reqs) < steps, (steps, events)
    assert res.metrics(1.0, 0.1)["slo_attainment"] < 0.2  # overloaded indeed

    traced = Cluster(StepByStep(COST), ServingConfig.disaggregated(1, 1, max_batch=4))
    checked = []

    def check(t, worker, *rest):
        for w in traced.workers:
            exact = w.memory.bytes_per_token * sum(s.context for s in w.slots())
            assert w.used_bytes() == exact
            checked.append(len(w.joining) + len(w.outbox))
        return on_done(t, worker, *rest)

    on_done, traced.on_done = traced.on_done, check
    traced.run(make_workload("code", 300, 400.0, seed=2))
    assert max(checked) > 100  # hundreds of requests parked while the sums were checked


def test_prompt_id_range_is_computed_once_and_follows_a_replaced_prompt():
    """Issue 19: an arrival's vocabulary check took min and max over the prompt on every run (3-6% of a large one);
    the range is now taken when the request is made and shared by its fresh copies, and a prompt replaced by another
    list is read again, so a bad id is still refused."""
    r = Request(0, 0.0, [5, 9, 7], 3)
    assert r.prompt_id_range == (5, 9)
    copy = r.fresh()
    assert copy.prompt is r.prompt and copy.prompt_id_range == (5, 9)
    copy.prompt = [4, -2]
    assert copy.prompt_id_range == (-2, 4) and r.prompt_id_range == (5, 9)
    res = run([copy, Request(1, 0.0, [3], 2)], ServingConfig(trace=False))
    assert res.requests[0].state.value == "rejected" and "-2" in res.requests[0].reject_reason
    assert res.requests[1].state.value == "finished"


@pytest.mark.parametrize("options", [CONFIGS[0], CONFIGS[3], OVERLOAD[0], OVERLOAD[3]], ids=str)
@pytest.mark.parametrize("rate", [40.0, 400.0])
def test_a_stopped_run_stops_where_the_step_by_step_run_does(options, rate):
    """A breaker's case: a goodput run's stop was called only at the fast path's own instants, so a run stopped at
    the next one after the step end where the step-by-step run stopped (0.6836 s, not 0.6810 s). Now the silent
    steps' ends are instants too for a stop that says when it may next say True (Verdict.next): the same end, the
    same tokens and the same requests left failing."""
    from splitlab.serving.goodput_verdict import STOPPED, Verdict
    reqs = make_workload("code", 300, rate, seed=4)
    runs = []
    for backend, fast in ((StepByStep(COST), False), (CostModelExecutor(COST), True)):
        copies = [r.fresh() for r in reqs]
        cluster = Cluster(backend, ServingConfig(trace=False, **options))
        assert cluster.fast is fast
        verdict = Verdict(copies[20:], 0.05, 0.004, 0.9)
        res = cluster.run(copies, stop=verdict)
        runs.append((outcome(res), verdict.decided, sum(r.reject_reason == STOPPED for r in copies)))
    assert runs[0] == runs[1]
    assert runs[0][1] is not None and runs[0][2] > 0  # it did stop early, with requests left


class _Promise:
    """A stop that passes a Verdict's answers through but says ``next`` as given (None: no ``next`` at all)."""

    def __init__(self, verdict, next_s):
        self.verdict, self.reason = verdict, verdict.reason
        if next_s is not None:
            self.next = next_s

    def __call__(self, t):
        return self.verdict(t)


@pytest.mark.parametrize("next_s", [float("nan"), -float("inf")])
def test_a_stop_whose_next_is_nan_or_minus_inf_stops_where_the_step_by_step_run_does(next_s):
    """A breaker's case: a stop whose ``next`` was NaN was never called at the silent steps' ends (NaN < t is
    False), so its fast run stopped later than the step-by-step one (1.5996 s against 1.5614 s); NaN and -inf now
    promise nothing, so it is called at every instant. A stop without ``next`` may stop later, as documented."""
    from splitlab.serving.goodput_verdict import Verdict
    reqs = make_workload("code", 300, 40.0, seed=4)
    runs = []
    for backend, wrap in ((StepByStep(COST), False), (CostModelExecutor(COST), True)):
        copies = [r.fresh() for r in reqs]
        verdict = Verdict(copies[20:], 0.05, 0.004, 0.9)
        res = Cluster(backend, ServingConfig(trace=False, workers=2, max_batch=4)).run(
            copies, stop=_Promise(verdict, next_s) if wrap else verdict)
        runs.append((outcome(res), verdict.decided))
    assert runs[0] == runs[1] and runs[0][1] is not None
