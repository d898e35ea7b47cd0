"""The simulator's fast path keeps each finished request's tokens as a span of its decode worker's clock (one entry
per step, :meth:`Request.defer_tokens`), expanded only when read: a reader sees the same ``output`` and
``token_times_s`` as step by step, metrics read the span without expanding it, and a copy or a pickle holds its own
lists."""
from __future__ import annotations

import copy
import pickle

import numpy as np

from splitlab.serving import CostModelExecutor, ServingConfig, make_workload
from splitlab.serving.cluster import Cluster
from splitlab.serving.metric_arrays import columns
from splitlab.serving.request import Request

from test_simulator_fast_path import COST, StepByStep


def runs(layout):
    reqs = make_workload("chat", 300, 40.0, seed=3)
    cfg = (ServingConfig.colocated(2, trace=False) if layout == "colocated" else
           ServingConfig.disaggregated(1, 2, trace=False))
    fast = Cluster(CostModelExecutor(COST), cfg).run([r.fresh() for r in reqs])
    slow = Cluster(StepByStep(COST), cfg).run([r.fresh() for r in reqs])
    return fast, slow


def test_a_fast_run_defers_its_token_times_and_readers_see_the_step_by_step_ones():
    for layout in ("colocated", "split"):
        fast, slow = runs(layout)
        deferred = [r for r in fast.requests if "_lazy" in r.__dict__]
        assert len(deferred) > 250, layout  # finished requests keep a span of the clock, not a copy
        c = columns(fast.requests)  # reads the spans ...
        assert all("_lazy" in r.__dict__ for r in deferred)  # ... without expanding them
        expected = columns(slow.requests)
        for name in expected:
            np.testing.assert_array_equal(c[name], expected[name], err_msg=f"{layout} {name}")
        for f, s in zip(fast.requests, slow.requests):  # the first read expands: the very floats
            assert (f.output, f.token_times_s) == (s.output, s.token_times_s)
            assert f.token_summary()[0] == len(f.token_times_s)
        assert not any("_lazy" in r.__dict__ for r in fast.requests)


def test_a_copy_or_a_pickle_of_a_deferred_request_holds_its_own_lists():
    fast, _ = runs("colocated")
    r = next(r for r in fast.requests if "_lazy" in r.__dict__)
    clock_len = len(r.__dict__["_lazy"][2])
    back = pickle.loads(pickle.dumps(r))
    assert "_lazy" not in back.__dict__ and len(back.token_times_s) == r.max_new_tokens < clock_len
    assert copy.deepcopy(r).token_times_s == r.token_times_s


def test_deferring_twice_keeps_the_tokens_in_order_and_other_attributes_still_raise():
    r = Request(0, 0.0, [1, 2], 6)
    r.emit(5, 1.0)
    clock = [2.0, 3.0, 4.0, 5.0, 6.0]
    r.defer_tokens(clock, 0, 2, 0)
    assert r.token_summary() == (3, 1.0, 2.0, 3.0)
    r.defer_tokens(clock, 3, 5, 0)
    assert r.token_summary() == (5, 1.0, 2.0, 6.0)
    assert r.output == [5, 0, 0, 0, 0] and r.token_times_s == [1.0, 2.0, 3.0, 5.0, 6.0]
    try:
        r.no_such_attribute
    except AttributeError as e:
        assert "no_such_attribute" in str(e)
    else:
        raise AssertionError("a missing attribute must raise AttributeError")
