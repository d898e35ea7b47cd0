"""Bad input against chapter 7's map sentences and figure (break5): a grid whose cost-model link is not its first,
a cost model other than the maps', a height of 0, a map given where a grid goes, and links written as numpy
numbers. Each was a traceback from inside (format, division, attribute) or a sentence on another model's numbers."""
from __future__ import annotations

import numpy as np
import pytest

from splitlab.planning.map_result import Cell, SplitMap
from splitlab.serving import CostModelExecutor
from splitlab.teach.figures.split_map_words import link_words, workers_words
from splitlab.teach.widgets.split_map import link_label, split_map_figure, split_map_grid, split_map_grids

NAMES = {"split": "1P+1D", "prefill-first": "2 colocated (prefill-first)", "chunked": "2 colocated (chunked)"}
BUILT_IN = CostModelExecutor(None).cost


def _map(split_goodputs, link, workers=2, source=BUILT_IN.source):
    cells = [Cell(p, s, 2.5, 0.1, 0.01, dict(zip(NAMES, (g, 10, 10))), {k: "tpot" for k in NAMES},
                  dict(NAMES)).decide(0.1) for p, s, g in zip((64, 512), (2.0, 9.0), split_goodputs)]
    return SplitMap(cells, workers, [64, 512], [2.0, 9.0], [2.5], 64, 5, link, 0.1, source, [256], None, 0)


def test_link_words_takes_the_cost_models_link_in_any_place():
    """{10 GB/s, cost model's, 0.001 GB/s}, split_map_grid's order as given, was 'unsupported format string passed
    to NoneType.__format__'."""
    maps = {10.0: _map((20, 5), 10e9), None: _map((15, 5), None), 0.001: _map((5, 5), 1e6)}
    text = link_words(maps, BUILT_IN)
    assert "on the cost model's link it keeps 1 of the 1 cells" in text and "at 0.001 GB/s it keeps 0" in text
    maps = {10.0: _map((5, 5), 10e9), None: _map((4, 5), None)}  # the split wins nothing: its goodput lost
    assert "on the cost model's link its best split serves 0% to 20% less" in link_words(maps, BUILT_IN)


def test_link_words_takes_none_as_the_built_in_cost_model_and_refuses_another_models():
    maps = {10.0: _map((20, 5), 10e9), 1.0: _map((5, 5), 1e9)}
    assert link_words(maps, None) == link_words(maps, BUILT_IN)  # None was an AttributeError
    other = {10.0: _map((20, 5), 10e9, source="calibrated: x"), 1.0: _map((5, 5), 1e9, source="calibrated: x")}
    with pytest.raises(ValueError, match="cost model.*calibrated: x"):  # its cache sizes and prefill were said
        link_words(other, BUILT_IN)


def test_workers_words_refuses_the_larger_cluster_first():
    """(8 workers, 4 workers) said 'On 4 workers against 8 ... From 8 workers to 4' and judged 8's ratios by 4's."""
    with pytest.raises(ValueError, match="small.*fewer workers"):
        workers_words(_map((20, 5), None, workers=4), _map((20, 5), None, workers=2))


@pytest.mark.parametrize("kw, match", [(dict(height=0), "height"), (dict(height=float("nan")), "height"),
                                       (dict(height=-5), "height"), (dict(height=True), "height"),
                                       (dict(title=5), "title")])
def test_split_map_figure_refuses_a_height_or_title_it_cannot_draw(kw, match):
    """height 0 was a ZeroDivisionError, NaN plotly's 'Invalid value ... for the y property of layout.title', a
    title of 5 printed '5'."""
    with pytest.raises((ValueError, TypeError), match=match):
        split_map_figure({10.0: _map((20, 5), 10e9)}, **kw)


@pytest.mark.parametrize("maps", [_map((20, 5), 10e9), [_map((20, 5), 10e9)], {1.0: 5}])
def test_split_map_figure_refuses_what_is_no_grid(maps):
    """A SplitMap or a list was "'SplitMap' object has no attribute 'values'", {1.0: 5} "'int' object has no
    attribute 'workers'"."""
    with pytest.raises(TypeError, match="maps must be"):
        split_map_figure(maps)


def test_link_labels_and_grids_take_numpy_numbers_and_refuse_a_scalar():
    assert link_label(1e6) == "1,000,000 GB/s" and link_label(np.float32(10.0)) == "10 GB/s"  # was '1e+06 GB/s'
    with pytest.raises(ValueError, match="links_gbps must be a list"):
        split_map_grid(None, 10.0, 2)  # was "'float' object is not iterable"
    with pytest.raises(ValueError, match="workers must be a list"):
        split_map_grids(None, 4)  # was "'int' object is not iterable"
    grid = split_map_grid(None, (np.float32(10.0),), 2, prompt_tokens=[64], tpot_steps=[2.5], progress=False)
    assert list(grid) == [10.0]  # np.float32(10.0) was refused as 'not a finite number of GB/s > 0'


def test_link_words_calls_a_link_slower_only_where_it_is():
    """{1 GB/s, 10 GB/s} said 'On a slower KV link between the pools, at 10 GB/s ...' beside 'crosses in 1 ms at 1
    GB/s and 0.1 ms at 10 GB/s'."""
    text = link_words({1.0: _map((20, 5), 1e9), 10.0: _map((20, 5), 10e9)}, BUILT_IN)
    assert "slower" not in text and "On another KV link between the pools, at 10 GB/s it keeps 1 of the 1" in text
    assert "On a slower KV link" in link_words({10.0: _map((20, 5), 10e9), 1.0: _map((20, 5), 1e9)}, BUILT_IN)


@pytest.mark.parametrize("seeds", [(0,), (0, 0), 3])
def test_the_live_check_refuses_fewer_than_two_seeds(seeds):
    """One seed has no interval: a tie served on it 'matched: a tie' behind an interval printed '-inf to +inf'
    points; 3 was "'int' object is not iterable"."""
    from splitlab.teach.figures.pools_live_args import seeds_of
    with pytest.raises(ValueError, match="seeds must be at least 2 distinct seeds"):
        seeds_of(seeds)


def test_map_words_on_one_cell_and_a_tie_tolerance_below_5_percent():
    """A map of one cell was 'Of the map's 1 cells'; a tie tolerance of 2.5% was said 'within 2%' (and 0.4%
    'within 0%'), tighter than the map judged."""
    import dataclasses

    from splitlab.teach.figures.split_map import map_words
    from splitlab.teach.widgets.split_map import split_map_figure
    one = _map((10.4, 20), None)
    one = dataclasses.replace(one, cells=one.cells[:1], prompt_tokens=[64], prefill_steps=[2.0], tie_tolerance=0.025)
    one.cells[0].decide(0.025)  # 10.4 against 10: a 3.8% margin, no tie at 2.5%
    assert map_words(one) == "Of the map's 1 cell, 1 to the split."
    tied = dataclasses.replace(one, tie_tolerance=0.05)
    tied.cells = [dataclasses.replace(one.cells[0]).decide(0.05)]
    assert map_words(tied).startswith("Of the map's 1 cell, none to any layout; 1 is a tie (within 5%")
    legend = [t.name for t in split_map_figure({None: one}).data]
    assert "tie (within 2.5%)" in legend


def test_rule_words_refuses_no_case_and_says_when_the_rule_claims_nothing():
    """No case gave 'Read at each case's prefill cost (...): . ... disagrees in 0 of 0 cases where the rule makes a
    claim'; cases the rule is silent on all said 'disagrees in 0 of 0 cases' too."""
    import pandas as pd

    from splitlab.planning import rule_of_thumb as rot
    from splitlab.teach.figures.split_map_words import rule_words
    m = _map((5, 20), None)
    row = rot.split_threshold(m).iloc[0]
    with pytest.raises(ValueError, match="rows has no case"):
        rule_words(pd.DataFrame(columns=["agrees"]), row)
    beyond = rot.apply_rule(m, rows=[("Llama-3-8B", "H100", "bf16", 2048)])  # 46 steps: past the map's 9
    beyond = beyond.assign(**{"rule says": ["beyond the map's columns"], "own map says": ["chunked"], "agrees": [None]})
    text = rule_words(beyond, row)
    assert "0 of 0" not in text and text.endswith("The rule makes no claim on any of these cases (near its "
                                                  "threshold or outside the map's columns).")
