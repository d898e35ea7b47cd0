"""Chapter 6 (the split): its formulas against cost-model runs with round numbers, its checkers, and a smoke run
of its explorer on the tiny model."""
from __future__ import annotations

import math

import matplotlib
import pytest

matplotlib.use("Agg")

from splitlab.teach import check  # noqa: E402
from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, Fixed, WorkloadSpec, compare, contenders, make_workload  # noqa: E402
from splitlab.teach.figures.style import fmt3  # noqa: E402

# prefill 1 ms per prompt token, a decode step 10 ms whatever the batch, transfers 1 GB/s
COST = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-3, decode_base_s=0.01, decode_per_seq_s=0.0,
                 decode_per_token_s=0.0, transfer_base_s=0.0, transfer_bytes_per_s=1e9, kv_bytes_per_token=100)
SPEC = WorkloadSpec("fixed", Fixed(100), Fixed(40))  # prefill 0.1 s, 40 tokens


def test_colocated_tpot_formula_and_split_tpot_on_a_cost_model():
    load = 0.8  # rate x prefill time
    cmp = compare(make_workload(SPEC, 300, load / 0.1, seed=1), contenders(kv_budget_bytes=None),
                  CostModelExecutor(COST))
    assert cmp.tokens_identical
    colocated = cmp.colocated.metrics()["tpot_s"]["mean"]
    split = cmp.disaggregated.metrics()["tpot_s"]["mean"]
    predicted = 0.01 / (1 - load / 2)  # the decode step stretched by the prefill share of a worker
    assert colocated == pytest.approx(predicted, rel=0.2)
    assert 0.01 <= split < 0.011  # a decode step; only the first gap may wait for a step already running
    assert check.colocated_tpot(predicted, 0.01, load / 0.1, 2, 0.1)


def test_colocated_tpot_checker():
    assert check.colocated_tpot(0.002 / (1 - 0.3), decode_step_s=0.002, rate_per_s=6, workers=2, mean_prefill_s=0.1)
    assert not check.colocated_tpot(0.002, decode_step_s=0.002, rate_per_s=6, workers=2, mean_prefill_s=0.1)
    assert not check.colocated_tpot(None, 0.002, 6, 2, 0.1)
    assert not check.colocated_tpot(0.1, 0.002, 30, 2, 0.1)  # a worker would need 150% of its time for prefill


def test_transfer_seconds_checker(lm):
    per_token = 2 * lm.geometry.layers * lm.geometry.kv_heads * lm.geometry.head_dim * lm.dtype.itemsize
    assert check.transfer_seconds(1000 * per_token / 1e8, lm, prompt_tokens=1000, link_bytes_per_s=1e8)
    assert not check.transfer_seconds(1000 * per_token / 1e9, lm, prompt_tokens=1000, link_bytes_per_s=1e8)
    assert not check.transfer_seconds("fast", lm, prompt_tokens=1000, link_bytes_per_s=1e8)


def test_min_prefill_workers_checker():
    assert check.min_prefill_workers(2, rate_per_s=12, mean_prefill_s=0.1, max_utilization=0.7)  # 1.2 / 0.7
    assert not check.min_prefill_workers(1, rate_per_s=12, mean_prefill_s=0.1, max_utilization=0.7)
    assert check.min_prefill_workers(1, rate_per_s=7, mean_prefill_s=0.1, max_utilization=0.7)  # exactly 0.7
    assert check.min_prefill_workers(1, rate_per_s=0.1, mean_prefill_s=0.1)
    with pytest.raises(ValueError):
        check.min_prefill_workers(1, 1, 0.1, max_utilization=0)
    assert math.ceil(1.2 / 0.7) == 2


def test_split_explorer_draws_a_static_figure():
    import matplotlib.pyplot as plt

    from splitlab.teach import widgets

    box = widgets.split_explorer(COST, "code", rate_per_s=20, prefill_workers=1, decode_workers=1, ttft_slo_s=1.0,
                                 tpot_slo_s=0.05, n_requests=30)
    assert len(box.children[0].children) == 3  # rate, P, D
    assert plt.get_fignums(), "the explorer leaves a static figure"
    plt.close("all")


def test_chapter_6_and_7_checkers():
    import splitlab as sl
    assert check.split_rate_per_worker(8.0, prefill_rps=10, decode_rps=16, prefill_workers=2, decode_workers=1) \
        is False  # min(20, 16) / 3 = 5.33
    assert check.split_rate_per_worker(16 / 3, 10, 16, 2, 1)
    plan = sl.planner.plan(COST, SPEC, ttft_slo_s=0.5, tpot_slo_s=0.05, max_workers=2, chunk_tokens=(),
                           progress=False, max_requests=300)
    kind = "split" if plan.best.layout == "disaggregated" else "colocated"
    assert check.planner_winner(kind, plan) and not check.planner_winner("nonsense", plan)
    assert not check.planner_winner({"split": "colocated", "colocated": "split"}[kind], plan)
    assert check.best_split_ratio("3P+1D", prefill_rps=10, decode_rps=30, max_workers=4)  # 30 / 4 = 7.5 per worker
    assert not check.best_split_ratio("1P+1D", 10, 30, 4)
    assert check.cost_per_million_tokens(2.0 / 3600 / (5 * 100) * 1e6, 2.0, 5, 100)
    import pandas as pd
    curve = pd.DataFrame(dict(rate_per_s=[4, 8, 12, 16], attainment=[1.0, 0.95, 0.8, 0.92]))
    assert check.goodput_from_curve(2.0, curve, workers=4)  # 8 / 4: the first failure stops the walk
    from splitlab.serving import run, ServingConfig
    res = run(make_workload("code", 400, 256, seed=0),  # DistServe's convention: the first token at once (the trap)
              ServingConfig.disaggregated(1, 3, max_batch=16, trace=False, first_token_on="prefill"))  # 16 slots
    from splitlab.serving import metrics as M
    n = M.slo_misses(res.requests, 2.0, 0.2)["ttst"]
    assert n > 0 and check.second_token_misses(n, res.requests, 2.0, 0.2)
    assert not check.second_token_misses(n + 1, res.requests, 2.0, 0.2)


def _phone_readable(fig):
    """Every text of ``fig`` at 9 pt or more once the figure is shrunk to a 412 px phone's column (~3.85 in)."""
    import matplotlib.text

    width_in = fig.get_size_inches()[0]
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip()]
    return width_in <= 5 and min(sizes) * 3.85 / width_in >= 9


def test_chapter_6_figures_read_on_a_phone():
    import matplotlib.pyplot as plt

    from splitlab.serving import ServingConfig, run
    from splitlab.teach import widgets
    from splitlab.teach.figures import split as split_figures

    reqs = make_workload(SPEC, 20, 8.0, seed=0)
    runs = {"1P+1D": run(reqs, ServingConfig.disaggregated(1, 1), CostModelExecutor(COST)),
            "2 colocated (chunked, 256-token chunks)": run(reqs, ServingConfig.colocated(2), CostModelExecutor(COST))}
    assert _phone_readable(split_figures.latency_cdfs(runs, 0.5, 0.05, title="a title"))
    assert _phone_readable(split_figures.timelines(runs, (0.0, 1.0)))
    box = widgets.split_explorer(COST, SPEC, rate_per_s=8, ttft_slo_s=0.5, tpot_slo_s=0.05, n_requests=20)
    assert _phone_readable(plt.gcf())
    assert set(box.attainment) == {"2 colocated", "1P+1D"} and all(0 <= v <= 1 for v in box.attainment.values())
    plt.close("all")


def test_chapter_6_tables_are_narrow_and_measured():
    import splitlab as sl
    from splitlab.serving import ServingConfig, run
    from splitlab.teach.figures import split_tables as T

    assert T.short_name("4 colocated (chunked, 256-token chunks)") == "4 chunked 256"
    assert T.short_name("4 colocated (prefill-first)") == "4 colocated" and T.short_name("3P+1D") == "3P+1D"
    plan = sl.planner.plan(COST, SPEC, ttft_slo_s=0.5, tpot_slo_s=0.05, max_workers=2, chunk_tokens=(256,),
                           progress=False, max_requests=300)
    table = T.plan_table(plan)
    assert list(table.index) == [T.short_name(c.name) for c in plan.candidates]
    assert list(table["goodput (/s/worker)"]) == [fmt3(c.goodput_rps_per_worker) for c in plan.candidates]
    assert not [v for v in table.to_numpy().ravel() if str(v).endswith(".0")]  # 15, not 15.0 beside a 14.3
    assert all(len(line) <= 62 for line in T.plan_summary(plan).splitlines())
    reqs = make_workload(SPEC, 20, 8.0, seed=0)
    res = run(reqs, ServingConfig.disaggregated(1, 1), CostModelExecutor(COST))
    steps = T.decode_steps(res, COST)
    assert len(steps) and (steps.predicted_s == 0.01).all()  # the cost model's step: 10 ms whatever the batch
    assert steps.measured_s.to_numpy() == pytest.approx(0.01)  # the simulator charges exactly that
    st = T.step_table({"1P+1D": res}, COST, 8.0, 0.1)
    assert st.loc["step, measured (ms)", "1P+1D"] == pytest.approx(10.0)
    assert st.loc["TPOT, predicted (ms)", "1P+1D"] == pytest.approx(10.0)  # a split: no stretch
    assert isinstance(st.loc["largest decode batch", "1P+1D"], int)
    assert "10.0" not in st.to_string()  # a column of ints and floats kept as written: 10 ms, not 10.0


def test_fit_table_and_formulas():
    from splitlab.costmodel.calibration import Calibration
    from splitlab.costmodel.fit import Fit
    from splitlab.teach.figures import split_tables as T

    def fit(name, terms, coef, residuals):
        return Fit(name, terms, coef, [dict(measured_s=1.0, predicted_s=1 + r, residual=r) for r in residuals])

    fits = {"prefill": fit("prefill", ("1", "tokens", "squares"), (5e-3, 1e-4, 6e-8), [0.1, -0.25, 0.05]),
            "decode": fit("decode", ("1", "batch", "context_tokens", "batched"), (5e-3, 2.4e-4, 2.2e-7, 1.9e-3),
                          [0.2, -0.1])}
    table = T.fit_table(Calibration(COST, fits))
    assert list(table.index) == ["prefill", "decode"] and list(table["points"]) == [3, 2]
    assert all(isinstance(v, int) for v in table["points"])
    assert table.loc["prefill", "max |res.| (%)"] == 25.0 and table.loc["decode", "max |res.| (%)"] == 20.0
    text = T.fit_formulas(Calibration(COST, fits))
    assert all(len(line) <= 56 for line in text.splitlines()) and "x context_tokens" in text
    assert text.startswith("prefill = 5 ms + 100 us x tokens")


def test_stream_prefill_share_and_the_tpot_note_read_the_timeline():
    import pandas as pd

    from splitlab.serving import Request, ServingConfig, run
    from splitlab.teach.figures import split_tpot as W

    # one worker: request 0 prefills 0-0.1 s and streams; request 1's prefill (0.21-0.31 s) lands in its life
    reqs = [Request(0, 0.0, list(range(100)), 40), Request(1, 0.205, list(range(100)), 40)]
    res = run(reqs, ServingConfig.colocated(1), CostModelExecutor(COST))
    life0 = 0.39 + 0.1  # 39 steps of 10 ms after its first token, one of them stalled by a 0.1 s prefill
    assert W.stream_prefill_share(res) == pytest.approx((0.1 / life0 + 0.0) / 2, rel=1e-6)
    steps = pd.DataFrame({"1P+1D": {"TPOT, measured (ms)": 10.0, "TPOT, predicted (ms)": 10.0},
                          "1 colocated": {"TPOT, measured (ms)": 5.0, "TPOT, predicted (ms)": 10.0}})
    note = W.tpot_prediction_note({"1 colocated (prefill-first)": res}, steps, 0.5, "1P+1D")
    assert "1 colocated: 5 ms measured, 10 predicted (-50%)" in note and "rho = 50%" in note
    assert "1P+1D: 10 ms measured, 10 predicted, its step at its batches (+0%), within the 20%" in note
    assert "they spent 10% of those lives prefilling" in note and "fewer prefills" in note
    two = W.tpot_prediction_note({"1 colocated (prefill-first)": res, "1 colocated (chunked, 64-token chunks)": res},
                                 steps.assign(**{"1 chunked 64": [6.0, 10.0]}), 0.5, "1P+1D")
    assert "1 colocated and 1 chunked 64 miss by more than the 20%" in two
    assert "they spent 10% (1 colocated) and 10% (1 chunked 64) of those lives" in two
    assert two.count("Two things the steady-state formula leaves out") == 1  # the reason once, not per layout
    close = W.tpot_prediction_note({}, steps.assign(**{"1 colocated": [9.0, 10.0]}), 0.5, "1P+1D")
    assert close.endswith("Each colocated run is within the 20% we allow a formula here.") and "(-10%)" in close
    edge = W.tpot_prediction_note({}, steps.assign(**{"1 colocated": [7.996, 10.0]}), 0.5, "1P+1D")
    assert "(-20%)" in edge and "Each colocated run is within the 20%" in edge  # printed -20% is not a miss of 20%


def test_the_tpot_note_where_the_formula_has_no_steady_state():
    """At rho >= 1 the colocated formula has no TPOT to predict: the table says so in words and the note says why,
    judging only the runs it can predict (on an H200 chapter 6's live rate gave rho = 1.21 and the note raised
    'cannot convert float NaN to integer')."""
    import pandas as pd

    from splitlab.serving import Request, ServingConfig, run
    from splitlab.teach.figures import split_tables as T
    from splitlab.teach.figures import split_tpot as W

    reqs = [Request(i, 0.01 * i, list(range(100)), 10) for i in range(4)]
    res = run(reqs, ServingConfig.colocated(1), CostModelExecutor(COST))
    st = T.step_table({"1 colocated (prefill-first)": res}, COST, 20.0, 0.1)  # rho = 2
    assert st.loc["TPOT, predicted (ms)", "1 colocated"] == T.NO_STEADY_STATE
    steps = pd.DataFrame({"1P+1D": {"TPOT, measured (ms)": 10.0, "TPOT, predicted (ms)": 10.0},
                          "1 colocated": {"TPOT, measured (ms)": 31.0, "TPOT, predicted (ms)": T.NO_STEADY_STATE}})
    note = W.tpot_prediction_note({"1 colocated (prefill-first)": res}, steps, 1.21, "1P+1D")
    assert "1 colocated: 31 ms measured, none predicted" in note and "At rho = 121%" in note
    assert "no steady TPOT" in note and "Each colocated run is within" not in note and "nan" not in note.lower()
    both = W.tpot_prediction_note({}, steps.assign(**{"1 chunked 64": [9.0, 10.0]}), 1.21, "1P+1D")
    assert "1 chunked 64: 9 ms measured, 10 predicted (-10%)" in both and "Each colocated run is within" in both


def test_stretch_words_follow_the_measured_stretch():
    """ch06 said 'the formula's stretch 1/(1-rho) = 3.73 at work' where the measured stretch was 2.3x."""
    import pandas as pd
    from splitlab.teach.figures import split_tpot as W

    steps = pd.DataFrame({"3P+1D": {"step, measured (ms)": 3.9, "step, predicted (ms)": 3.8,
                                    "TPOT, measured (ms)": 4.1},
                          "4 colocated": {"step, measured (ms)": 3.58, "step, predicted (ms)": 3.4,
                                          "TPOT, measured (ms)": 8.25}})
    words = W.stretch_words(steps, 1 - 1 / 3.73, "3P+1D", "4 colocated")
    assert "2.3x its worker's mean decode step (3.58 ms), less than the formula's stretch" in words
    assert "= 3.73" in words and words.startswith(", the prefills' stalls at work: on 4 colocated")
    assert "close to" in W.stretch_words(steps, 1 - 1 / 2.4, "3P+1D", "4 colocated")
    assert "more than" in W.stretch_words(steps, 0.1, "3P+1D", "4 colocated")
    assert "has no value" in W.stretch_words(steps, 1.2, "3P+1D", "4 colocated")
    with pytest.raises(ValueError, match="rho"):
        W.stretch_words(steps, float("nan"), "3P+1D", "4 colocated")


def test_a_chunked_run_is_compared_on_its_own_decode_steps_and_has_no_stretch_formula():
    """A review (2026-12-05) found ch06's chunked column comparing the decode share of fused steps (the timeline
    splits a fused step's seconds by tokens) with whole decode steps (0.537 ms against 1.9), and predicting its
    TPOT by prefill-first's stretch 1 / (1 - rho)."""
    from splitlab.serving import Request, ServingConfig, run
    from splitlab.teach.figures import split_tables as T
    from splitlab.teach.figures import split_tpot as W
    # one worker: request 0 streams alone, request 1's 100-token prompt arrives in its life: fused steps follow
    reqs = [Request(0, 0.0, list(range(100)), 40), Request(1, 0.205, list(range(100)), 40)]
    cfg = ServingConfig.colocated(1, policy="chunked", chunk_tokens=32)
    res = run(reqs, cfg, CostModelExecutor(COST))
    steps = T.decode_steps(res, COST)
    assert steps.fused.any() and not steps.fused.all()
    own = steps[~steps.fused]
    assert own.measured_s.to_numpy() == pytest.approx(own.predicted_s.to_numpy())  # the simulator charges decode_s
    assert (steps[steps.fused].measured_s < own.measured_s.min()).all()  # a token-proportional share, no step
    table = T.step_table({cfg.name: res}, COST, 1.0, 0.1)
    col = table[T.short_name(cfg.name)]
    assert col["TPOT, predicted (ms)"] == T.FUSED_STEPS and float(col["step, measured (ms)"]) == pytest.approx(10.0)
    pf = run(reqs, ServingConfig.colocated(1), CostModelExecutor(COST))
    assert not T.decode_steps(pf, COST).fused.any()  # prefill-first: a prefill right after a decode step is no fusion
    both = T.step_table({cfg.name: res, "1P+1D": run(reqs, ServingConfig.disaggregated(1, 1),
                                                     CostModelExecutor(COST))}, COST, 1.0, 0.1)
    note = W.tpot_prediction_note({cfg.name: res}, both, 0.1, "1P+1D")
    assert f"{T.short_name(cfg.name)}: " in note
    assert "no formula here (a chunked stream also takes tokens from fused steps" in note
    assert "predicted (" not in note.split("1P+1D")[0]  # no error computed against a formula that does not apply


def test_map_winner_reads_a_cell_of_the_map_and_names_a_missing_one(capsys):
    """Chapter 7's exercise on its headline map: who wins a cell, in the names a reader would use."""
    from splitlab.planning.map_result import Cell, SplitMap
    names = {"split": "1P+1D", "prefill-first": "2 colocated (prefill-first)", "chunked": "2 colocated (chunked)"}
    cell = Cell(512, 9.0, 2.5, 0.1, 0.01, {"split": 10.0, "prefill-first": 5.0, "chunked": 7.0},
                {k: "tpot" for k in names}, names).decide(0.1)
    m = SplitMap(cells=[cell], workers=2, prompt_tokens=[512], prefill_steps=[9.0], tpot_steps=[2.5],
                 output_tokens=64, ttft_prefills=5.0, link_bytes_per_s=None, tie_tolerance=0.1, cost_source="test")
    assert cell.winner == "split"
    assert not check.map_winner(None, m, 512, 2.5) and "Not answered yet" in capsys.readouterr().out
    assert check.map_winner("Split", m, 512, 2.5) and check.map_winner(" disaggregated ", m, 512, 2.5)
    assert "Correct: split" in capsys.readouterr().out
    assert not check.map_winner("colocated chunked", m, 512, 2.5) and "Not yet" in capsys.readouterr().out
    assert not check.map_winner(3, m, 512, 2.5)  # not a name: wrong, not a crash
    with pytest.raises(ValueError, match="no cell at 100 prompt tokens and 2.5 TPOT steps: its prompts \\[512\\]"):
        check.map_winner("split", m, 100, 2.5)
