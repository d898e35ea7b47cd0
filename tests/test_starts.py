"""The planner's search starts (planning/starts.py): a conditional split learns only from splits of its own rule,
a plain split only from plain ones (a conditional search once started from a plain split's corrected start)."""
import math
from types import SimpleNamespace

import pytest

import splitlab as sl
from splitlab.costmodel import CostModel
from splitlab.planning import closed_form
from splitlab.planning.starts import Starts
from splitlab.serving import Fixed, ServingConfig, WorkloadSpec


def split(x, y, goodput, binding, **rule):
    return SimpleNamespace(outcome="found", layout="disaggregated", policy="prefill-first", workers=x + y,
                           prefill_workers=x, decode_workers=y, goodput_rps_per_worker=goodput,
                           first_guess_rps_per_worker=1.0, binding_slo=binding,
                           config=ServingConfig.disaggregated(x, y, **rule))


def test_conditional_and_plain_splits_learn_apart():
    s = Starts(prefill_rps=10.0, decode_rps=20.0)
    s.learn(split(1, 1, 4.0, "ttft"))               # plain: the prefill pool reaches 8 of the closed form's 10
    assert s.start("prefill-first", 1, 1, 5.0) == (pytest.approx(min(10 * 0.8, 20) / 2), True)
    rule = {"local_prefill_tokens": 512}
    assert s.start("prefill-first", 1, 1, 5.0, rule) == (5.0, False)  # nothing learned for this rule yet
    s.learn(split(1, 1, 9.0, "tpot", **rule))        # the conditional's decode pool: 18 of 20
    assert s.start("prefill-first", 2, 1, 5.0, rule) == (pytest.approx(min(20.0, 18.0) / 3), True)
    assert s.start("prefill-first", 2, 1, 5.0) == (pytest.approx(min(16.0, 20.0) / 3), True)  # plain: unchanged
    assert s.start("prefill-first", 1, 1, 5.0, {"local_prefill_tokens": math.inf}) == (5.0, False)
    assert s.start("prefill-first", 1, 1, 5.0, {"local_prefill_tokens": None}) == s.start("prefill-first", 1, 1, 5.0)


def test_the_planner_starts_each_conditional_family_at_the_closed_form():
    cost = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-4, decode_base_s=2e-3, decode_per_seq_s=0.0,
                     decode_per_token_s=0.0, transfer_base_s=0.0, transfer_bytes_per_s=math.inf)
    p = sl.planner.plan(cost, WorkloadSpec("long prompts", Fixed(400), Fixed(20)), ttft_slo_s=0.2, tpot_slo_s=0.004,
                        max_workers=3, chunk_tokens=(), progress=False, max_requests=300,
                        local_prefill_tokens=[math.inf])
    g = p.first_guess
    conditional = [c for c in p.candidates if c.config.local_prefill_tokens is not None]
    assert len(conditional) == 3
    first = min(conditional, key=lambda c: (c.workers, c.prefill_workers))  # 1P+1D, the family's first search
    closed = closed_form.split_capacity(g["prefill_rps"], g["decode_rps"], 1, 1)
    assert first.result.points[0]["rate_per_worker"] == pytest.approx(max(closed, 1e-3))
