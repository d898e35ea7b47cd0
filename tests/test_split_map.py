"""The map of where the split pays off (splitlab.planning.split_map), its rule of thumb, figures and explorers.

The corners are known by hand on a crafted cost model: a decode step of 10 ms whatever the batch, a prefill of 1
ms per token, a free link. A 500-token prompt costs 50 decode steps: a colocated worker stalls every stream it
holds for 0.5 s per prefill (chunked: 0.26 s per 256-token chunk), which a TPOT SLO of 1.5 steps (15 ms over 128
answer tokens: 0.64 s of slack per stream) allows about once per stream, while the split's decode worker never
stalls: 3P+1D serves min(3 x 2, 1 x 16 / (128 x 10 ms)) = 6 requests/s, 1.5 per worker. A 10-token prompt costs
1 step: the split's prefill worker idles (1P+3D: 3 x 12.5 / 4 = 9.4 per worker) while every colocated worker
decodes (about 12.5 x (1 - 12.5 x 10 ms) = 11 per worker): colocated wins. That arithmetic holds a batch of 16
requests: the crafted steps do not grow with the batch, so these maps pass ``max_batch=16`` (the map's default is
no cap, the KV budget bounding the batch, as in the planner).
"""
from __future__ import annotations

import json
import math

import matplotlib
import numpy as np
import pytest

from splitlab.costmodel import CostModel
from splitlab.planning.map_result import Cell, SplitMap
from splitlab.planning.rule_of_thumb import BOOK_ROWS, agrees, apply_rule, order_words, split_threshold
from splitlab.planning.split_map import geometric_axis, prompt_axis, split_map

matplotlib.use("Agg")

CRAFTED = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-3, decode_base_s=0.01, decode_per_seq_s=0.0,
                    decode_per_token_s=0.0, transfer_base_s=0.0, transfer_bytes_per_s=math.inf,
                    kv_bytes_per_token=64, max_context=2048,
                    source="crafted: 10 ms decode steps, 1 ms per prompt token")


@pytest.fixture(scope="module")
def corners():
    return split_map(CRAFTED, 4, prompt_tokens=[10, 500], tpot_steps=[1.5], output_tokens=128, max_batch=16,
                     chunk_tokens=(256,), progress=False)  # the arithmetic above: 256-token chunks


def _cell(m, prompt, steps):
    return next(c for c in m.cells if c.prompt_tokens == prompt and c.tpot_steps == steps)


def test_the_corners_known_by_hand(corners):
    long, short = _cell(corners, 500, 1.5), _cell(corners, 10, 1.5)
    assert long.prefill_steps == pytest.approx(50) and short.prefill_steps == pytest.approx(1)
    assert long.winner == "split" and long.margin > 0.3, long.to_json()
    assert long.goodput["split"] == pytest.approx(1.5, rel=0.15)
    assert corners.chunk_steps == [pytest.approx(25.7), pytest.approx(25.7)]  # 256 + 1 tokens at 1 ms, 10 ms steps
    assert short.verdict == "colocated" and short.leader != "split", short.to_json()  # pf-first and chunked may tie
    assert short.goodput["split"] < 0.9 * short.goodput[short.leader]
    assert long.verdict == "split" and long.runner_up != "split"
    assert long.goodput[long.runner_up] < long.goodput["split"]
    for c in corners.cells:
        assert set(c.binding.values()) <= {"ttft", "ttst", "tpot", "unfinished", "none"}
        assert c.tpot_slo_s == pytest.approx(1.5 * 0.01) and c.ttft_slo_s == pytest.approx(5 * c.prompt_tokens * 1e-3)


def test_json_has_every_cell_with_both_goodputs(corners):
    data = json.loads(json.dumps(corners.to_json()))
    assert len(data["cells"]) == 2 and data["workers"] == 4 and data["counts"]["split"] == 1
    for c in data["cells"]:
        for key in ("prompt_tokens", "prefill_steps", "tpot_steps", "winner", "goodput_rps_per_worker", "runner_up",
                    "runner_up_goodput_rps_per_worker", "binding_slo", "margin", "winner_layout"):
            assert key in c
        assert c["goodput_rps_per_worker"] >= c["runner_up_goodput_rps_per_worker"]


def test_a_slow_link_makes_the_split_lose(corners):
    slow = split_map(CRAFTED, 4, prompt_tokens=[500], tpot_steps=[1.5], output_tokens=128, max_batch=16,
                     link_bytes_per_s=2e3, progress=False)  # 32 kB at 2 kB/s: 16 s per cache
    assert slow.cells[0].winner != "split" and slow.cells[0].goodput["split"] < _cell(corners, 500, 1.5).goodput[
        "split"] / 2


def test_colocated_from_reuses_the_colocated_searches(corners):
    m = split_map(CRAFTED, 4, prompt_tokens=[10, 500], tpot_steps=[1.5], output_tokens=128, link_bytes_per_s=1e9,
                  max_batch=16, colocated_from=corners, chunk_tokens=(256,), progress=False)
    assert m.searches < corners.searches
    for a, b in zip(m.cells, corners.cells):
        assert (a.goodput["chunked"], a.goodput["prefill-first"]) == (b.goodput["chunked"], b.goodput["prefill-first"])
    with pytest.raises(ValueError, match="colocated_from is a map of other inputs .*output_tokens"):
        split_map(CRAFTED, 4, prompt_tokens=[10, 500], tpot_steps=[1.5], output_tokens=64, max_batch=16,
                  colocated_from=corners, chunk_tokens=(256,))
    # break30: runs of other lengths, tolerance or ServingConfig options were taken in silently (chapter 7 measured
    # runs of 400 biasing a map's goodputs by up to +152% against steady state)
    for other, name in ((dict(max_requests=100), "max_requests"), (dict(min_requests=None), "min_requests"),
                        (dict(tolerance=0.1), "tolerance"), (dict(kv_budget_bytes=2 ** 20), "options")):
        with pytest.raises(ValueError, match=f"colocated_from is a map of other inputs .*{name}"):
            split_map(CRAFTED, 4, prompt_tokens=[10, 500], tpot_steps=[1.5], output_tokens=128, max_batch=16,
                      colocated_from=corners, chunk_tokens=(256,), **other)


@pytest.mark.parametrize("kwargs, match", [
    (dict(workers=0), "workers must be an integer in 2 .. 16"),
    (dict(workers=1), "workers must be an integer in 2 .. 16"),
    (dict(prompt_tokens=[]), "prompt_tokens is empty"),
    (dict(tpot_steps=[]), "tpot_steps is empty"),
    (dict(tpot_steps=[float("nan")]), "tpot_steps value must be a finite number >= 1, got nan"),
    (dict(tpot_steps=[0.5]), "tpot_steps value must be a finite number >= 1"),
    (dict(prompt_tokens=[64, 64]), "holds a value twice"),
    (dict(prompt_tokens=[2040]), "exceed the cost model's context of 2048"),
    (dict(link_bytes_per_s=float("nan")), "link_bytes_per_s must be a finite number"),
    (dict(tie_tolerance=1.5), "tie_tolerance must be below 1"),
    (dict(chunk_tokens=[8], max_batch=16), "chunk_tokens must be one or more integers above max_batch"),
    (dict(chunk_tokens=[1]), "chunk_tokens must be one or more integers above 1"),
    (dict(output_tokens=1), "output_tokens must be an integer >= 2"),
    (dict(max_requests=1, min_requests=None), "max_requests must be an integer >= 2, got 1"),  # '... got 1 and 1'
    (dict(max_requests=100.5), "max_requests must be an integer >= 2, got 100.5"),
])
def test_bad_input_is_refused_before_any_search(kwargs, match):
    args = dict(prompt_tokens=[64], tpot_steps=[2.0], progress=False) | kwargs
    with pytest.raises(ValueError, match=match):
        split_map(CRAFTED, **({"workers": 4} | args))


def test_a_free_prefill_is_refused_naming_the_ttft_slo_it_leaves_at_0():
    # was goodput's 'ttft_slo_s must be a time > 0 s', an argument split_map's caller never gave
    free = CostModel(prefill_base_s=0.0, prefill_per_token_s=0.0, prefill_per_token2_s=0.0, max_context=2048)
    with pytest.raises(ValueError, match="predicts a prefill of 0 s for a 64-token prompt: the TTFT SLO"):
        split_map(free, 2, prompt_tokens=[64], tpot_steps=[2.0], progress=False)


def test_the_default_columns_space_the_prefill_cost_evenly():
    from splitlab.costmodel import roofline_cost_model
    cost = roofline_cost_model("Llama-3-8B", "H100")  # prefill memory-bound, 1 step, up to ~600 tokens
    prompts = prompt_axis(cost, 16, 8128, 6)
    steps = [cost.prefill_s(n) / cost.decode_s(1, n) for n in prompts]
    assert prompts[0] == 16 and prompts[-1] == 8128 and len(prompts) == 6
    ratios = [b / a for a, b in zip(steps, steps[1:])]
    assert all(1.8 < r < 2.4 for r in ratios), steps  # 1 to 39 steps in five factors of about 2.08
    assert prompt_axis(CRAFTED, 10, 1000, 3) == [10, 100, 1000]  # 1, 10, 100 steps
    with pytest.raises(ValueError, match="empty range"):
        prompt_axis(cost, 512, 64, 3)


def test_geometric_axis():
    assert geometric_axis(16, 2048, 8, integer=True) == [16, 32, 64, 128, 256, 512, 1024, 2048]
    assert geometric_axis(1.5, 6, 3) == [1.5, 3.0, 6.0]
    for low, high, n, match in ((512, 64, 3, "empty range"), (float("nan"), 4, 3, "finite number > 0"),
                                (1, 4, 0, "points must be an integer >= 1"),
                                (2, 4, 1, "one point needs low equal to high"),  # was [2], its 4 dropped
                                (4, 4, 3, "3 points need low below high")):  # was [4]: `map --columns 3` one column
        with pytest.raises(ValueError, match=match):
            geometric_axis(low, high, n)


def _hand_map(winners: list[list[str]], steps=(2.0, 10.0, 50.0), tpots=(1.5, 4.0), workers: int = 4,
              max_requests: int | None = None) -> SplitMap:
    """A map whose winners are given, row by row (goodputs made to match: the winner 10, the others 5); its goodput
    runs uncapped unless ``max_requests`` is given (a cap of 400 cuts every cell's runs to about 6 lifetimes)."""
    cells = []
    for k, row in zip(tpots, winners):
        for s, w in zip(steps, row):
            good = {kind: (10.0 if kind == w else 9.8 if w == "tie" and kind in ("split", "chunked") else 5.0)
                    for kind in ("split", "prefill-first", "chunked")}
            cells.append(Cell(int(s * 10), s, k, 1.0, 0.01, good, dict.fromkeys(good, "tpot"),
                              {"split": "2P+2D", "prefill-first": "4 colocated", "chunked": "4 chunked"}).decide(0.1))
    return SplitMap(cells, workers, [int(s * 10) for s in steps], list(steps), list(tpots), 64, 5, None, 0.1,
                    "built-in", chunk_tokens=[256], search={"max_requests": max_requests})


def _row(winners: list[str], steps=(2.0, 10.0, 50.0)):
    """split_threshold's reading of one row of the given winners, at a TPOT SLO of 2.5 steps."""
    return split_threshold(_hand_map([winners], steps=steps, tpots=(2.5,))).set_index("tpot_steps").loc[2.5]


def test_the_rule_of_thumb_reads_the_threshold_off_a_map():
    m = _hand_map([["chunked", "tie", "split"], ["chunked", "chunked", "chunked"]])
    t = split_threshold(m).set_index("tpot_steps")
    assert t.loc[1.5, "threshold"] and (t.loc[1.5, "below_steps"], t.loc[1.5, "from_steps"]) == (10, 50)
    assert t.loc[1.5, "from_prompt_tokens"] == 500 and t.loc[1.5, "verdicts"] == ("colocated", "tie", "split")
    assert t.loc[1.5, "rule"] == ("at a TPOT SLO of 1.5 decode steps the split loses at 2, ties at 10 and wins at 50 "
                                  "decode steps of prefill: its threshold lies between 10 and 50 decode steps, where "
                                  "the map has no column")
    assert not t.loc[4.0, "threshold"] and t.loc[4.0, "wins"] == 0
    assert "loses at every prefill of the map, 2 to 50 decode steps" in t.loc[4.0, "rule"]


def test_a_loss_then_wins_is_a_threshold_quoted_as_its_bracket():
    """ch07 quoted 'about 3 decode steps' for rows whose columns were 1.8 (lost) and 5.02 (won): a geometric mean
    of two columns, no measured point; the bracket is what the map knows."""
    t = _row(["chunked", "split", "split"], steps=(1.8, 5.02, 13.9))
    assert t["threshold"] and t["monotone"] and (t["below_steps"], t["from_steps"]) == (1.8, 5.02)
    assert t["rule"].endswith("loses at 1.8 and wins at 5.02 and 13.9 decode steps of prefill: its threshold lies "
                              "between 1.8 and 5.02 decode steps, where the map has no column")
    assert "about" not in t["rule"]


def test_a_win_a_tie_and_a_win_again_has_no_threshold():
    """ch07 printed 'the split wins once a prefill costs more than about 23 decode steps (between 13.9 and 38.7)' for
    a row the split won at 1.8 and 5.02, tied at 13.9 and won at 38.7."""
    t = _row(["split", "split", "tie", "split"], steps=(1.8, 5.02, 13.9, 38.7))
    assert not t["threshold"] and not t["monotone"] and t["wins"] == 3
    assert math.isnan(t["below_steps"]) and math.isnan(t["from_steps"])
    assert t["rule"] == ("at a TPOT SLO of 2.5 decode steps the split wins at 1.8 and 5.02, ties at 13.9 and wins at "
                         "38.7 decode steps of prefill: no single threshold")


def test_rows_of_one_verdict_and_wins_before_a_tie():
    """All ties, all wins (no threshold inside the map: it lies at or below its first column), and a row whose
    longest prompt the split does not win (ch07 once printed a threshold claim and its denial in one sentence)."""
    ties = _row(["tie", "tie", "tie"])
    assert not ties["threshold"] and ties["wins"] == 0
    assert ties["rule"] == "at a TPOT SLO of 2.5 decode steps the split ties at every prefill of the map, 2 to 50 " \
                           "decode steps"
    wins = _row(["split"] * 3)
    assert not wins["threshold"] and wins["monotone"] and wins["from_steps"] == 2 and math.isnan(wins["below_steps"])
    last = _row(["split", "split", "tie"])
    assert not last["threshold"] and not last["monotone"] and "no single threshold" in last["rule"]
    assert last["rule"].startswith("at a TPOT SLO of 2.5 decode steps the split wins at 2 and 10 and ties at 50")


def test_the_rows_compared_in_words():
    m = _hand_map([["chunked", "tie", "split"], ["chunked", "split", "split"]])
    assert order_words(split_threshold(m)) == ("The split wins 1 of the 3 columns at a TPOT SLO of 1.5 decode steps, "
                                               "2 at 4: a tighter TPOT SLO does not always give the split more "
                                               "columns here.")
    m = _hand_map([["split", "split", "split"], ["chunked", "tie", "split"]])
    assert order_words(split_threshold(m)).endswith("3 of the 3 columns at a TPOT SLO of 1.5 decode steps, 1 at 4: "
                                                    "the tighter the TPOT SLO, the more columns the split wins.")
    m = _hand_map([["chunked", "split", "split"], ["chunked", "tie", "split"], ["tie", "tie", "split"]],
                  tpots=(1.5, 2.5, 4.0))
    assert order_words(split_threshold(m)).endswith("2 of the 3 columns at a TPOT SLO of 1.5 decode steps, 1 at 2.5, "
                                                    "1 at 4: the tighter the TPOT SLO, the more columns the split "
                                                    "wins, or as many.")
    with pytest.raises(ValueError, match="table is empty"):
        order_words(split_threshold(m).iloc[:0])


def test_the_rule_applied_to_the_book_rows():
    m = _hand_map([["chunked", "tie", "split"], ["chunked", "chunked", "chunked"]])
    table = apply_rule(m, tpot_steps=1.5).set_index(["model", "prompt tokens"])
    assert len(table) == len(BOOK_ROWS)
    row = table.loc[("Llama-3-8B", 2048)]  # 57.3 ms / 6.09 ms on the roofline: 9.4 steps, below 10
    assert row["prefill (decode steps)"] == pytest.approx(row["prefill (ms)"] / row["decode step (ms)"])
    assert 8 < row["prefill (decode steps)"] < 10 and row["rule says"] == "colocated or tie"  # between 2 and 10
    assert (row["threshold from (steps)"], row["threshold to (steps)"]) == (10, 50)
    assert 1 < row["256-token chunk (decode steps)"] < 1.5  # a chunk rides in a memory-bound step almost free
    assert table.loc[("Llama-3-8B", 8192), "rule says"] == "near the threshold"  # 39 steps: between 10 and 50
    assert table.loc[("Llama-3-70B", 8192), "rule says"] == "split"  # 78 steps: past a monotone row's last win
    assert set(apply_rule(m, tpot_steps=4.0)["rule says"]) <= {"colocated", "beyond the map's columns"}
    with pytest.raises(ValueError, match="not a row of the map"):
        apply_rule(m, tpot_steps=3.0)
    with pytest.raises(ValueError, match="each row must be"):
        apply_rule(m, rows=[("Llama-3-8B", "H100", 2048)])


def test_the_rule_reads_a_case_off_the_columns_on_either_side():
    """The rule applied to a case says what the map's row says there: the verdict of the columns around its
    prefill cost, both where they differ, a threshold's bracket as 'near the threshold'; past the row's ends only
    where a monotone row points that way."""
    from splitlab.planning.rule_of_thumb import reading
    bumpy = _row(["split", "split", "tie", "split"], steps=(1.8, 5.02, 13.9, 38.7))
    assert [reading(bumpy, s) for s in (1.0, 3.0, 5.02, 9.4, 20.0, 80.0)] == [
        "below the map's columns", "split", "split", "split or tie", "tie or split", "beyond the map's columns"]
    step = _row(["chunked", "split", "split"], steps=(1.8, 5.02, 13.9))
    assert [reading(step, s) for s in (1.0, 3.0, 9.4, 80.0)] == ["colocated", "near the threshold", "split", "split"]
    assert [reading(_row(["tie"] * 3), s) for s in (1.0, 5.0, 80.0)] == [
        "below the map's columns", "tie", "beyond the map's columns"]
    assert agrees("split", "split") and agrees("split or tie", "tie (split, chunked)")
    assert agrees("colocated", "chunked") and agrees("tie", "prefill-first") is False
    assert agrees("near the threshold", "split") is None and agrees("beyond the map's columns", "split") is None
    # within 5% past an end column a case reads as that column (ch07: Llama-3-8B at 8k, 39.3 steps, past 38.6)
    assert [reading(bumpy, s) for s in (1.72, 1.70, 39.3, 40.6, 40.7)] == [
        "split", "below the map's columns", "split", "split", "beyond the map's columns"]


def test_the_rule_checked_against_the_rows_own_map():
    """The 8B row's own cell on the H100 roofline: a 256-token chunk costs 1.2 decode steps there, so chunked
    colocated holds a TPOT SLO of 1.5 steps and wins (measured: 0.50 margin over the split at 2,338 tokens)."""
    m = _hand_map([["chunked", "tie", "split"], ["chunked", "chunked", "chunked"]])
    row = apply_rule(m, rows=[("Llama-3-8B", "H100", "bf16", 2048)], tpot_steps=1.5, check=True).iloc[0]
    assert row["rule says"] == "colocated or tie" and row["own map says"] == "chunked" and row["agrees"]


def test_the_heatmap_reads_on_a_phone():
    from splitlab.teach.figures.phone import overlapping_texts, phone_font_pt
    from splitlab.teach.figures.split_map import KIND_COLORS, cell_color, map_heatmap
    from splitlab.teach.figures.style import LAYOUT_COLORS
    m = _hand_map([["chunked", "tie", "split"], ["prefill-first", "chunked", "split"]])
    ax = map_heatmap(m)
    assert phone_font_pt(ax.figure) >= 9 and not overlapping_texts(ax.figure)
    assert "prefill cost" in ax.get_xlabel() and "TPOT SLO" in ax.get_ylabel()
    assert KIND_COLORS["split"] == LAYOUT_COLORS["split"]  # the book's one colour per layout
    close, wide = (_hand_map([["split"] * 3] * 2).cells[0]), m.cells[2]
    close.margin = 0.12
    assert sum(cell_color(close)) > sum(cell_color(wide))  # a close win is paler


def test_the_maps_mark_cells_read_off_runs_too_short_for_a_backlog():
    """A reviewer's read of chapter 7 (2026-12-06): 9 of the eight-worker map's 16 cells came from runs of 2 to 20
    request lifetimes, and the figure marked none of them."""
    from splitlab.teach.figures.phone import phone_font_pt
    from splitlab.teach.figures.split_map import SHORT_LABEL, map_heatmap, run_lifetimes, short_run
    from splitlab.teach.widgets.split_map import split_map_figure
    m = _hand_map([["chunked", "tie", "split"], ["prefill-first", "chunked", "split"]], max_requests=400)
    assert all(short_run(m, c) and run_lifetimes(m, c) < 20 for c in m.cells)  # 400 / (40/s x 1.63 s): about 6
    ax = map_heatmap(m)
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 6 and all(t.endswith("*") for t in texts) and phone_font_pt(ax.figure) >= 9
    assert SHORT_LABEL in [t.get_text() for t in ax.figure.legends[0].get_texts()]
    fig = split_map_figure({None: m})
    assert fig.data[0].text[0][0].endswith("*") and "request lifetimes (< 20)" in fig.data[0].hovertext[0][0]
    assert SHORT_LABEL in [d.name for d in fig.data]
    plain = _hand_map([["chunked", "tie", "split"], ["prefill-first", "chunked", "split"]])  # uncapped
    assert not any(t.get_text().endswith("*") for t in map_heatmap(plain).texts)
    assert SHORT_LABEL not in [d.name for d in split_map_figure({None: plain}).data]
    from splitlab.teach.figures.split_map import map_words  # the counts say it too, not the figure alone
    assert map_words(m).endswith("; 6 of the 6 were read off goodput runs under 20 request lifetimes (marked *).")
    assert "marked *" not in map_words(plain)


def test_the_explorers_draw_the_same_maps():
    from splitlab.teach.widgets.split_map import split_map_explorer, split_map_figure
    maps = {None: _hand_map([["chunked", "tie", "split"], ["chunked"] * 3]),
            1.0: _hand_map([["chunked", "tie", "chunked"], ["chunked"] * 3])}
    fig = split_map_figure(maps)
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["cost model's", "1 GB/s"]
    assert steps[1].args[0]["text"][0][0][2] == "chunk<br>x2" and steps[0].args[0]["text"][0][0][2] == "2P+2D<br>x2"
    with pytest.raises(ValueError, match="default link 5"):
        split_map_figure(maps, default=5)
    box = split_map_explorer(maps)
    assert box.children[0].children[0].options == ("cost model's", "1 GB/s")


def test_the_explorers_draw_4_and_8_workers_with_a_menu():
    """Issue 22 asks the map for a fixed cluster of 4 and 8 workers: one heatmap per cluster size, a dropdown that
    shows one, the link slider restyling both (so the two controls combine)."""
    from splitlab.teach.widgets.split_map import split_map_explorer, split_map_figure, split_map_grids
    grids = {4: {None: _hand_map([["chunked", "tie", "split"], ["chunked"] * 3]),
                 1.0: _hand_map([["chunked", "tie", "chunked"], ["chunked"] * 3])},
             8: {None: _hand_map([["split"] * 3, ["tie", "split", "split"]], workers=8),
                 1.0: _hand_map([["split", "split", "chunked"], ["chunked"] * 3], workers=8)}}
    fig = split_map_figure(grids)
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat) == 2 and [t.visible for t in heat] == [True, False]
    assert fig.data[0].text[0][0] == "chunk<br>x2" and fig.data[1].text[0][0] == "2P+2D<br>x2"
    menu = fig.layout.updatemenus[0]
    assert [b.label for b in menu.buttons] == ["4 workers", "8 workers"]
    legend = len(fig.data) - 2
    assert list(menu.buttons[1].args[0]["visible"]) == [False, True] + [True] * legend  # the legend's traces stay
    step = fig.layout.sliders[0].steps[1]  # 1 GB/s: both heatmaps restyled, each from its own cluster's map
    assert step.label == "1 GB/s" and list(step.args[1]) == [0, 1]
    assert step.args[0]["text"][0][0][2] == "chunk<br>x2" and step.args[0]["text"][1][0][2] == "chunk<br>x2"
    assert step.args[0]["text"][1][0][0] == "2P+2D<br>x2"
    assert "workers" not in fig.layout.title.text  # the menu names the cluster
    assert fig.layout.margin.t > 70 and fig.layout.height == 630  # a row for the menu, the plot as tall as before
    assert split_map_figure(grids[4]).layout.updatemenus == ()  # one cluster: no menu, as before
    with pytest.raises(ValueError, match="different links"):
        split_map_figure({4: grids[4], 8: {None: grids[8][None]}})
    for empty in ({}, {4: {}}):
        with pytest.raises(ValueError, match="maps is empty"):
            split_map_figure(empty)
    box = split_map_explorer(grids)
    slider, menu = box.children[0].children
    assert slider.options == ("cost model's", "1 GB/s") and menu.options == (4, 8)
    for bad, match in (((), "workers is empty"), ((4, 4), "cluster size twice")):
        with pytest.raises(ValueError, match=match):
            split_map_grids(CRAFTED, workers=bad)


def test_a_cell_says_its_winner_s_lead_not_its_margin():
    """The map printed 'chunked +75%' for 5,531 against 1,380 requests/s per worker, a 4x lead (a fresh reader,
    2026-12-05): '+N%' reads as 'N% more', so a cell says the lead; the margin still decides ties."""
    from splitlab.planning.map_result import lead_text
    assert [lead_text(m) for m in (0.0, 0.2, 0.28, 0.5, 0.75, 0.9, 1.0)] == ["+0%", "+25%", "+39%", "x2", "x4",
                                                                              "x10", "alone"]
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="margin must be a share in"):
            lead_text(bad)


def test_counts_on_the_rows_two_maps_share(corners):
    """Two maps of different TPOT rows are compared on the rows both have (chapter 7's rule of thumb)."""
    import copy
    import dataclasses
    m = copy.copy(corners)
    m.tpot_steps = [1.5, 10.0]
    m.cells = corners.cells + [dataclasses.replace(c, tpot_steps=10.0) for c in corners.cells]
    whole, row = m.counts(), m.counts([1.5])
    assert sum(whole.values()) == 4 and row == corners.counts() and sum(row.values()) == 2
    assert m.counts([1.5, 10.0]) == whole
    with pytest.raises(ValueError, match=r"no row at tpot_steps \[2.5\]"):
        m.counts([1.5, 2.5])
    with pytest.raises(ValueError, match="tpot_steps is empty"):  # was every count 0
        m.counts([])
    assert m.counts(np.array([1.5])) == m.counts(x for x in [1.5]) == row
    for bad in (1.5, "1.5", np.array(1.5), np.array([[1.5]]), ["x"]):
        with pytest.raises(TypeError, match="tpot_steps must be a sequence"):
            m.counts(bad)


def test_a_cell_searched_again_until_its_runs_span_20_lifetimes():
    """Chapter 6's 8-worker cell was read off runs of 11 request lifetimes (the cap), then its reading withdrawn."""
    from splitlab.teach.figures.map_steady_place import settings_of
    from splitlab.teach.figures.split_map import full_runs_cell, run_lifetimes
    kw = dict(output_tokens=128, max_batch=16, chunk_tokens=(256,))
    short = split_map(CRAFTED, 4, [500], [1.5], max_requests=60, progress=False, **kw)
    assert run_lifetimes(short, short.cells[0]) < 20  # the cap cuts its runs short
    m, cell, spanned = full_runs_cell(CRAFTED, 4, 500, 1.5, max_requests=60, **kw)
    assert spanned >= 20 and spanned == run_lifetimes(m, cell) and settings_of(m)["max_requests"] > 60
    assert (cell.prompt_tokens, cell.tpot_steps) == (500, 1.5)
    _, _, once = full_runs_cell(CRAFTED, 4, 500, 1.5, max_requests=60, tries=1, **kw)
    assert once == run_lifetimes(short, short.cells[0])  # one search: the caveat's number, unchanged
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="tries must be a whole number"):
            full_runs_cell(CRAFTED, 4, 500, 1.5, tries=bad)
