"""Chapter 7's steady-state check of the map (splitlab.teach.figures.map_steady, issue 22 item 3): the cell picked
per region, the verdict on paired seeds, the table and words computed from the runs, the record written and read
back, the record shipped with splitlab, and one cell served on the tiny model."""
from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pandas as pd
import pytest

from splitlab.costmodel import CostModel
from splitlab.teach.figures import map_steady, map_steady_sizes, map_steady_text
from test_pools_live import NAMES, _cell, _map

WIN = {"split": 10, "prefill-first": 5, "chunked": 4}  # the split by 50%
NARROW = {"split": 10, "prefill-first": 8.5, "chunked": 4}  # by 15%
TIE = {"split": 10, "prefill-first": 9.6, "chunked": 4}


def _steady(region="split", winner=NAMES["split"], rival=NAMES["prefill-first"], measured=((96, 60), (94, 70),
            (98, 55)), predicted=((99, 50), (97, 60), (99, 40)), link=None) -> map_steady.SteadyCell:
    cols = lambda rows: {winner: [float(a) for a, _ in rows], rival: [float(b) for _, b in rows]}
    return map_steady.SteadyCell(region, 2, link, 120, 5.0, 1.5, 0.5, winner, rival, {winner: 10.0, rival: 5.0},
                                 {"prefill": 1.0, "decode": 1.1}, 118, 0.05, 0.004, {winner: 9.0, rival: 4.5},
                                 6.36, 20.0, [0, 1, 2], [300, 310, 305], [250, 260, 255], cols(predicted),
                                 cols(measured), 42.0)


def test_pick_cells_takes_the_shortest_lived_cell_won_by_a_fifth_and_a_missing_region_from_the_slow_link():
    cost = CostModel()
    short_narrow, long_wide, longer_wide = _cell(16, 1.5, NARROW, cost), _cell(256, 1.5, WIN, cost), \
        _cell(256, 5.0, WIN, cost)
    ties = [_cell(16, 5.0, TIE, cost), _cell(16, 2.5, TIE, cost)]
    own = _map([short_narrow, long_wide, longer_wide, *ties])
    pf = _cell(64, 1.5, {"split": 2, "prefill-first": 10, "chunked": 4}, cost)
    slow = _map([pf])
    slow.link_bytes_per_s = 1e7
    got = map_steady.pick_cells({None: own, 0.01: slow})
    assert {k: (c.prompt_tokens, c.tpot_steps) for k, (_, c) in got.items()} == {
        "split": (256, 5.0), "tie": (16, 2.5), "prefill-first": (64, 1.5)}  # 15% < MIN_MARGIN: not the 16-token one
    assert got["split"][0] is own and got["prefill-first"][0] is slow and "chunked" not in got
    assert map_steady.lifetime_s(own, long_wide) == pytest.approx(long_wide.ttft_slo_s + 63 * long_wide.tpot_slo_s)
    tight, roomy = _cell(16, 1.5, WIN, cost), _cell(64, 2.5, WIN, cost)  # 1.5 steps: no room for jitter
    assert map_steady.pick_cells({None: _map([tight, roomy])})["split"][1] is roomy
    assert map_steady.pick_cells({None: _map([tight])})["split"][1] is tight  # the only one: taken
    only_narrow = map_steady.pick_cells({None: _map([short_narrow])})  # no cell by a fifth: the widest margin
    assert only_narrow["split"][1] is short_narrow
    with pytest.raises(ValueError, match="maps must be a dict"):
        map_steady.pick_cells([own])


def test_the_verdict_reads_the_paired_gaps_interval_and_a_tie_needs_load_and_an_even_gap():
    assert _steady().outcome() == "matches"
    assert _steady().gap()["ci_low"] > 0 and _steady().outcome("predicted") == "matches"
    assert _steady(measured=((60, 96), (70, 94), (55, 98))).outcome() == "does not match"
    assert _steady(measured=((90, 60), (60, 95), (80, 80))).outcome() == "undecided"
    assert _steady("tie", measured=((80, 81), (85, 84), (78, 79))).outcome() == "matches: a tie"
    assert _steady("tie", measured=((100, 100), (100, 100), (99, 100))).outcome() == "undecided"  # idle: no tie
    assert _steady("tie", measured=((90, 60), (94, 70), (96, 55))).outcome() == "does not match"
    # the winner ahead but below 90%: it leads at this rate, the goodput order is not shown (review of 2026-12-05)
    assert _steady(measured=((81, 30), (85, 25), (78, 33))).outcome() == "leads"
    assert _steady(measured=((99, 93), (98, 91), (99, 95))).outcome() == "leads"  # both kept 90%
    assert _steady(measured=((0, 10), (0, 8), (1, 12))).outcome() == "no test"  # both far past their goodputs
    assert _steady("tie", measured=((20, 30), (25, 10), (5, 40))).outcome() == "no test"


def test_table_and_words_are_computed_from_the_runs():
    c = _steady()
    t = map_steady_text.steady_table({"split": c})
    row = t.loc["split"]
    assert row["winner (%)"] == "96 (98)" and row["2nd (%)"] == "62 (50)"
    g = c.gap()
    assert row["gap (pp)"] == f"{g['mean']:+.0f} ({g['ci_low']:+.0f} to {g['ci_high']:+.0f})"
    assert row["live"] == "matches" and "runs of 300 to 310 requests" in map_steady_text.steady_words({"split": c})
    words = map_steady_text.steady_words({"split": c})
    assert "**The split** (120-token prompts" in words and "96% of its requests" in words
    assert "The winner kept the 90% bar on average and the runner-up fell below it" in words
    both = map_steady_text.steady_words({"split": _steady(measured=((96, 92), (94, 95), (98, 91)))})
    assert "Both kept the 90% bar on average" in both and "so the live winner is undecided" in both
    leads = map_steady_text.steady_words({"split": _steady(measured=((81, 30), (85, 25), (78, 33)))})
    assert "so the live winner leads as in the map, outside the runs' spread. Both fell below the 90% bar" in leads
    none = map_steady_text.steady_words({"split": _steady(measured=((0, 10), (0, 8), (1, 12)))})
    assert "so the runs are no test of the map's order: both layouts kept less than 50%" in none
    assert "Both fell below" not in none  # the bar's sentence is not said twice
    eight = _steady("prefill-first", link=0.01)
    eight.workers = 8
    slow = map_steady_text.steady_table({"split": c, "prefill-first": eight})
    assert slow.loc["pf-first", "cell"] == "120 tok, 1.5 st, 0.01 GB/s, 8 workers"
    assert slow.loc["split", "cell"] == "120 tok, 1.5 st"
    from test_pages_ch07_09 import PHONE_PX, _html_table_px
    wide = {r: _steady(r, measured=((100, 0), (100, 0), (100, 0))) for r in map_steady.REGIONS}
    wide["chunked"].map_prompt_tokens, wide["chunked"].link_gbps = 1024, 0.01
    assert _html_table_px(map_steady_text.steady_table(wide)) <= PHONE_PX  # the burst check's table was not


def test_the_records_verdicts_in_a_clause():
    cells = {"split": _steady(), "tie": _steady("tie", measured=((90, 60), (60, 95), (80, 80))),
             "chunked": _steady("chunked", measured=((60, 96), (70, 94), (55, 98)))}
    # "their map": the record's, which today's map on the same page may draw otherwise (a reviewer's read, 12-06)
    assert map_steady_text.record_summary(cells) == ("of the 3 cells served live, the split showed their map's "
                                                     "goodput order; a tie undecided; colocated chunked did not match")
    eight = _steady(measured=((0, 10), (0, 8), (1, 12)))
    eight.workers = 8
    assert map_steady_text.record_summary({"pf-first (8)": eight}) == (
        "of the 1 cells served live, the split on 8 workers no test (both far past their goodputs)")
    with pytest.raises(ValueError, match="no region was served"):
        map_steady_text.record_summary({})


def test_the_probes_aim_is_said_from_every_layouts_steps():
    cells = {"split": _steady(), "tie": _steady("tie")}
    cells["split"].extra["steps"] = {cells["split"].winner: {"decode": 1.15}, cells["split"].rival: {"decode": 1.2}}
    cells["tie"].extra["steps"] = {cells["tie"].winner: {"decode": 1.05}}
    text = map_steady_text.probe_words(cells)
    assert text.startswith("Over the 3 layouts' runs of these records the live decode steps ran 1.05x to 1.20x the "
                           "model each probe placed (median 1.15x): every one slower than that model.")
    cells["tie"].extra["steps"] = {cells["tie"].winner: {"decode": 0.9}}
    assert map_steady_text.probe_words(cells).endswith("the probe's aim missed both ways.")
    assert map_steady_text.probe_words({"split": _steady()}) == ""  # no steps kept: nothing said
    for c in cells.values():  # placed again by a pilot (the records from 2026-12-06)
        c.extra["pilot"] = {"decode": 1.16}
    flown = map_steady_text.probe_words(cells)
    assert flown.startswith("Each cell was placed twice: by a probe") and "decode steps ran 1.16x the probe's" in flown
    assert "the model each pilot placed" in flown and "the pilot's aim missed both ways." in flown


def test_a_record_is_written_and_read_back_and_a_foreign_file_refused(tmp_path):
    cells = {"split": _steady(), "tie": _steady("tie", measured=((80, 81), (85, 84), (78, 79)))}
    path = map_steady.save_record(cells, str(tmp_path / "rec.json"), date="2026-12-05", machine="test")
    meta, back = map_steady.load_record(path)
    assert meta == {"date": "2026-12-05", "machine": "test"}
    assert {r: c.outcome() for r, c in back.items()} == {"split": "matches", "tie": "matches: a tie"}
    assert back["split"].measured == cells["split"].measured
    (tmp_path / "other.json").write_text(json.dumps({"what": "something else"}))
    with pytest.raises(ValueError, match="not a record of the map's steady-state check"):
        map_steady.load_record(tmp_path / "other.json")


def test_the_shipped_record_holds_every_region_over_three_seeds_and_reads_on_todays_map():
    meta, cells = map_steady.load_record()
    assert {"machine", "device", "runs"} <= set(meta) and not meta["quick"]
    assert all({"date", "command", "calibration"} <= set(r) for r in meta["runs"])
    assert len(map_steady_text.run_lines(meta)) == len(meta["runs"])
    assert set(cells) == set(map_steady.REGIONS)
    for c in cells.values():
        assert len(c.seeds) >= 3 and min(c.requests) >= 100 and c.outcome() in (
            "matches", "leads", "does not match", "undecided", "matches: a tie", "no test")
        middle = (min(c.goodput_now.values()) * max(c.goodput_now.values())) ** 0.5
        assert c.rate_per_worker == pytest.approx(middle * (map_steady.TIE_RATE if c.region == "tie" else 1))
        assert set(c.extra["in_run"]) == {c.winner, c.rival} and set(c.extra["steps"]) == {c.winner, c.rival}
    eight_meta, eight = map_steady.load_record(map_steady.RECORDS[8])
    assert eight_meta["workers"] == 8 and {c.workers for c in eight.values()} == {8} and "chunked" in eight
    assert all("pilot" in c.extra for c in (*cells.values(), *eight.values()))  # placed by a pilot (2026-12-05 22:00)
    assert map_steady_sizes.sizes_words(cells, eight).startswith("Colocated chunked: on 4 workers")  # both sizes
    words = map_steady_text.steady_words(cells)
    laddered = sum("ladder" in c.extra for c in cells.values())  # a tie's verdict read off its ladder of rates
    assert words.count(", so the live ") == len(cells) - laddered  # a verdict per cell
    assert words.count("bootstrap resamples of the seeds") == laddered
    tie = map_steady_text.steady_words({"tie": cells["tie"]})
    if cells["tie"].outcome() == "does not match":  # a tie the runs part is said so, not "the live winner"
        assert "so the live runs part the two" in tie
    cost = CostModel()
    today = map_steady_text.today_words({"tie": _steady("tie")}, {None: _map([_cell(120, 1.5, TIE, cost)])})
    assert "the tie cell (5 steps of prefill, TPOT 1.5) sits nearest today's 120-token cell" in today
    assert "the map again calls a tie" in today  # a tie is no kind's win
    split = map_steady_text.today_words({"split": _steady()}, {None: _map([_cell(120, 1.5, WIN, cost)])})
    assert "which the same kind wins" in split


def test_a_cell_served_on_the_real_model(lm, monkeypatch):
    """The whole path on the tiny model with runs of a dozen requests: probe (ratios forced to 1, so that a busy
    machine's probe does not move the cell), both goodputs searched again, runs at their geometric mean."""
    cost = CostModel()
    cell = _cell(64, 1.5, {"split": 10, "prefill-first": 100, "chunked": 8}, cost)
    m = _map([cell])
    real = map_steady.step_probe
    monkeypatch.setattr(map_steady, "step_probe", lambda *a, **k: dict(real(lm, cost, 16, requests=2),
                                                                        prefill=1.0, decode=1.0))
    import splitlab.serving as serving
    served, curve = [], serving.attainment_curve

    def logged(spec, cfg, backend, **k):  # the layouts' order on the real model, pilot then runs
        if isinstance(backend, serving.ModelExecutor):
            served.append((cfg.name, k["seed"], k["max_requests"]))
        return curve(spec, cfg, backend, **k)
    monkeypatch.setattr(serving, "attainment_curve", logged)
    c = map_steady.steady_cell(m, cell, lm, cost, seeds=(0, 1), max_requests=12)
    assert (c.winner, c.rival) == (NAMES["prefill-first"], NAMES["split"]) and c.seeds == [0, 1]
    pilot = c.extra["pilot"]  # both layouts piloted first, on a seed of their own, then ABBA over the seeds
    n = pilot["requests"]
    assert served == [(NAMES["prefill-first"], 10_000, n), (NAMES["split"], 10_000, n),
                      (NAMES["prefill-first"], 0, 12), (NAMES["split"], 0, 12),
                      (NAMES["split"], 1, 12), (NAMES["prefill-first"], 1, 12)]
    assert 8 <= n <= 12 and set(pilot["steps"]) == {c.winner, c.rival} and pilot["prefill"] > 0 < pilot["decode"]
    assert c.extra["cost"]["source"].count("decode x") == 2  # rescaled by the probe, then by the pilot
    assert all(len(v) == 2 and all(0 <= x <= 100 for x in v) for v in (*c.measured.values(), *c.predicted.values()))
    lo, hi = sorted(c.goodput_now.values())
    assert lo <= c.rate_per_worker <= hi and max(c.requests) <= 12 and c.cpu_s > 0
    assert c.outcome() in ("matches", "leads", "does not match", "undecided", "no test")
    with pytest.raises(ValueError, match="max_requests must be a whole number >= 2"):
        map_steady.steady_cell(m, cell, lm, cost, max_requests=1)
    with pytest.raises(ValueError, match="cell must be a cell of the map"):
        map_steady.steady_cell(m, _cell(16, 1.5, WIN, cost), lm, cost)
    none = _cell(32, 1.5, {"split": 0, "prefill-first": 0, "chunked": 0}, cost)
    with pytest.raises(ValueError, match="no layout meets its SLOs"):
        map_steady.steady_cell(_map([none]), none, lm, cost)
    assert set(c.extra["in_run"]) == {c.winner, c.rival} and all(len(v) == 2 for v in c.extra["in_run"].values())
    same = map_steady.in_run(c)  # on the model rescaled by the runs' own steps: a simulation, so repeatable
    assert same == c.extra["in_run"]
    c.extra.pop("cost")
    with pytest.raises(ValueError, match=r"no \['cost'\]"):
        map_steady.in_run(c)


def test_a_pilot_spans_its_lifetimes_and_pools_both_layouts_steps():
    """A pilot's requests span PILOT_LIFETIMES lifetimes at the cluster's rate, within [8, the runs' cap]; its factors
    are the medians of every step's measured / predicted over both layouts' logs, prefill from lone prefills (else
    fused hybrid steps), decode from decode steps, 1 where no run made that kind."""
    from splitlab.teach.figures import map_steady_place as place
    assert place.pilot_requests(10.0, 4, 1.0, 2000) == 4 * 10 * 4 + 1
    assert place.pilot_requests(0.01, 4, 1.0, 2000) == 8 and place.pilot_requests(100.0, 8, 2.0, 500) == 500
    cost = CostModel()
    d = cost.decode_s(2, 100)
    log_a = [dict(kind="decode", step_s=1.2 * d, batch=2, context_tokens=100)] * 3
    log_b = [dict(kind="decode", step_s=1.0 * d, batch=2, context_tokens=100)] * 2 + [
        dict(kind="prefill", prefill_s=0.9 * cost.prefill_s(64, 64 ** 2, 0), tokens=64, squares=64 ** 2,
             masked_pairs=0)]
    prefill, decode = place.pooled_factors(cost, [log_a, log_b])
    assert decode == pytest.approx(1.2) and prefill == pytest.approx(0.9)  # median of 1.2, 1.2, 1.2, 1.0, 1.0
    assert place.pooled_factors(cost, [log_a[:1], log_b[:1]])[0] == 1.0 and place.pooled_factors(cost, []) == (1, 1)


def test_a_colocated_win_live_on_two_cluster_sizes_is_said_not_granularity():
    """sizes_words reads each region served on both records: shown on both (matches or leads), a colocated win is
    a loss finer ratios do not remove; a run that shows nothing on one size says so; sizes in the wrong order
    refused."""
    import dataclasses
    small = _steady("chunked", NAMES["chunked"], NAMES["split"], measured=((100, 40), (100, 45), (100, 38)),
                    link=0.01)
    large = dataclasses.replace(small, workers=8)
    text = map_steady_sizes.sizes_words({"chunked": small}, {"chunked": large, "split": _steady()})
    assert text.startswith("Colocated chunked: on 2 workers (120-token prompts, TPOT 1.5 steps, a 0.01 GB/s link, "
                           "under a mean-TPOT SLO)")  # a fused step with its whole prompt: 5 steps, past 1.5
    assert "kept 100% against 41% for " in text and text.count("matches") == 2
    assert text.endswith(": a loss of the split on both sizes, live, so not the coarse ratios of the smaller cluster.")
    even = dataclasses.replace(large, measured={k: [60.0, 62.0, 58.0] for k in large.measured})
    assert map_steady_sizes.sizes_words({"chunked": small}, {"chunked": even}).endswith("not shown live on both sizes.")
    assert map_steady_sizes.sizes_words({"split": _steady()}, {"chunked": large}) == ""
    with pytest.raises(ValueError, match="small must be the record of fewer workers"):
        map_steady_sizes.sizes_words({"chunked": large}, {"chunked": small})
    lasting = map_steady_sizes.lasting_words({"chunked": small}, {"chunked": large})
    assert lasting == ("Served live in steady state (chapter 7's records), the split lost the colocated chunked cell "
                       "(120-token prompts, TPOT 1.5 steps, a 0.01 GB/s link, under a mean-TPOT SLO) on both 2 and 8 "
                       "workers (colocated kept "
                       "100% and 100% of its requests within the SLOs, the split 41% and 41%): a loss on a 0.01 GB/s "
                       "link, and the finer ratios of more workers do not remove it.")
    # the same map cell on the record's own link (its split cell): the split's attainment there beside the slow one's
    twin = map_steady_sizes.lasting_words({"chunked": small, "split": _steady()}, {"chunked": large})
    assert ("0.01 GB/s link (the same map cell on the cost model's own link, the record's split cell, served with "
            "118-token prompts at 6.36 requests/s per worker, kept 1P+1D at 96%; over the slow link, with 118-token "
            "prompts at 6.36, 41%; the own link's runs carried at least as heavy a load), and the finer") in twin
    own = lambda n: {"None": {"split": 16 - n, "chunked": n}, "0.01": {"chunked": 16}}
    assert lasting.replace(" link, and", " link; on the records' maps' own link colocated chunked wins 0 of 16 cells "
                           "on 2 workers and 0 of 16 cells on 8 workers, so at this cell the slow link makes that "
                           "loss, and") == map_steady_sizes.lasting_words({"chunked": small}, {"chunked": large},
                                                                          (own(0), own(0)))
    drawn = SimpleNamespace(workers=4, cells=[None] * 16, counts=lambda: {"chunked": 2, "split": 14})  # ch06's map
    assert "on 8 workers (this page's map, drawn today on 4 workers: 2 of 16), so at this cell" in \
        map_steady_sizes.lasting_words({"chunked": small}, {"chunked": large}, (own(0), own(0)), drawn)
    with pytest.raises(TypeError, match="today must be a map"):
        map_steady_sizes.lasting_words({"chunked": small}, {"chunked": large}, (own(0), own(0)), {"chunked": 2})
    assert "wins 0 of 16 cells on 2 workers and 3 of 16 cells on 8 workers, and" in map_steady_sizes.lasting_words(
        {"chunked": small}, {"chunked": large}, (own(0), own(3)))  # not the slow link's loss alone
    for bad in ((own(0),), (own(0), {"0.01": {}}), (own(0), {"None": {"chunked": -1}}), "counts"):
        with pytest.raises(ValueError, match="counts must be the two records' counts"):
            map_steady_sizes.lasting_words({"chunked": small}, {"chunked": large}, bad)
    assert map_steady_sizes.lasting_words({"chunked": small}, {"chunked": even}) == ""


def test_sizes_words_say_a_tie_shown_on_both_and_each_sizes_cell():
    """A tie shown on both sizes is said so (was "not shown live on both sizes"); a lasting loss names each size's cell
    where the records served different ones (the 8-worker cell was said at the 4-worker cell's prompt)."""
    import dataclasses
    tie = _steady("tie", measured=((80, 81), (85, 84), (78, 79)))
    assert map_steady_sizes.sizes_words({"tie": tie}, {"tie": dataclasses.replace(tie, workers=8)}).endswith(
        "matches: a tie: a tie on both sizes, live.")
    small = _steady("chunked", NAMES["chunked"], NAMES["split"], measured=((100, 40), (100, 45), (100, 38)))
    large = dataclasses.replace(small, workers=8, map_prompt_tokens=16, tpot_steps=10.0)
    words = map_steady_sizes.lasting_words({"chunked": small}, {"chunked": large})
    assert ("the colocated chunked cells on 2 workers (120-token prompts, TPOT 1.5 steps, under a mean-TPOT SLO) and "
            "on 8 workers (16-token prompts, TPOT 10 steps) (colocated kept") in words


def test_probe_words_says_both_ways_only_where_steps_ran_both_ways():
    """1.00x to 1.20x was "the probe's aim missed both ways"; one layout's runs were "the 1 layouts' runs"."""
    import dataclasses
    steps = lambda *d: dataclasses.replace(_steady(), extra={"steps": dict(zip((NAMES["split"], "b"),
                                                                               ({"decode": x} for x in d)))})
    assert map_steady_text.probe_words({"split": steps(1.0, 1.2)}).endswith(": none faster than that model.")
    assert map_steady_text.probe_words({"split": steps(1.0, 1.0)}).endswith(": the probe's aim was exact.")
    assert map_steady_text.probe_words({"split": steps(0.9, 1.2)}).endswith(": the probe's aim missed both ways.")
    assert map_steady_text.probe_words({"split": steps(1.2)}).startswith("Over the one layout's runs of")


def test_capped_words_never_reads_the_fewest_lifetimes_as_the_span_they_fell_below():
    """19.86 lifetimes of 20 were "to as few as 20" (two digits)."""
    from splitlab.teach.figures.split_map import capped_words
    m = _map([_cell(400, 2.5, WIN)])
    m.search = {"max_requests": 261}  # 19.86 lifetimes of 20
    assert "below 20 request lifetimes, to as few as 19.9 (400-token" in capped_words(m)
    assert capped_words(m).startswith("In 1 of the map's 1 cell the cap") and capped_words(m).endswith(
        "so that cell's margin is the least sure.")  # was "the map's 1 cells", "those cells' margins are"


def test_words_say_an_idle_tie_a_winner_at_its_knee_and_a_margin_below_the_checks():
    """A tie whose gap lies within +-10 but at which neither layout was loaded is said to be that (it read 'reaches
    past the +-10' at +0 to +0); a winner above 90% on average but below it on some seeds is said to sit at its knee;
    a cell picked below MIN_MARGIN (its region's widest) says so instead of rounding 19.7% to '20%'."""
    import dataclasses
    idle = _steady("tie", measured=((100, 100), (100, 100), (100, 100)))
    words = map_steady_text.steady_words({"tie": idle})
    assert "lies within ±10 points, but both layouts kept 95% or more on average" in words
    assert "reaches past" not in words
    knee = _steady(measured=((96, 60), (94, 70), (85, 55)))
    assert "The winner fell below 90% on 1 of the 3 seeds, though" in map_steady_text.steady_words({"split": knee})
    assert "The winner fell below" not in map_steady_text.steady_words({"split": _steady()})
    narrow = dataclasses.replace(_steady(), margin=0.197)
    assert "the map's margin 19.7% (the runner-up's shortfall; the map labels the winner's lead, +25%), below the " \
        "20% the check asks for" in map_steady_text.steady_words({"split": narrow})
    # the prompts the cell was served with beside the map's (placed on this machine's speed: chapter 6 quotes them)
    same = dataclasses.replace(narrow, prompt_tokens=narrow.map_prompt_tokens)
    assert f"({same.map_prompt_tokens}-token prompts, " in map_steady_text.steady_words({"split": same})
    moved = dataclasses.replace(narrow, prompt_tokens=narrow.map_prompt_tokens + 45)
    assert f"({moved.map_prompt_tokens}-token prompts on the map, {moved.prompt_tokens} served, " in \
        map_steady_text.steady_words({"split": moved})
    # the margin (the runner-up's shortfall) beside the map's label (the winner's lead): two scales of one gap
    assert "the map's margin 27% (the runner-up's shortfall; the map labels the winner's lead, +37%))" in \
        map_steady_text.steady_words({"split": dataclasses.replace(narrow, margin=0.27)})


def test_moved_words_size_a_slow_links_transfer_against_the_prefill():
    c = _steady("chunked", NAMES["chunked"], NAMES["split"], link=0.01)
    assert map_steady_sizes.moved_words(c) == ""  # no cost model kept: nothing said
    cost = CostModel(kv_bytes_per_token=2048)
    c.extra["cost"] = dataclasses.asdict(cost)
    moved_s = c.prompt_tokens * 2048 / 1e7  # 118 tokens x 2,048 bytes over 0.01 GB/s
    said = map_steady_sizes.moved_words(c)
    assert f"served, {c.prompt_tokens * 2048 / 1e3:.3g} kB) takes {moved_s * 1e3:.3g} ms to move" in said
    assert f"{100 * moved_s / c.ttft_slo_s:.2g}% of its TTFT SLO" in said
    assert f"({c.prompt_tokens} prompt tokens served," in said  # the prompt served, not the map's column
    busy = c.rate_per_worker * c.workers / 1 * moved_s  # 1P+1D: one prefill worker's link carries every cache
    assert said.endswith(f"each of the split's 1 prefill workers' links is busy {100 * busy:.2g}% of the time")
    assert f"{moved_s / cost.prefill_s(c.prompt_tokens):.2g} prefills of its prompt" in said
    c.link_gbps = None
    assert map_steady_sizes.moved_words(c) == ""  # the cost model's own link: the map's, nothing slow to say


def test_burst_words_set_a_short_live_run_against_the_records_steady_state():
    from types import SimpleNamespace as R
    burst = [R(arrival_s=0.02 * i, max_new_tokens=64) for i in range(24)]  # 0.46 s of arrivals
    win = _steady("prefill-first", NAMES["prefill-first"], NAMES["split"])  # matches: 96, 94, 98 against 60, 70, 55
    said = map_steady_sizes.burst_words(burst, 0.1, 0.01, {"prefill-first": win, "split": _steady()})
    life = 0.1 + 63 * 0.01
    assert said.startswith(f"The first seed's 24 requests arrive within 0.46 s, {100 * 0.46 / life:.2g}% of the 0.73 s")
    assert "they all overlap" in said and "at other cells of the map" in said
    assert "2 colocated kept 96% of its requests within the SLOs on average over 3 seeds and 1P+1D 62%." in said
    assert said.count(" kept ") == 1  # the split's own win is not a colocated one
    slow = map_steady_sizes.burst_words(burst, 0.01, 0.001, {})
    assert f"over {0.46 / 0.073:.2g} times the 0.073 s" in slow and "fewer lifetimes than a goodput run's 20" in slow
    with pytest.raises(ValueError, match="at least 2 requests"):
        map_steady_sizes.burst_words(burst[:1], 0.1, 0.01, {})
    with pytest.raises(ValueError, match=r"_slo_s \(s\) must be a finite number > 0"):
        map_steady_sizes.burst_words(burst, float("nan"), 0.01, {})
    with pytest.raises(TypeError):
        map_steady_sizes.burst_words(burst, 0.1, 0.01, [win])


def test_a_prefill_first_win_says_its_tpot_slo_judges_each_requests_mean():
    """Prefill-first won where one prefill costs more decode steps than the TPOT SLO: the page says the SLO is on
    each request's mean and that a bound on each gap is not what these runs test (issue 22, item 2's review)."""
    import dataclasses
    pf = _steady("prefill-first", NAMES["prefill-first"], NAMES["split"], measured=((92, 3),) * 3)
    words = map_steady_text.mean_tpot_words(pf)
    assert "one prefill here stalls the streams beside it for 5 decode steps or more, past the 1.5-step SLO" in words
    assert "a P99 ITL SLO" in words and words in map_steady_text.steady_words({"prefill-first": pf})
    assert map_steady_text.mean_tpot_words(dataclasses.replace(pf, tpot_steps=10.0)) == ""  # a stall within the SLO
    assert map_steady_text.mean_tpot_words(_steady()) == ""  # the split's cell
    ch = _steady("chunked", NAMES["chunked"], NAMES["split"], measured=((92, 3),) * 3, link=0.01)
    assert "one fused step carrying a whole prompt here stalls" in map_steady_text.mean_tpot_words(ch)
    from splitlab.teach.figures.map_steady_slo import qualifiers
    assert qualifiers(ch) == "at 0.01 GB/s, under a mean-TPOT SLO" and qualifiers(_steady()) == ""
    assert qualifiers(dataclasses.replace(ch, map_prompt_tokens=300)) == "at 0.01 GB/s"  # two chunks: not said
    summary = map_steady_text.record_summary({"prefill-first": pf, "chunked": ch})
    assert "colocated prefill-first (under a mean-TPOT SLO) and colocated chunked (at 0.01 GB/s, under" in summary


def test_the_tables_gap_is_the_difference_of_the_means_it_prints():
    """Chapter 7 printed 92 and 3 beside a gap of +90 (taken on the unrounded means, 91.6 and 2.4)."""
    c = _steady("prefill-first", NAMES["prefill-first"], NAMES["split"], measured=((92.4, 2.6), (91.0, 2.2),
                                                                                   (91.4, 2.4)))
    row = map_steady_text.steady_table({"prefill-first": c}).iloc[0]
    assert row["winner (%)"].startswith("92 ") and row["2nd (%)"].startswith("2 ")  # means 91.6 and 2.4
    assert row["gap (pp)"].startswith("+90 (")
    c = _steady("prefill-first", NAMES["prefill-first"], NAMES["split"], measured=((91.6, 2.6),) * 3)
    row = map_steady_text.steady_table({"prefill-first": c}).iloc[0]
    assert (row["winner (%)"].split()[0], row["2nd (%)"].split()[0], row["gap (pp)"].split()[0]) == ("92", "3", "+89")


def test_margin_words_set_the_map_margins_beside_the_simulators_own_error():
    """The live checks confirm an order, not a margin; a tie's ladder measured both goodputs live: their ratio."""
    from test_map_steady_tie import _ladder, _tie
    t = pd.DataFrame(dict(workload=["code", "research"], contender=["1P+1D", "2 colocated"],
                          metric=["ttft_p90", "tpot_p50"], error=[0.1, -0.3], abs_error=[0.1, 0.3],
                          in_run_error=[0.05, -0.197]))
    cells = {"split": _steady()}
    words = map_steady_sizes.margin_words(t, cells)
    assert "reached 19.7% on one latency percentile (research, 2 colocated, tpot_p50), on the check's short " \
        "runs" in words
    assert words.endswith("the check's errors differ from layout to layout.")  # no ladder: no goodput measured live
    tie = _tie(ladder=_ladder([(0.85, [100] * 3), (0.9, [40] * 3)], [(0.85, [100] * 3), (0.9, [95] * 3),
                                                                     (0.95, [40] * 3)]))  # goodputs 16 and 25
    words = map_steady_sizes.margin_words(t, {"tie": tie})
    assert ("1P+1D at 1.06x to 1.12x its simulated 16/s and 2 chunked 256 at 0.72x to 0.76x its simulated 25/s per "
            "worker; "
            "the ratio of the two, 1P+1D over 2 chunked 256, lies live (on the means over the seeds) between 0.89 and "
            "1.00, simulated 0.64.") in words
    with pytest.raises(ValueError, match="simulated in run"):
        map_steady_sizes.margin_words(t.drop(columns="in_run_error"), cells)
