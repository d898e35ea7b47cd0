"""Chapters 1-3's package side: the latency table, the figure and table helpers (teach/figures/phases.py,
kv_cache.py, roofline.py), the explorers' static figures and the exercise checkers, each against values computed
independently here."""
from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import splitlab as sl  # noqa: E402
from splitlab import sizing  # noqa: E402
from splitlab.teach.figures import kv_cache, phases, roofline  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def gen(lm):
    return sl.generate(lm, [list(range(40))], max_new_tokens=6)


def _labelled(ax):
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()


def test_request_latencies_follow_the_definitions(gen):
    t = gen.token_time_s
    table = phases.request_latencies(gen)
    assert list(table.index) == ["TTFT", "ITL, median", "ITL, max", "TPOT", "E2E"]
    assert float(table.loc["TPOT", "ms"]) == pytest.approx((t[-1] - t[0]) / (len(t) - 1) * 1e3, rel=5e-3)
    assert float(table.loc["E2E", "ms"]) == pytest.approx(t[-1] * 1e3, rel=5e-3)
    rates = phases.phase_rates(gen)
    assert rates.loc["prefill", "tokens"] == 40 and rates.loc["decode", "tokens"] == 5
    _labelled(phases.token_timeline(gen))
    with pytest.raises(ValueError, match="two output tokens"):
        phases.request_latencies(SimpleNamespace(token_time_s=[0.1]))


def test_three_significant_digits():
    assert [phases.fmt3(v) for v in (0.012345, 4.5678, 78.91, 4880.4, 1234567, 0)] == \
        ["0.0123", "4.57", "78.9", "4,880", "1,230,000", "0"]
    df = pd.DataFrame({"n": [1, 2], "s": [0.0012345, 0.5], "name": ["a", "b"]})
    shown = phases.fmt_table(df, {"name": "name", "n": "count", "s": ("ms", 1e3)}, index="name")
    assert shown.loc["a", "count"] == 1 and shown.loc["a", "ms"] == "1.23"


def test_kv_tables_and_mla():
    sizes = kv_cache.published_sizes(["Llama-2-7B", "Llama-3-8B"], gpu="H100", context=4096)
    assert list(sizes["KiB per token"]) == ["512", "128"]
    cfg = sizing.resolve_config("Llama-3-8B")
    assert sizes.loc["Llama-3-8B", "requests per H100"] == int((80e9 - 2 * cfg["n_params"]) // (131072 * 4096))
    mla = kv_cache.mla_comparison("DeepSeek-V3", dtype="bf16")
    assert mla.iloc[0]["elements per layer"] == f"{512 + 64:,}" and mla.iloc[1]["elements per layer"] == "40,960"
    assert mla.iloc[0]["KiB per token"] == phases.fmt3(61 * 576 * 2 / 1024)
    assert mla.iloc[1]["x MLA"] == phases.fmt3(128 * (192 + 128) / 576)
    shapes = kv_cache.published_shapes(["Mistral-7B"])
    assert shapes.loc["Mistral-7B", "KV heads"] == 8


def _decode_table(lm):
    dc = pd.DataFrame({"batch": [1, 2, 4, 8], "context": 16, "step_s": [0.010, 0.011, 0.012, 0.030],
                       "matmul_s": [0.006, 0.009, 0.010, 0.020]})
    return roofline.with_decode_roofline(lm, dc, peak=1e10, bandwidth=2e9, efficiency=0.5)


def test_decode_roofline_columns_and_notes(lm):
    dc = _decode_table(lm)
    kv = sizing.kv_bytes_per_token(lm.config, lm.dtype)
    assert dc["bytes"].iloc[1] == sl.profiling.weight_bytes_read(lm) + 2 * 16 * kv
    assert dc["floor_s"].iloc[1] == pytest.approx(dc["bytes"].iloc[1] / 2e9)
    assert dc["compute_s"].iloc[2] == pytest.approx(dc["flops"].iloc[2] / 0.5e10)
    assert roofline.flat_up_to(dc, within=0.3) == 4
    note = roofline.prediction_note(dc, tolerance=0.35)
    ratio = dc["step_s"] / dc["predicted_s"]
    assert f"{ratio.min():.2f} to {ratio.max():.2f}" in note
    missed = int(((ratio > 1.35) | (ratio < 1 / 1.35)).sum())
    assert "misses here" in note and f"at {missed} of 4 batches" in note
    rate1 = sl.profiling.weight_bytes_read(lm) / 0.006
    assert f"{rate1 / 1e9:.3g} GB/s" in note and "slow to" in note  # 0.009 s at batch 2: slower per byte
    slow = dc.assign(matmul_s=dc["matmul_s"] * 10)  # matmuls far below the copy bandwidth: who runs them is named
    assert "one core's matrix kernel reads" in roofline.prediction_note(slow, tolerance=0.35)
    assert "core" not in roofline.prediction_note(slow, tolerance=0.35, device="cuda")  # an H200 once read "core"
    for ax in (roofline.decode_vs_batch(dc), roofline.latency_throughput(dc),
               roofline.roofline(1e10, 2e9, {"decode": (dc["intensity"], dc["flops"] / dc["step_s"])}, 0.5)):
        _labelled(ax)
    batches, curves, ceiling = roofline.predicted_decode_curves("Llama-3-8B", "H100", contexts=(2048,))
    _labelled(roofline.decode_throughput(batches, curves, ceiling))
    assert ceiling == pytest.approx(989e12 / (2 * 8.03e9))
    assert float(roofline.gpu_table().loc["H100", "ridge FLOP/B"]) == float(f"{989 / 3.35:.3g}")


def test_weight_matmuls_alone(lm):
    mm = sl.profiling.measure_weight_matmuls(lm, [1, 4], repeats=2)
    assert list(mm["batch"]) == [1, 4] and (mm["matmul_s"] > 0).all()
    head = lm.model.get_output_embeddings().weight
    assert head.numel() * 4 / mm["matmul_s"].iloc[0] < mm["bytes_per_s"].iloc[0]  # counts more than the head


def test_explorers_leave_a_static_figure(lm):
    for box in (sl.widgets.two_phases_explorer(lm, prompt_tokens=32, new_tokens=4),
                sl.widgets.kv_size_explorer(["Llama-3-8B"]), sl.widgets.decode_roofline_explorer()):
        assert box.children
    assert len(plt.get_fignums()) >= 3, "each explorer draws its default setting as a static figure"


def test_chapter_1_checkers(gen, capsys):
    assert sl.check.tpot((4.33 - 0.35) / 199, ttft_s=0.35, e2e_s=4.33, output_tokens=200)
    assert not sl.check.tpot(0.05, ttft_s=0.35, e2e_s=4.33, output_tokens=200)
    with pytest.raises(ValueError):
        sl.check.tpot(0.1, ttft_s=1.0, e2e_s=0.5, output_tokens=10)
    before = SimpleNamespace(token_time_s=[0.1, 0.2, 0.3])
    after = SimpleNamespace(token_time_s=[0.2, 0.31, 0.42])
    assert not sl.check.prompt_doubling(None, 1.0, before, after)
    assert sl.check.prompt_doubling(2.0, 1.1, before, after)
    assert not sl.check.prompt_doubling(1.0, 1.1, before, after)
    assert "measured (fastest of 1 each): TTFT" in capsys.readouterr().out
    # interleaved pairs timed by the engine: the fastest of each length is compared; a noisy pair widens the
    # tolerance to the pairs' own spread; beyond 40% the run is not judged (a quadratic 4x or a doubled TPOT
    # would pass), and the checker says so
    run = lambda prefill_s, step_s: SimpleNamespace(prefill_s=prefill_s, decode_step_s=[step_s] * 15)
    base = [run(0.10, 0.008), run(0.13, 0.010), run(0.10, 0.008)]
    longer = [run(0.23, 0.0085), run(0.23, 0.0085), run(0.30, 0.0084)]  # fastest ratios 2.3 and 1.05
    m = sl.check.ch01.doubling_ratios(base, longer)
    assert m["ttft_ratio"] == pytest.approx(2.3) and m["tpot_ratio"] == pytest.approx(1.05)
    assert m["tolerance"]["ttft"] == pytest.approx(0.35) and m["tolerance"]["tpot"] == pytest.approx(0.35)
    wider = [run(0.23, 0.0085), run(0.23, 0.0085), run(0.32, 0.0085)]  # one pair 3.2x: spread 39%
    m = sl.check.ch01.doubling_ratios(base, wider)
    assert m["tolerance"]["ttft"] == pytest.approx(0.39, abs=0.01) and m["judged"]["ttft"]  # never below it
    noisy = [run(0.23, 0.0085), run(0.23, 0.0085), run(0.40, 0.0085)]  # one pair 4x: spread 74%
    m = sl.check.ch01.doubling_ratios(base, noisy)
    assert m["tolerance"]["ttft"] == pytest.approx(m["spread"]["ttft"]) and not m["judged"]["ttft"]
    capsys.readouterr()
    assert sl.check.prompt_doubling(2.0, 1.0, base, longer) and not sl.check.prompt_doubling(2.3, 1.06, base, noisy)
    assert "Not judged" in capsys.readouterr().out
    for wrong in ((1.0, 1.0), (4.0, 1.0), (2.0, 2.0)):
        assert not sl.check.prompt_doubling(*wrong, base, longer)
    with pytest.raises(ValueError, match="as many runs"):
        sl.check.ch01.doubling_ratios(base, longer[:2])


def test_chapter_2_checkers(lm):
    cache = sl.prefill(lm, [list(range(10)), list(range(40))]).cache
    assert sl.check.padding_waste(30 / 80, cache) and not sl.check.padding_waste(0.5, cache)
    assert sl.check.mla_equivalent_kv_heads(2.25) and not sl.check.mla_equivalent_kv_heads(4.5)
    assert sl.check.kv_bytes_per_token(2 * 40 * 40 * 128 * 2, "Llama-2-13B", "fp16")


def test_chapter_3_checkers():
    assert sl.check.compute_bound_batch(125, peak_flops_per_s=400e12, bandwidth_bytes_per_s=1.6e12, bytes_per_param=1)
    assert sl.check.ridge_point(250, peak_flops_per_s=400e12, bandwidth_bytes_per_s=1.6e12)
    with pytest.raises(ValueError):
        sl.check.ridge_point(1, peak_flops_per_s=400e12)
    cfg = sizing.resolve_config("Llama-3-8B")
    floor = (2 * cfg["n_params"] + 32 * 4096 * 131072) / 3.35e12
    assert sl.check.decode_floor(floor, "Llama-3-8B", "H100", batch=32, context=4096)
    best = math.floor((0.02 * 3.35e12 - 2 * cfg["n_params"]) / (4096 * 131072))
    assert sl.check.max_batch_for_tpot(best, "Llama-3-8B", "H100", context=4096, tpot_slo_s=0.02)
    assert not sl.check.max_batch_for_tpot(best + 1, "Llama-3-8B", "H100", context=4096, tpot_slo_s=0.02)
    measured = pd.DataFrame({"step_s": [0.040]})
    assert sl.check.decode_step_prediction(0.045, measured) and not sl.check.decode_step_prediction(0.08, measured)
    assert not sl.check.decode_step_prediction(None, measured)


def test_prefill_flops_count_the_output_layer_once(lm):
    """The engine asks for the last position's logits only (logits_to_keep=1): the output layer runs once per
    sequence, the untied input embedding is a lookup."""
    head = lm.model.get_output_embeddings().weight.numel()
    body = lm.n_params - head - lm.model.get_input_embeddings().weight.numel()
    g = lm.geometry
    expected = 2 * body * 100 + 2 * g.layers * g.heads * g.head_dim * 100 ** 2 + 2 * head
    assert sl.profiling.flops_of_prefill(lm, 100) == pytest.approx(expected)
    assert sl.profiling.flops_of_prefill(lm, 100, batch=3) == pytest.approx(3 * expected)
    assert sl.profiling.flops_of_decode(lm, 2, 10) == pytest.approx(sizing.decode_flops(body + head, 2, 10, g))
    ridge = 3.0
    t = roofline.prefill_crossing(lm, ridge)
    kv, w = sizing.kv_bytes_per_token(lm.config, lm.dtype), sl.profiling.weight_bytes_read(lm)
    intensity = lambda n: sl.profiling.flops_of_prefill(lm, n) / sizing.prefill_bytes(w, n, kv)  # noqa: E731
    assert intensity(t) > ridge >= intensity(t - 1)


def _prefill_table(lm, seconds):
    pf = pd.DataFrame({"prompt_tokens": [8, 64, 256], "batch": 1, "prefill_s": seconds})
    return roofline.with_prefill_roofline(lm, pf, peak=1e10, bandwidth=1e9)


def test_prefill_note_follows_the_printed_efficiency(lm):
    pf = _prefill_table(lm, [0.01, 0.05, 0.2])
    text, e = roofline.prefill_note(pf, ridge=pf["intensity"].iloc[0] * 1.01)
    assert e == pytest.approx(pf["efficiency"].iloc[-1]) and e < 1
    assert f"{e:.0%} of the measured peak" in text and "Prompts of 64 tokens and longer" in text
    fast = _prefill_table(lm, [0.01, 0.05, pf["flops"].iloc[-1] / 1.2e10])  # 120% of the peak
    text, e = roofline.prefill_note(fast, ridge=0.1)
    assert e == 1.0 and "120%" in text and "faster than the peak" in text and "Every prompt" in text
    note = roofline.ridge_note(_decode_table(lm), pf, ridge=pf["intensity"].iloc[1] * 1.01)
    assert "The prefill of 256 tokens sits right of it" in note and "shorter prompts sit left" in note


def test_ridge_note_names_the_batches_on_each_side(lm):
    dc = _decode_table(lm)
    ridge = float(dc["intensity"].iloc[2]) * 1.01  # batches 1, 2, 4 left; 8 right
    note = roofline.ridge_note(dc, _prefill_table(lm, [0.01, 0.05, 0.2]), ridge)
    assert "Decode at batch 1, 2 and 4 sits left of the ridge" in note
    assert f"at batch 8 ({dc['intensity'].iloc[3]:.3g} FLOP/B) it has crossed" in note


def test_ops_note_names_only_printed_operators():
    shares = pd.DataFrame({"operator": ["aten::mm", "aten::_scaled_dot_product…", "aten::mul"],
                           "ms_per_call": [20.0, 1.0, 0.5], "share": [0.8, 0.04, 0.02]})
    shares.attrs.update(step_s=0.030, profiled_step_s=0.036, ops_s=0.025)
    note = roofline.ops_note(shares)
    assert "`aten::mm`, 80%" in note and "`aten::_scaled_dot_product…` (4%)" in note and "`aten::mul`" in note
    assert "addmm" not in note and "cat" not in note
    assert "36 ms, without it 30 ms (+20%)" in note and "inflated" in note and "25 ms" in note


def test_gpu_ridge_note_states_the_ratios_of_the_table():
    ridges = [float(v) for v in roofline.gpu_table()["ridge FLOP/B"]]
    note = roofline.gpu_ridge_note(4.6)
    lo, hi = min(ridges) / 4.6, max(ridges) / 4.6
    assert f"{lo:.2g}x to {hi:.2g}x this CPU core's (4.6 FLOP/B)" in note and f"{min(ridges):.3g} to" in note


def test_itl_note_follows_the_gaps():
    even = SimpleNamespace(token_time_s=[0.1, 0.2, 0.3, 0.4, 0.5])
    assert "within 0% of the median" in phases.itl_note(even) and "close to it" in phases.itl_note(even)
    paused = SimpleNamespace(token_time_s=[0.1, 0.2, 0.3, 0.6, 0.7])
    assert "3x the median" in phases.itl_note(paused) and "pause of this machine" in phases.itl_note(paused)


def test_decode_op_shares_time_the_step_with_and_without_the_profiler(lm):
    shares = sl.profiling.decode_op_shares(lm, batch=1, context=8, top=3, repeats=2)
    assert len(shares) == 3 and shares["share"].is_monotonic_decreasing and (shares["share"] <= 1).all()
    a = shares.attrs
    assert a["step_s"] > 0 and a["profiled_step_s"] > 0 and 0 < a["ops_s"]
    assert shares["ms_per_call"].sum() <= a["ops_s"] * 1e3 + 1e-9
    with pytest.raises(ValueError, match="repeats"):
        sl.profiling.op_shares(lambda: None, "cpu", repeats=0)


def test_printouts_fit_a_phone(lm, capsys):
    lines = str(lm).splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 40 and "\n" not in repr(lm)
    assert " ".join(line.strip() for line in lines) == repr(lm)
    sl.check.decode_step_prediction(None, 0.1)
    sl.check.compute_bound_batch(None, peak_flops_per_s=400e12, bandwidth_bytes_per_s=1.6e12)
    sl.check.tpot(0.5, ttft_s=0.35, e2e_s=4.33, output_tokens=200)
    out = capsys.readouterr().out
    assert "Not answered yet" in out and "Not yet" in out and max(map(len, out.splitlines())) <= 40
