"""Bad input a fresh reader found on the map (2026-12-05): an axis that rounds two points to one value blamed the
reader for 'a value twice', a million columns took 30 s before the 400-cell limit refused them, the axis helpers
read 0, -5, NaN and '64' tokens, a full disk behind `> file` gave a traceback, and a cell no layout serves named a
winning layout in its JSON."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from splitlab.costmodel import CostModel
from splitlab.planning.map_axes import MAX_POINTS, chunk_steps, geometric_axis, prefill_steps, prompt_axis
from splitlab.planning.map_result import Cell

COST = CostModel(prefill_base_s=1e-3, prefill_per_token_s=1e-5, decode_base_s=1e-3, decode_per_seq_s=1e-4,
                 decode_per_token_s=1e-7)


def test_an_axis_too_narrow_for_its_points_says_so():
    with pytest.raises(ValueError, match=r"4 points from 1 to 1.01 round to only 2 distinct values at 3 "
                                         r"significant digits: widen the range or ask for at most 2 points"):
        geometric_axis(1, 1.01, 4)
    assert geometric_axis(1, 1.01, 2) == [1.0, 1.01]
    assert geometric_axis(16, 17, 6, integer=True) == [16, 17]  # prompt lengths: whole tokens, deduplicated


def test_an_axis_past_the_cell_limit_is_refused_before_it_is_built():
    t0 = time.perf_counter()
    for build in (lambda: geometric_axis(1.5, 8, 10 ** 6), lambda: prompt_axis(COST, 16, 1024, 10 ** 6)):
        with pytest.raises(ValueError, match=f"points must be at most {MAX_POINTS}"):
            build()
    assert time.perf_counter() - t0 < 5  # was 30 s, then 'a map of at most 400 cells'
    assert len(geometric_axis(1.5, 800, MAX_POINTS)) == MAX_POINTS


@pytest.mark.parametrize("bad", [0, -5, float("nan"), "64", 64.0, True, None])
def test_the_axis_helpers_refuse_a_prompt_or_chunk_that_is_not_whole_tokens(bad):
    with pytest.raises(ValueError, match="prompt_tokens must be an integer number of tokens >= 1"):
        prefill_steps(COST, bad)
    with pytest.raises(ValueError, match="chunk_tokens must be an integer number of tokens >= 1"):
        chunk_steps(COST, bad, 64)
    with pytest.raises(ValueError, match="prompt_tokens must be an integer number of tokens >= 1"):
        chunk_steps(COST, 256, bad)


def test_the_axis_helpers_refuse_what_is_not_a_cost_model():
    with pytest.raises(TypeError, match="cost must be a CostModel, got NoneType"):
        prefill_steps(None, 64)
    assert prefill_steps(COST, 64) == pytest.approx(COST.prefill_s(64) / COST.decode_s(1, 64))


def test_a_full_disk_is_one_line_not_a_traceback():
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "splitlab", "kv-size", "tiny", "--json"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.strip() == ("splitlab kv-size: error: cannot write the output: [Errno 28] No space left on "
                                   "device")


def test_a_cell_no_layout_serves_names_no_winning_layout():
    names = {"split": "1P+3D", "prefill-first": "4 colocated (prefill-first)",
             "chunked": "4 colocated (chunked, 256-token chunks)"}
    none = Cell(512, 20.0, 1.0, 0.1, 0.01, {k: 0.0 for k in names}, {k: "ttft" for k in names}, names).decide(0.1)
    data = none.to_json()
    assert data["winner"] == "none" and data["winner_layout"] is None and data["goodput_rps_per_worker"] == 0
    won = Cell(512, 20.0, 1.0, 0.1, 0.01, {"split": 3.0, "prefill-first": 1.0, "chunked": 2.0},
               {k: "ttft" for k in names}, names).decide(0.1)
    assert won.to_json()["winner_layout"] == "1P+3D"


def test_a_tpot_slo_too_long_for_a_run_is_refused_before_the_first_search():
    from splitlab.planning.split_map import split_map
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"make a request's lifetime \(.* s\) too long for a run of 20 lifetimes"):
        split_map(COST, 4, [64, 128], [2.0, 1e308], progress=False)
    assert time.perf_counter() - t0 < 5  # was refused 38 s into the map, by the first search of that row


@pytest.mark.parametrize("argv, message", [
    (["--prompt-tokens", "100", "100"], "--columns 6 needs LOW below HIGH, got 100 to 100 (one value: --columns 1)"),
    (["--tpot-steps", "2", "2"], "--rows 4 needs LOW below HIGH, got 2 to 2 (one value: --rows 1)"),
    (["--tpot-steps", "1", "1.01"], "--tpot-steps 1 1.01 with --rows 4: 4 points from 1 to 1.01 round to only 2 "
                                    "distinct values at 3 significant digits"),
])
def test_the_map_command_names_its_flags_not_the_axis_parameters(argv, message, capsys):
    """A fresh reader got 'one point: points=1' (exit 1) for a one-value range under the default column count."""
    from splitlab.cli import main
    assert main(["map", *argv]) == 2
    assert message in capsys.readouterr().err
