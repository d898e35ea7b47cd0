"""A cost model carries how its engine runs a hybrid step (``CostModel.hybrid_path``): a calibration of a family
that cannot fuse (sliding window, MLA) charges two passes, the decode step then the chunk's prefill, as that
engine runs them, so the simulator does not favour chunked prefill on it; the JSON keeps the path, an older
file loads as fused, and ``combine`` refuses calibrations that disagree."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from splitlab import costmodel
from splitlab.costmodel import CalibrationError, CostModel, roofline_cost_model
from splitlab.costmodel.model import hybrid_terms
from splitlab.serving import CostModelExecutor, Request, ServingConfig, make_workload, run
from splitlab.serving.cluster import Cluster
from splitlab.serving.executor import DecodeBatch, Slot, run_step

from test_costmodel import _calibration, _measured

LINEAR = CostModel(prefill_base_s=2e-3, prefill_per_token_s=1e-4, prefill_per_token2_s=1e-8, decode_base_s=3e-3,
                   decode_per_seq_s=2e-4, decode_per_token_s=1e-7, hybrid_per_row_s=5e-5, padded_prefill=True)
REASON = "sliding-window layers (a packed row's keys would fall out of its window)"


def two_pass(cost):
    return cost.with_(hybrid_path="two-pass", two_pass_reason=REASON)


def test_a_two_pass_cost_model_charges_the_decode_step_and_the_chunk_prefill():
    t = hybrid_terms(4, 400, [(64, 32)])
    apart = LINEAR.decode_s(4, 400) + LINEAR.prefill_s(32, t["chunk_squares"], t["masked_pairs"])
    assert two_pass(LINEAR).hybrid_s(**t) == pytest.approx(apart, rel=1e-12)
    assert LINEAR.hybrid_s(**t) == two_pass(LINEAR).fused_hybrid_s(**t) < apart  # the fused form, whatever the path
    # the roofline (memory-bound small step): the fused step saves exactly one weight read and one step overhead
    roof = roofline_cost_model("Llama-3-8B", "H100", step_overhead_s=1e-4)
    assert roof.hybrid_path == "fused" and CostModel().hybrid_path == "fused"
    small = hybrid_terms(8, 8 * 512, [(256, 16)])
    saved = two_pass(roof).hybrid_s(**small) - roof.hybrid_s(**small)
    assert saved == pytest.approx(roof.weight_bytes / roof.bandwidth_bytes_per_s + 1e-4, rel=1e-9)
    with pytest.raises(ValueError, match="hybrid_path must be one of 'fused', 'two-pass', got 'packed'"):
        LINEAR.with_(hybrid_path="packed")


def test_the_simulator_charges_a_two_pass_step_as_the_engine_runs_it():
    sim = CostModelExecutor(two_pass(LINEAR))
    assert sim.hybrid_path == "two-pass" and CostModelExecutor(LINEAR).hybrid_path == "fused"
    decoding = [Slot(Request(i, 0.0, [1] * 40, 8), prefilled=40) for i in range(3)]
    for s in decoding:
        s.request.output.append(0)
    chunk = Slot(Request(9, 0.0, [1] * 100, 4), prefilled=30)
    t = hybrid_terms(3, 120, [(30, 50)])
    sim.step_log = []
    out = run_step(sim, DecodeBatch(decoding), decoding, [chunk], [50])
    assert not out.fused and chunk.prefilled == 80
    assert out.decode_s == LINEAR.decode_s(3, 120) and out.prefill_s == LINEAR.prefill_s(50, 80 ** 2 - 30 ** 2,
                                                                                         50 * 80)
    assert out.seconds == pytest.approx(two_pass(LINEAR).hybrid_s(**t), rel=1e-12)
    assert [r["kind"] for r in sim.step_log] == ["decode", "prefill", "two-pass"]
    assert sim.step_log[-1] == dict(kind="two-pass", step_s=out.seconds, **t)


def test_a_simulated_chunked_run_on_a_two_pass_model_says_so_and_its_fast_path_agrees():
    reqs = make_workload("chat", 40, 30.0, seed=3, scale=0.3)
    cfg = ServingConfig.colocated(2, policy="chunked", chunk_tokens=48, max_batch=8, kv_budget_bytes=None)
    fused, slow = run(reqs, cfg, CostModelExecutor(LINEAR)), run(reqs, cfg, CostModelExecutor(two_pass(LINEAR)))
    assert fused.hybrid_path == "fused" and slow.hybrid_path == "two-pass"
    # two passes pay a decode step's fixed cost beside every chunk: the same requests take longer
    assert slow.metrics()["e2e_s"]["mean"] > fused.metrics()["e2e_s"]["mean"]
    from test_simulator_fast_path import StepByStep
    step_by_step = Cluster(StepByStep(two_pass(LINEAR)), cfg.with_(trace=True))
    assert not step_by_step.fast and step_by_step.backend.hybrid_path == "two-pass"
    ref = step_by_step.run([r.fresh() for r in reqs])
    assert [r.token_times_s for r in ref.requests] == [r.token_times_s for r in slow.requests]


def test_calibration_json_keeps_the_path_and_an_older_file_loads_as_fused(tmp_path):
    cal = _calibration()
    cal.cost = two_pass(cal.cost)
    back = costmodel.load(costmodel.save(cal, tmp_path / "cal.json"))
    assert back.cost == cal.cost and back.cost.hybrid_path == "two-pass" and back.cost.two_pass_reason == REASON
    data = json.loads((tmp_path / "cal.json").read_text())
    del data["cost_model"]["hybrid_path"], data["cost_model"]["two_pass_reason"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    old = costmodel.load(tmp_path / "old.json").cost
    assert old.hybrid_path == "fused" and old.two_pass_reason is None
    for field, value, why in (("hybrid_path", "packed", "must be fused or two-pass"),
                              ("two_pass_reason", 5, "must be a string or null")):
        data = json.loads((tmp_path / "cal.json").read_text())
        data["cost_model"][field] = value
        (tmp_path / "bad.json").write_text(json.dumps(data))
        with pytest.raises(CalibrationError, match=f"cost_model.{field} {why}"):
            costmodel.load(tmp_path / "bad.json")


def test_combine_keeps_the_path_and_refuses_calibrations_that_disagree():
    a, b = _measured(1.0), _measured(1.5)
    a.cost, b.cost = two_pass(a.cost), two_pass(b.cost)
    both = costmodel.combine([a, b]).cost
    assert both.hybrid_path == "two-pass" and both.two_pass_reason == REASON
    with pytest.raises(ValueError, match=r"ran hybrid steps differently \(fused, two-pass"):
        costmodel.combine([a, _measured(1.5)])


def test_calibrating_a_sliding_window_model_gives_a_two_pass_cost_model():
    """A real fallback family: tiny random-weight Mistral with a sliding window (tests/tiny_families.py)."""
    import splitlab as sl
    from tiny_families import loaded
    lm = loaded("mistral-sw")
    cal = sl.profiling.calibrate(lm, prompt_tokens=[8, 16, 32], decode_batches=[1, 2], contexts=[16, 24],
                                 transfer_tokens=[8, 16], chunk_tokens=[4, 8], chunk_prefixes=[8], repeats=1)
    assert cal.cost.hybrid_path == "two-pass" and "sliding-window" in cal.cost.two_pass_reason
    assert not any(r.get("hybrid_rows") for r in cal.fits["prefill"].rows)  # no fused forward measured
    assert sl.serving.ModelExecutor(lm, warm=False).fused_unsupported == cal.cost.two_pass_reason


def test_paired_runs_keep_their_hybrid_steps_and_the_page_says_how_they_ran():
    """Chapter 6's sentence after its chunked runs, from the runs' own step records and the cost model."""
    from test_simulator_fast_path import StepByStep
    from splitlab.teach.figures import split_seeds
    configs = {"2 colocated": ServingConfig.colocated(2, max_batch=8, kv_budget_bytes=None),
               "2 chunked 48": ServingConfig.colocated(2, policy="chunked", chunk_tokens=48, max_batch=8,
                                                       kv_budget_bytes=None)}
    words, kept = {}, {}
    for name, cost in (("fused", LINEAR), ("two-pass", two_pass(LINEAR))):
        ex = StepByStep(cost)  # off the fast path: run_step records every step
        runs = split_seeds.paired_runs("chat", 20, 30.0, configs, ex, 1.0, 1.0, seeds=(0, 1), scale=0.3)
        assert ex.step_log is None and len(runs.hybrid_steps) >= 10  # the executor's record left as it was
        assert {r["kind"] for r in runs.hybrid_steps} == {"hybrid" if name == "fused" else "two-pass"}
        words[name], kept[name] = split_seeds.hybrid_note(runs, cost), runs
        measured = sorted(r["step_s"] for r in runs.hybrid_steps)
        median = split_seeds.fmt3(1e3 * float(pd.Series(measured).median()))
        assert f"{median} ms" in words[name]
    assert words["fused"].startswith("The chunked runs' ") and "ran as one fused forward each" in words["fused"]
    assert "(medians, +0%, within the 20% we allow a prediction)" in words["fused"]  # the simulator: exact
    dear = LINEAR.with_(hybrid_per_row_s=LINEAR.hybrid_per_row_s + 0.01)  # predicts fused steps far longer
    assert "beyond the 20% we allow a prediction: a chunk budget sized on the prediction (the 'tpot' budget) gives " \
           "steps shorter than it planned" in split_seeds.hybrid_note(kept["fused"], dear)
    assert words["two-pass"].startswith("This model's family (sliding-window layers) runs hybrid steps in two "
                                        "passes, and the simulator charges two passes too")
    assert "a fused engine's step would cost" in words["two-pass"]
    stale = split_seeds.hybrid_note(runs, LINEAR)  # a fused cost model beside a two-pass run
    assert "this cost model charges one fused forward" in stale
