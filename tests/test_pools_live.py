"""Chapter 7's live check of the map (splitlab.teach.figures.pools_live, issue 22 item 3): the cells it picks per
region, the probe and the cost model rescaled by it, the cell placed back at its map coordinates, the verdict by
chapter 6's paired rule (split_seeds.paired_gaps) and its words. Maps and attainments are crafted or simulated;
one test serves a cell on the tiny model."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from splitlab.costmodel import CostModel
from splitlab.planning import split_map as SM
from splitlab.planning.map_result import Cell, SplitMap
from splitlab.teach.figures import pools_live
from splitlab.serving import CostModelExecutor
from splitlab.serving.workload import Fixed, WorkloadSpec
from splitlab.teach.figures.split_seeds import PairedRuns, paired_runs

NAMES = {"split": "1P+1D", "prefill-first": "2 colocated (prefill-first)",
         "chunked": "2 colocated (chunked, 256-token chunks)"}


def _cell(prompt: int, tpot_steps: float, goodput: dict, cost=CostModel()) -> Cell:
    return Cell(prompt, SM.prefill_steps(cost, prompt), tpot_steps, 5 * cost.prefill_s(prompt),
                tpot_steps * cost.decode_s(1, prompt), goodput, {k: "tpot" for k in goodput}, dict(NAMES)).decide(0.1)


def _map(cells) -> SplitMap:
    prompts = sorted({c.prompt_tokens for c in cells})
    return SplitMap(cells, 2, prompts, [], sorted({c.tpot_steps for c in cells}), 64, 5.0, None, 0.1, "built-in",
                    [256])


def test_layout_config_reads_every_name_a_map_writes():
    assert pools_live.layout_config("2P+2D", 4, [256]).name == "2P+2D"
    assert pools_live.layout_config("4 colocated (prefill-first)", 4, [256]).policy == "prefill-first"
    cfg = pools_live.layout_config("4 colocated (chunked, 256-token chunks)", 4, [256], max_batch=16)
    assert (cfg.policy, cfg.chunk_tokens, cfg.max_batch) == ("chunked", 256, 16)
    with pytest.raises(ValueError, match="not a layout name"):
        pools_live.layout_config("4 workers", 4, [256])


def test_gap_cells_serve_every_region_and_a_tie_and_leave_out_one_without_a_cell():
    cells = [_cell(16, 2.5, {"split": 10, "prefill-first": 5, "chunked": 4}),  # split by 50%
             _cell(256, 2.5, {"split": 5, "prefill-first": 10, "chunked": 6}),  # prefill-first by 40%
             _cell(512, 2.5, {"split": 5, "prefill-first": 5.2, "chunked": 10}),  # chunked by 48%
             _cell(16, 5.0, {"split": 10, "prefill-first": 9.5, "chunked": 4})]  # a tie: a region of its own
    m = _map(cells)
    got = pools_live.gap_cells(m, None, n_requests={"split": 6, "tie": 8}, seeds=(0, 1), rates=2)
    assert {k: (c.prompt_tokens, c.tpot_steps) for k, c in got.items()} == \
        {"split": (16, 2.5), "prefill-first": (256, 2.5), "chunked": (512, 2.5), "tie": (16, 5.0)}
    short = pools_live.gap_cells(m, None, n_requests=6, seeds=(0, 1), rates=2, max_prompt_tokens=300)
    assert set(short) == {"split", "prefill-first", "tie"}  # a region with no cell in bounds is left out
    per = pools_live.gap_cells(m, None, n_requests=6, seeds=(0, 1), rates=2, max_prompt_tokens={"prefill-first": 100})
    assert set(per) == {"split", "chunked", "tie"}  # a cap per region: the others uncapped
    with pytest.raises(ValueError, match="max_prompt_tokens names no region"):
        pools_live.gap_cells(m, None, max_prompt_tokens={"splt": 100})
    with pytest.raises(ValueError, match="rates must be"):
        pools_live.gap_cells(m, None, rates=1)
    for bad in (0, {"split": 0}, {"tie": 2.5}):
        with pytest.raises(ValueError, match="n_requests must be"):
            pools_live.gap_cells(m, None, n_requests=bad, rates=2)


def test_rescaled_scales_prefill_and_decode_apart():
    cost = CostModel(prefill_per_token2_s=1e-8, hybrid_per_row_s=1e-4, decode_batched_s=1e-3)
    now = pools_live.rescaled(cost, 1.5, 0.5)
    assert now.prefill_s(300) == pytest.approx(1.5 * cost.prefill_s(300))
    assert now.decode_s(4, 900) == pytest.approx(0.5 * cost.decode_s(4, 900))
    assert now.hybrid_s(128, 128 ** 2, 0, 3, 600) == pytest.approx(1.5 * cost.hybrid_s(128, 128 ** 2, 0, 3, 600))
    assert now.transfer_s(10 ** 6) == cost.transfer_s(10 ** 6) and "prefill x1.5, decode x0.5" in now.source
    for bad in (0, -1.0, float("inf"), float("nan"), True, "2"):
        with pytest.raises(ValueError, match="prefill must be a finite factor"):
            pools_live.rescaled(cost, bad, 1.0)


def test_cell_now_puts_the_cell_back_at_its_map_coordinates():
    cost = CostModel()
    cell = _cell(400, 2.5, {"split": 10, "prefill-first": 5, "chunked": 4})
    m = _map([cell])
    assert pools_live.cell_now(m, cell, cost) == (400, pytest.approx(cell.ttft_slo_s), pytest.approx(cell.tpot_slo_s))
    # prefills 2x slower, decode steps as fast: the prefill of a shorter prompt costs the cell's decode steps
    now = pools_live.rescaled(cost, 2.0, 1.0)
    prompt, ttft, tpot = pools_live.cell_now(m, cell, now)
    assert prompt < 300 and SM.prefill_steps(now, prompt) == pytest.approx(cell.prefill_steps, rel=0.01)
    assert ttft == pytest.approx(5 * now.prefill_s(prompt)) and tpot == pytest.approx(2.5 * now.decode_s(1, prompt))


def test_gap_cells_pick_the_cell_whose_interval_clears_zero_furthest_not_the_widest_margin():
    """A 16-token cell the split won by 47% left no gap in runs of 24 requests (a loaded machine's map): of each
    region's cells, the one whose predicted interval, on the live runs' very requests, starts furthest above zero."""
    m = SM.split_map(None, 2, [16, 1024], [1.5, 2.5], max_requests=100, progress=False)
    picked = pools_live.gap_cells(m, None, n_requests=12, seeds=(0, 1, 2), rates=3)
    assert picked and all(c.winner == k for k, c in picked.items())

    def score(d):  # the best rate's lowest interval end over decode steps 15% slower, as fast and faster
        spec = WorkloadSpec("x", Fixed(d.prompt_tokens), Fixed(64))
        names = [d.names[d.winner], d.names[d.runner_up]]
        cfgs = {n: pools_live.layout_config(n, 2, [256], trace=False) for n in names}
        low = max(d.goodput[d.runner_up], 1e-3 * d.goodput[d.winner])
        best = -np.inf
        for rate in 2 * np.geomspace(0.5 * low, 4 * d.goodput[d.winner], 3):
            ends = []
            for f in (1 / pools_live.DRIFT, 1.0, pools_live.DRIFT):
                att = paired_runs(spec, 12, rate, cfgs, CostModelExecutor(pools_live.rescaled(CostModel(), 1.0, f)),
                                  d.ttft_slo_s, d.tpot_slo_s, seeds=(0, 1, 2), scale=1.0).attainment
                gaps = att[names[0]] - att[names[1]]
                ends.append(gaps.mean() - 4.303 * gaps.std(ddof=1) / np.sqrt(3))
            best = max(best, min(ends)) if min(ends) >= pools_live.LEAD_FLOOR else best
        return best
    for kind, c in picked.items():
        assert score(c) == max(score(d) for d in m.cells if d.winner == kind)
    assert pools_live.gap_cells(m, None, n_requests=12, max_prompt_tokens=8) == {}  # no cell: no region


def test_gap_interval_is_students_t_over_the_seeds():
    att = pd.DataFrame({"a": [100.0, 92.0, 100.0], "b": [96.0, 42.0, 42.0]})  # the thin lead a page once passed
    g = pools_live.gap_interval(att, "a", "b")
    sd = np.std([4, 50, 58], ddof=1)
    assert g["mean"] == pytest.approx(112 / 3) and (g["low"], g["high"]) == (4, 58)
    assert (g["ci_low"], g["ci_high"]) == (pytest.approx(112 / 3 - 4.303 * sd / np.sqrt(3)), 100)  # +110: clipped
    assert not g["excludes_zero"]  # every seed ahead, but one by a single request of 24: not outside the spread
    same = pools_live.gap_interval(pd.DataFrame({"a": [80.0] * 4, "b": [60.0] * 4}), "a", "b")
    assert (same["ci_low"], same["ci_high"], same["excludes_zero"]) == (20, 20, True)
    one = pools_live.gap_interval(pd.DataFrame({"a": [80.0], "b": [10.0]}), "a", "b")
    assert one["ci_low"] == -np.inf and not one["excludes_zero"]  # one seed: no spread to judge against


def test_the_rate_is_picked_by_the_interval_and_a_tie_at_its_most_loaded():
    win, tie = _cell(16, 2.5, {"split": 10, "prefill-first": 5, "chunked": 4}), \
        _cell(16, 5.0, {"split": 10, "prefill-first": 9.5, "chunked": 4})

    def runs(*pairs):  # {drift: PairedRuns} from (a's seeds, b's seeds) per drift
        return {i: PairedRuns(pd.DataFrame({"a": a, "b": b}), None, 6, 1.0, True) for i, (a, b) in enumerate(pairs)}
    lead = runs(([90, 80, 85], [40, 40, 45]), ([90, 85, 85], [50, 40, 45]))
    assert pools_live.rate_score(win, lead) == pytest.approx(min(
        pools_live.gap_interval(r.attainment, "a", "b")["ci_low"] for r in lead.values()))
    assert pools_live.rate_score(tie, runs(([90, 80, 85], [88, 81, 85]))) == pytest.approx(254 / 3)  # 90% in +-2.6
    assert np.isnan(pools_live.rate_score(tie, runs(([90, 80, 85], [85, 85, 80]))))  # holds 0, but +-16 points
    assert np.isnan(pools_live.rate_score(tie, lead))  # the runs tell the two apart: not a tie's rate
    # ch07's 2026-12-05 tie: b at 100% in every simulated seed, a at 79/42/42: the interval holds zero, but no tie
    leans = runs(([79, 42, 42], [100, 100, 100]))
    assert not pools_live.gap_interval(leans[0].attainment, "a", "b")["excludes_zero"]
    assert np.isnan(pools_live.rate_score(tie, leans))
    # ch07's 2026-12-05 tie at 03:00: gaps of 0, -54 and -50 (a seed both served whole): no seed lean the other way
    hidden = runs(([100, 46, 50], [100, 100, 100]))
    g = pools_live.gap_interval(hidden[0].attainment, "a", "b")
    assert not g["excludes_zero"] and not g["decisive"] and np.isnan(pools_live.rate_score(tie, hidden))
    # an equivalence test (Schuirmann's two one-sided tests): the 90% interval within +-TIE_GAP, t of T95
    g = pools_live.gap_interval(pd.DataFrame({"a": [100.0, 86, 95], "b": [100.0, 95, 92]}), "a", "b")
    se = np.std([0, -9, 3], ddof=1) / np.sqrt(3)
    assert (g["eq_low"], g["eq_high"]) == (pytest.approx(-2 - 2.920 * se), pytest.approx(-2 + 2.920 * se))
    assert not pools_live.even(g)  # -2 +- 10.5: holds zero, but no tie shown
    assert pools_live.pick_rate(win, pd.Series({1.0: -5.0, 2.0: 12.0, 3.0: 8.0})) == 2.0
    assert pools_live.pick_rate(win, pd.Series({1.0: -5.0, 2.0: -1.0})) is None  # never outside the spread
    assert pools_live.pick_rate(win, pd.Series({1.0: 6.0, 2.0: 8.0})) is None  # ch07's +6 and +8: undecided live
    loads = pd.Series({1.0: 100.0, 2.0: 81.0, 3.0: 55.0, 4.0: 20.0, 5.0: np.nan})
    assert pools_live.pick_rate(tie, loads) == 3.0  # the most loaded with both at >= TIE_FLOOR, not 100 each
    assert pools_live.pick_rate(tie, pd.Series({1.0: 100.0, 2.0: 99.0, 3.0: 30.0})) is None  # 99%: not loaded
    assert pools_live.pick_rate(tie, pd.Series({1.0: 100.0, 2.0: 10.0})) is None


def _live(kind: str, winner, rival, prompt=120, rate=40.0) -> pools_live.LiveCell:
    cell = _cell(128, 5.0 if kind == "tie" else 2.5, {
        "split": {"split": 10, "prefill-first": 6, "chunked": 5},
        "tie": {"split": 10, "prefill-first": 9.5, "chunked": 4},
        "chunked": {"split": 5, "prefill-first": 6, "chunked": 10}}.get(kind, {"split": 5, "prefill-first": 10,
                                                                           "chunked": 6}))
    w, r = cell.names[cell.leader], cell.names[cell.runner_up]
    att = pd.DataFrame({w: winner, r: rival}, index=pd.Index(range(len(winner)), name="seed"))
    steps = pd.DataFrame({"measured / predicted": [1.1, 0.9]}, index=["prefill", "decode"])
    return pools_live.LiveCell(cell, w, r, {"prefill": 1.2, "decode": 0.8, "steps": steps}, prompt, 0.1, 0.01,
                               cell.prefill_steps, rate, pd.Series({rate: 30.0, 2 * rate: 10.0}),
                               PairedRuns(att, None, 24, rate, True), steps)


def test_the_verdict_is_the_gaps_95_percent_interval_in_words_a_tie_included():
    assert pools_live.live_outcome(_live("split", [100, 90, 95], [60, 50, 50])) == "matches"
    assert pools_live.live_outcome(_live("split", [60, 50, 50], [100, 90, 95])) == "does not match"
    # ahead in every seed (chapter 6's rule), but by one request of 24 in one: the interval holds zero
    assert pools_live.live_outcome(_live("split", [100, 92, 100], [96, 42, 42])) == "undecided"
    assert pools_live.live_outcome(_live("split", [90, 90, 90], [90, 90, 90])) == "undecided"
    assert pools_live.live_outcome(_live("tie", [80, 78, 84], [78, 78, 85])) == "matches: a tie"  # 90%: -2.2 to +2.9
    assert pools_live.live_outcome(_live("tie", [80, 70, 90], [75, 78, 86])) == "undecided"  # 90%: -13 to +14
    assert pools_live.live_outcome(_live("tie", [80, 70, 90], [40, 35, 50])) == "does not match"
    # ch07 on 2026-12-05: the second layout led every seed by 8 to 50 points, the interval (-88, +21) held zero
    assert pools_live.live_outcome(_live("tie", [92, 50, 58], [100, 100, 100])) == "undecided"
    assert pools_live.live_outcome(_live("tie", [100, 88, 96], [100, 100, 90])) == "undecided"  # mean -2, +-27
    # both layouts at 100% in every seed: a gap of 0 whatever the layouts, no tie confirmed (TIE_LOADED)
    assert pools_live.live_outcome(_live("tie", [100] * 5, [100] * 5)) == "undecided"
    assert pools_live.live_outcome(_live("tie", [100, 0, 100], [100, 100, 0])) == "undecided"  # apart every seed
    lc = _live("tie", [80], [80])
    lc.runs = None
    assert pools_live.live_outcome(lc) == "undecided"  # not served: nothing to match


def test_live_table_and_words_print_each_seed_the_interval_and_a_computed_sentence():
    lives = {"split": _live("split", [100, 90, 95], [60, 50, 50]),
             "prefill-first": _live("prefill-first", [70, 90, 50], [75, 80, 40]),
             "tie": _live("tie", [80, 78, 84], [78, 78, 85])}
    t = pools_live.live_table(lives)
    assert list(t.index) == ["split", "prefill-first", "tie"] and t.shape[1] + 1 <= 6  # a phone's table
    assert t.loc["split", "leader (%)"] == "1P+1D: 100/90/95"
    assert t.loc["split", "runner-up (%)"] == "2 colocated: 60/50/50"
    assert t.loc["split", "gap (pp)"] == "+42 (+34 to +49)" and t.loc["split", "live"] == "matches"
    assert t.loc["prefill-first", "gap (pp)"] == "+5 (-17 to +27)" and t.loc["prefill-first", "live"] == "undecided"
    assert t.loc["tie", "live"] == "matches: a tie"
    words = pools_live.live_words(lives, _map([lives["split"].cell]))
    split, colocated, chunked, tie = words.split("\n\n")
    assert "the probe timed prefills at 1.20x and decode steps at 0.80x the cost model" in split
    assert "120-token prompts put the cell back" in split and "prefill 1.10x, decode 0.90x" in split
    assert ("at 20 requests/s per worker (2x 1P+1D's, 3.33x 2 colocated's goodput on the map: past both, where a "
            "short run from idle workers can tell them apart) the rescaled simulator predicted the gap's 95% interval "
            "to start at +30 points") in split
    assert ("Each seed's 24 requests arrive over about 600 ms, 0.822 request lifetimes (the TTFT SLO and 63 TPOT "
            "SLOs): a burst on idle workers") in split
    assert "100 / 90 / 95%" in split and "ranged from +40 to +45 points, mean +42" in split
    assert "runs from +34 to +49 points and excludes zero" in split and split.endswith("matches the map's.")
    assert "holds zero" in colocated and colocated.endswith("the map's winner unconfirmed.")
    assert chunked == ("The map gives colocated chunked no cell it wins alone here, on any of the links searched, so "
                       "that region goes unconfirmed live.")
    assert tie.startswith("**A tie** (1P+1D and 2 colocated within 10% in goodput on the map; 128-token prompts")
    assert "predicted the less served layout at 30% of its requests within the SLOs (the rule takes 50% to 90%)" in tie
    assert tie.endswith("the live runs match the map's: a tie.")
    lost = pools_live.live_words({"split": _live("split", [60, 50, 50], [100, 90, 95])}, _map([]))
    assert "the live winner is not the map's" in lost
    assert lost.endswith("The map has no tie here, on any of the links searched, so none was served.")
    apart = pools_live.live_words({"tie": _live("tie", [80, 70, 90], [40, 35, 50])}, _map([]))
    assert apart.endswith("So the live runs tell apart what the map calls a tie.")
    leans = pools_live.live_words({"tie": _live("tie", [92, 50, 58], [100, 100, 100])}, _map([]))
    assert leans.endswith("So 2 colocated led by 33 points on average, and the gap's 90% interval (-71 to +4 points) "
                          "is not within ±10: these runs neither confirm the map's tie nor tell the two apart.")
    assert "runs from -89 to +22 points and holds zero" in leans
    idle = pools_live.live_words({"tie": _live("tie", [100, 100, 96], [100, 100, 100])}, _map([]))
    assert idle.endswith("So both layouts met the SLOs for 99% or more of their requests on average: runs that load "
                         "neither cannot show a tie.")


def test_a_cell_short_runs_cannot_tell_apart_is_not_served_and_said_so():
    """Under nbval a 16-token cell was served live at a rate where the simulator predicted a gap of 0 (both
    layouts 100% on every seed): CPU spent on runs that could not tell anything."""
    lc = _live("split", [100], [100])
    lc.runs, lc.steps, lc.prefill_steps = None, None, 3 * lc.cell.prefill_steps
    assert pools_live.live_outcome(lc) == "undecided"
    t = pools_live.live_table({"split": lc})
    assert (t.loc["split", "leader (%)"], t.loc["split", "gap (pp)"]) == ("1P+1D: not served", "-")
    words = pools_live.live_words({"split": lc}, _map([lc.cell])).split("\n\n")[0]
    assert f"120-token prompts cost {lc.prefill_steps:.2g} steps, as near as a prompt gets" in words
    assert "found no rate, of those tried (with decode steps 15% slower or faster), where runs this short start " \
           "the 95% interval of 1P+1D's lead over 2 colocated at least 10 points above zero" in words
    assert words.endswith("so the cell was not served: it stays unconfirmed live.")


def test_step_ratios_read_each_kind_of_step_against_the_cost_model():
    cost = CostModel()
    log = [dict(kind="decode", batch=2, context_tokens=300, batched=1, step_s=1.5 * cost.decode_s(2, 300)),
           dict(kind="decode", batch=1, context_tokens=100, batched=0, step_s=1.5 * cost.decode_s(1, 100)),
           dict(kind="decode", batch=1, context_tokens=100, batched=0, step_s=9 * cost.decode_s(1, 100)),  # a stall
           dict(kind="prefill", tokens=200, squares=200 ** 2, masked_pairs=0, prefill_s=0.5 * cost.prefill_s(200))]
    t = pools_live.step_ratios(cost, log)
    assert list(t.index) == ["prefill", "decode"] and list(t["steps"]) == [1, 3]
    assert t.loc["decode", "measured / predicted"] == pytest.approx(1.5)  # the median: one stall does not move it
    assert t.loc["prefill", "measured / predicted"] == pytest.approx(0.5)


def test_a_cell_served_on_the_real_model(lm, monkeypatch):
    """The whole live path on the tiny model: a probe, the rescaled cell, the simulated rate, paired live runs (a
    cell where a burst of 6 requests leaves the split behind at the fastest rate tried, on the built-in model). The
    probe is real; the cell is then placed as if the steps ran as the cost model says (ratios 1), so that a busy
    machine's probe cannot move the pick to 'not served' (it did, at 1.15x slower decode steps under load)."""
    cost = CostModel()
    cell = _cell(256, 1.5, {"split": 10, "prefill-first": 100, "chunked": 8}, cost)
    m = _map([cell])
    probe = pools_live.step_probe(lm, cost, 64, requests=2)
    assert probe["prefill"] > 0 and probe["decode"] > 0 and list(probe["steps"].index) == ["prefill", "decode"]
    with pytest.raises(ValueError, match="requests must be"):
        pools_live.step_probe(lm, cost, 64, requests=0)
    monkeypatch.setattr(pools_live, "step_probe", lambda *a, **k: dict(probe, prefill=1.0, decode=1.0))
    lc = pools_live.live_cell(m, cell, lm, cost, n_requests=6, seeds=(0, 1), rates=3)
    assert (lc.winner, lc.rival) == ("2 colocated (prefill-first)", "1P+1D")
    assert lc.rate_per_s == lc.predicted.idxmax() and lc.predicted.max() > 0, lc.predicted  # served: cleared 0
    assert list(lc.runs.attainment.index) == [0, 1] and list(lc.runs.attainment.columns) == [lc.winner, lc.rival]
    assert pools_live.live_outcome(lc) in ("matches", "does not match", "undecided")
    assert {"prefill", "decode"} <= set(lc.steps.index)
    with pytest.raises(ValueError, match="one layout wins or a tie, got winner 'none'"):  # no layout meets the SLOs
        pools_live.live_cell(m, _cell(64, 2.5, {"split": 0, "prefill-first": 0, "chunked": 0}), lm, cost)
    with pytest.raises(ValueError, match="rates must be"):
        pools_live.live_cell(m, cell, lm, cost, rates=1)


def test_live_regions_serve_on_the_sliders_slowest_link_a_region_the_maps_own_link_lacks(lm, monkeypatch):
    """This device's map gave chunked prefill no cell on its own link (a fused decode row costs about 2x a decode
    step's here), but several on the slider's 0.01 GB/s link: the live check serves a region there, on that link; a
    region whose own-link cell a probe moves out of reach goes there too. Live runs are stubbed: which map and cell
    each region is served from is what is checked."""
    cost = CostModel()
    own = _map([_cell(16, 2.5, {"split": 10, "prefill-first": 5, "chunked": 4}),
                _cell(256, 2.5, {"split": 5, "prefill-first": 10, "chunked": 6})])
    mid = SplitMap([_cell(16, 2.5, {"split": 10, "prefill-first": 5, "chunked": 4})], 2, [16], [], [2.5], 64, 5.0,
                   1e8, 0.1, "built-in", [256])
    slow_cells = [_cell(16, 2.5, {"split": 3, "prefill-first": 5, "chunked": 4}),
                  _cell(512, 2.5, {"split": 3, "prefill-first": 5.2, "chunked": 10})]
    slow = SplitMap(slow_cells, 2, [16, 512], [], [2.5], 64, 5.0, 1e5, 0.1, "built-in", [256])
    served = []

    def fake(m, cell, lm, cost, n_requests, seeds, rates, **options):
        served.append((m, cell))
        lc = _live(cell.winner, [100, 90, 95], [60, 50, 50])
        lc.cell, lc.link_bytes_per_s = cell, m.link_bytes_per_s
        if m is own and cell.winner == "prefill-first":  # its probe moved it out of reach: not served
            lc.runs = None
        return lc
    monkeypatch.setattr(pools_live, "live_cell", fake)
    got = pools_live.live_regions({None: own, 0.1: mid, 1e-4: slow}, lm, cost, n_requests=8, rates=3)
    assert got.keys() == {"split", "prefill-first", "chunked"}  # no map has a tie
    assert got["split"].cell is own.cells[0] and got["split"].link_bytes_per_s is None  # the own link first
    assert got["chunked"].cell is slow_cells[1] and got["chunked"].link_bytes_per_s == 1e5  # the slowest, not 0.1
    assert got["prefill-first"].link_bytes_per_s == 1e5 and got["prefill-first"].runs is not None
    assert all(m is not mid for m, _ in served)
    for bad in ({}, [own], {None: "map"}):
        with pytest.raises(ValueError, match="maps must be a dict"):
            pools_live.live_regions(bad, lm, cost)
    with pytest.raises(ValueError, match="seeds must be"):
        pools_live.live_regions({None: own}, lm, cost, seeds=(0,))


def test_a_cell_of_a_slower_link_is_simulated_and_worded_on_that_link():
    """A slow map's cell is judged on its own link, not the cost model's: the same cell a 10 MB/s link loses for the
    split scores lower than on the cost model's link, and the page names the link."""
    cost = CostModel()
    cell = _cell(512, 2.5, {"split": 3, "prefill-first": 5.2, "chunked": 10}, cost)
    fast, slow = _map([cell]), SplitMap([cell], 2, [512], [], [2.5], 64, 5.0, 1e7, 0.1, "built-in", [256])
    args = (cost, 512, cell.ttft_slo_s, cell.tpot_slo_s, 8, (0, 1), 3, 1.0, None, {})
    on_fast, on_slow = (pools_live._contest(m, cell, *args)[3] for m in (fast, slow))
    assert on_slow.max() > on_fast.max() + 20  # chunked's lead over 1P+1D at its best rate grows on 10 MB/s
    lc = _live("chunked", [100, 90, 95], [60, 50, 50])
    lc.link_bytes_per_s = 1e7
    assert pools_live.live_table({"chunked": lc}).loc["chunked", "cell"] == "128 tok, 2.5 st, 0.01 GB/s"
    words = pools_live.live_words({"chunked": lc}, _map([lc.cell])).split("\n\n")[2]
    assert "on the slider's 0.01 GB/s KV link, where the map's own link gives this region no cell" in words
