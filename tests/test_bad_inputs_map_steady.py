"""Bad input to chapter 7's steady-state check of the map (map_steady, map_steady_text, benchmarks/map_live.py) and to
chapter 6's colocated contender (split_runs, split_grid, split_figure): each refused early, by name, with the error
type and words a reader can act on (before: AttributeErrors, a pandas length error, a TypeError from the dataclass,
a truncated record, a misspelt workload or "chunked" served prefill-first in silence, CLI flags refused only after a
minute of calibration or not at all)."""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import splitlab as sl
from splitlab.costmodel import CostModel
from splitlab.teach.figures import map_steady, map_steady_text
from splitlab.teach.figures import split as split_figures
from splitlab.teach.figures.pools_live_args import cost_of
from splitlab.teach.widgets.ch06 import split_figure
from test_map_steady import WIN, _steady
from test_pools_live import _cell, _map

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_probe(monkeypatch):
    """steady_cell's probe (the first work it does) made to fail loudly: a check that passes reaches it."""
    def probe(*a, **k):
        raise AssertionError("the probe ran: the bad input was not refused before the work")
    monkeypatch.setattr(map_steady, "step_probe", probe)


def test_steady_cell_refuses_before_the_probe(no_probe, monkeypatch):
    cost = CostModel()
    cell = _cell(64, 2.5, WIN, cost)
    with pytest.raises(TypeError, match="steady_cell's lm takes a splitlab LoadedModel .* got NoneType"):
        map_steady.steady_cell(_map([cell]), cell, None, cost, seeds=(0, 1), max_requests=12)
    with pytest.raises(ValueError, match="region must be the cell's winner 'split' .* got 'nope'"):
        map_steady.steady_cell(_map([cell]), cell, None, cost, region="nope")
    four = _map([cell])
    four.workers = 4  # a 2-worker cell's layouts on a map of 4: was served on the probe's word
    with pytest.raises(ValueError, match="'1P\\+1D' is a layout of 2 workers, not of the map's 4"):
        map_steady.steady_cell(four, cell, None, cost)
    import splitlab.phases.loaded as loaded
    monkeypatch.setattr(loaded, "require_loaded", lambda lm, where: lm)  # a model that passes: cost is next
    with pytest.raises(TypeError, match=r"cost needs a splitlab.costmodel.CostModel, got str \(a calibration's"):
        map_steady.steady_cell(_map([cell]), cell, object(), "tiny")
    with pytest.raises(TypeError, match="got Calibration.*: a calibration\\? give its .cost"):
        cost_of(type("Calibration", (), {"cost": cost})())


def test_load_record_names_the_file_and_the_field(tmp_path):
    def write(name, text):
        (tmp_path / name).write_text(text)
        return tmp_path / name
    with pytest.raises(FileNotFoundError, match="no record at .*missing.json"):
        map_steady.load_record(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="bad.json is not a record .*: Expecting value"):
        map_steady.load_record(write("bad.json", "not json {"))
    with pytest.raises(ValueError, match="list.json is not a record .*no 'cells'.*got list"):
        map_steady.load_record(write("list.json", "[1, 2]"))
    cell = _steady().to_json()
    cell.pop("seeds")
    with pytest.raises(ValueError, match=r"miss.json: cell 'split' is not a cell .*missing field\(s\) \['seeds'\]"):
        map_steady.load_record(write("miss.json", json.dumps({"cells": {"split": cell}})))
    with pytest.raises(ValueError, match=r"extra.json: cell 'split' .*unknown field\(s\) \['bogus'\]"):
        map_steady.load_record(write("extra.json", json.dumps({"cells": {"split": dict(_steady().to_json(),
                                                                                           bogus=1)}})))
    with pytest.raises(ValueError, match="int.json: cell 'split' must be an object of a cell's fields, got int"):
        map_steady.load_record(write("int.json", json.dumps({"cells": {"split": 5}})))
    nan = _steady().to_json()
    nan["measured"][nan["winner"]][0] = float("nan")  # was read, then "attainment is NaN" from inside the verdict
    with pytest.raises(ValueError, match="nan.json is not a record .*holds NaN"):
        map_steady.load_record(write("nan.json", json.dumps({"cells": {"split": nan}})))


def test_save_record_refuses_what_it_cannot_write_and_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "rec.json"
    map_steady.save_record({"split": _steady()}, str(path), date="2026-12-05")
    before = path.read_text()
    with pytest.raises(TypeError, match="save_record: cells must be a dict .* got list"):
        map_steady.save_record([_steady()], str(path))
    with pytest.raises(TypeError, match=r"save_record: cells must be a dict .* got a dict of \['int'\]"):
        map_steady.save_record({"split": 1}, str(path))
    with pytest.raises(ValueError, match="cannot be written as JSON .*nothing was written"):
        map_steady.save_record({"split": _steady()}, str(path), load=float("nan"))  # was: an 8-byte record left
    assert path.read_text() == before and map_steady.load_record(path)[0] == {"date": "2026-12-05"}
    with pytest.raises(FileNotFoundError, match="no_such_dir"):
        map_steady.save_record({"split": _steady()}, str(tmp_path / "no_such_dir" / "rec.json"))


def _uneven():
    c = _steady()
    c.measured[c.winner] = c.measured[c.winner][:2]
    return c


@pytest.mark.parametrize("func", ["steady_table", "steady_words", "record_summary"])
def test_the_texts_refuse_cells_they_cannot_read(func):
    f = getattr(map_steady_text, func)
    with pytest.raises(ValueError, match=r"the 'split' cell: one value per seed expected \(3 seeds\), got "
                                         r"\{\"measured\['1P\+1D'\]\": 2\}"):
        f({"split": _uneven()})  # was pandas' "Length of values (2) does not match length of index (3)"
    twice = _steady()
    twice.seeds = [0, 0, 1]
    with pytest.raises(ValueError, match=r"the 'split' cell: seeds must be at least 2 distinct .* got \[0, 0, 1\]"):
        f({"split": twice})  # was read as three seeds
    with pytest.raises(TypeError, match=f"{func}: cells must be a dict .* got list"):
        f([_steady()])


def test_today_words_and_run_lines_refuse_what_is_not_a_record():
    cost = CostModel()
    with pytest.raises(ValueError, match="maps must be a dict .* with at least one map, got"):
        map_steady_text.today_words({"tie": _steady("tie")}, {})  # was a TypeError formatting None
    with pytest.raises(ValueError, match="pick one cluster size, e.g. grids\\[4\\]"):
        map_steady_text.today_words({"tie": _steady("tie")}, {4: {None: _map([_cell(120, 1.5, WIN, cost)])}})
    with pytest.raises(ValueError, match="today_words: cells is empty"):
        map_steady_text.today_words({}, {None: _map([_cell(120, 1.5, WIN, cost)])})  # was "today, ."
    slow = _map([_cell(120, 1.5, WIN, cost)])
    slow.link_bytes_per_s = 1e7
    own = map_steady_text.today_words({"tie": _steady("tie")}, {0.01: slow})
    assert "today's maps have no map on the cost model's own link for the tie cell" in own
    with pytest.raises(TypeError, match="meta must be a dict .* got NoneType"):
        map_steady_text.run_lines(None)
    with pytest.raises(ValueError, match="a run of meta must name its date or command"):
        map_steady_text.run_lines({})  # was ['? UTC: ?']
    with pytest.raises(ValueError, match=r"meta\['runs'\] must be a list of dicts"):
        map_steady_text.run_lines({"runs": "abc"})
    with pytest.raises(ValueError, match="its regions as a list"):
        map_steady_text.run_lines({"date": "2026-12-05", "regions": "split"})  # was "(s, p, l, i, t)"


@pytest.mark.parametrize("colocated, error, words", [
    ({"research": {"policy": "nope"}}, ValueError, r"colocated\['research'\]: policy must be one of"),
    ({"resarch": {"policy": "chunked"}}, ValueError, r"colocated names \['resarch'\], not among the workloads"),
    ("chunked", TypeError, "colocated must be a mapping {workload: "),
    ({"research": "chunked"}, TypeError, "colocated must be a mapping {workload: "),
    ({"research": {"polcy": "chunked"}}, TypeError, r"colocated\['research'\]: .*unexpected keyword .*'polcy'"),
])
def test_the_colocated_contender_is_checked_before_any_run(colocated, error, words, monkeypatch):
    monkeypatch.setattr(split_figures, "split_runs", lambda *a, **k: pytest.fail("a run before the check"))
    with pytest.raises(error, match=words):
        split_figures.split_grid(CostModel(), {"research": (2.0, 0.05)}, {"research": [0.5]}, [(1, 1)],
                                 colocated=colocated)
    with pytest.raises(error, match=words):
        split_figure(CostModel(), {"research": (2.0, 0.05)}, {"research": 0.5}, ratios=[(1, 1)], factors=[1.0],
                     colocated=colocated)


def test_split_runs_refuses_a_colocated_that_is_neither_a_bool_nor_options():
    ex = sl.serving.CostModelExecutor(CostModel())
    with pytest.raises(TypeError, match="colocated must be True, False or a mapping .* got str 'chunked'"):
        split_figures.split_runs(ex, "research", 1.0, [(1, 1)], 5, colocated="chunked")  # was prefill-first


def _map_live(monkeypatch):
    """benchmarks/map_live.py, imported, with the model's load and calibration made to fail loudly."""
    spec = importlib.util.spec_from_file_location("map_live", ROOT / "benchmarks" / "map_live.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    work = lambda *a, **k: pytest.fail("the CLI started work before refusing its arguments")
    monkeypatch.setattr(mod.sl, "load_model", work)
    monkeypatch.setattr(mod.sl.profiling, "calibrate_or_reuse", work)
    return mod


@pytest.mark.parametrize("argv, words", [
    ("--seeds 0", "argument --seeds: seeds must be at least 2 distinct seeds"),
    ("--seeds a,b", "argument --seeds: seeds must be whole numbers, comma-separated"),
    ("--seeds 1,1", "argument --seeds: seeds must be at least 2 distinct seeds .* got \\[1, 1\\]"),
    ("--seeds=-1,2", "argument --seeds: seeds must be whole numbers >= 0"),
    ("--regions nope", "argument --regions: regions must be distinct names of"),
    ("--regions ,", "argument --regions: regions must be distinct names of"),
    ("--workers 1", "argument --workers: workers must be in 2 .. 16, got 1"),
    ("--workers 17", "argument --workers: workers must be in 2 .. 16, got 17"),
    ("--max-requests 0", "argument --max-requests: max requests must be >= 2, got 0"),
    ("--merge", "--merge needs --out"),
    ("--calibration x.json", "--calibration is read only with --resimulate"),
    ("--resimulate x.json", "--resimulate needs --calibration"),
    ("--resimulate {tmp}/missing.json --calibration x.json", "--resimulate: no record at"),
    ("--resimulate {tmp}/rec.json --calibration {tmp}/rec.json", "--calibration: .*rec.json"),
    ("--out {tmp}/rec.json --merge --workers 4", "--merge: the record at .* holds cells of 8 workers"),
    ("--out {tmp}/bad.json --merge", "--merge: .*bad.json is not a record"),
    ("--ladder {tmp}/missing.json", "--ladder: no record at"),
    ("--ladder {tmp}/rec.json", "--ladder: the record at .* holds no tie"),
])
def test_the_cli_refuses_bad_arguments_before_any_work(argv, words, monkeypatch, capsys, tmp_path):
    mod = _map_live(monkeypatch)
    map_steady.save_record({"split": _steady()}, str(tmp_path / "rec.json"), workers=8)
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(SystemExit) as exit_:
        mod.main(argv.format(tmp=tmp_path).split())
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2
    assert err[-1].startswith("map_live.py: error: ") or err[-1].startswith(f"{Path(sys.argv[0]).name}: error: ")
    assert re.search(words, err[-1]), err[-1]


def test_the_cli_exits_2_in_seconds_from_the_command_line():
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "map_live.py"), "--workers", "17"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2 and "argument --workers: workers must be in 2 .. 16, got 17" in out.stderr
    assert time.monotonic() - t0 < 30  # a calibration takes a minute


def test_other_rule_words_refuses_what_is_not_apply_rules_rows():
    import pandas as pd
    from splitlab.teach.figures.split_map_words import other_rule_words
    rows = pd.DataFrame({"model": ["Llama-3-8B"], "dtype": ["bf16"], "prompt tokens": [2048],
                         "own map says": ["chunked"]})
    other = rows.drop(columns="own map says").assign(**{"rule says": ["colocated"]})
    row = pd.Series({"rule": "at a TPOT SLO of 2.5 decode steps the split loses"})
    with pytest.raises(TypeError, match="rows must be a DataFrame of apply_rule's rows, got dict"):
        other_rule_words({"own map says": ["chunked"]}, other, row, "m")  # was "unhashable type: 'list'"
    with pytest.raises(ValueError, match=r"other has no column\(s\) \['rule says'\]"):
        other_rule_words(rows, other.drop(columns="rule says"), row, "m")  # was a KeyError from pandas
    with pytest.raises(TypeError, match="row must be one split_threshold row .* got DataFrame and str"):
        other_rule_words(rows, other, row.to_frame().T, "m")  # was the whole column's repr in the sentence
    with pytest.raises(TypeError, match="row must be one .* got NoneType and str"):
        other_rule_words(rows, other, None, "m")  # was an AttributeError
    with pytest.raises(TypeError, match="name a str, got Series and NoneType"):
        other_rule_words(rows, other, row, None)  # was "Read off None instead"
    with pytest.raises(ValueError, match="rows has no case"):
        other_rule_words(rows.iloc[:0], other.iloc[:0], row, "m")  # was "There it says: ."


def test_steady_cell_refuses_a_bad_progress_before_the_probe(no_probe):
    cell = _cell(64, 2.5, WIN)
    with pytest.raises(TypeError, match="progress must be True, False or None .* got 'yes'"):
        map_steady.steady_cell(_map([cell]), cell, None, None, progress="yes")  # was after minutes of searches


def test_load_record_refuses_a_cell_under_another_key_or_with_runs_not_one_per_seed(tmp_path):
    (tmp_path / "key.json").write_text(json.dumps({"cells": {"nope": _steady().to_json()}}))
    with pytest.raises(ValueError, match="key.json: cell 'nope' must be kept under its region, one of .* got 'split'"):
        map_steady.load_record(tmp_path / "key.json")
    (tmp_path / "short.json").write_text(json.dumps({"cells": {"split": _uneven().to_json()}}))
    with pytest.raises(ValueError, match=r"short.json: the 'split' cell: one value per seed expected \(3 seeds\)"):
        map_steady.load_record(tmp_path / "short.json")  # was read, then refused by the first table


@pytest.mark.parametrize("args, words", [
    ((float("nan"), 4, 1.0, 2000), "rate_per_worker must be a finite number > 0, got nan"),  # "cannot convert NaN"
    ((-1.0, 4, 1.0, 2000), "rate_per_worker must be a finite number > 0, got -1.0"),  # was 8 requests in silence
    ((1.0, 0, 1.0, 2000), "workers must be a whole number >= 1, got 0"),
    ((1.0, True, 1.0, 2000), "workers must be a whole number >= 1, got True"),
    ((1.0, 4, float("inf"), 2000), "lifetime_s must be a finite number > 0, got inf"),  # was an OverflowError
    ((1.0, 4, 1.0, 0), "cap must be a whole number >= 2, got 0"),  # was a pilot of 0 requests
    ((1.0, 4, 1.0, 2.5), "cap must be a whole number >= 2, got 2.5")])
def test_pilot_requests_refuses_what_is_not_a_rate_a_size_a_lifetime_or_a_cap(args, words):
    from splitlab.teach.figures.map_steady_place import pilot_requests
    with pytest.raises(ValueError, match=re.escape(words)):
        pilot_requests(*args)


def test_pooled_factors_refuses_logs_it_cannot_read_and_factors_that_are_none():
    from splitlab.teach.figures.map_steady_place import pooled_factors
    cost = CostModel()
    step = dict(kind="decode", step_s=cost.decode_s(2, 100), batch=2, context_tokens=100)
    with pytest.raises(ValueError, match="logs must be a list of step logs"):
        pooled_factors(cost, [step])  # one log, not a list of them: was "string indices must be integers"
    with pytest.raises(ValueError, match="got a step of kind 'warmup'"):
        pooled_factors(cost, [[dict(step, kind="warmup")]])  # was KeyError 'chunk_tokens'
    with pytest.raises(ValueError, match="cost predicts 0.0 s for a decode step"):
        pooled_factors(CostModel(decode_base_s=0.0, decode_per_seq_s=0.0, decode_per_token_s=0.0), [[step]])
    for bad in (0.0, float("nan")):  # were a factor of 0 or NaN, refused by rescaled after the pilot's minutes
        with pytest.raises(ValueError, match=f"the decode steps ran {bad!r} x the model's time"):
            pooled_factors(cost, [[dict(step, step_s=bad)]])


def test_place_pilot_and_settings_of_refuse_before_any_search():
    from splitlab.teach.figures import map_steady_place as place
    m = _map([_cell(64, 2.5, WIN)])
    settings = place.settings_of(m)
    with pytest.raises(ValueError, match="configs must be a non-empty dict"):
        place.place(m, m.cells[0], {}, None, settings, 0.85)  # was a rate of 1 request/s in silence
    with pytest.raises(ValueError, match="settings must be a dict of"):
        place.place(m, m.cells[0], {"x": None}, None, {}, 0.85)
    with pytest.raises(ValueError, match="tie_rate must be a finite number > 0, got nan"):
        place.place(m, m.cells[0], {"x": None}, None, settings, float("nan"))
    with pytest.raises(ValueError, match="runs must be a dict of the check's run settings with max_requests"):
        place.pilot({}, {"x": None}, None, None, 2, {}, 0)
    with pytest.raises(TypeError, match="m must be a split map"):
        place.settings_of({None: m})  # was an AttributeError on search
    m.search = None
    assert place.settings_of(m) == settings
    m.search = [("max_requests", 400)]
    with pytest.raises(TypeError, match="m.search must be a dict of the map's search settings, got list"):
        place.settings_of(m)


def test_capped_words_refuses_bad_lifetimes_whose_and_maps_and_reads_ties_and_no_cap():
    import dataclasses
    from splitlab.teach.figures.split_map import capped_words
    cell = _cell(400, 2.5, WIN)
    m = _map([cell, dataclasses.replace(cell, prompt_tokens=401)])  # as many lifetimes: was Cell < Cell
    assert capped_words(m, 1000).startswith("In 2 of the map's 2 cells")
    for bad in (float("nan"), 0, -5, True, "20"):  # NaN was "spanning nan request lifetimes"
        with pytest.raises(ValueError, match="lifetimes must be a finite number > 0"):
            capped_words(m, bad)
    with pytest.raises(TypeError, match="whose must be a string"):
        capped_words(m, whose=None)  # was "of None 2"
    with pytest.raises(TypeError, match="m must be a split map"):
        capped_words({None: m})
    with pytest.raises(ValueError, match="m has no cells"):
        capped_words(dataclasses.replace(m, cells=[]))
    m.search = {"max_requests": None}
    assert capped_words(m) == ""  # no cap: was a TypeError on None / float


def test_wins_words_counts_a_kinds_cells_and_those_read_off_short_runs():
    """Chapter 7's takeaway counted the split's wins on 8 workers unqualified, though 9 of those 16 cells' runs spanned
    fewer than 20 request lifetimes (a reviewer's read, 2026-12-06)."""
    import dataclasses
    from splitlab.teach.figures.split_map import run_lifetimes, wins_words
    cell = _cell(400, 2.5, WIN)
    m = _map([cell, dataclasses.replace(cell, prompt_tokens=401)])
    assert all(run_lifetimes(m, c) >= 20 for c in m.cells) and wins_words(m, cell.winner) == "2 of the 2 cells"
    m.search = dict(m.search or {}, max_requests=3)  # a cap that cuts both cells' runs short
    assert all(run_lifetimes(m, c) < 20 for c in m.cells)
    assert wins_words(m, cell.winner) == "2 of the 2 cells (2 of them off runs under 20 request lifetimes)"
    assert wins_words(m, "no such kind") == "0 of the 2 cells"
    m.search = {"max_requests": None}
    assert wins_words(m, cell.winner) == "2 of the 2 cells"  # no cap: every run spans its lifetimes
    with pytest.raises(ValueError, match="m has no cells"):
        wins_words(dataclasses.replace(m, cells=[]))


def test_sizes_words_name_the_argument_and_a_cell_under_another_regions_key():
    import dataclasses
    from splitlab.teach.figures import map_steady_sizes
    with pytest.raises(TypeError, match="sizes_words: small must be a dict"):
        map_steady_sizes.sizes_words([_steady()], {})
    with pytest.raises(TypeError, match="lasting_words: large must be a dict .* got a dict of \\['str'\\]"):
        map_steady_sizes.lasting_words({}, {"split": "x"})
    with pytest.raises(ValueError, match="small\\['chunked'\\] must be the 'chunked' cell, got a 'split' cell"):
        map_steady_sizes.sizes_words({"chunked": _steady()}, {"chunked": dataclasses.replace(_steady(), workers=8)})


def test_probe_words_names_the_cell_whose_ratios_it_cannot_read():
    import dataclasses
    steps = lambda d: dataclasses.replace(_steady(), extra={"steps": {_steady().winner: {"decode": d}}})
    with pytest.raises(ValueError, match="the 'split' cell's decode steps must be a finite number > 0, got nan"):
        map_steady_text.probe_words({"split": steps(float("nan"))})  # was "ran nanx"
    no_decode = steps(1.1)
    no_decode.extra["pilot"] = {"prefill": 1.0}
    with pytest.raises(ValueError, match="the 'split' cell's pilot's decode must be a finite number > 0, got None"):
        map_steady_text.probe_words({"split": no_decode})  # was KeyError 'decode'


def test_steady_cell_names_the_maps_own_cap_when_it_is_the_bad_one(no_probe):
    cell = _cell(64, 2.5, WIN)
    m = _map([cell])
    m.search = {"max_requests": 1}
    with pytest.raises(ValueError, match=r"max_requests must be a whole number >= 2, got 1 \(the map's search setting"):
        map_steady.steady_cell(m, cell, None, None)  # was "got None": the argument left out, not the map's 1
