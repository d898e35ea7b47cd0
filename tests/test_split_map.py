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
import pytest

from splitlab.costmodel import CostModel
from splitlab.planning.map_result import Cell, SplitMap
from splitlab.planning.rule_of_thumb import BOOK_ROWS, apply_rule, split_threshold
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


def _hand_map(winners: list[list[str]], steps=(2.0, 10.0, 50.0), tpots=(1.5, 4.0)) -> SplitMap:
    """A map whose winners are given, row by row (goodputs made to match: the winner 10, the others 5)."""
    cells = []
    for k, row in zip(tpots, winners):
        for s, w in zip(steps, row):
            good = {kind: (10.0 if kind == w else 9.8 if w == "tie" and kind in ("split", "chunked") else 5.0)
                    for kind in ("split", "prefill-first", "chunked")}
            cells.append(Cell(int(s * 10), s, k, 1.0, 0.01, good, dict.fromkeys(good, "tpot"),
                              {"split": "2P+2D", "prefill-first": "4 colocated", "chunked": "4 chunked"}).decide(0.1))
    return SplitMap(cells, 4, [int(s * 10) for s in steps], list(steps), list(tpots), 64, 5, None, 0.1, "built-in",
                    chunk_tokens=[256])


def test_the_rule_of_thumb_reads_the_threshold_off_a_map():
    m = _hand_map([["chunked", "tie", "split"], ["chunked", "chunked", "chunked"]])
    t = split_threshold(m).set_index("tpot_steps")
    assert t.loc[1.5, "threshold_steps"] == pytest.approx(math.sqrt(10 * 50))
    assert (t.loc[1.5, "above_steps"], t.loc[1.5, "from_steps"], t.loc[1.5, "from_prompt_tokens"]) == (10, 50, 500)
    assert "more than about 22 decode steps" in t.loc[1.5, "rule"]
    assert math.isinf(t.loc[4.0, "threshold_steps"]) and "wins nowhere" in t.loc[4.0, "rule"]


def test_a_row_whose_longest_prompt_the_split_does_not_win_says_so_without_a_threshold_claim():
    """ch07 printed "the split wins once a prefill costs 1.19 decode steps or more ...; not every longer prompt"
    for a row whose last column was a tie: a claim and its denial in one sentence."""
    t = split_threshold(_hand_map([["split", "split", "tie"]], tpots=(2.5,))).set_index("tpot_steps").loc[2.5]
    assert not t["monotone"] and t["from_steps"] == 2.0
    assert t["rule"] == ("at a TPOT SLO of 2.5 decode steps the split wins 2 of the 3 columns from a prefill of 2 "
                         "decode steps on, but not the longest prompt (500 tokens, 50 decode steps: tie)")


def test_the_rule_applied_to_the_book_rows():
    m = _hand_map([["chunked", "tie", "split"], ["chunked", "chunked", "chunked"]])
    table = apply_rule(m, tpot_steps=1.5).set_index(["model", "prompt tokens"])
    assert len(table) == len(BOOK_ROWS)
    row = table.loc[("Llama-3-8B", 2048)]  # 57.3 ms / 6.09 ms on the roofline: 9.4 steps, below 10
    assert row["prefill (decode steps)"] == pytest.approx(row["prefill (ms)"] / row["decode step (ms)"])
    assert 8 < row["prefill (decode steps)"] < 10 and row["rule says"] == "colocated"
    assert 1 < row["256-token chunk (decode steps)"] < 1.5  # a chunk rides in a memory-bound step almost free
    assert table.loc[("Llama-3-8B", 8192), "rule says"] == "near the threshold"  # 39 steps: between 10 and 50
    assert table.loc[("Llama-3-70B", 8192), "rule says"] == "split"
    assert set(apply_rule(m, tpot_steps=4.0)["rule says"]) <= {"colocated", "beyond the map's columns"}
    with pytest.raises(ValueError, match="not a row of the map"):
        apply_rule(m, tpot_steps=3.0)
    with pytest.raises(ValueError, match="each row must be"):
        apply_rule(m, rows=[("Llama-3-8B", "H100", 2048)])


def test_the_rule_checked_against_the_rows_own_map():
    """The 8B row's own cell on the H100 roofline: a 256-token chunk costs 1.2 decode steps there, so chunked
    colocated holds a TPOT SLO of 1.5 steps and wins (measured: 0.50 margin over the split at 2,338 tokens)."""
    m = _hand_map([["chunked", "tie", "split"], ["chunked", "chunked", "chunked"]])
    row = apply_rule(m, rows=[("Llama-3-8B", "H100", "bf16", 2048)], tpot_steps=1.5, check=True).iloc[0]
    assert row["rule says"] == "colocated" and row["own map says"] == "chunked"


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


def test_the_explorers_draw_the_same_maps():
    from splitlab.teach.widgets.split_map import split_map_explorer, split_map_figure
    maps = {None: _hand_map([["chunked", "tie", "split"], ["chunked"] * 3]),
            1.0: _hand_map([["chunked", "tie", "chunked"], ["chunked"] * 3])}
    fig = split_map_figure(maps)
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["cost model's", "1 GB/s"]
    assert steps[1].args[0]["text"][0][0][2] == "chunk<br>+50%" and steps[0].args[0]["text"][0][0][2] == "2P+2D<br>+50%"
    with pytest.raises(ValueError, match="default link 5"):
        split_map_figure(maps, default=5)
    box = split_map_explorer(maps)
    assert box.children[0].children[0].options == ("cost model's", "1 GB/s")
