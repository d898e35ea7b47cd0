"""Chapter 7's tables, the sentences computed from them, its figures' phone sizes, and the planner's first guess:
computed from the closed form on the simulation's own inputs, never copied from the simulated goodput."""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import splitlab as sl  # noqa: E402
from splitlab.costmodel import CostModel  # noqa: E402
from splitlab.costmodel.fit import Fit  # noqa: E402
from splitlab.planning import closed_form  # noqa: E402
from splitlab.planning.starts import Starts  # noqa: E402
from splitlab.serving import Fixed, ServingConfig, WorkloadSpec, make_workload, run  # noqa: E402
from splitlab.teach.figures import pools  # noqa: E402
from splitlab.teach.figures.pools_tables import sig3  # noqa: E402

SPEC = WorkloadSpec("long prompts", Fixed(400), Fixed(20))
COST = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-4, decode_base_s=2e-3, decode_per_seq_s=0.0,
                 decode_per_token_s=0.0, transfer_base_s=0.0, transfer_bytes_per_s=math.inf)


@pytest.fixture(scope="module")
def plan():
    """2P+1D wins on these prompts (tests/test_goodput_planner.py); 3 colocated layouts, 6 splits."""
    return sl.planner.plan(COST, SPEC, ttft_slo_s=0.2, tpot_slo_s=0.004, max_workers=4, chunk_tokens=(64, 128),
                           progress=False, max_requests=400)


def test_first_guess_is_the_closed_form_on_the_same_inputs_and_where_each_search_starts(plan):
    g = plan.first_guess
    again = closed_form.first_guess(COST, [400], [20], 0.2, 0.004, 4, max_batch=int(plan.batch["batch"]),
                                    max_prefill_tokens=2048)  # the KV batch the plan states
    assert again == pytest.approx(g)
    # the planner's search order (colocated, each chunk size, then every split by size), replayed through Starts:
    # each search starts at the closed form corrected by the searches before it (planning/starts.py)
    order = sorted(plan.candidates, key=lambda c: (c.layout != "colocated", c.policy != "prefill-first",
                                                   c.chunk_tokens or 0, c.workers, c.prefill_workers))
    starts = Starts(g["prefill_rps"], g["decode_rps"])
    for c in order:
        expected = (g["colocated_rps"] if c.layout == "colocated" else
                    closed_form.split_capacity(g["prefill_rps"], g["decode_rps"], c.prefill_workers,
                                               c.decode_workers))
        assert c.first_guess_rps_per_worker == pytest.approx(expected)
        start, _ = starts.start(c.policy, c.prefill_workers, c.decode_workers, expected)
        first = c.result.points[0]
        assert first["rate_per_worker"] == pytest.approx(max(start, 1e-3))
        if c is order[0]:
            assert start == expected  # nothing learned yet: the first search starts at the closed form
        starts.learn(c)


def test_plan_table_keeps_the_best_of_each_kind(plan):
    t = pools.plan_table(plan, top=2)
    kinds = {(c.layout, c.policy) for c in plan.candidates}
    assert len(t) == 2 + sum(1 for k in kinds if k not in {(c.layout, c.policy) for c in plan.candidates[:2]})
    assert list(t.index[:2]) == [pools.short_name(c) for c in plan.candidates[:2]]
    best_colocated = plan.best_of("colocated", "prefill-first")
    chunked = plan.best_of("colocated", "chunked")
    assert pools.short_name(best_colocated) in t.index and f"4 chunked {chunked.chunk_tokens}" in t.index
    assert t.loc[pools.short_name(best_colocated), "#"] == plan.candidates.index(best_colocated) + 1
    assert all(isinstance(r, int) for r in t["#"]) and list(t["#"]) == sorted(t["#"])  # in rank order
    for col in ("goodput (req/s per worker)", "first guess (req/s per worker)", "cost per 1M tokens"):
        # sig3 keeps a whole value an int: the table once showed 6.0 and 2.0 (a row-wise build made them floats)
        assert all(isinstance(v, int) or not float(v).is_integer() for v in t[col]), (col, list(t[col]))
    assert list(t.columns) == ["#", "goodput (req/s per worker)", "first guess (req/s per worker)",
                               "cost per 1M tokens", "binds"]
    assert set(t["binds"]) <= {"TTFT", "TTST", "TPOT", "UNFINISHED", "NONE"}
    assert len(t.columns) + t.index.nlevels <= 6  # fits a 412 px phone's column (tests/test_page_tables.py)
    full = pools.plan_table(plan, top=len(plan.candidates))
    assert list(full["#"]) == list(range(1, len(plan.candidates) + 1))
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="top"):
            pools.plan_table(plan, top=bad)


def test_plan_table_shows_a_whole_number_without_a_decimal():
    """ch07's toy table printed "6.0" (goodput) and "2.0" (cost): sig3 gave 6 and 2, a row-wise DataFrame made
    every number of a row a float."""
    from types import SimpleNamespace as C
    cands = [C(layout="colocated", policy="chunked", workers=4, chunk_tokens=512, name="4 chunked", binding_slo="tpot",
               goodput_rps_per_worker=8.15, first_guess_rps_per_worker=6.86, cost_per_million_tokens=1.07),
             C(layout="colocated", policy="prefill-first", workers=4, chunk_tokens=None, name="4 coloc.",
               binding_slo="tpot", goodput_rps_per_worker=5.9996, first_guess_rps_per_worker=6.86,
               cost_per_million_tokens=2.0004)]
    t = pools.plan_table(C(batch_line="", candidates=cands), top=2)
    assert t.loc["4 coloc."].tolist() == [2, 6, 6.86, 2, "TPOT"]
    assert "6.0" not in t.to_html() and "2.0" not in t.to_string()


def test_validation_tables_one_narrow_table_per_workload():
    from splitlab.teach.figures.pools_tables import validation_tables
    check = pd.DataFrame({"workload": ["research", "research", "code"],
                          "contender": ["colocated prefill-first", "split", "colocated chunked"],
                          "metric": ["ttft_p50", "tpot_p90", "ttft_p90"], "emulated_s": [0.06423, 0.0104, 0.0182],
                          "simulated_s": [0.07001, 0.00785, 0.0137]})
    check["error"] = check.simulated_s / check.emulated_s - 1
    check["emulated_spread"] = [0.10412, 0.421, 0.0123]
    tables = validation_tables(check)
    assert list(tables) == ["research", "code"]
    r = tables["research"]
    assert r.index.names[0] == "research" and list(r.index) == [("coloc.", "TTFT P50"), ("split", "TPOT P90")]
    assert list(r.columns) == ["emul. (ms)", "sim. (ms)", "error", "spread"]
    assert r.loc[("coloc.", "TTFT P50")].tolist() == [64.2, 70, "+9%", "10%"]  # 3 significant digits, % of 2
    assert isinstance(r.loc[("coloc.", "TTFT P50"), "sim. (ms)"], int)  # 70, not 70.0
    assert r.loc[("split", "TPOT P90")].tolist() == [10.4, 7.85, "-25%", "42%"]
    assert tables["code"].loc[("chunked", "TTFT P90")].tolist() == [18.2, 13.7, "-25%", "1.2%"]
    assert tables["code"].index[0] == ("chunked", "TTFT P90")
    assert len(r.columns) + r.index.nlevels <= 6
    assert "spread" not in validation_tables(check.drop(columns="emulated_spread"))["code"]
    with pytest.raises(ValueError, match="missing"):
        validation_tables(check.drop(columns="error"))


def test_kinds_table_and_guess_and_ratio_sentences(plan):
    t = pools.kinds_table({"a": plan}, caps={"a": 12.345})
    assert t.loc["best split", "a"] == plan.best_of("disaggregated").name
    assert t.loc["colocated cap (req/s per worker)", "a"] == 12.3
    text = pools.guess_verdict(plan)
    rel = [c.goodput_rps_per_worker / c.first_guess_rps_per_worker - 1 for c in plan.candidates]
    below = sum(r < -1e-9 for r in rel)
    assert f"of the {len(rel)} simulated goodputs" in text
    if below == len(rel):
        assert f"all {len(rel)} are below it" in text
    elif below > 1:
        assert f"{below} are below it" in text
    assert ("Below the guess" in text) == (below > 0)
    assert "Below the guess" not in pools.guess_verdict(plan, reasons=False)
    ratio = pools.ratio_verdict(plan)
    assert ratio.startswith("For ") and "cluster sizes" in ratio


def test_validation_verdict_counts_the_misses():
    table = pd.DataFrame({"error": [0.05, -0.2, 0.3, -0.01]}).assign(abs_error=lambda d: d.error.abs())
    text = pools.validation_verdict(table)
    assert text.startswith("The goal is 15% on every value; 2 of the 4 printed values miss it (largest error 30.0%)")
    assert "in 1 of the 2 misses the simulator is faster" in text
    ok = pools.validation_verdict(table.assign(abs_error=0.01))
    assert "none of the 4 printed values miss it" in ok and "simulator is faster" not in ok


def test_trap_table_prints_output_lengths_and_integer_counts():
    runs = {cfg.name: run(make_workload("code", 60, 64.0, seed=0), cfg)
            for cfg in (ServingConfig.colocated(2, trace=False), ServingConfig.disaggregated(1, 1, trace=False))}
    t = pools.trap_table(runs, ttft_slo_s=2.0, tpot_slo_s=0.2)
    mean_out = sum(r.max_new_tokens for r in next(iter(runs.values())).requests) / 60
    assert t.loc["output tokens per request (mean)"].iloc[0] == sig3(mean_out)
    tokens = t.loc["output tokens/s"].iloc[0]
    assert isinstance(tokens, int) and tokens == int(float(f"{tokens:.3g}"))  # 8630, not 8630.0 or 8.63e+03
    assert sig3(0.0070812) == 0.00708 and sig3(float("nan")) != sig3(float("nan"))



def test_trap_verdict_states_the_table_numbers_and_their_direction():
    t = pd.DataFrame({"4 colocated (prefill-first)": {"TTFT P90 (s)": 3.01, "E2E P90 (s)": 3.85,
                                                      "output tokens per request (mean)": 126, "output tokens/s": 8630,
                                                      "attainment, TTFT and TPOT only (%)": 63.2,
                                                      "attainment with the TTST bound (%)": 63.2},
                      "1P+3D": {"TTFT P90 (s)": 0.074, "E2E P90 (s)": 4.76, "output tokens per request (mean)": 126,
                                "output tokens/s": 7290, "attainment, TTFT and TPOT only (%)": 100,
                                "attainment with the TTST bound (%)": 50.5}})
    text = pools.trap_verdict(t)
    assert "TTFT P90 is 0.074 s against 3.01 s" in text and "for 100% of requests against 63.2%" in text
    assert "fewer (7,290 against 8,630)" in text and "longer (4.76 s against 3.85 s)" in text
    assert text.endswith("1P+3D reaches 50.5% against 63.2%.")
    flipped = pools.trap_verdict(t.assign(**{"1P+3D": t["1P+3D"].replace({7290: 9000, 4.76: 3.0})}))
    assert "more (9,000 against 8,630)" in flipped and "shorter (3 s against 3.85 s)" in flipped
    with pytest.raises(ValueError, match="one split and one colocated"):
        pools.trap_verdict(t[["1P+3D"]])

def test_fit_table_lines_fit_a_phone(capsys):
    class Cal:  # what fit_table reads of a Calibration
        meta = dict(model="tiny", device="CPU (1 thread)", dtype="float32", clock="thread")
        fits = {"prefill": Fit("prefill", ("1", "tokens", "squares", "masked_pairs"), (8e-3, 1.4e-4, 1e-7, 6.8e-8),
                               [dict(measured_s=1.0, predicted_s=1.1, residual=0.1),
                                dict(measured_s=2.0, predicted_s=1.9, residual=-0.05)]),
                "transfer": Fit("transfer", ("1", "nbytes"), (3e-5, 1 / 1.3e10),
                                [dict(measured_s=1.0, predicted_s=1.0, residual=0.0),
                                 dict(measured_s=2.0, predicted_s=2.0, residual=0.0)])}
    t = pools.fit_table(Cal(), width=40)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "tiny on CPU (1 thread), float32, clock: thread"
    assert all(len(line) <= 40 for line in lines[1:]) and len(lines) > 3
    assert "".join(lines[1:3]).replace("  + ", " + ").startswith("prefill: 8 ms + 140 us x tokens")
    assert t.loc["prefill", "points"] == 2 and isinstance(t.loc["prefill", "points"], int)
    assert t.loc["prefill", "max |res| (%)"] == 10.0


def test_why_wraps_to_a_width(plan):
    assert "\n" not in plan.why()
    wrapped = plan.why(width=60)
    assert max(len(line) for line in wrapped.splitlines()) <= 60
    assert wrapped.replace("\n", " ") == plan.why()


def test_figures_are_phone_sized(plan):
    before = matplotlib.rcParams["font.size"]
    curve = pd.DataFrame({"rate_per_worker": [1.0, 2.0, 3.0], "attainment": [1.0, 0.95, 0.5]})
    for ax in (pools.attainment_curves({"a": curve}, goodputs={"a": 2.0}), pools.ratio_sweep(plan),
               pools.candidates(plan)):
        fig = ax.figure
        assert fig.get_size_inches()[0] <= pools.WIDTH
        fig.canvas.draw()
        texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_text() and t.get_visible()]
        assert min(t.get_fontsize() for t in texts) >= 11, [(t.get_text(), t.get_fontsize()) for t in texts
                                                           if t.get_fontsize() < 11]
    assert matplotlib.rcParams["font.size"] == before  # the style does not leak into other figures
    plt.close("all")


def test_a100_link_is_nvlink3():
    gpu = sl.costmodel.roofline_cost_model("OPT-13B", "A100-80GB", "fp16", link="NVLink 3 (A100)")
    assert gpu.transfer_bytes_per_s == sl.sizing.LINKS["NVLink 3 (A100)"]["bandwidth_bytes_per_s"] == 300e9
    assert "NVLink 3 (A100)" in gpu.source
