"""What chapter 7's check of the map accepts (pools_live_args, pools_live_probe, pools_live; issue 22 item 3)
called as a reader in a notebook might get it wrong: each case was a silent default, a run on other inputs,
garbage or a traceback from deep inside, and is now a clear early error naming the argument (or the right
answer). Maps are crafted; one probe runs on the tiny model."""
from __future__ import annotations

import numpy as np
import pytest

from splitlab.costmodel import CostModel
from splitlab.planning.map_result import SplitMap
from splitlab.teach.figures import pools_live
from splitlab.teach.figures.pools_live_args import check_map, cost_of, ordered_maps, seeds_of
from splitlab.teach.figures.pools_live_probe import cell_now, rescaled, step_probe
from splitlab.teach.figures.pools_live_words import gap_interval
from test_pools_live import _cell, _map

WIN = {"split": 10, "prefill-first": 5, "chunked": 4}  # the split wins by 50%


def test_seeds_given_as_a_generator_or_numpy_array_are_the_same_seeds():
    """A generator was consumed by the seeds' check, then refused by the first run as 'got []'."""
    assert seeds_of((0, 1)) == seeds_of(s for s in (0, 1)) == seeds_of(np.array([0, 1])) == (0, 1)
    for bad in ((0.5, 1.5), ("a", "b"), (-1, 2)):
        with pytest.raises(ValueError, match="seeds must be whole numbers >= 0"):
            seeds_of(bad)
    with pytest.raises(ValueError, match=r"seeds must be at least 2 distinct seeds .*got \[0\]"):
        seeds_of(s for s in (0,))


def _maps():
    own = _map([_cell(16, 2.5, WIN)])
    slow = SplitMap([_cell(16, 2.5, WIN)], 2, [16], [], [2.5], 64, 5.0, 1e5, 0.1, "built-in", [256])
    mid = SplitMap([_cell(16, 2.5, WIN)], 2, [16], [], [2.5], 64, 5.0, 1e8, 0.1, "built-in", [256])
    return own, slow, mid


def test_maps_are_ordered_by_their_links_not_by_the_dict():
    """split_map_grid keeps the order of its links: {0.1 MB/s: slow, None: own} had the slow map served as the
    own link's (its split cell, on a 0.1 MB/s link) and the own link's map as the slider's slowest."""
    own, slow, mid = _maps()
    for maps in ({None: own, 1e-4: slow}, {1e-4: slow, None: own}, {0.1: mid, 1e-4: slow, None: own}):
        got = ordered_maps(maps)
        assert got[0] is own and got[1] is slow and len(got) == 2
    assert ordered_maps({1e-4: slow, 0.1: mid}) == [mid, slow]  # no own-link map: the fastest first
    assert ordered_maps({None: own}) == [own]


def test_maps_of_two_cluster_sizes_or_split_map_grids_shape_are_refused_shortly():
    """A 4-worker own map beside an 8-worker slow one was served from both, the page's per-worker rates one map's;
    split_map_grids' {workers: {link: map}} was refused with the whole maps' repr in the message."""
    own = _map([_cell(16, 2.5, WIN)])
    big = SplitMap([_cell(16, 2.5, WIN)], 8, [16], [], [2.5], 64, 5.0, 1e5, 0.1, "built-in", [256])
    with pytest.raises(ValueError, match=r"one cluster size, got maps of \[2, 8\] workers"):
        ordered_maps({None: own, 1e-4: big})
    with pytest.raises(ValueError, match=r"split_map_grids' .* pick one cluster size") as err:
        ordered_maps({2: {None: own}})
    assert len(str(err.value)) < 300 and "Cell(" not in str(err.value)
    for bad in ([own], {}, {None: "map"}):
        with pytest.raises(ValueError, match="maps must be a dict") as err:
            ordered_maps(bad)
        assert "Cell(" not in str(err.value)


def test_one_map_where_one_is_asked_for():
    """A dict of maps was "'dict' object has no attribute 'cells'" (or 'workers')."""
    m = _map([_cell(16, 2.5, WIN)])
    check_map(m)
    with pytest.raises(TypeError, match=r"m must be a split map .*got dict: a dict of maps\? give one"):
        check_map({None: m})
    with pytest.raises(TypeError, match="m must be a split map .*got NoneType"):
        check_map(None)


def test_layout_config_refuses_a_name_of_another_cluster_size_or_not_a_name():
    """'4 colocated (prefill-first)' with workers=2 built 2 colocated workers; None was a TypeError from re."""
    with pytest.raises(ValueError, match="a layout of 4 workers, not of the map's 2"):
        pools_live.layout_config("4 colocated (prefill-first)", 2, [256])
    with pytest.raises(ValueError, match="a layout of 6 workers, not of the map's 4"):
        pools_live.layout_config("3P+3D", 4, [256])
    with pytest.raises(ValueError, match="not a layout name of a map: None"):
        pools_live.layout_config(None, 4, [256])
    assert pools_live.split_pools(None) is None
    assert pools_live.layout_config("1P+3D", 4, [256]).name == "1P+3D"


def test_the_probe_and_rescaling_take_the_built_in_model_and_numpy_factors():
    """rescaled(cost, np.int64(2), 1) was refused as 'must be a finite factor > 0, got np.int64(2)'; cost None was
    "'NoneType' object has no attribute 'prefill_base_s'" (and 'max_context', 'prefill_s'); a cost model named as
    a string got as far as the probe."""
    cost = CostModel()
    two = rescaled(cost, np.int64(2), np.float32(0.5))
    assert two.prefill_s(300) == pytest.approx(2 * cost.prefill_s(300))
    assert two.decode_s(1, 300) == pytest.approx(0.5 * cost.decode_s(1, 300))
    assert rescaled(None, 2.0, 0.5).prefill_s(300) == pytest.approx(two.prefill_s(300))
    cell = _cell(400, 2.5, WIN)
    assert cell_now(_map([cell]), cell, None) == cell_now(_map([cell]), cell, cost)
    for bad in (np.bool_(True), np.float64("nan"), -np.int64(1)):
        with pytest.raises(ValueError, match="decode must be a finite factor > 0"):
            rescaled(cost, 1.0, bad)
    with pytest.raises(TypeError, match="needs a splitlab.costmodel.CostModel, got dict"):
        rescaled({}, 1.0, 1.0)
    with pytest.raises(TypeError, match="needs a splitlab.costmodel.CostModel, got str"):
        cost_of("tiny")
    assert "built-in" in cost_of(None).source


def test_cell_now_refuses_a_cell_without_prefill_steps_or_a_context_with_no_prompt_room():
    """A NaN prefill cost placed the cell at the longest prompt in silence; answers that fill the context returned
    a prompt of 0 tokens or fewer."""
    cell = _cell(400, 2.5, WIN)
    cell.prefill_steps = float("nan")
    with pytest.raises(ValueError, match="prefill_steps must be finite and > 0, got nan"):
        cell_now(_map([cell]), cell, None)
    cell = _cell(400, 2.5, WIN)
    full = SplitMap([cell], 2, [400], [], [2.5], CostModel().max_context, 5.0, None, 0.1, "built-in", [256])
    with pytest.raises(ValueError, match="leave no prompt room"):
        cell_now(full, cell, None)


def test_step_probe_runs_on_the_built_in_model(lm):
    probe = step_probe(lm, None, 16, requests=2)
    assert probe["prefill"] > 0 and probe["decode"] > 0 and list(probe["steps"].index) == ["prefill", "decode"]


def test_gap_interval_refuses_what_has_no_gap():
    """An attainment of inf made the interval NaN in silence, a dict "no attribute 'columns'"."""
    import pandas as pd
    with pytest.raises(ValueError, match="must be finite percentages"):
        gap_interval(pd.DataFrame({"a": [np.inf, 2.0], "b": [1.0, 2.0]}), "a", "b")
    with pytest.raises(TypeError, match="attainment must be a DataFrame"):
        gap_interval({"a": [1, 2], "b": [1, 2]}, "a", "b")
