"""Chapters 4 and 5 as pages: the longest gap and what ran inside it, TTFT runs over arrival seeds, the explorers'
static figures drawn from the page's own runs (no run served again), the phone page style, and the transfer
prediction experiment's checker."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import splitlab as sl  # noqa: E402
from splitlab import serving  # noqa: E402
from splitlab.serving import interference  # noqa: E402
from splitlab.teach.figures import confusions, interference as plots  # noqa: E402

from conftest import cached_model  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    return cached_model("tiny")


@pytest.fixture(scope="module")
def ex(tiny):
    return serving.ModelExecutor(tiny, warm=False)


def test_longest_gap_names_the_steps_inside_it(tiny, ex):
    reqs = interference.streams_and_long_prompts([200], [0.02], 2, 8, 30, model=tiny)
    res = serving.run(reqs, serving.ServingConfig(kv_budget_bytes=None), ex)
    worst = interference.longest_gap(res)
    table = res.request_table()
    assert worst["gap_s"] == pytest.approx(table.max_itl_s.max())
    assert "prefill" in set(worst["steps"].kind)  # the long prompt's prefill sits inside the worst gap
    assert worst["steps"].seconds.sum() <= worst["gap_s"] + 1e-9
    empty = interference.longest_gap(serving.run([serving.Request(0, 0.0, [1, 2], 1)],
                                                 serving.ServingConfig(kv_budget_bytes=None), ex))
    assert empty["request_id"] is None and empty["steps"].empty


def test_ttft_runs_median_over_seeds(tiny, ex):
    point, runs = interference.ttft_runs(tiny, 32, 20.0, n_requests=4, seeds=(0, 1), backend=ex)
    assert len(runs) == 2 and point["runs"] == 2 and point["prompt_tokens"] == 32
    means = sorted(r.metrics()["ttft_s"]["mean"] for r in runs)
    assert point["ttft_mean_s"] == pytest.approx(sum(means) / 2)
    assert 0 < point["in_run_prefill_s"] <= max(r.request_table().ttft_s.max() for r in runs)


def test_explorers_draw_the_runs_they_are_given(tiny, ex, monkeypatch):
    served = []
    monkeypatch.setattr(serving, "run", lambda *a, **k: served.append(1))  # the static figure must not serve
    reqs = interference.streams_and_long_prompts([64], [0.01], 2, 8, 12, model=tiny)
    from splitlab.serving.runner import run
    initial = {p: run(reqs, serving.ServingConfig(policy=p, kv_budget_bytes=None, chunk_tokens=32), ex)
               for p in ("prefill-first", "decode-first", "chunked")}
    before = len(plt.get_fignums())
    sl.widgets.stall_explorer(tiny, prompt_tokens=64, n_streams=2, schedule=(0.01, 12), chunk_tokens=32,
                              initial=initial)
    point, runs = interference.ttft_runs(tiny, 32, 20.0, n_requests=3, seeds=(0,), backend=ex)
    import pandas as pd
    sl.widgets.ttft_load_explorer(tiny, rate_per_s=20.0, prompt_tokens=32, n_requests=3, seeds=(0,),
                                  prefill_table=pd.DataFrame(dict(prompt_tokens=[16, 64], prefill_s=[1e-3, 2e-3])),
                                  decode_step_s=1e-3, initial=(point, runs))
    assert not served and len(plt.get_fignums()) >= before  # drawn (and shown) without serving again
    plt.close("all")


def test_phone_style_keeps_interactive_mode():
    plt.interactive(True)
    try:
        fig, axes = confusions.figure(2)
        assert plt.isinteractive() and len(axes) == 2
        assert fig.get_size_inches()[0] == confusions.WIDTH
        with confusions.phone():
            assert plt.rcParams["font.size"] == confusions.PHONE["font.size"]
        assert plt.isinteractive()
    finally:
        plt.interactive(False)
        plt.close("all")


def test_chapter_figures_have_labels(tiny, ex):
    reqs = interference.streams_and_long_prompts([64], [0.01], 2, 8, 12, model=tiny)
    res = serving.run(reqs, serving.ServingConfig(kv_budget_bytes=None), ex)
    for fig in (plots.stall_run(res, 2, 0.01, "t"), plots.policies({"a": res, "b": res}, 2, "t"),
                plots.ttft_load([res], 1e-3, 2e-3, "t")):
        for ax in fig.axes:
            assert ax.get_xlabel() or ax is not fig.axes[-1]
            assert ax.get_ylabel()
    plt.close("all")


def test_transfer_prediction_checker(capsys):
    assert sl.check.transfer_prediction(1e-3 + 1e6 / 1e9, 1e6, 1e-3, 1e9, measured_s=2.1e-3)
    assert "within a quarter" in capsys.readouterr().out
    assert sl.check.transfer_prediction(2e-3, 1e6, 1e-3, 1e9, measured_s=4e-3)
    assert "more than a quarter" in capsys.readouterr().out
    assert not sl.check.transfer_prediction(5e-3, 1e6, 1e-3, 1e9)


def test_chapter_helpers_say_what_the_cells_computed(tiny, ex):
    """The helpers that keep chapters 4 and 8 within a phone's column compute what the cells did: the policies'
    frame (longest and median stream gap, the long prompt's TTFT), the stall check's lines (a miss beyond the
    tolerance says how much longer the prefill took), the simulated rate sweep and the prefix reuse."""
    import pandas as pd

    reqs = interference.streams_and_long_prompts([96], [0.0], 2, 8, 12, model=tiny)
    runs = {p: serving.run(reqs, serving.ServingConfig(policy=p, chunk_tokens=32, kv_budget_bytes=None), ex)
            for p in ("prefill-first", "chunked")}
    frame = plots.remedies_frame(runs, 2)
    assert list(frame.columns) == list(runs) and frame.shape == (3, 2)
    assert frame.loc["longest stream gap (ms)", "chunked"] == pytest.approx(
        runs["chunked"].request_table().max_itl_s[:2].max() * 1e3)
    assert frame.loc["long prompt's TTFT (ms)", "prefill-first"] == pytest.approx(
        runs["prefill-first"].request_table().ttft_s[2] * 1e3)
    spikes = pd.DataFrame(dict(prompt_tokens=[128, 256], spike_s=[0.011, 0.030], prefill_s=[0.010, 0.020]))
    text = plots.stall_check(spikes, [0.011, 0.015], 0.001, 0.2)
    assert text.count("tokens: stall") == 2 and text.count("missed by more than 20%") == 1
    assert "the prefill took 1.43x its time alone" in text  # 0.020 / (0.015 - 0.001)
    cost = serving.CostModel(max_context=tiny.max_context)
    spec = serving.WorkloadSpec("short", serving.Uniform(16, 32), serving.Uniform(4, 8))
    configs = {"2 colocated": serving.ServingConfig.colocated(2, kv_budget_bytes=None)}
    sweep = confusions.rate_sweep(spec, configs, cost, [1.0, 2.0], 1.0, 0.1, model=tiny, n_requests=10)
    assert list(sweep.rate_per_s) == [1.0, 2.0] and sweep.slo_attainment.between(0, 1).all()
    rows = confusions.prefix_reuse_rows(tiny, (32,), 8)
    assert rows[0]["prefix_tokens"] == 32 and rows[0]["same_logits"] and rows[0]["cached_tokens"] == 32
