"""Chapters 06-07 on the map: the sentences computed from a map, a plan's batch line and a fit's zero terms
(issue 22 items 1, 5; the live check of a map's cells: test_pools_live.py)."""
import pandas as pd
import pytest

from splitlab.planning import split_map as SM
from splitlab.planning.planner import plan
from splitlab.teach.figures import pools, split_tables, split_tpot
from splitlab.teach.figures.split_map import map_words


@pytest.fixture(scope="module")
def small_map():
    return SM.split_map(None, 2, [16, 1024], [2.5], max_requests=100, progress=False)


def test_map_words_count_the_cells(small_map):
    n = small_map.counts()
    text = map_words(small_map)
    assert text.startswith(f"Of the map's {len(small_map.cells)} cells")
    for kind, label in (("split", "the split"), ("chunked", "colocated chunked")):
        if n.get(kind):
            assert f"{n[kind]} to {label}" in text


def test_plan_summary_and_plan_table_state_the_batch_bound(capsys):
    p = plan(None, "code", 0.5, 0.05, max_workers=2, chunk_tokens=(256,), max_requests=60, progress=False)
    assert p.batch_line
    summary = split_tables.plan_summary(p)
    assert "decode batch" in summary and all(len(line) <= 62 for line in summary.splitlines())
    pools.plan_table(p)
    assert "decode batch" in capsys.readouterr().out


def test_split_tpot_note_says_a_miss_beyond_the_tolerance():
    steps = pd.DataFrame({"3P+1D": {"TPOT, measured (ms)": 11.2, "TPOT, predicted (ms)": 7.14,
                                    "step, measured (ms)": 9.74}})
    text = split_tpot._split_tpot_note(steps, "3P+1D", 0.2)
    assert "+57%" in text and "beyond the 20%" in text and "+36%" in text
    steps.loc["TPOT, measured (ms)", "3P+1D"] = 7.5
    assert "within the 20%" in split_tpot._split_tpot_note(steps, "3P+1D", 0.2)


def test_zero_terms_note_names_a_term_fitted_to_zero():
    class F:
        def __init__(self, terms, coef):
            self.terms, self.coef = terms, coef

    class Cal:
        fits = {"decode": F(("1", "batch", "context_tokens"), (5e-3, 0.0, 5e-7)), "prefill": F(("1",), (1e-3,))}
    text = pools.zero_terms_note(Cal())
    assert "decode: batch" in text and "unstable" in text
    Cal.fits = {"prefill": F(("1",), (1e-3,))}
    assert pools.zero_terms_note(Cal()) == ""


def test_run_length_words_compare_a_column_on_short_and_long_runs():
    """Chapter 7's sentence on its GPU map searched on runs of 2,000 and, for one column, of 400 requests."""
    from types import SimpleNamespace as C
    from splitlab.teach.figures.split_map import run_length_words
    long = C(cells=[C(prompt_tokens=64, tpot_steps=1.5, winner="tie", margin=0.05),
                    C(prompt_tokens=64, tpot_steps=2.5, winner="chunked", margin=0.2),
                    C(prompt_tokens=743, tpot_steps=1.5, winner="chunked", margin=0.25)])
    short = C(cells=[C(prompt_tokens=64, tpot_steps=1.5, winner="chunked", margin=0.48),
                     C(prompt_tokens=64, tpot_steps=2.5, winner="chunked", margin=0.21)])
    assert run_length_words(long, short) == (
        "On its 64-token prompts runs of 400 requests find chunked +92% at 1.5 steps, chunked +27% at 2.5 "
        "steps; runs of 2,000 a tie at 1.5 steps, chunked +25% at 2.5 steps (1 of 2 cells change hands): a short "
        "run ends before a decode backlog builds, and the backlog weighs on the layouts differently.")
    assert run_length_words(long, C(cells=[C(prompt_tokens=16, tpot_steps=1.5, winner="split", margin=0.1)])) == ""


def test_capped_words_count_the_cells_whose_runs_the_cap_cut_below_twenty_lifetimes():
    """A run of the cap at the best goodput g spans cap / (g x workers x lifetime) lifetimes; the fewest is named."""
    from types import SimpleNamespace as C
    from splitlab.teach.figures.split_map import capped_words
    cells = [C(prompt_tokens=16, tpot_steps=10.0, ttft_slo_s=0.05, tpot_slo_s=0.02,
               goodput={"split": 10, "chunked": 5}),
             C(prompt_tokens=64, tpot_steps=2.5, ttft_slo_s=0.05, tpot_slo_s=0.005, goodput={"split": 1, "chunked": 0})]
    m = C(cells=cells, workers=4, output_tokens=64, search={"max_requests": 2000, "min_requests": 100,
                                                            "tolerance": 0.03, "extend": 1})
    # lifetimes: 0.05 + 63 x 0.02 = 1.31 s at 40 req/s: 2000 / 52.4 = 38 lifetimes; 0.365 s at 4 req/s: 1370
    assert capped_words(m).startswith("Every cell of the map's 2 had goodput runs spanning 20 request lifetimes within "
                                      "the cap of 2,000")
    cells[0].goodput["split"] = 100  # 2000 / (400 x 1.31) = 3.8 lifetimes
    assert capped_words(m).startswith("In 1 of the map's 2 cells the cap of 2,000 requests cut the goodput runs at "
                                      "the best layout's goodput below 20 request lifetimes, to as few as 3.8 "
                                      "(16-token prompts, TPOT 10 steps)")
    assert capped_words(m, lifetimes=2000).startswith("In 2 of the map's 2 cells")  # 1,370 lifetimes < 2,000


def _map(winners, workers=4, split_names=None, link=None, steps=(2.0, 10.0), tpots=(1.5, 4.0)):
    """A map whose winners are given row by row (the winner's goodput 10, a tie's two kinds 9.8, the others 5),
    ``split_names`` the best split of each cell (row by row)."""
    from splitlab.planning.map_result import Cell, SplitMap
    cells, names = [], iter(split_names or [])
    for k, row in zip(tpots, winners):
        for s, w in zip(steps, row):
            good = {kind: (10.0 if kind == w else 9.8 if w == "tie" and kind in ("split", "chunked") else 5.0)
                    for kind in ("split", "prefill-first", "chunked")}
            cells.append(Cell(int(s * 10), s, k, 1.0, 0.01, good, dict.fromkeys(good, "tpot"),
                              {"split": next(names, "2P+2D"), "prefill-first": "coloc.", "chunked": "chunk"})
                         .decide(0.1))
    return SM.SplitMap(cells, workers, [int(s * 10) for s in steps], list(steps), list(tpots), 64, 5, link, 0.1,
                       "built-in", chunk_tokens=[256])


def test_workers_words_say_what_eight_workers_change():
    """ch07's sentence on its 4- and 8-worker maps (issue 22 item 1: a fixed cluster of 4 and 8 workers)."""
    from splitlab.teach.figures.split_map_words import workers_words
    four = _map([["tie", "split"], ["prefill-first", "split"]])
    eight = _map([["split", "split"], ["tie", "split"]], workers=8,
                 split_names=["1P+7D", "4P+4D", "3P+5D", "6P+2D"])  # 4P+4D and 6P+2D: 1P+1D and 3P+1D on 4
    # the best split's goodput 9.8 -> 10, 10, 5 -> 9.8, 10: median +1%; colocated 9.8 -> 5, 5, 10 -> 9.8, 5: -1%
    assert workers_words(four, eight) == (
        "On 8 workers (the menu above the map) against 4, the cells won: the split 3 (2), colocated prefill-first 0 "
        "(1) and ties 1 (1); 2 of the 4 cells change hands (1 to the split and 1 to a tie). From 4 workers to 8, "
        "the best split's goodput per worker changes by a median +1% over the cells, the best colocated layout's by "
        "-1%; 2 of the 4 best splits on 8 workers use a prefill:decode ratio 4 workers cannot make (1P+7D and "
        "3P+5D).")
    assert "none of the 4 cells changes hands" in workers_words(four, _map([["tie", "split"], ["prefill-first",
                                                                                               "split"]], workers=8))
    with pytest.raises(ValueError, match="both maps are of 4 workers"):
        workers_words(four, four)
    with pytest.raises(ValueError, match="different axes"):
        workers_words(four, _map([["split"] * 3] * 2, workers=8, steps=(2.0, 10.0, 50.0)))


def test_link_words_say_where_the_cells_a_slow_link_takes_go():
    from types import SimpleNamespace
    from splitlab.teach.figures.split_map_words import link_words
    own = _map([["split", "split"], ["tie", "split"]])
    maps = {None: own, 0.1: _map([["split", "tie"], ["tie", "split"]], link=1e8),
            0.01: _map([["chunked", "chunked"], ["tie", "prefill-first"]], link=1e7)}
    cost = SimpleNamespace(kv_bytes_per_token=2048, transfer_s=lambda b: 1e-4 + b / 2e9, prefill_s=lambda n: 1e-4 * n)
    assert link_words(maps, cost) == (
        "On a slower KV link between the pools, at 0.1 GB/s it keeps 2 of the 3 cells it wins on its own link (1 to a "
        "tie: 100 tokens at 1.5 steps); at 0.01 GB/s it keeps 0 of the 3 cells it wins on its own link (3 to colocated "
        "serving: 20 and 100 tokens at 1.5 steps; 100 at 4 steps). The longest prompt's cache (0.2 MiB, 100 tokens) "
        "crosses in 0.2 ms on the cost model's link, 2 ms at 0.1 GB/s and 20 ms at 0.01 GB/s, against a prefill of "
        "10 ms.")
    mixed = link_words({None: own, 0.01: _map([["chunked", "tie"], ["tie", "prefill-first"]], link=1e7)}, cost)
    assert ("at 0.01 GB/s it keeps 0 of the 3 cells it wins on its own link (2 to colocated serving: 20 tokens at 1.5 "
            "steps; 100 at 4 steps, and 1 to a tie: 100 tokens at 1.5 steps)") in mixed
    with pytest.raises(ValueError, match="at least two maps"):
        link_words({None: own}, cost)


def test_link_words_on_a_map_the_split_never_wins_say_what_the_link_takes_from_its_goodput():
    """ch07's H100 map: chunked wins every cell, so a slow link can turn none; the words give the split's loss."""
    from types import SimpleNamespace
    from splitlab.teach.figures.split_map_words import link_words
    own = _map([["chunked", "chunked"], ["tie", "chunked"]])  # a tie is not a cell the split wins
    slow = _map([["chunked", "chunked"], ["chunked", "chunked"]], link=1e8)
    for cell, g in zip(slow.cells, (5.0, 4.0, 7.35, 2.5)):  # the split's goodput 5, 5, 9.8, 5 on its own link
        cell.goodput["split"] = g
    cost = SimpleNamespace(kv_bytes_per_token=2048, transfer_s=lambda b: 1e-4 + b / 2e9, prefill_s=lambda n: 1e-4 * n)
    text = link_words({None: own, 0.1: slow}, cost)
    assert text.startswith("The split wins no cell on its own link, so a slower one can only widen its losses: on a "
                           "slower KV link between the pools, at 0.1 GB/s its best split serves 0% to 50% less (the "
                           "most at 100 tokens, 4 steps; its tie goes to colocated serving: 20 tokens at 4 steps). "
                           "The longest prompt's cache")
    same = link_words({None: own, 0.1: _map([["chunked", "chunked"], ["tie", "chunked"]], link=1e8)}, cost)
    assert "at 0.1 GB/s its best split serves as much in every cell" in same
    two = _map([["tie", "chunked"], ["tie", "chunked"]])
    one_ends = link_words({None: two, 0.1: _map([["tie", "chunked"], ["chunked", "chunked"]], link=1e8)}, cost)
    assert "; 1 of its 2 ties goes to colocated serving: 20 tokens at 4 steps)" in one_ends


def test_rule_words_count_agreements_only_where_the_rule_makes_a_claim():
    rows = pd.DataFrame({"model": ["Llama-3-8B", "Llama-3-70B"], "prompt tokens": [2048, 8192],
                         "prefill (decode steps)": [9.4, 78.1], "rule says": ["near the threshold", "split"],
                         "own map says": ["chunked", "chunked"], "agrees": [None, False]})
    row = pd.Series({"rule": "at a TPOT SLO of 2.5 decode steps the split loses at 2 and wins at 10"})
    from splitlab.teach.figures.split_map_words import rule_words
    text = rule_words(rows, row)
    assert text.startswith("On this device's map, at a TPOT SLO of 2.5 decode steps the split loses at 2 and wins "
                           "at 10. Read at each case's prefill cost")
    assert ("disagrees in 1 of 1 cases where the rule makes a claim: Llama-3-70B at 8,192 tokens, chunked (1 where "
            "it makes none: Llama-3-8B at 2,048 tokens).") in text and "leaves out what a chunk costs" in text
    rows["agrees"] = [None, True]
    assert "disagrees in 0 of 1" in rule_words(rows, row) and "chunk costs" not in rule_words(rows, row)
    with pytest.raises(ValueError, match="check=True"):
        rule_words(rows.drop(columns="agrees"), row)


def test_rule_words_name_the_dtype_a_memory_verdict_and_chapter_5_s_bounds():
    """ch07 (review of 2026-12-05): the 70B rows are fp8, which the page never said; their 8k cell went to chunked
    because the split and prefill-first finished no request; and the table's 9.4 steps for Llama-3-8B at 2k stood
    beside chapter 5's 34.4 ms against 4.87 ms (about 7) unexplained."""
    from splitlab.planning.rule_of_thumb import split_threshold, apply_rule
    from splitlab.planning.split_map import split_map
    from splitlab.costmodel import roofline_cost_model
    from splitlab.teach.figures.split_map import rule_table
    from splitlab.teach.figures.split_map_words import rule_words
    m = split_map(roofline_cost_model("Llama-3-8B", "H100", "bf16"), 4, [64, 1024, 8000], [2.5], progress=False)
    rows = apply_rule(m, check=True)
    assert list(rows["unfinished"]) == ["", "", "", "split, prefill-first"]
    assert list(rule_table(rows).index) == ["8B bf16, 2,048", "8B bf16, 8,192", "70B fp8, 2,048", "70B fp8, 8,192"]
    text = rule_words(rows, split_threshold(m).set_index("tpot_steps").loc[2.5])
    assert "Llama-3-70B (fp8) at 2,048 tokens (18.8 steps)" in text
    assert ("For Llama-3-70B (fp8) at 8,192 tokens, the split and prefill-first finished no request: chunked there "
            "says which layout fits such a request in memory, not which serves it better.") in text
    assert text.endswith("Chapter 5 prints the roofline's bounds at full efficiency: for Llama-3-8B (bf16) at 2,048 "
                         "tokens a prefill of at least 34.4 ms against a decode step of at least 4.87 ms, 7.05 steps; "
                         "the table charges the cost model's default efficiencies (60% of peak compute, 80% of memory "
                         "bandwidth): 57.3 and 6.09 ms, 9.4 steps.")


def test_fused_row_words_follow_the_two_per_row_costs():
    """ch07 (review of 2026-12-05): a decode row in this engine's fused step costs more than in a decode step, and on
    the H100 roofline less (its cache read hidden under the chunk's compute); the words follow the two numbers."""
    from splitlab.costmodel import CostModel
    from splitlab.teach.figures.split_map_words import fused_row_words
    base = dict(prefill_base_s=1e-3, prefill_per_token_s=1e-5, decode_base_s=1e-3, decode_per_seq_s=1e-4,
                decode_per_token_s=1e-7)
    dear = fused_row_words(CostModel(**base, hybrid_per_row_s=3e-4), 400)
    # fused row: 1e-5 (its token) + 3e-4; decode row: 1e-4 + 400 x 1e-7 = 1.4e-4
    assert "adds 310 us to a fused step beside a 256-token chunk and 8 rows, against 140 us to a decode step (2.2x)" \
        in dear and "part of the split's lead over chunked prefill on this device's map is this engine's" in dear
    # over the map's prompts (the reviewer's 2.4x at one context was 3.5x and 7.5x at others): decode rows 1.1e-4,
    # 1.4e-4, 2.6e-4 against a fused row of 3.1e-4
    over = fused_row_words(CostModel(**base, hybrid_per_row_s=3e-4), 400, contexts=[1600, 100, 400])
    assert over == dear + " Over the map's prompts of 100 to 1,600 cached tokens that ratio runs 1.2x to 2.8x, the " \
        "most at 100 tokens."
    with pytest.raises(ValueError, match="context_tokens must be a whole number >= 1"):
        fused_row_words(CostModel(**base), 400, contexts=[0])
    with pytest.raises(ValueError, match="context_tokens must be a whole number >= 1"):
        fused_row_words(CostModel(**base), 400, contexts=[2.5])
    same = fused_row_words(CostModel(**base, hybrid_per_row_s=1.2e-4), 400)
    assert "about what it costs a decode worker" in same
    cheap = fused_row_words(CostModel(**base), 400)
    assert "(0.071x): a stream costs a chunked worker less than a decode worker; its token rides" in cheap
    h100 = fused_row_words(sl_roofline(), 2000)
    assert "the roofline charges a step the larger of its compute and its memory time" in h100
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="context_tokens must be a whole number >= 1"):
            fused_row_words(CostModel(**base), bad)
    from splitlab.teach.figures.split_map_words import fused_row_s
    fused, decode = fused_row_s(CostModel(**base, hybrid_per_row_s=3e-4), 400)  # the rule of thumb's third number
    assert fused == pytest.approx(3.1e-4) and decode == pytest.approx(1.4e-4)


def sl_roofline():
    """The H100 roofline cost model of ch07's datasheet map."""
    from splitlab.costmodel import roofline_cost_model
    return roofline_cost_model("Llama-3-8B", "H100", "bf16")


def test_the_rule_read_off_the_gpus_own_map_is_counted_against_the_same_cells():
    """Issue 22 item 4 (review of 2026-12-05): the rule read off this device's map disagreed with every GPU row's own
    cell; read off the H100 map it is checked against the same cells, counting only its claims."""
    from splitlab.teach.figures.split_map_words import other_rule_words
    rows = pd.DataFrame({"model": ["Llama-3-8B", "Llama-3-70B"], "dtype": ["bf16", "fp8"],
                         "prompt tokens": [2048, 8192], "own map says": ["chunked", "chunked"]})
    other = rows.drop(columns="own map says").assign(**{"rule says": ["colocated", "beyond the map's columns"]})
    row = pd.Series({"rule": "at a TPOT SLO of 2.5 decode steps the split loses at every prefill of the map"})
    text = other_rule_words(rows, other, row, "the H100 map")
    assert text == ("Read off the H100 map instead, at a TPOT SLO of 2.5 decode steps the split loses at every "
                    "prefill of the map. There it says: Llama-3-8B (bf16) at 2,048 tokens, colocated; Llama-3-70B "
                    "(fp8) at 8,192 tokens, beyond the map's columns. Each case's own cell agrees in 1 of the 1 cases "
                    "where it makes a claim (1 where it makes none). Read off the H100 map, the rule holds on every "
                    "case it makes a claim on.")
    split = other.assign(**{"rule says": ["split", "near the threshold"]})
    assert "agrees in 0 of the 1 cases" in other_rule_words(rows, split, row, "m") and "holds" not in \
        other_rule_words(rows, split, row, "m")
    none = other.assign(**{"rule says": ["near the threshold", "below the map's columns"]})
    assert other_rule_words(rows, none, row, "m").endswith("It makes no claim on any of these cases.")
    with pytest.raises(ValueError, match="check=True"):
        other_rule_words(rows.drop(columns="own map says"), other, row, "m")
    with pytest.raises(ValueError, match="same cases in the same order"):
        other_rule_words(rows, other.iloc[::-1], row, "m")


def test_run_lifetimes_is_the_cap_over_a_lifetimes_requests_at_the_best_goodput():
    from types import SimpleNamespace as C
    from splitlab.teach.figures.split_map import run_lifetimes
    cell = C(ttft_slo_s=0.05, tpot_slo_s=0.02, goodput={"split": 100, "chunked": 5})
    m = C(cells=[cell], workers=4, output_tokens=64, search={"max_requests": 2000, "min_requests": 100,
                                                             "tolerance": 0.03, "extend": 1})
    assert run_lifetimes(m, cell) == pytest.approx(2000 / (100 * 4 * 1.31))
    assert run_lifetimes(m, C(ttft_slo_s=0.05, tpot_slo_s=0.02, goodput={"split": 0})) == float("inf")
