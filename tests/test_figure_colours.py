"""One colour convention across the book (issue 22, screenshot review): each phase in its colour of
``splitlab.teach.figures.style`` (prefill orange, decode blue, transfer green, a prediction black) in the
matplotlib figures and in the rendered book's plotly explorers alike; what is neither a phase nor a layout (a
routing policy, a draft model, a memory scheme) in none of their colours; chapter 3's memory-full batch the same
in its curves and its explorer; its decode figure's legend off the measured points. Model-free: synthetic tables
and datasheet numbers."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

import splitlab as sl  # noqa: E402
from phone_cases import CASES, as_figure  # noqa: E402
from splitlab import sizing  # noqa: E402
from splitlab.phases.engine import Generation  # noqa: E402
from splitlab.teach.figures import pools, roofline, serving as serving_plots  # noqa: E402
from splitlab.teach.figures.style import (DECODE, LAYOUT_COLORS, OTHER_COLORS, PHASE_COLORS, PREDICTED,  # noqa: E402
                                          PREFILL, TARGET, TARGET_DASH, TARGET_LS, TRANSFER)
from splitlab.teach.widgets import ch03  # noqa: E402

TAKEN = {to_hex(c) for c in (*LAYOUT_COLORS.values(), *PHASE_COLORS.values())}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _trace(fig, name: str) -> str:
    t = next(t for t in fig.data if t.name == name)
    return to_hex(t.marker.color if t.mode == "markers" else t.line.color)


def test_the_palette_is_defined_once_and_its_parts_do_not_share_a_colour():
    assert serving_plots.KIND_COLORS["prefill"] == PHASE_COLORS["prefill"] == PREFILL
    assert serving_plots.KIND_COLORS["decode"] == DECODE and serving_plots.KIND_COLORS["transfer"] == TRANSFER
    others = {to_hex(c) for c in OTHER_COLORS}
    assert len(others) == len(OTHER_COLORS) and not others & TAKEN
    assert len({to_hex(c) for c in PHASE_COLORS.values()}) == len(PHASE_COLORS)


@pytest.mark.parametrize("case", ["ch08 prefix_reuse", "ch08 speculative_sweep", "ch08 kv_schemes"])
def test_what_is_not_a_layout_takes_no_layout_or_phase_colour(case):
    """ch08's prefix-caching bars (routing policies) were blue, orange, green and purple: the legend's colours of
    prefill-first, the split and chunked."""
    fig = as_figure(CASES[case]())
    colours = [to_hex(p.get_facecolor()) for ax in fig.axes for p in ax.patches]
    colours += [to_hex(line.get_color()) for ax in fig.axes for line in ax.get_lines()]
    colours = [c for c in colours if c not in ("#000000", "#ffffff")]
    assert colours and not set(colours) & TAKEN, (case, sorted(set(colours) & TAKEN))
    if case == "ch08 prefix_reuse":  # the policies named on the axis, in one colour none of the lines above has
        bars = {to_hex(p.get_facecolor()) for p in fig.axes[1].patches}
        assert len(bars) == 1 and not bars & {to_hex(line.get_color()) for line in fig.axes[0].get_lines()}


def test_chapter_1_figure_draws_tokens_in_the_decode_colour_and_the_prediction_black():
    """The rendered page's timeline drew the predicted line blue and the measured tokens orange, the reverse of
    the page's own figure above it."""
    times = list(0.05 + 0.002 * np.arange(16))
    gen = Generation(tokens=[[0] * 16], prompt_lengths=[256], prefill_s=0.05, ttft_s=0.05,
                     decode_step_s=[0.002] * 15, token_time_s=times)
    prefill = pd.DataFrame(dict(prompt_tokens=[128, 256, 384], prefill_s=[0.011, 0.021, 0.031]))
    fig = sl.widgets.two_phases_figure(gen, prefill, prompt_tokens=(128, 256), new_tokens=(8, 16))
    assert _trace(fig, "predicted") == PREDICTED and _trace(fig, "measured (256-token prompt)") == DECODE
    dots = [line for line in as_figure(CASES["ch01 token_timeline"]()).axes[0].get_lines() if line.get_marker() == "."]
    assert to_hex(dots[0].get_color()) == DECODE  # the page's own figure: the same colour


def test_chapter_3_figures_colour_decode_blue_prefill_orange_and_predictions_black():
    """The 2,048- and 8,192-token decode curves were orange and green (prefill's and the transfer's colours); the
    explorer drew the prediction blue and the measured steps black, the reverse of the page's figures."""
    points = {"decode, batch 1..16": ([0.5, 1.0], [3e9, 5e9]), "prefill, 16..256 tokens": ([5.0, 20.0], [2e10, 4e10])}
    ax = roofline.roofline(8e10, 2.4e10, points=points, efficiency=0.8)
    dots = {line.get_label(): to_hex(line.get_color()) for line in ax.get_lines() if line.get_marker() == "o"}
    assert dots == {"decode, batch 1..16": DECODE, "prefill, 16..256 tokens": PREFILL}
    batches, curves, ceiling = roofline.predicted_decode_curves("Llama-3-8B", "H100")
    ax = roofline.decode_throughput(batches, curves, ceiling_tokens_per_s=ceiling)
    drawn = {to_hex(line.get_color()) for line in ax.get_lines() if line.get_label().startswith("context")}
    assert len(drawn) == 3 and not drawn & (TAKEN - {DECODE})
    setup = ch03.DecodeSetup("device", 4.2e7, sizing.kv_geometry(sizing.resolve_config("tiny")), 1.7e8, 4096.0,
                             8e10, 2.4e10, batches=(1, 2, 4), max_context=2048)
    dc = pd.DataFrame(dict(batch=[1, 2, 4], context=64, step_s=[1e-3, 1.1e-3, 1.3e-3]))
    fig = sl.widgets.decode_roofline_figure([ch03.published_setup("Llama-3-8B", "H100"), setup], contexts=(64, 2048),
                                            measured={"device": dc}, context_default=2048)
    assert _trace(fig, "predicted (roofline)") == PREDICTED and _trace(fig, "memory full") == PREDICTED
    assert _trace(fig, "measured, context 64") == DECODE


def test_chapters_4_and_5_explorers_colour_the_phases():
    alone = pd.DataFrame(dict(prompt_tokens=[16, 64], prefill_s=[1e-3, 3e-3]))
    measured = pd.DataFrame(dict(prompt_tokens=[64, 64], rate_per_s=[50.0, 100.0], ttft_mean_s=[0.004, 0.005],
                                 ttft_p90_s=[0.005, 0.007]))
    fig = sl.widgets.ttft_load_figure(alone, 1e-3, measured, default=64)
    assert _trace(fig, "measured mean") == _trace(fig, "measured P90") == PREFILL  # TTFT: the prefill's, as on the page
    assert _trace(fig, "predicted mean") == PREDICTED
    fig = sl.widgets.kv_transfer_figure(measured={"here": 2e9})
    names = [t.name for t in fig.data]
    assert _trace(fig, next(n for n in names if n.startswith("decode step"))) == DECODE
    assert _trace(fig, next(n for n in names if n.startswith("prefill"))) == PREFILL
    assert _trace(fig, "link measured here") == TRANSFER


@pytest.mark.parametrize("model, gpu", [("Llama-3-8B", "H100"), ("Llama-2-7B", "H100"), ("Llama-3-8B", "L4")])
def test_chapter_3_curves_and_explorer_agree_on_the_memory_full_batch(model, gpu):
    """Chapter 3 printed "batch 237" beside the explorer's "B=238" for Llama-3-8B at 2,048 tokens on an H100: the
    curves stopped at the last of their log-spaced batches that fit. 238 is right: (80 GB - 16.06 GB of weights) /
    (2,048 x 128 KiB) = 238.2."""
    contexts = (128, 2048, 8192)
    batches, curves, _ = roofline.predicted_decode_curves(model, gpu, contexts=contexts)
    setup = ch03.published_setup(model, gpu)
    for context, tps in zip(contexts, curves.values()):
        fits = np.flatnonzero(np.isfinite(tps))
        full = sizing.max_decode_batch(setup.memory_bytes, setup.weight_bytes, context, setup.kv_bytes_per_token)
        grid = ch03.decode_roofline_grid(setup, context)
        assert int(grid.batch.iloc[-1]) == full
        assert int(batches[fits[-1]]) == min(full, 1024)  # the curves stop at max_batch (1,024) at the latest
        per_seq = context * setup.kv_bytes_per_token
        assert setup.weight_bytes + full * per_seq <= setup.memory_bytes < setup.weight_bytes + (full + 1) * per_seq
    h100 = ch03.published_setup("Llama-3-8B", "H100")
    assert sizing.max_decode_batch(h100.memory_bytes, h100.weight_bytes, 2048, h100.kv_bytes_per_token) == 238
    assert sizing.max_decode_batch(1e9, 2e9, 2048, 1.0) == 0
    with pytest.raises(ValueError, match="context >= 1"):
        sizing.max_decode_batch(1e9, 1e8, 0, 1.0)


def test_chapter_3_decode_legend_covers_no_measured_point():
    """The legend of "Decode on stories42m" sat inside the panel, over the measured step at batch 2."""
    fig = as_figure(CASES["ch03 decode_vs_batch"]())
    ax = fig.axes[0]
    assert ax.get_legend() is None and fig.legends  # under the panel, as the book's other figures
    fig.canvas.draw()
    box = fig.legends[0].get_window_extent()
    for line in ax.get_lines():
        xy = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]))
        assert not any(box.contains(x, y) for x, y in xy), line.get_label()


def test_the_90_percent_target_is_one_style_in_every_chapter():
    """ch08 drew its 90% line of goodput black and dashed, like the book's predictions, while ch06 and ch07 drew it
    dotted: a target is :data:`style.TARGET`, dotted (``TARGET_LS`` in matplotlib, ``TARGET_DASH`` in plotly)."""
    def targets(fig):  # the horizontal lines at 90% of a matplotlib figure
        return [ln for ax in fig.axes for ln in ax.get_lines()
                if len(set(ln.get_ydata())) == 1 and float(ln.get_ydata()[0]) == 90.0 and "90%" in ln.get_label()]

    ch08 = targets(as_figure(CASES["ch08 chunked_vs_split"]()))
    curve = pd.DataFrame(dict(rate_per_worker=[1.0, 2.0, 3.0], attainment=[1.0, 0.95, 0.5]))
    ch07 = targets(pools.attainment_curves({"2P+2D": curve, "4 colocated": curve}, goodputs={"2P+2D": 2.2}).figure)
    for line in ch08 + ch07:
        assert to_hex(line.get_color()) == TARGET and line.get_linestyle() == TARGET_LS == ":", line.get_label()
    assert len(ch08) == 1 and len(ch07) == 1
    ch06 = sl.widgets.split_figure(None, {"research": (0.5, 0.05)}, {"research": 2.0}, ratios=[(1, 1)],
                                   factors=(1.0,), ratio=(1, 1), n_requests=20, scale=0.5)
    [trace] = [t for t in ch06.data if t.name == "90% target"]
    assert (trace.line.dash, to_hex(trace.line.color)) == (TARGET_DASH, TARGET) == ("dot", PREDICTED)
