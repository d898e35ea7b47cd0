"""Chapter 8's section-1 notes (issue 22): the simulator's distance from the live runs said per layout, and what a
printed goodput is beside its curve. Cost-model runs only: no model, no timing."""
from __future__ import annotations

import pandas as pd
import pytest

from splitlab import serving
from splitlab.teach.figures import confusions as plots
from splitlab.teach.figures.confusions_sim import crossing, step_ratios

SPEC = serving.WorkloadSpec("long prompts", serving.Uniform(192, 576), serving.Uniform(16, 40))
CONFIGS = {"prefill-first": serving.ServingConfig.colocated(2, kv_budget_bytes=None),
           "chunked": serving.ServingConfig.colocated(2, policy="chunked", chunk_tokens=128, kv_budget_bytes=None),
           "split 1P+1D": serving.ServingConfig.disaggregated(1, 1, kv_budget_bytes=None)}


def test_simulator_note_says_each_layouts_distance_and_the_steps_ratio():
    cost = serving.CostModel()
    reqs = serving.make_workload(SPEC, 8, 20.0)
    sim = serving.compare(reqs, CONFIGS, serving.CostModelExecutor(cost)).results
    for name, res in sim.items():  # the simulator charges the cost model's seconds: every ratio is 1
        r = step_ratios(res, cost)
        assert r["decode"] == pytest.approx(1.0, rel=1e-3), name
        assert r["prefill"] == pytest.approx(1.0, rel=1e-3) if name != "chunked" else r["prefill"] != r["prefill"], name
    note = plots.simulator_note(sim, sim, cost)
    assert all(f"{n} TTFT" in note for n in CONFIGS) and "(1x)" in note
    assert "split 1P+1D decode steps 1x (the slowest 1x), whole prefills 1x and KV transfers 1x" in note


def test_goodput_note_reads_the_search_and_the_curve():
    sweep = pd.DataFrame({"config": ["a"] * 4, "rate_per_s": [2.0, 4.0, 6.0, 8.0],
                          "slo_attainment": [1.0, 0.95, 0.85, 0.2]})
    assert crossing(sweep) == pytest.approx(5.0)  # halfway from 95% at 4/s to 85% at 6/s
    assert crossing(sweep.assign(slo_attainment=0.95)) is None
    g = serving.goodput(SPEC, CONFIGS["split 1P+1D"], serving.CostModelExecutor(), ttft_slo_s=0.5, tpot_slo_s=0.05)
    note = plots.goodput_note(sweep.assign(config="split 1P+1D"), {"split 1P+1D": g}, 100)
    assert "falls below 90% at 5 requests/s on the axis, 2.5 per worker" in note and "one run of 100 requests" in note
    assert "at least 2,000 requests" in note and "the search's run there met both SLOs for" in note


def test_simulator_note_points_to_the_slow_steps_where_the_means_do_not_explain_a_ttft_gap(monkeypatch):
    """ch08's split: TTFT 481 ms live against 323 simulated, its decode steps 1.1x the cost model's on average."""
    import dataclasses

    from splitlab.teach.figures import confusions_sim

    cost = serving.CostModel()
    slow = dataclasses.replace(cost, prefill_base_s=4 * cost.prefill_base_s + 0.02)
    reqs = serving.make_workload(SPEC, 8, 20.0)
    one = {"prefill-first": CONFIGS["prefill-first"]}
    live = serving.compare(reqs, one, serving.CostModelExecutor(slow)).results
    sim = serving.compare(reqs, one, serving.CostModelExecutor(cost)).results
    assert sim["prefill-first"].metrics()["ttft_s"]["mean"] < 0.75 * live["prefill-first"].metrics()["ttft_s"]["mean"]
    monkeypatch.setattr(confusions_sim, "step_ratios", lambda res, c: {"decode": 1.1, "slowest decode": 2.9,
                                                                       "prefill": 0.94})
    note = plots.simulator_note(live, sim, cost)
    assert "prefill-first decode steps 1.1x (the slowest 2.9x) and whole prefills 0.94x" in note
    assert "its slowest decode step 2.9x): only a queue amplifying those slower steps" in note
    assert "does not break it down further" in note and "admits it" not in note  # colocated: no admission clause
    monkeypatch.setattr(confusions_sim, "step_ratios", lambda res, c: {"decode": 1.6, "slowest decode": 2.9,
                                                                       "prefill": 1.0})
    assert "break it down" not in plots.simulator_note(live, sim, cost)  # the means may explain it
