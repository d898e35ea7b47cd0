"""Chapters 1-4: each ipywidgets explorer and its figure in the rendered book take their numbers from one grid
function; at a grid point the widget's drawn prediction, the plotly figure's data and the formula agree."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import splitlab as sl
from splitlab import sizing
from splitlab.phases.engine import Generation
from splitlab.serving.interference import queueing_ttft_s
from splitlab.teach.figures import interference as interference_plots
from splitlab.teach.figures.roofline import with_decode_roofline
from splitlab.teach.widgets import ch03

PREFILL = pd.DataFrame(dict(prompt_tokens=[128, 256, 384], prefill_s=[0.011, 0.021, 0.031]))


def _step(fig, i: int, name: str):
    """x and y that slider step ``i`` of ``fig`` gives the trace called ``name`` (the first of that name)."""
    k = [t.name for t in fig.data].index(name)
    args = fig.layout.sliders[0].steps[i].args[0]
    return np.asarray(args["x"][k], dtype=float), np.asarray(args["y"][k], dtype=float)


def _lines(label: str):
    return [line for n in plt.get_fignums() for ax in plt.figure(n).axes for line in ax.get_lines()
            if line.get_label() == label]


def test_timeline_grid_is_the_prefill_fit_then_one_step_per_token():
    grid = sl.widgets.timeline_grid(PREFILL, 0.002, [512], [8])
    assert list(grid.token) == list(range(1, 9))
    assert grid.time_s.iloc[0] == pytest.approx(0.001 + 512 * 0.0000781250, rel=1e-9)  # a + bT of the 3 points
    assert np.diff(grid.time_s) == pytest.approx(np.full(7, 0.002))
    with pytest.raises(ValueError, match="at least two prompt lengths"):
        sl.widgets.timeline_grid(PREFILL.head(1), 0.002, [512], [8])
    with pytest.raises(ValueError, match="decode_step_s"):
        sl.widgets.timeline_grid(PREFILL, 0.0, [512], [8])


def test_chapter_1_widget_and_figure_draw_the_grid(lm):
    plt.close("all")
    sl.widgets.two_phases_explorer(lm, prompt_tokens=32, new_tokens=4, prefill=PREFILL, decode_step_s=0.002)
    grid = sl.widgets.timeline_grid(PREFILL, 0.002, [32], [4])
    (line, *_) = _lines("predicted")
    assert line.get_xdata() == pytest.approx(grid.time_s * 1e3) and list(line.get_ydata()) == [1, 2, 3, 4]
    plt.close("all")
    times = list(0.05 + 0.002 * np.arange(16))
    gen = Generation(tokens=[[0] * 16], prompt_lengths=[256], prefill_s=0.05, ttft_s=0.05,
                     decode_step_s=[0.002] * 15, token_time_s=times)
    fig = sl.widgets.two_phases_figure(gen, PREFILL, prompt_tokens=(128, 256), new_tokens=(8, 16))
    assert fig.layout.sliders[0].active == 1 and fig.layout.updatemenus[0].active == 1  # the measured point
    # traces: (predicted, measured) for 8 new tokens, then for 16; slider step 0 = 128 tokens
    x, y = np.asarray(fig.layout.sliders[0].steps[0].args[0]["x"][2]), fig.layout.sliders[0].steps[0].args[0]["y"][2]
    expect = sl.widgets.timeline_grid(PREFILL, 0.002, [128], [16])
    assert x == pytest.approx(expect.time_s * 1e3) and list(y) == list(expect.token)
    measured = fig.data[3]
    assert "measured" in measured.name and np.asarray(measured.x) == pytest.approx(np.array(times) * 1e3)


def test_chapter_2_widget_and_figure_draw_the_grid():
    models = ["Llama-2-7B", "Llama-3-8B"]
    grid = sl.widgets.kv_grid(models, [4096], [8], "fp16")
    assert list(grid.nbytes) == [sizing.kv_bytes(sizing.resolve_config(m), 4096, 8, "fp16") for m in models]
    assert grid.nbytes.iloc[0] == 4 * grid.nbytes.iloc[1]  # MHA's 32 KV heads against GQA's 8
    plt.close("all")
    sl.widgets.kv_size_explorer(models, context=4096, batch=8)
    bars = plt.figure(plt.get_fignums()[0]).axes[0].patches
    assert [b.get_width() for b in bars] == pytest.approx(list(grid.nbytes / 2 ** 30))
    plt.close("all")
    measured = pd.DataFrame({"tokens": [40, 40], "cache (KiB)": [160.0, 40.0]}, index=["tiny-mha", "tiny"])
    fig = sl.widgets.kv_size_figure(models, measured, batches=(1, 8), max_tokens=4096)
    x, y = _step(fig, 1, "MHA: Llama-2-7B")
    expect = sl.widgets.kv_grid(["Llama-2-7B"], x.astype(int), [8], "fp16")
    assert x[-1] == 4096 and y == pytest.approx(expect.nbytes.to_numpy())
    _, dots = _step(fig, 0, "measured, batch 1")
    assert dots == pytest.approx([160 * 1024, 40 * 1024]) and len(_step(fig, 1, "measured, batch 1")[1]) == 0
    _, formula = _step(fig, 0, "GQA: tiny")
    per_token = sizing.kv_bytes_per_token(sizing.resolve_config("tiny"), "fp32")
    assert formula[1] / np.linspace(0, 80, 9)[1] == pytest.approx(per_token)


def test_chapter_3_grid_is_the_pages_roofline_and_the_widget_draws_it(lm):
    dc = pd.DataFrame(dict(batch=[1, 2, 4], context=64, step_s=[1e-3, 1.1e-3, 1.3e-3]))
    setup = ch03.device_setup(lm, 5e10, 1e10, efficiency=0.5, batches=(1, 2, 4))
    grid = sl.widgets.decode_roofline_grid(setup, 64)
    assert grid.step_s.to_numpy() == pytest.approx(with_decode_roofline(lm, dc, 5e10, 1e10, 0.5).predicted_s.to_numpy())
    assert sl.widgets.decode_roofline_grid(setup, lm.max_context + 1).empty
    plt.close("all")
    sl.widgets.decode_roofline_explorer("Llama-3-8B", "H100", context=2048)
    h100 = sl.widgets.decode_roofline_grid(ch03.published_setup("Llama-3-8B", "H100"), 2048)
    line = plt.figure(plt.get_fignums()[0]).axes[0].get_lines()[0]
    assert line.get_xdata() == pytest.approx(h100.tokens_per_s) and line.get_ydata() == pytest.approx(h100.step_s * 1e3)
    assert h100.batch.iloc[-1] * 2048 * 131072 + 2 * 8.03e9 <= sizing.GPUS["H100"]["memory_bytes"]
    plt.close("all")
    fig = sl.widgets.decode_roofline_figure([ch03.published_setup("Llama-3-8B", "H100"), setup],
                                            contexts=(64, 2048), measured={setup.name: dc}, context_default=2048)
    x, y = _step(fig, 1, "predicted (roofline)")
    assert x == pytest.approx(h100.tokens_per_s) and y == pytest.approx(h100.step_s * 1e3)
    args = fig.layout.sliders[0].steps[0].args[0]
    assert np.asarray(args["y"][-1]) == pytest.approx(dc.step_s * 1e3)  # measured, at its own context
    assert len(fig.layout.sliders[0].steps[1].args[0]["y"][-1]) == 0


def test_chapter_4_widget_and_figure_draw_the_grid(lm, monkeypatch):
    alone = pd.DataFrame(dict(prompt_tokens=[16, 64], prefill_s=[1e-3, 3e-3]))
    grid = sl.widgets.ttft_load_grid(alone, 1e-3, [16, 40, 64], [100.0])
    assert list(grid.prefill_s) == pytest.approx([1e-3, 2e-3, 3e-3])
    assert list(grid.ttft_mean_s) == pytest.approx([queueing_ttft_s(100.0, p, 1e-3) for p in grid.prefill_s])
    with pytest.raises(ValueError, match="measured"):
        sl.widgets.ttft_load_grid(alone, 1e-3, [128], [1.0])
    drawn = []
    monkeypatch.setattr(interference_plots, "ttft_load", lambda runs, p, pred, title: drawn.append((p, pred)))
    point = dict(ttft_mean_s=0.004)
    sl.widgets.ttft_load_explorer(lm, rate_per_s=100.0, prompt_tokens=64, n_requests=3, seeds=(0,),
                                  max_rate_per_s=200.0, prefill_table=alone, decode_step_s=1e-3,
                                  initial=(point, []))  # the runs given: nothing is served
    assert drawn[0] == pytest.approx((grid.prefill_s.iloc[2], grid.ttft_mean_s.iloc[2]))
    measured = pd.DataFrame(dict(prompt_tokens=[64, 64], rate_per_s=[50.0, 100.0], ttft_mean_s=[0.004, 0.005],
                                 ttft_p90_s=[0.005, 0.007]))
    fig = sl.widgets.ttft_load_figure(alone, 1e-3, measured, default=64)
    assert fig.layout.sliders[0].active == 1
    x, y = _step(fig, 1, "predicted mean")
    assert y == pytest.approx(sl.widgets.ttft_load_grid(alone, 1e-3, [64], x).ttft_mean_s * 1e3)
    assert x.max() * 3e-3 == pytest.approx(0.9)  # up to load 0.9
    assert list(_step(fig, 1, "measured mean")[1]) == pytest.approx([4.0, 5.0])
    assert len(_step(fig, 0, "measured mean")[1]) == 0
    plt.close("all")


@pytest.mark.parametrize("rows, plot_px, dropdown", [(1, 300, False), (3, None, True)])
def test_room_for_legend_puts_the_legend_between_the_axis_and_the_slider(rows, plot_px, dropdown):
    from splitlab.teach.interactive import Trace, explorer_figure, room_for_legend

    def traces(*args):
        return [Trace(f"curve {k}", [0, 1], [k, k + args[-1]]) for k in range(3)]

    fig = explorer_figure(traces, ("n", [1, 2]), "t", "x (s)", "y (s)", dropdown=("d", ["a"]) if dropdown else None)
    before = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    room_for_legend(fig, rows, plot_px, axis_px=52)
    plot = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert plot == (plot_px or before)
    legend_top_px, slider_top_px = -fig.layout.legend.y * plot, -fig.layout.sliders[0].y * plot
    assert legend_top_px == pytest.approx(52)  # below the tick labels and the axis title
    assert slider_top_px >= legend_top_px + rows * 21  # below the legend's rows
    assert fig.layout.margin.b - slider_top_px >= 70  # the slider, its value and its ticks inside the figure
    with pytest.raises(ValueError, match="rows must be >= 1"):
        room_for_legend(fig, 0)
