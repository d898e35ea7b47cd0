"""Chapter 6's live comparisons over paired seeds (splitlab.teach.figures.split_seeds) and its words about where
the split loses (split_loss): each sentence is fed crafted numbers on either side of its thresholds and must
change its words with them. Model-free: the runs here are simulated."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from splitlab import serving
from splitlab.planning.map_result import Cell, SplitMap
from splitlab.teach.figures import split_loss, split_seeds

A, B = "3P+1D", "4 colocated (prefill-first)"


def _att(a, b) -> pd.DataFrame:
    return pd.DataFrame({A: a, B: b}, index=pd.Index([0, 1, 2], name="seed"))


def test_a_gap_of_one_sign_in_every_seed_is_outside_the_spread():
    g = split_seeds.paired_gaps(_att([100, 97, 100], [69, 72, 66]), A, B)
    assert g["gaps"] == [31, 25, 34] and (g["low"], g["high"], g["spread"]) == (25, 34, 9)
    assert g["decisive"] and g["leader"] == A
    words = split_seeds.paired_verdict(_att([100, 97, 100], [69, 72, 66]), A, B, 32)
    assert "Over 3 seeds of 32 requests each, 3P+1D met both SLOs for 100 / 97 / 100% of them" in words
    assert "4 colocated for 69 / 72 / 66%" in words
    assert "3P+1D led 4 colocated by 25 to 34 points (mean 30)" in words and "outside the runs' own spread" in words


def test_the_other_layout_leading_in_every_seed_is_named_the_leader():
    words = split_seeds.paired_verdict(_att([80, 85, 90], [95, 95, 100]), A, B, 32)
    assert "4 colocated led 3P+1D by 10 to 15 points (mean 12)" in words
    assert split_seeds.paired_gaps(_att([80, 85, 90], [95, 95, 100]), A, B)["leader"] == B
    assert "by 10 points in every seed" in split_seeds.paired_verdict(_att([80, 85, 90], [90, 95, 100]), A, B, 9)


def test_a_gap_whose_range_holds_zero_cannot_tell_the_layouts_apart():
    for a, b in (([100, 92, 97], [97, 95, 97]), ([90, 90, 90], [90, 90, 90])):
        g = split_seeds.paired_gaps(_att(a, b), A, B)
        assert not g["decisive"]
        words = split_seeds.paired_verdict(_att(a, b), A, B, 32)
        assert "cannot tell the two layouts apart" in words and "outside" not in words
    assert "ranged from -3 to +3 points (mean +0)" in split_seeds.paired_verdict(
        _att([100, 92, 97], [97, 95, 97]), A, B, 32)
    assert split_seeds.paired_gaps(_att([90, 90, 90], [90, 90, 90]), A, B)["leader"] is None


def test_the_attainment_table_has_a_column_per_seed_the_mean_and_a_row_per_paired_gap():
    runs = split_seeds.PairedRuns(_att([100, 97.5, 100], [68.75, 72, 66]), None, 32, 36.0, True)
    t = split_seeds.attainment_table(runs, [(A, B)])
    assert list(t.columns) == [0, 1, 2, "mean"] and t.columns.name == "seed"  # seeds across: it fits a phone
    assert list(t.index) == ["3P+1D", "4 colocated", "3P+1D - 4 colocated (pp)"]
    assert t.loc["3P+1D", 0] == 100 and t.loc["4 colocated", 0] == 68.8
    assert "100.0" not in t.to_string() and "100" in t.to_string()
    assert t.loc["3P+1D - 4 colocated (pp)", "mean"] == pytest.approx(30.2)


def test_the_attainment_table_of_three_layouts_and_two_gaps_fits_a_phone():
    """Ch06's table of 3 layouts and 2 gaps lost its last column at 412 px with the layouts across."""
    from test_pages_ch07_09 import CHAR_PX, COLUMN_PX, PHONE_PX

    def unwrapped_px(table):  # every header and label on one line: the widest the table can be
        cols = [[table.columns.name or "", *map(str, table.index)]] + [[str(c), *map(str, table[c])] for c in table]
        return sum(CHAR_PX * max(map(len, col)) + COLUMN_PX for col in cols)
    names = ["3P+1D", "4 colocated (prefill-first)", "4 colocated (chunked, 256-token chunks)"]
    att = pd.DataFrame({n: v for n, v in zip(names, ([100, 97, 100], [69, 72, 66], [81, 84, 78]))},
                       index=pd.Index([0, 1, 2], name="seed"))
    t = split_seeds.attainment_table(split_seeds.PairedRuns(att, None, 32, 36.0, True),
                                     [(names[0], names[1]), (names[0], names[2])])
    assert len(t.index) == 5 and unwrapped_px(t) <= PHONE_PX, (unwrapped_px(t), t)
    assert unwrapped_px(t.T) > PHONE_PX  # the estimate catches the table the reader saw


def test_paired_runs_serve_each_seed_on_every_layout_and_find_the_widest_predicted_gap():
    configs = {"2 colocated (prefill-first)": serving.ServingConfig.colocated(2),
               "1P+1D": serving.ServingConfig.disaggregated(1, 1)}
    ex = serving.CostModelExecutor()
    runs = split_seeds.paired_runs("chat", 12, 4.0, configs, ex, 1.0, 0.1, seeds=(0, 1))
    assert list(runs.attainment.index) == [0, 1] and list(runs.attainment.columns) == list(configs)
    assert runs.tokens_identical and runs.first.results["1P+1D"].config.trace
    rate, gaps = split_seeds.widest_gap_rate("chat", 12, [2.0, 8.0], configs, None, 1.0, 0.1, "1P+1D",
                                             "2 colocated (prefill-first)", seeds=(0, 1))
    assert rate in (2.0, 8.0) and gaps[rate] == gaps.max() and len(gaps) == 2
    with pytest.raises(ValueError, match="distinct"):
        split_seeds.paired_runs("chat", 12, 4.0, configs, ex, 1.0, 0.1, seeds=(0, 0))
    with pytest.raises(ValueError, match="two or more layouts"):
        split_seeds.paired_runs("chat", 12, 4.0, {"1P+1D": configs["1P+1D"]}, ex, 1.0, 0.1)
    with pytest.raises(ValueError, match="at least one rate"):
        split_seeds.widest_gap_rate("chat", 12, [], configs, None, 1.0, 0.1, "1P+1D", "2 colocated (prefill-first)")


def _map(goodputs: dict, binding: str = "ttft") -> tuple[SplitMap, list]:
    """Two rows (2.5 and 10 decode steps) of two prompts (16 and 418 tokens); ``goodputs``: (prompt, steps) ->
    (split, prefill-first, chunked)."""
    names = {"split": "2P+2D", "prefill-first": "4 colocated (prefill-first)",
             "chunked": "4 colocated (chunked, 256-token chunks)"}
    cells = []
    for k in (2.5, 10.0):
        for n, s in ((16, 1.7), (418, 12.2)):
            good = dict(zip(("split", "prefill-first", "chunked"), goodputs[(n, k)]))
            cells.append(Cell(n, s, k, 0.05, 0.005 * k, good, {"split": binding, "prefill-first": "tpot",
                                                               "chunked": "tpot"}, names).decide(0.1))
    return SplitMap(cells, 4, [16, 418], [1.7, 12.2], [2.5, 10.0], 64, 5, None, 0.1, "crafted"), cells


def test_the_loss_note_names_the_cell_the_split_loses_and_why():
    m, cells = _map({(16, 2.5): (24, 19, 20), (418, 2.5): (7, 4.6, 4.7), (16, 10.0): (35, 37, 23),
                     (418, 10.0): (6.6, 8.3, 7.4)})
    lost = [c for c in cells if c.verdict == "colocated"]
    assert [(c.prompt_tokens, c.tpot_steps) for c in lost] == [(418, 10.0)]
    note = split_loss.cell_note(m, lost[0], lost, "research", 11.3)
    assert "1 of the map's 4 cells goes to a colocated layout by more than the tie tolerance (10%)" in note
    assert ("4 colocated serves 8.3 requests/s per worker, the best split, 2P+2D, 6.6, 20% less (4 colocated serves "
            "26% more)") in note
    assert ("held back there by its TTFT SLO: a request's first token waits for its prefill pool (2 prefill workers), "
            "its cache's transfer and a slot in its decode pool (2 decode workers; either pool can be the one that "
            "queues)") in note
    assert "even the shortest prompts (16 tokens, 1.7 decode steps a prefill) go to the split" in note
    lost[0].goodput["split"] = 0.0  # the split serves nothing there: no "serves inf% more" (was a ZeroDivisionError)
    assert "2P+2D, 0, 100% less. The split is held back" in split_loss.cell_note(m, lost[0], lost, "research", 11.3)
    assert "Of this chapter's workloads, the `research` prompts (11.3 decode steps a prefill) lie nearest" in note
    m2, cells2 = _map({(16, 2.5): (22, 19, 20), (418, 2.5): (7, 4.6, 4.7), (16, 10.0): (35, 37, 23),
                       (418, 10.0): (6.6, 8.3, 7.4)}, binding="tpot")
    note = split_loss.cell_note(m2, cells2[3], [cells2[3]], "code", 2)
    assert "its 2 decode workers carry every stream" in note
    cells[3].names = dict(cells[3].names, split="1P+3D")
    assert "waits for its prefill pool (1 prefill worker)" in split_loss.cell_note(m, cells[3], [cells[3]], "code", 2)
    assert "even the shortest prompts (16 tokens, 1.7 decode steps a prefill) are a tie" in note


def test_a_map_without_a_colocated_region_says_so_instead_of_claiming_a_loss():
    m, cells = _map({(16, 2.5): (22, 19, 20), (418, 2.5): (7, 4.6, 4.7), (16, 10.0): (35, 33, 23),
                     (418, 10.0): (8, 8.3, 7.4)})
    assert not [c for c in cells if c.verdict == "colocated"]
    note = split_loss.cell_note(m, cells[3], [], "research", 11.3)
    assert "**No loss on this map.** None of its 4 cells" in note and "so this page shows no loss" in note
    assert "Where the map puts the loss" not in note and "less." not in note
    plan = SimpleNamespace(name="2P+2D", goodput_rps_per_worker=8.0)
    col = SimpleNamespace(name="4 colocated (prefill-first)", goodput_rps_per_worker=8.3)
    att = pd.DataFrame({"2P+2D": [90, 95, 100], col.name: [95, 90, 100]})
    words = split_loss.takeaway([], cells[3], "research", 11.3, plan, col, att)
    assert words.startswith("The map has no colocated region on this device") and "within the runs' own spread" in words


def test_the_loss_takeaway_follows_the_planner_and_the_seeds():
    m, cells = _map({(16, 2.5): (22, 19, 20), (418, 2.5): (7, 4.6, 4.7), (16, 10.0): (35, 37, 23),
                     (418, 10.0): (6.6, 8.3, 7.4)})
    sp = SimpleNamespace(name="2P+2D", goodput_rps_per_worker=10.0)
    co = SimpleNamespace(name="4 colocated (chunked, 256-token chunks)", goodput_rps_per_worker=13.1)
    att = pd.DataFrame({"2P+2D": [60, 70, 65], co.name: [90, 95, 100]})
    words = split_loss.takeaway([cells[3]], cells[3], "research", 11.3, sp, co, att)
    assert "turn the order: 4 chunked 256 served 13.1 requests/s per worker, ahead of 10 for 2P+2D" in words
    assert "95% of the colocated requests met both SLOs on average against 65% on the split" in words
    assert "(the colocated layout ahead by 18 to 42 points, its 95% interval over 3 seeds)" in words
    assert "tie tolerance" not in split_loss.takeaway([cells[3]], cells[3], "research", 11.3, sp, co, att, 0.1)
    co.goodput_rps_per_worker = 10.7  # ch06 on 2026-12-05: 17.7 against 16.4, 7% apart
    near = split_loss.takeaway([cells[3]], cells[3], "research", 11.3, sp, co, att, 0.1)
    assert "the planner puts `research` prompts of 11.3 decode steps at a tie: 4 chunked 256 served 10.7 requests/s " \
        "per worker, ahead of 10 for 2P+2D, 7% ahead (the other 6.5% behind, what the tie tolerance judges), within " \
        "the map's 10% tie tolerance" in near
    assert "turn the order" not in near  # chapter 6 said both of one 6% gap, and 7% beside the table's 6%
    co.goodput_rps_per_worker = 9.0
    words = split_loss.takeaway([cells[3]], cells[3], "research", 11.3, sp, co, att)
    assert "the planner did not rank colocated first" in words and "behind 10 for 2P+2D" in words


def test_short_prompts_already_lost_at_the_chapters_tpot_are_said_to_be_lost():
    m, cells = _map({(16, 2.5): (15, 19, 20), (418, 2.5): (7, 4.6, 4.7), (16, 10.0): (35, 37, 23),
                     (418, 10.0): (6.6, 8.3, 7.4)})
    lost = [c for c in cells if c.verdict == "colocated"]
    note = split_loss.cell_note(m, lost[0], lost, "code", 2.4)
    assert "2 of the map's 4 cells go to a colocated layout" in note
    assert "the shortest prompts (16 tokens, 1.7 decode steps a prefill) already go to a colocated layout." in note
    assert "even the shortest" not in note and "a cheap prefill alone" not in note
    assert "furthest behind at 16-token prompts" in note  # 20 / 15 beats 8.3 / 6.6


def test_paired_gaps_reject_no_seeds_a_nan_seed_one_layout_twice_and_a_name_not_there():
    """break27: an empty table hit numpy's "zero-size array" error, a NaN seed printed "nan%" as a verdict, a == b
    gave "+0 to +0", and a mistyped name was a bare KeyError."""
    with pytest.raises(ValueError, match="no seeds"):
        split_seeds.paired_gaps(pd.DataFrame({A: [], B: []}), A, B)
    with pytest.raises(ValueError, match=r"NaN for seed\(s\) \[1\]"):
        split_seeds.paired_verdict(_att([90, float("nan"), 90], [80, 80, 80]), A, B, 32)
    with pytest.raises(ValueError, match="two different layouts"):
        split_seeds.paired_verdict(_att([90] * 3, [80] * 3), A, A, 32)
    with pytest.raises(KeyError, match="b='3P\\+2D' is not a layout of attainment"):
        split_seeds.paired_gaps(_att([90] * 3, [80] * 3), A, "3P+2D")
    with pytest.raises(KeyError, match=r"pairs\[0\]\[1\]='3P\+2D' is not a layout of runs.attainment"):
        split_seeds.attainment_table(split_seeds.PairedRuns(_att([90] * 3, [80] * 3), None, 32, 1.0, True),
                                     [(A, "3P+2D")])


def test_paired_verdict_says_one_seed_and_a_tie_in_words():
    one = pd.DataFrame({A: [90.0], B: [80.0]}, index=pd.Index([0], name="seed"))
    assert split_seeds.paired_verdict(one, A, B, 32).startswith("Over 1 seed of 32")
    tie = split_seeds.paired_verdict(_att([90] * 3, [90] * 3), A, B, 32)
    assert "tied in every seed" in tie and "+0 to +0" not in tie


def test_widest_gap_rate_checks_its_rates_and_names_before_serving_anything():
    """break27: a rate of 0 failed only after the rates before it had run, naming ``rate_per_s`` (an argument of
    paired_runs, not of widest_gap_rate); a name not in configs failed with a bare KeyError after every run."""
    configs = {B: serving.ServingConfig.colocated(2), "1P+1D": serving.ServingConfig.disaggregated(1, 1)}
    for rates in ([2.0, 0.0], [-1.0], [float("inf")], [float("nan")], 4.0, None, []):
        with pytest.raises(ValueError, match="rate") as err:
            split_seeds.widest_gap_rate("chat", 6, rates, configs, None, 1.0, 0.1, "1P+1D", B, seeds=(0,))
        assert "rate_per_s" not in str(err.value)
    with pytest.raises(KeyError, match="a='3P\\+1D' is not a layout of configs"):
        split_seeds.widest_gap_rate("chat", 6, [2.0], configs, None, 1.0, 0.1, "3P+1D", B, seeds=(0,))
    with pytest.raises(ValueError, match="n_requests must be a whole number >= 1"):
        split_seeds.paired_runs("chat", 0, 4.0, configs, serving.CostModelExecutor(), 1.0, 0.1, seeds=(0,))
    with pytest.raises(TypeError, match="configs must map layout names"):
        split_seeds.paired_runs("chat", 4, 4.0, list(configs.values()), serving.CostModelExecutor(), 1.0, 0.1)


def test_the_loss_takeaway_names_its_own_arguments_when_a_layout_is_not_in_the_attainment():
    """break27: a split or colocated name missing from ``attainment`` raised paired_gaps' "a='...'", an argument
    takeaway's caller does not have; a NaN seed raises paired_gaps' named error, not 'nan%' in the sentence."""
    m, cells = _map({(16, 2.5): (22, 19, 20), (418, 2.5): (7, 4.6, 4.7), (16, 10.0): (35, 37, 23),
                     (418, 10.0): (6.6, 8.3, 7.4)})
    sp = SimpleNamespace(name="2P+2D", goodput_rps_per_worker=10.0)
    co = SimpleNamespace(name="4 colocated (prefill-first)", goodput_rps_per_worker=13.1)
    with pytest.raises(KeyError, match="colocated.name='4 colocated \\(prefill-first\\)' is not a column"):
        split_loss.takeaway([cells[3]], cells[3], "research", 11.3, sp, co, pd.DataFrame({"2P+2D": [60.0]}))
    with pytest.raises(ValueError, match="NaN for seed"):
        split_loss.takeaway([cells[3]], cells[3], "research", 11.3, sp, co,
                            pd.DataFrame({"2P+2D": [60.0, float("nan")], co.name: [90.0, 95.0]}))


def test_a_colocated_lead_past_its_tpot_slo_is_said_to_rest_on_the_mean():
    """Chapter 6's map cell had chunked 19% ahead at 16 tokens and a 1.5-step SLO, a fused step of 1.7 steps."""
    import dataclasses
    from splitlab.planning.map_result import Cell
    names = {"split": "1P+3D", "prefill-first": "4 colocated (prefill-first)",
             "chunked": "4 colocated (chunked, 256-token chunks)"}
    cell = Cell(16, 1.7, 1.5, 0.01, 0.004, {"split": 12.8, "prefill-first": 10.0, "chunked": 15.2},
                {"split": "tpot", "prefill-first": "tpot", "chunked": "tpot"}, names)
    said = split_loss._on_mean(cell, "chunked")
    assert "each prefill stalls the 4 chunked 256 streams beside it for 1.7 decode steps or more, past the 1.5-step" \
        in said
    assert split_loss._on_mean(dataclasses.replace(cell, tpot_steps=2.5), "chunked") == ""  # within the SLO
    assert split_loss._on_mean(dataclasses.replace(cell, prompt_tokens=400), "chunked") == ""  # two chunks
    assert "4 colocated streams" in split_loss._on_mean(dataclasses.replace(cell, prompt_tokens=400), "prefill-first")
