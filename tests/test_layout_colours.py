"""One colour per serving layout across the book: every figure that compares layouts (chapters 4, 6, 7 and 8,
matplotlib and the rendered book's plotly figures) draws each layout in its colour of
``splitlab.teach.figures.style.LAYOUT_COLORS``, whatever the order or the name the chapter gives the run.
Simulated on the built-in cost model (model-free, a few seconds)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from splitlab import serving  # noqa: E402
from splitlab.serving import CostModelExecutor, Request  # noqa: E402
from splitlab.teach import widgets  # noqa: E402
from splitlab.teach.widgets.ch07 import phone_tick  # noqa: E402
from splitlab.teach.figures import confusions, interference, pools, serving as serving_plots  # noqa: E402
from splitlab.teach.figures import split as split_figures  # noqa: E402
from splitlab.teach.figures.style import (LAYOUT_COLORS, change_words, fmt2, fmt3, layout_color,  # noqa: E402
                                          layout_of)

#: the names the chapters give their runs, with the layout each one is
NAMES = {"2 colocated (prefill-first)": "prefill-first", "4 colocated": "prefill-first", "4 coloc.": "prefill-first",
         "prefill-first": "prefill-first", "2 colocated (chunked, 128-token chunks)": "chunked",
         "4 colocated, chunked": "chunked", "4 chunked 256": "chunked", "chunked": "chunked",
         "decode-first": "decode-first", "1P+1D": "split", "3P+1D": "split", "split 1P+1D": "split",
         "prefill-first: max gap 80 ms, TTFT 120 ms": "prefill-first"}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def runs():
    """The same requests (three streams, then a long prompt) on each layout, keyed as chapter 8 keys them."""
    reqs = [Request(i, 0.01 * i, [1] * 32, 40) for i in range(3)] + [Request(3, 0.05, [1] * 600, 4)]
    configs = {"split 1P+1D": serving.ServingConfig.disaggregated(1, 1, kv_budget_bytes=None),
               "chunked": serving.ServingConfig.colocated(2, policy="chunked", chunk_tokens=64, kv_budget_bytes=None),
               "decode-first": serving.ServingConfig.colocated(2, policy="decode-first", kv_budget_bytes=None),
               "prefill-first": serving.ServingConfig.colocated(2, kv_budget_bytes=None)}
    return {k: serving.run(reqs, c, CostModelExecutor()) for k, c in configs.items()}


def _hex(c) -> str:
    return to_hex(c)


def _line_colours(ax) -> dict:
    """label -> colour of every labelled line of ``ax`` (legend labels carry suffixes such as " (n=4)")."""
    return {line.get_label(): _hex(line.get_color()) for line in ax.get_lines()
            if not line.get_label().startswith("_")}


def _check(colours: dict) -> int:
    """Every label naming a layout has that layout's colour; returns how many were checked."""
    checked = 0
    for label, colour in colours.items():
        layout = layout_of(label)
        if layout is not None:
            assert colour == LAYOUT_COLORS[layout], (label, colour, LAYOUT_COLORS[layout])
            checked += 1
    return checked


def test_every_name_the_book_gives_a_run_names_its_layout(runs):
    assert {n: layout_of(n) for n in NAMES} == NAMES
    assert layout_of("with the budget") is None and layout_color("idle", "#e6e6e6") == "#e6e6e6"
    for name, res in runs.items():  # a config says it too
        assert layout_of(res.config if hasattr(res, "config") else name) in LAYOUT_COLORS
    assert layout_of(serving.ServingConfig.disaggregated(2, 1)) == "split"
    assert layout_of(serving.ServingConfig.colocated(2, policy="chunked", chunk_tokens=64)) == "chunked"
    assert len(set(LAYOUT_COLORS.values())) == len(LAYOUT_COLORS), "two layouts share a colour"


def test_latency_cdfs_colour_each_layout(runs):
    ax = serving_plots.latency_cdf(dict(reversed(list(runs.items()))), "ttft")
    assert _check(_line_colours(ax)) == 4
    fig = split_figures.latency_cdfs({"1P+1D": runs["split 1P+1D"], "2 colocated (prefill-first)": runs[
        "prefill-first"], "2 colocated (chunked, 64-token chunks)": runs["chunked"]}, 0.5, 0.05)
    assert all(_check(_line_colours(ax)) == 3 for ax in fig.axes if ax.get_lines())


def test_chapter_4_policies_and_chapter_8_comparison_colour_each_layout(runs):
    fig = interference.policies({k: runs[k] for k in ("prefill-first", "decode-first", "chunked")}, 3, "policies")
    for ax in fig.axes:
        dots = [line for line in ax.get_lines() if line.get_marker() == "."]
        assert _hex(dots[0].get_color()) == LAYOUT_COLORS[layout_of(ax.get_title())]
    three = {k: runs[k] for k in ("prefill-first", "chunked", "split 1P+1D")}
    sweep = pd.DataFrame([dict(config=c, rate_per_s=r, slo_attainment=1 - r / 30) for c in ("split 1P+1D", "chunked",
                                                                                             "prefill-first")
                          for r in (3, 6, 9)])
    fig = confusions.chunked_vs_split(three, sweep, 0.3, 0.03)
    a1, a2 = fig.axes[:2]
    assert _check({line.get_label(): _hex(line.get_color()) for line in a1.get_lines()
                   if not line.get_label().startswith("_")}) == 3
    assert _check(_line_colours(a2)) == 3


def test_chapter_7_figures_colour_each_layout():
    curve = pd.DataFrame({"rate_per_worker": [1.0, 2.0], "attainment": [1.0, 0.5]})
    ax = pools.attainment_curves({"3P+1D": curve, "4 colocated": curve, "4 colocated, chunked": curve})
    assert _check(_line_colours(ax)) == 3
    plan = pools.pools_plan(None, "research", 0.5, 0.05, 0.5, max_workers=2, chunk_tokens=(64,))
    ax = pools.candidates(plan)
    bars = [p for p in ax.patches]
    assert [_hex(b.get_facecolor()) for b in bars] == [LAYOUT_COLORS[layout_of(c)] for c in plan.candidates[:10]]
    ax = pools.ratio_sweep(plan)
    assert all(_hex(line.get_color()) == LAYOUT_COLORS["split"] for line in ax.get_lines()
               if line.get_label().endswith("workers"))
    fig = widgets.pools_figure(None, "research", 0.5, (0.05,), (0.5,), scale=0.5, tpot_slo_s=0.05, max_workers=2,
                               chunk_tokens=(64,))
    bar = next(t for t in fig.data if t.type == "bar" and t.visible)
    grid = pools.pools_grid(None, "research", 0.5, (0.05,), (0.5,), max_workers=2, chunk_tokens=(64,))
    name = {phone_tick(n): n for n in grid.candidate}  # each tick's candidate ("2<br>coloc": "2 coloc.")
    assert list(bar.marker.color) == [layout_color(name[x]) for x in bar.x]


def test_chapter_6_plotly_figure_colours_each_layout():
    fig = widgets.split_figure(None, {"research": (0.5, 0.05)}, {"research": 2.0}, ratios=[(1, 1)], factors=(1.0,),
                               ratio=(1, 1), n_requests=20, scale=0.5)
    for t in fig.data:
        if t.name.startswith(("split", "colocated")):
            assert t.line.color == LAYOUT_COLORS["split" if t.name.startswith("split") else "prefill-first"]


def test_numbers_carry_no_false_precision():
    assert [fmt3(v) for v in (121.0, 105.04, 4608, 4610.4, 0.0811798, 2 ** 16, True)] == \
        ["121", "105", "4,608", "4,610", "0.0812", "65,536", "True"]
    # no trailing zeros ("2.00 MiB", "1.50x", "11.50 requests/s" were on the pages) and no exponent
    assert [fmt3(v) for v in (2.0000001, 1.5, 11.5, 99.96, 9.999, 1.23e-5, -0.000123456, 1234567.0, 0.0)] == \
        ["2", "1.5", "11.5", "100", "10", "0.0000123", "-0.000123", "1,230,000", "0"]
    # fmt2 is fmt3 with 2 digits (a ratio of noisy times), exact whole numbers in full like fmt3's
    assert [fmt2(v) for v in (0.2134, 4.71, 47.2, 116.3, 116.0, 0.999, 1.6e-6)] == \
        ["0.21", "4.7", "47", "120", "116", "1", "0.0000016"]
    assert [fmt3(v, 2) for v in (0.2134, 116.3)] == ["0.21", "120"]
    assert [change_words(r) for r in (1.02, 1.83, 2.04, 2.7, 0.8, 0.2)] == \
        ["stays about the same", "grows by 83%", "about doubles", "grows 2.7x", "falls by 20%", "falls to 0.2x"]
    assert change_words(1.02, number=True) == "stays about the same (+2%)"
    assert change_words(2.04, number=True) == "about doubles (2.04x)"
    with pytest.raises(ValueError, match="positive"):
        change_words(0)
