"""Chapters 7, 8 and 9 as a reader saw them (issue 22, a read of the rendered book at 1280 and 412 px): sentences
computed from crafted numbers, figure properties, and what a phone shows of their tables, sliders and code cells.
Model-free: no chapter is executed."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from phone_cases import CASES, as_figure  # noqa: E402
from splitlab.teach.figures import confusions, confusions_tables, pools, production, production_pains  # noqa: E402
from splitlab.teach.figures.split_map import rule_table  # noqa: E402
from splitlab.teach.figures.style import LAYOUT_COLORS, OTHER_COLORS, PHASE_COLORS, PREDICTED, TRANSFER  # noqa: E402
from splitlab.teach.widgets import split_map as map_widgets  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


# --- words -----------------------------------------------------------------------------------------------------

def test_a_tie_on_the_attainment_curves_reads_as_a_tie():
    """ch07 said "4 colocated falls first" where 4 colocated and 4 chunked both printed 4.75 req/s per worker."""
    tie = pools.falls_words({"4 colocated": 4.75, "4 colocated, chunked": 4.75, "3P+1D": 11.0}, 0.03)
    assert tie.startswith("4 colocated and 4 colocated, chunked fall first, together (4.75 and 4.75 req/s")
    assert "within the searches' 3%" in tie and tie.endswith("3P+1D last")
    assert pools.falls_words({"4 colocated": 6.0, "4 colocated, chunked": 6.38, "3P+1D": 11.0}, 0.03) == \
        "4 colocated falls first, 3P+1D last"  # 6% apart: not a tie at 3%
    top = pools.falls_words({"a": 5.0, "b": 10.9, "c": 11.0}, 0.03)
    assert top.startswith("a falls first; b and c last, together (10.9 and 11 req/s")
    assert pools.falls_words({"a": 5.0, "b": 5.01, "c": 5.1}, 0.03).startswith("All 3 fall together (5, 5.01 and 5.1")
    with pytest.raises(ValueError, match="two goodputs"):
        pools.falls_words({"a": 1.0}, 0.03)


def _variants(int8=1058 * 1024, fp8=1058 * 1024):
    return {"float32": SimpleNamespace(nbytes=4096 * 1024), "fp16": SimpleNamespace(nbytes=2048 * 1024),
            "int8": SimpleNamespace(nbytes=int8), "fp8": SimpleNamespace(nbytes=fp8)}


def test_int8_and_fp8_transfers_of_the_same_bytes_get_one_explanation():
    """ch08 explained int8's 0.57x and fp8's 0.45x of fp16's transfer time differently, both moving 1,058 KiB."""
    moved = {"float32": 2.58e-3, "fp16": 1.63e-3, "int8": 0.929e-3, "fp8": 0.733e-3}
    note = confusions_tables.quant_note(_variants(), moved)
    assert note.count("they fell about in proportion to the bytes") == 1 and "The int8 transfer" not in note
    assert "took 0.57x and 0.45x fp16's time" in note and "this machine's noise" in note
    assert "their mean, 0.51x" in note
    close = confusions_tables.quant_note(_variants(), dict(moved, fp8=0.9e-3))
    assert "noise" not in close and "together (their mean) 0.56x: they fell about in proportion" in close
    apart = confusions_tables.quant_note(_variants(int8=1000 * 1024), moved)  # different sizes: one each
    assert "The int8 transfer took" in apart and "The fp8 transfer took" in apart


def _spec(first_layer_acceptance=0.0):
    rows = [dict(draft=d, k=k, acceptance=a, tpot_ms=t) for d, k, a, t in
            [("first layer", 1, first_layer_acceptance, 9.0), ("first layer", 2, 0.0, 10.8),
             ("first layer", 4, 0.0, 12.3), ("n-gram", 1, 0.974, 3.8), ("n-gram", 2, 0.98, 3.75),
             ("n-gram", 4, 0.98, 2.86)]]
    return pd.DataFrame(rows + rows)  # two prompts per draft and k


def test_the_drafts_acceptance_is_said_as_the_table_prints_it():
    """ch08 said the first-layer draft "agrees with the full model rarely" where its acceptance was 0 at every k."""
    note = confusions.draft_note(_spec(), 5.18e-3, random_weights=True)
    assert "kept none of its proposals (acceptance 0 at every k)" in note and "rarely" not in note
    assert "costs more than it saves at every k (TPOT 9 to 12.3 ms against 5.18 ms plain)" in note
    assert "kept most of its proposals (acceptance 0.974 to 0.98)" in note and "saves time at every k" in note
    some = confusions.draft_note(_spec(0.1), 3.8e-3, random_weights=False)
    assert "kept few of its proposals (acceptance 0 to 0.1)" in some and "random weights" not in some
    assert "saves time only at k = 2 and 4" in some


# --- tables, sliders and code on a 412 px phone ------------------------------------------------------------------

#: the text column of a 412 px phone (px), and an estimate of a pandas HTML table's narrowest width in it: a column
#: is as wide as its longest word (taken as breaking at spaces only), about 7 px a character, plus 12 px of padding.
#: It errs wide: ch07's rule-of-thumb table as the reader saw it estimates at 457 px (Chromium: 415 px, in a 365 px
#: column), rule_table's at 326 px (Chromium, in the book's CSS: 288 px at the narrowest, 365 px filling the column).
PHONE_PX, CHAR_PX, COLUMN_PX = 365, 7, 12


def _html_table_px(table: pd.DataFrame) -> int:
    def longest(values) -> int:
        return max(len(w) for v in values for w in str(v).split() or [""])
    columns = [[*(n for n in table.index.names if n), *table.index.get_level_values(i)]
               for i in range(table.index.nlevels)]
    columns += [[c, *table[c]] for c in table.columns]
    return sum(CHAR_PX * longest(col) + COLUMN_PX for col in columns)


def _rule_rows():
    return pd.DataFrame({"model": ["Llama-3-8B", "Llama-3-8B", "Llama-3-70B", "Llama-3-70B"],
                         "dtype": ["bf16", "bf16", "fp8", "fp8"], "prompt tokens": [2048, 8192, 2048, 8192],
                         "prefill (decode steps)": [9.402, 39.317, 18.761, 78.137],
                         "256-token chunk (decode steps)": [1.147, 1.094, 2.316, 2.285],
                         "rule says": ["colocated", "split", "near the threshold", "beyond the map's columns"],
                         "own map says": ["chunked", "prefill-first", "chunked", "split"]})


def test_chapter_7_rule_of_thumb_table_fits_a_phone():
    """ch07's table of the rule applied to GPU rows was 415 px wide in a 365 px column at 412 px."""
    rows = _rule_rows()
    before = rows[["model", "prompt tokens", "prefill (decode steps)", "256-token chunk (decode steps)",
                   "rule says", "own map says"]].set_index(["model", "prompt tokens"]).round(3)
    assert _html_table_px(before) > PHONE_PX  # the estimate catches the table the reader saw
    shown = rule_table(rows)
    assert _html_table_px(shown) <= PHONE_PX, shown
    assert shown.index.name == "Llama-3" and list(shown.index) == ["8B bf16, 2,048", "8B bf16, 8,192",
                                                                   "70B fp8, 2,048", "70B fp8, 8,192"]
    assert list(shown.columns) == ["prefill (steps)", "chunk of 256 (steps)", "rule", "own map"]
    assert shown.loc["8B bf16, 2,048"].tolist() == ["9.4", "1.15", "colocated", "chunked"]
    assert shown.loc["8B bf16, 8,192", "own map"] == "pf-first"


def test_chapters_7_to_9_other_tables_fit_a_phone():
    """The same estimate on the chapters' other table functions, fed numbers shaped like theirs."""
    table = pd.DataFrame({"need_gb_s": [6.51, 7.93], "kv_gb": [0.268, 1.04]}, index=["8B, 2k", "8B, 8k"])
    table.index.name = "case"
    assert _html_table_px(production.link_table(table)) <= PHONE_PX
    routing = confusions.routing_counts({p: pd.DataFrame({"worker": [0, 1], "computed_tokens": [9088, 9984]})
                                         for p in ("round-robin", "prefix-aware")}, 36864)
    shown = confusions.routing_table(routing, 36864)
    assert _html_table_px(shown) <= PHONE_PX
    assert routing.loc["cache on the decode side", "computed_tokens"] == 36864
    assert shown.loc["round-robin"].tolist() == ["19,072", "9,088 / 9,984", "0.517"]


def test_the_map_slider_end_labels_stay_inside_a_phone():
    """ch07's link slider showed "0.01 GB/" at 412 px: its end labels are centred on the rail's ends, and the rail
    ran to the plot's right edge with a 10 px margin."""
    maps = {None: None, 0.1: None, 0.01: None}
    labels = [map_widgets.link_label(g) for g in maps]
    plot_px = PHONE_PX - 70 - 10  # the figure's left and right margins
    inset = map_widgets.SLIDER_X * plot_px
    assert CHAR_PX * len(labels[-1]) / 2 <= inset + 10  # right: the inset and the right margin
    assert CHAR_PX * len(labels[0]) / 2 <= inset + 70  # left: the inset and the left margin


def _tiny_map(workers: int):
    from splitlab.planning.map_result import Cell, SplitMap
    good = {"split": 10.0, "prefill-first": 5.0, "chunked": 5.0}
    cell = Cell(64, 2.0, 2.5, 1.0, 0.01, good, dict.fromkeys(good, "tpot"),
                {"split": f"{workers // 2}P+{workers // 2}D", "prefill-first": "coloc.", "chunked": "chunk"})
    return SplitMap([cell.decide(0.1)], workers, [64], [2.0], [2.5], 64, 5, None, 0.1, "built-in", chunk_tokens=[256])


def test_the_map_menu_of_cluster_sizes_fits_a_phone():
    """ch07's map has a menu of cluster sizes (4 and 8 workers) on a row of its own between the title and the plot,
    left-aligned over the plot: in Chromium at 412 px the title's two lines, the menu and the plot do not overlap
    (the title, placed at the container's top, had its first line cut when the top margin grew; it is pinned 12 px
    below the top)."""
    grids = {n: {None: _tiny_map(n), 0.1: _tiny_map(n), 0.01: _tiny_map(n)} for n in (4, 8)}
    fig = map_widgets.split_map_figure(grids)
    menu = fig.layout.updatemenus[0]
    plot_px = PHONE_PX - fig.layout.margin.l - fig.layout.margin.r
    assert (menu.x, menu.xanchor, menu.yanchor) == (0, "left", "bottom") and menu.y > 1
    assert all(CHAR_PX * len(b.label) + 40 <= plot_px for b in menu.buttons)  # label and arrow
    title_px, menu_px = 14 + 12 + 12, 30  # two lines under a 12 px pin; the menu's box
    assert fig.layout.margin.t >= title_px + menu_px + 10
    assert fig.layout.title.yref == "container" and fig.layout.title.yanchor == "top"
    assert fig.layout.height * (1 - fig.layout.title.y) == pytest.approx(12)
    one = map_widgets.split_map_figure(grids[4])  # one cluster: no menu, the title names its size
    assert not one.layout.updatemenus and "4 workers" in one.layout.title.text and one.layout.margin.t == 70


#: what a 412 px phone's code block shows of a line, measured: the 42-column estimate of tests/test_book.py let
#: cells of 16-18 rendered lines through
RENDERED_COLUMNS, PHONE_LINES = 36, 15


@pytest.mark.parametrize("chapter", ["07", "08", "09"])
def test_visible_code_cells_of_chapters_7_to_9_fit_a_phone_as_rendered(chapter):
    path = next((ROOT / "book").glob(f"{chapter}_*.ipynb"))
    hidden = {"hide-input", "remove-input", "remove-cell"}
    long = {}
    for i, c in enumerate(nbformat.read(path, as_version=4).cells):
        if c.cell_type == "code" and not hidden & set(c.metadata.get("tags", [])):
            n = sum(max(1, -(-len(line) // RENDERED_COLUMNS)) for line in c.source.split("\n"))
            if n > PHONE_LINES:
                long[i] = n
    assert not long, f"{path.stem}: cells of more than {PHONE_LINES} rendered lines (index: lines): {long}"


# --- figures -----------------------------------------------------------------------------------------------------

def test_phase_and_layout_colours_are_apart():
    """Orange meant prefill and the split, blue decode and colocated prefill-first (ch04, ch09)."""
    phases, layouts = set(PHASE_COLORS.values()), set(LAYOUT_COLORS.values())
    others = set(OTHER_COLORS)
    assert not phases & layouts and not others & (phases | layouts) and PREDICTED not in phases | layouts | others


def test_chapter_8_predictions_are_black_and_dashed_and_measurements_are_not_black():
    """ch08's predicted lines were dashed in the series' colours, and black marked measurements (plain decoding,
    the cached positions, a prefill of the suffix alone)."""
    fig = as_figure(CASES["ch08 speculative_sweep"]())
    top, bottom = fig.axes[:2]
    predicted = [ln for ln in top.get_lines() if ln.get_linestyle() == "--"]
    assert len(predicted) == 2 and all(to_hex(ln.get_color()) == PREDICTED for ln in predicted)
    measured = [ln for ln in top.get_lines() + bottom.get_lines() if ln.get_linestyle() != "--"]
    assert measured and all(to_hex(ln.get_color()) != PREDICTED for ln in measured)
    for case in ("ch08 kv_schemes", "ch08 prefix_reuse"):  # every line of these is measured
        lines = [ln for ax in as_figure(CASES[case]()).axes for ln in ax.get_lines()]
        assert lines and all(to_hex(ln.get_color()) != PREDICTED for ln in lines), case


def test_chapter_8_prefix_panel_is_not_squeezed_by_a_tick_label():
    """"cache on the decode side" on one line took about half the bottom panel's width at 412 px."""
    fig = as_figure(CASES["ch08 prefix_reuse"]())
    fig.canvas.draw()
    top, bottom = (ax.get_window_extent().width for ax in fig.axes[:2])
    assert bottom >= 0.75 * top, (bottom, top)
    assert all(len(line) <= 12 for t in fig.axes[1].get_yticklabels() for line in t.get_text().split("\n"))


def test_chapter_7_ratio_sweep_tells_every_total_apart():
    """2 and 6 workers were drawn with the same marker and dash (four styles for five totals)."""
    cands = [SimpleNamespace(layout="disaggregated", workers=n, prefill_workers=x, goodput_rps_per_worker=x + n,
                             name=f"{x}P+{n - x}D", policy="prefill-first")
             for n in range(2, 9) for x in range(1, n)]
    cands.append(SimpleNamespace(layout="colocated", workers=4, prefill_workers=0, goodput_rps_per_worker=3.0,
                                 name="4 colocated", policy="prefill-first"))
    ax = pools.ratio_sweep(SimpleNamespace(candidates=cands))
    styles = [(ln.get_marker(), ln.get_linestyle()) for ln in ax.get_lines() if ln.get_label().endswith("workers")]
    assert len(styles) == 7 and len(set(styles)) == 7


def test_chapter_9_hand_offs_are_in_the_transfer_colour():
    """ch09's hand-off bars were orange, the split's layout colour, where every other chapter draws a transfer
    green."""
    table = pd.DataFrame({"need_gb_s": [6.51, 7.93, 2.33]}, index=["8B, 2k", "8B, 8k", "70B, 2k"])
    ax = production.link_need(table)
    assert {to_hex(p.get_facecolor()) for p in ax.patches} == {TRANSFER}
    nic = pd.DataFrame({"bare_ms": [20.0, 20.0], "link_mean_ms": [22.0, 40.0], "link_p90_ms": [25.0, 60.0]},
                       index=[1, 2])
    ax = production_pains.nic_figure(nic)
    assert {to_hex(ln.get_color()) for ln in ax.get_lines() if re.match("mean|90th", ln.get_label())} == {TRANSFER}


def test_an_arrival_is_not_drawn_in_a_layouts_colour():
    """serving.py drew arrivals in tab:red, the split's colour, on chapter 4's timelines (where no split runs)."""
    from matplotlib.colors import to_hex

    from splitlab.teach.figures import serving
    assert to_hex(serving.ARRIVAL) not in {to_hex(c) for c in (*LAYOUT_COLORS.values(), *PHASE_COLORS.values())}
