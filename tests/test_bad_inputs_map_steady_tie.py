"""Bad input to the tie's ladder of rates (map_steady_tie), to the words of chapter 7's records that read it
(SteadyCell.outcome, map_steady_text), to map_steady_sizes' moved_words and burst_words, and to map_live.py --ladder:
each refused early, by name (before: a ZeroDivisionError, "math domain error" or a KeyError; two negative goodputs,
one seed served three times or a step below the shares' 6 places served in silence; a ladder of other layouts or
seeds, or on a split cell, told as the tie's; "nan ms", "-0.242 ms", "-4.55 s" and a cost model's missing field read
as the default model's; --ladder's model loaded before its record was refused, --out dropped in silence)."""
from __future__ import annotations

import dataclasses
import math
import re
from types import SimpleNamespace

import pytest

import splitlab.serving as serving
from splitlab.costmodel import CostModel
from splitlab.teach.figures import map_steady, map_steady_sizes, map_steady_text
from splitlab.teach.figures import map_steady_tie as T
from splitlab.teach.figures import map_steady_tie_words as W
from test_bad_inputs_map_steady import _map_live
from test_map_steady import _steady
from test_map_steady_tie import CHUNKED, SPLIT, _ladder, _tie


@pytest.fixture
def no_runs(monkeypatch):
    """attainment_curve made to fail loudly: a check that passes reaches the first run."""
    def fail(*a, **k):
        raise AssertionError("a run was served: the bad input was not refused before the work")
    monkeypatch.setattr(serving, "attainment_curve", fail)


def _cell(**fields):
    c = _tie()
    c.extra.update(fields.pop("extra", {}))
    for k, v in fields.items():
        setattr(c, k, v)
    return c


@pytest.mark.parametrize("fields, match", [
    (dict(goodput_now={SPLIT: 0.0, CHUNKED: 25.0}), r"goodput_now\['1P\+1D'\] must be a finite number > 0, got 0.0"),
    (dict(goodput_now={SPLIT: -16.0, CHUNKED: 25.0}), r"goodput_now\['1P\+1D'\] .* got -16.0"),  # math domain error
    (dict(goodput_now={SPLIT: -16.0, CHUNKED: -25.0}), r"goodput_now\['1P\+1D'\] .* got -16.0"),  # served: sqrt 20
    (dict(goodput_now={SPLIT: 16.0}), r"goodput_now\['2 colocated .* got None"),  # a KeyError
    (dict(seeds=[0]), "at least 2 distinct seeds"),
    (dict(seeds=[0, 0, 0]), "at least 2 distinct seeds"),  # one seed served three times, bootstrapped as three
    (dict(seeds=[]), "at least 2 distinct seeds"),  # a ZeroDivisionError after the model's executors
    (dict(rival=SPLIT), "two layouts, got '1P\\+1D' twice"),  # one layout served, refused by brackets at the end
    (dict(link_gbps=0.0), "link_gbps must be a finite number > 0, got 0.0"),
    (dict(extra=dict(output_tokens=0)), "output_tokens must be a whole number >= 1, got 0"),
    (dict(extra=dict(min_requests=20)), "max_requests must be a whole number >= 20, got 12"),
    (dict(extra=None), "has no \\['output_tokens', 'min_requests', 'max_requests'\\]"),  # 'NoneType' not iterable
])
def test_tie_ladder_refuses_a_cell_it_cannot_serve_before_any_run(fields, match, lm, no_runs):
    c = _cell(**{k: v for k, v in fields.items() if k != "extra" or v is not None})
    if "extra" in fields and fields["extra"] is None:
        c.extra = None
    with pytest.raises(ValueError, match=match):
        T.tie_ladder(c, lm)


@pytest.mark.parametrize("kw, match", [
    (dict(step=1e-8), "step must be at least 1e-06"),  # 8 rungs of 0.85 each, 48 runs of one rate
    (dict(start=1e-7), "start must be at least 1e-06"),  # a share rounded to 0: no rung, an empty ladder returned
])
def test_tie_ladder_refuses_shares_below_their_six_places(kw, match, lm, no_runs):
    with pytest.raises(ValueError, match=match):
        T.tie_ladder(_tie(), lm, **kw)


def test_brackets_refuse_one_layout_served_twice_at_one_share():
    twice = _ladder([(0.85, [100] * 3), (0.85, [50] * 3)], [(0.85, [100] * 3), (0.9, [50] * 3)])
    with pytest.raises(ValueError, match=r"served '1P\+1D' twice at one share: \[0.85, 0.85\]"):
        T.brackets(twice)  # was (0.0, 0.85): "kept 90% at no rung down to 0.85" beside a rung that held


GOOD = _ladder([(0.85, [100] * 3), (0.9, [50] * 3)], [(0.85, [100] * 3), (0.9, [50] * 3)])


@pytest.mark.parametrize("cell, match", [
    (_tie(ladder=dict(GOOD, served={"A": GOOD["served"][SPLIT], "B": GOOD["served"][CHUNKED]})),
     r"must be of a tie's two layouts .* got \['A', 'B'\]"),  # "A kept 90%...": a tie of layouts the cell never had
    (_tie(ladder=_ladder([(0.85, [100] * 2)], [(0.85, [100] * 2)])), "on its 3 seeds, got .* on 2 seeds"),
    (_tie(ladder={k: v for k, v in GOOD.items() if k != "step"}), r"\['step'\] must be finite numbers > 0"),  # KeyError
    (_tie(ladder=dict(GOOD, geomean_per_worker=0)), r"\['geomean_per_worker'\] .* got \[0\]"),  # "0 requests/s"
    (_tie(ladder=dict(GOOD, step=-1)), r"\['step'\] must be finite numbers > 0, got \[-1\]"),  # "rates -1.00 apart"
    (_tie(ladder={}), "'tie' cell's extra\\['ladder'\\]: a ladder must hold 'served'"),
])
def test_a_records_ladder_not_of_its_tie_is_refused_naming_the_cell(cell, match, tmp_path):
    path = tmp_path / "rec.json"
    map_steady.save_record({"tie": cell}, str(path), workers=2)
    cells = map_steady.load_record(path)[1]
    for read in (map_steady_text.steady_table, map_steady_text.steady_words, map_steady_text.record_summary):
        with pytest.raises(ValueError, match=match):
            read(cells)
    with pytest.raises(ValueError, match=match):
        W.ladder_words(cells["tie"])


def test_a_ladder_on_a_cell_not_a_tie_is_refused():
    s = _steady()
    s.extra["ladder"] = GOOD  # its words told the split cell "the ladder shows the tie the map draws"
    with pytest.raises(ValueError, match="'split' cell's extra\\['ladder'\\]: only a tie is served on a ladder"):
        map_steady_text.steady_words({"split": s})
    with pytest.raises(ValueError, match="only a tie"):
        s.outcome()


COST = dataclasses.asdict(CostModel())


def _slow(cost=COST, **fields):
    c = _steady(link=1.0)
    c.extra = {"cost": cost}
    for k, v in fields.items():
        setattr(c, k, v)
    return c


@pytest.mark.parametrize("cell, match", [
    (_slow(link_gbps=0.0), "link_gbps must be a finite number > 0, got 0.0"),  # ZeroDivisionError
    (_slow(link_gbps=-1.0), "link_gbps .* got -1.0"),  # "takes -0.242 ms to move"
    (_slow(link_gbps=float("nan")), "link_gbps .* got nan"),  # "nan ms"
    (_slow(ttft_slo_s=0.0), "ttft_slo_s must be a finite number > 0, got 0.0"),  # ZeroDivisionError
    (_slow(ttft_slo_s=-0.5), "ttft_slo_s .* got -0.5"),  # "-0.048% of its TTFT SLO"
    (_slow(prompt_tokens=0), "prompt_tokens .* got 0"),
    (_slow({k: v for k, v in COST.items() if k != "kv_bytes_per_token"}), r"missing \['kv_bytes_per_token'\]"),
    (_slow("tiny"), "extra\\['cost'\\] must hold the placed CostModel's fields"),  # a TypeError from CostModel(**)
    (_slow(dict(COST, bogus=1)), "extra\\['cost'\\] is not a CostModel's fields: .*bogus"),
    (_slow(dict(COST, prefill_base_s=0.0, prefill_per_token_s=0.0, prefill_per_token2_s=0.0)), "prefill of its"),
])
def test_moved_words_refuses_a_cell_it_cannot_read(cell, match):
    with pytest.raises(ValueError, match=f"moved_words: the 'split' cell's .*{match}"):
        map_steady_sizes.moved_words(cell)


def _requests(arrivals, tokens=8):
    return [SimpleNamespace(arrival_s=a, max_new_tokens=tokens) for a in arrivals]


PF = {"prefill-first": _steady("prefill-first")}


@pytest.mark.parametrize("requests, slos, cells, error, match", [
    (_requests([0, math.nan, 1]), (0.5, 0.05), PF, ValueError, "arrival_s finite >= 0 .* got nan"),  # "1.2 times"
    (_requests([0, math.inf]), (0.5, 0.05), PF, ValueError, "arrival_s .* got inf"),  # "over inf times"
    (_requests([-5, 0.1]), (0.5, 0.05), PF, ValueError, "arrival_s .* got -5"),
    (_requests([0, 1], tokens=-100), (0.5, 0.05), PF, ValueError, "max_new_tokens >= 1, got 0 and -100"),  # -4.55 s
    (_requests([0, 1], tokens=0), (0.5, 0.05), PF, ValueError, "max_new_tokens >= 1"),  # a lifetime below the TTFT
    (_requests([0, 1]), (True, 0.05), PF, ValueError, r"ttft_slo_s \(s\) must be a finite number > 0"),  # read as 1 s
    (None, (0.5, 0.05), PF, TypeError, "requests must be a list of served Requests"),  # 'NoneType' has no len()
    ([{"arrival_s": 0}, {"arrival_s": 1}], (0.5, 0.05), PF, TypeError, "requests must be"),  # an AttributeError
    (_requests([0, 1]), (0.5, 0.05), {"chunked": PF["prefill-first"]}, ValueError,
     "cells\\['chunked'\\] must be the 'chunked' cell, got a 'prefill-first' cell"),
])
def test_burst_words_refuses_bad_requests_and_cells(requests, slos, cells, error, match):
    with pytest.raises(error, match=f"burst_words: .*{match}" if "SLOs" not in match else match):
        map_steady_sizes.burst_words(requests, *slos, cells)


def test_burst_words_reads_requests_of_a_generator_once():
    words = map_steady_sizes.burst_words((r for r in _requests([0, 0.1])), 0.5, 0.05, PF)
    assert words.startswith("The first seed's 2 requests arrive within 0.1 s")


@pytest.mark.parametrize("argv, match", [
    ("--ladder {tmp}/bare.json", "--ladder: the tie in the record at .* cannot be served again: the cell has no "
                                 "\\['max_requests'\\]"),  # the model was loaded first, then a traceback
    ("--ladder {tmp}/bad.json", "--ladder: the tie .* goodput_now\\['1P\\+1D'\\] must be a finite number > 0"),
    ("--ladder {tmp}/tie.json --out {tmp}/other.json", "--ladder serves the record's tie .*: --out not read"),
    ("--ladder {tmp}/tie.json --seeds 0,1", "--seeds not read with it"),
    ("--ladder {tmp}/tie.json --calibration x.json", "--calibration not read with it"),
    ("--ladder {tmp}/tie.json --resimulate {tmp}/tie.json", "--resimulate not read with it"),  # ladder dropped
    ("--ladder {tmp}/tie.json --more-seeds 3", "has no ladder yet to add seeds to: serve it with --ladder alone"),
    ("--ladder {tmp}/done.json --more-seeds 2,3", "more_seeds \\[2\\] were served already"),
    ("--ladder {tmp}/done.json --more-seeds 3,3", "seeds must be distinct"),
    ("--ladder {tmp}/done.json --more-seeds=-1", "seeds must be distinct whole numbers >= 0"),  # served 5 first
    ("--ladder {tmp}/done.json --more-seeds 3 --more-seeds 4", "--more-seeds given more than once"),  # 3 dropped
    ("--ladder {tmp}/done.json --more-seeds 3", "resume: .*rung at 0.85 has a load_average of None"),
    ("--ladder {tmp}/done.json --more-seeds x", "seeds must be whole numbers"),
    ("--more-seeds 3", "--more-seeds adds seeds to a record's ladder: give it with --ladder"),
])
def test_map_live_ladder_refuses_before_loading_the_model(argv, match, monkeypatch, capsys, tmp_path):
    mod = _map_live(monkeypatch)
    bare, bad = _tie(), _tie()
    bare.extra.pop("max_requests")
    bad.goodput_now = {SPLIT: 0.0, CHUNKED: 25.0}
    loaded = _done()
    loaded["served"][SPLIT][0]["load_average"] = None if "load_average" in match else 1.0  # JSON's null
    for name, c in (("tie", _tie()), ("bare", bare), ("bad", bad), ("done", _tie(ladder=loaded))):
        map_steady.save_record({"tie": c}, str(tmp_path / f"{name}.json"), workers=2)
    with pytest.raises(SystemExit) as exit_:
        mod.main(argv.format(tmp=tmp_path).split())
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(match, err), err


def _done(**change):
    """A ladder of _tie()'s cell served to its end: every seed held the lowest rung and missed the highest."""
    ladder = _ladder([(0.85, [100] * 3), (0.9, [40] * 3)], [(0.85, [100] * 3), (0.9, [95, 50, 50]), (0.95, [40] * 3)])
    ladder["cpu_s"] = 1.0
    return dict(ladder, **change)


@pytest.mark.parametrize("resume, match", [
    (dict(_done(), step=0.07), "rung at 0.9 is not on the ladder's grid"),  # served 0.99, 1.06 after 0.95
    (dict(_ladder([(0.85, [100] * 3)], [(0.87, [100] * 3)]), cpu_s=1.0), "rung at 0.87 is not on the ladder's grid"),
    (_done(geomean_per_worker=21.0), "a ladder of another cell"),
    (_done(cpu_s=-1.0), "cpu_s must be a finite number >= 0"),
    ({k: v for k, v in _done().items() if k != "cpu_s"}, "cpu_s must be a finite number >= 0"),
])
def test_a_ladder_that_cannot_be_gone_on_from_is_refused(resume, match, lm, no_runs):
    with pytest.raises(ValueError, match=match):
        T.tie_ladder(_tie(), lm, resume=resume)
    with pytest.raises(ValueError, match=match):
        T.left_to_serve(_tie(), resume)


def test_a_rungs_rate_must_be_its_share_of_the_mean():
    ladder = _done()
    ladder["served"][SPLIT][1]["rate_per_worker"] = 999.0
    with pytest.raises(ValueError, match="served at 999.0/s per worker, not its share of 20"):
        T.check_resume(_tie(), ladder)


def test_left_to_serve_names_the_layouts_a_resume_would_serve():
    assert T.left_to_serve(_tie(), _done()) == []
    open_above = _done()
    open_above["served"][SPLIT][1]["measured"] = [95.0, 40.0, 40.0]  # a seed held the highest rung
    assert T.left_to_serve(_tie(), open_above) == [SPLIT] and T.left_to_serve(_tie(), open_above, rungs=2) == []


def test_more_seeds_and_a_resumed_ladder_are_checked_before_any_run(lm, no_runs):
    """Seeds < 0 refused before the first run (the workload refused seed -1 after seed 5 was served); a rung kept
    without its rate is served at its share of the mean (a KeyError once the model was loaded); a load average
    that is not a finite number >= 0 refused (max() raised, or kept NaN, after the rung's runs)."""
    import numpy as np
    for more in ([5, -1], [-1], np.array([3, -4])):
        with pytest.raises(ValueError, match="more_seeds must be distinct whole numbers >= 0"):
            T.tie_ladder(_tie(), lm, resume=_done(), more_seeds=more)
    assert T.check_more_seeds([0, 1, 2], np.array([3, 4]), _done()) == [3, 4]  # numpy's integers, as ints
    norate = _done()
    for rungs in norate["served"].values():
        for r in rungs:
            r.pop("rate_per_worker")
    served, _, _ = T.check_resume(_tie(), norate)
    assert all(r["rate_per_worker"] == pytest.approx(r["share"] * 20.0) for v in served.values() for r in v)
    assert all("rate_per_worker" not in r for v in norate["served"].values() for r in v)  # the record left as it was
    for bad in (None, "high", [1.0], float("nan"), -5.0):
        ladder = _done()
        ladder["served"][CHUNKED][1]["load_average"] = bad
        with pytest.raises(ValueError, match="rung at 0.9 has a load_average of"):
            T.tie_ladder(_tie(), lm, resume=ladder, more_seeds=[3])
    with pytest.raises(ValueError, match="its seeds must be distinct whole numbers >= 0"):
        T.cell_ladder(_tie(seeds=(0, 1), ladder=dict(_done(), seeds=[0, 1, -7])))  # the cell's first, then -7


def test_the_ladders_small_readers_refuse_what_they_cannot_read():
    import numpy as np
    with pytest.raises(ValueError, match="a ladder must be a dict"):
        T.ladder_seeds(_tie(), [1])
    for said, backed in (("foo", {}), ("matches: a tie", {})):
        with pytest.raises(ValueError, match="verdict: said must be one of"):
            T.verdict(said, backed)
    with pytest.raises(ValueError, match="seeds must be the ladder's seeds, a list"):
        T.check_more_seeds(None, [3], {})
    shares = T.support(_done(), resamples=np.int64(5))
    assert all(type(v) is float for v in shares.values())


def test_map_live_more_seeds_serves_a_finished_ladder_on_its_new_seeds(monkeypatch, capsys, tmp_path):
    mod, path = _map_live(monkeypatch), tmp_path / "done.json"
    map_steady.save_record({"tie": _tie(ladder=_done())}, str(path), workers=2)
    asked = {}
    monkeypatch.setattr(mod.sl, "load_model", lambda name: "lm")
    monkeypatch.setattr(mod.sl.phases.device, "set_cpu_clock", lambda clock: None)

    def fake(c, lm, resume=None, more_seeds=None):
        asked.update(resume=resume, more_seeds=more_seeds)
        return dict(resume, seeds=[0, 1, 2] + more_seeds, served={n: [dict(r, measured=r["measured"] + [100.0] * 2)
                                                                      for r in v] for n, v in resume["served"].items()})
    monkeypatch.setattr(mod.map_steady_tie, "tie_ladder", fake)
    assert mod.main(["--ladder", str(path), "--more-seeds", "3,4"]) == 0
    assert asked["more_seeds"] == [3, 4] and asked["resume"]["served"] == _done()["served"]
    _, cells = map_steady.load_record(str(path))
    assert cells["tie"].extra["ladder"]["seeds"] == [0, 1, 2, 3, 4]


def test_map_live_ladder_serves_nothing_and_writes_nothing_for_a_finished_ladder(monkeypatch, capsys, tmp_path):
    mod, path = _map_live(monkeypatch), tmp_path / "done.json"
    map_steady.save_record({"tie": _tie(ladder=_done())}, str(path), workers=2)
    before = path.read_text()
    assert mod.main(["--ladder", str(path)]) == 0
    assert "nothing to serve, the record is left as it is" in capsys.readouterr().out
    assert path.read_text() == before
    map_steady.save_record({"tie": _tie(ladder=dict(_done(), step=0.07))}, str(path), workers=2)
    with pytest.raises(SystemExit):  # refused before the model (the last _map_live fails a load)
        mod.main(["--ladder", str(path)])
    assert "not on the ladder's grid" in capsys.readouterr().err


def test_the_words_of_a_record_refuse_what_they_cannot_say():
    from splitlab.teach.figures.map_steady_in_run import kept
    tie = _tie()
    with pytest.raises(ValueError, match=r"no \['steps'\] in its extra"):  # was the letters of 'steps'
        kept(tie, "steps")
    pf = _steady("prefill-first", measured=((92, 3),) * 3)
    for field, v in (("tpot_steps", -1.0), ("prefill_steps", math.inf), ("tpot_steps", math.nan)):
        with pytest.raises(ValueError, match=f"cell's {field} must be a finite number > 0"):
            map_steady_text.mean_tpot_words(dataclasses.replace(pf, **{field: v}))
    with pytest.raises(TypeError, match="must be a SteadyCell"):
        map_steady_text.mean_tpot_words(None)
    small, large = _steady("chunked", CHUNKED, SPLIT, measured=((100, 40),) * 3, link=0.01), None
    large = dataclasses.replace(small, workers=8)
    own = {"None": {"split": 16, "chunked": 0}}
    for counts in ((own, {"None": {"chunked": 0}}), (own,), "x"):  # 0 of 0 cells; one record; words
        with pytest.raises(ValueError, match="counts must be the two records' counts"):
            map_steady_sizes.lasting_words({"chunked": small}, {"chunked": large}, counts)
    with pytest.raises(ValueError, match="counts must be"):  # refused even where no loss is on a slow link
        map_steady_sizes.lasting_words({"split": _steady()}, {"split": dataclasses.replace(_steady(), workers=8)}, "x")
    for bad in (dict(link_gbps=-1.0), dict(rate_per_worker=math.nan)):
        cost = dict(kv_bytes_per_token=1000, prefill_base_s=0.001, prefill_per_token_s=1e-4)
        c = dataclasses.replace(small, extra=dict(small.extra, cost=cost), **bad)
        with pytest.raises(ValueError, match="must be a finite number > 0"):
            map_steady_sizes.lasting_words({"chunked": c}, {"chunked": large})
    with pytest.raises(ValueError, match="cells is empty"):
        map_steady_sizes.margin_words(None, {})
    with pytest.raises(ValueError, match="margin must be a share"):
        map_steady_sizes.margin_words(None, {"split": dataclasses.replace(_steady(), margin=math.nan)})
