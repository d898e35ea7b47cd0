"""Chapter 7's live check of the map (pools_live, issue 22 item 3) called as a reader in a notebook might get it
wrong: each case was a silent default, a run on other inputs, garbage or a traceback from deep inside, and is now a
clear early error naming the argument (or the right answer). Maps are crafted; live runs are stubbed or tiny."""
from __future__ import annotations

import numpy as np
import pytest

from splitlab.costmodel import CostModel
from splitlab.planning.map_result import SplitMap
from splitlab.teach.figures import pools_live
from test_pools_live import _cell, _live, _map

WIN = {"split": 10, "prefill-first": 5, "chunked": 4}  # the split wins by 50%
SMALL = dict(n_requests=4, rates=2)


def _picks(got: dict) -> dict:
    return {k: (c.prompt_tokens, c.tpot_steps) for k, c in got.items()}


def test_seeds_given_as_a_generator_or_numpy_array_serve_the_same_seeds():
    """A generator was consumed by the seeds' check, then refused by the first run as 'got []'."""
    m = _map([_cell(16, 2.5, WIN)])
    want = _picks(pools_live.gap_cells(m, None, seeds=(0, 1), **SMALL))
    assert want == {"split": (16, 2.5)}
    assert _picks(pools_live.gap_cells(m, None, seeds=(s for s in (0, 1)), **SMALL)) == want
    assert _picks(pools_live.gap_cells(m, None, seeds=np.array([0, 1]), **SMALL)) == want
    for bad in ((0.5, 1.5), ("a", "b"), (-1, 2)):
        with pytest.raises(ValueError, match="seeds must be whole numbers >= 0"):
            pools_live.gap_cells(m, None, seeds=bad, **SMALL)
    with pytest.raises(ValueError, match=r"seeds must be at least 2 distinct seeds .*got \[0\]"):
        pools_live.gap_cells(m, None, seeds=(s for s in (0,)), **SMALL)


def test_rates_as_a_numpy_integer_is_a_number_of_rates():
    """np.int64(2) was refused as 'rates must be an integer >= 2, got np.int64(2)'."""
    m = _map([_cell(16, 2.5, WIN)])
    got = pools_live.gap_cells(m, None, n_requests=4, seeds=(0, 1), rates=np.int64(2))
    assert _picks(got) == _picks(pools_live.gap_cells(m, None, n_requests=4, seeds=(0, 1), rates=2))


def test_bad_arguments_are_refused_before_any_run_even_on_a_map_without_cells():
    """A map with no cell of a region took rates=1, n_requests=0 and max_prompt_tokens='64' in silence."""
    empty = _map([])
    assert pools_live.gap_cells(empty, None, seeds=(0, 1), **SMALL) == {}
    for kw, match in ((dict(rates=1), "rates must be"), (dict(n_requests=0), "n_requests must be"),
                      (dict(max_prompt_tokens="64"), "max_prompt_tokens must be"),
                      (dict(max_prompt_tokens=float("nan")), "max_prompt_tokens must be"),
                      (dict(max_prompt_tokens=-1), "max_prompt_tokens must be")):
        with pytest.raises(ValueError, match=match):
            pools_live.gap_cells(empty, None, seeds=(0, 1), **{**SMALL, **kw})
        with pytest.raises(ValueError, match=match):
            pools_live.live_regions({None: empty}, None, None, seeds=(0, 1), **{**SMALL, **kw})


def test_n_requests_naming_no_region_is_refused():
    """{"splt": 6} served the split's cell on the default 24 requests in silence; {"tie": 2.5} passed on a map
    without a tie."""
    m = _map([_cell(16, 2.5, WIN)])
    with pytest.raises(ValueError, match=r"n_requests names no region \['splt'\]"):
        pools_live.gap_cells(m, None, n_requests={"splt": 6}, seeds=(0, 1), rates=2)
    with pytest.raises(ValueError, match="n_requests must be a whole number >= 1 .* got 2.5"):
        pools_live.gap_cells(m, None, n_requests={"tie": 2.5}, seeds=(0, 1), rates=2)  # a map without a tie
    with pytest.raises(ValueError, match=r"n_requests names no region \[1\]"):
        pools_live.live_regions({None: m}, None, None, n_requests={1: 6}, seeds=(0, 1), rates=2)


def _fake_live(served: list):
    def fake(m, cell, lm, cost, n_requests, seeds, rates, **options):
        served.append(m.link_bytes_per_s)
        lc = _live(cell.winner, [100, 90, 95], [60, 50, 50])
        lc.cell, lc.link_bytes_per_s, lc.workers = cell, m.link_bytes_per_s, m.workers
        return lc
    return fake


def test_maps_are_ordered_by_their_links_not_by_the_dict(lm):
    """split_map_grid keeps the order of its links: {0.1 MB/s: slow, None: own} had the slow map served as the
    own link's (its split cell, on a 0.1 MB/s link) and the own link's map as the slider's slowest."""
    own = _map([_cell(16, 2.5, WIN)])
    slow = SplitMap([_cell(16, 2.5, WIN)], 2, [16], [], [2.5], 64, 5.0, 1e5, 0.1, "built-in", [256])
    mid = SplitMap([_cell(16, 2.5, WIN)], 2, [16], [], [2.5], 64, 5.0, 1e8, 0.1, "built-in", [256])
    for maps in ({None: own, 1e-4: slow}, {1e-4: slow, None: own}, {0.1: mid, 1e-4: slow, None: own}):
        served = []
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(pools_live, "live_cell", _fake_live(served))
            got = pools_live.live_regions(maps, lm, None, seeds=(0, 1), **SMALL)
        assert served == [None] and got["split"].link_bytes_per_s is None, served
    with pytest.MonkeyPatch.context() as mp:  # no own-link map: the fastest is the first tried
        served = []
        mp.setattr(pools_live, "live_cell", _fake_live(served))
        pools_live.live_regions({1e-4: slow, 0.1: mid}, lm, None, seeds=(0, 1), **SMALL)
    assert served == [1e8]


def test_maps_of_two_cluster_sizes_or_split_map_grids_shape_are_refused_shortly():
    """A 4-worker own map beside an 8-worker slow one was served from both, the page's per-worker rates one map's;
    split_map_grids' {workers: {link: map}} was refused with the whole maps' repr in the message."""
    own = _map([_cell(16, 2.5, WIN)])
    big = SplitMap([_cell(16, 2.5, WIN)], 8, [16], [], [2.5], 64, 5.0, 1e5, 0.1, "built-in", [256])
    with pytest.raises(ValueError, match=r"one cluster size, got maps of \[2, 8\] workers"):
        pools_live.live_regions({None: own, 1e-4: big}, None, None, seeds=(0, 1), **SMALL)
    with pytest.raises(ValueError, match=r"split_map_grids' .* pick one cluster size") as err:
        pools_live.live_regions({2: {None: own}}, None, None, seeds=(0, 1), **SMALL)
    assert len(str(err.value)) < 300 and "Cell(" not in str(err.value)
    with pytest.raises(ValueError, match="maps must be a dict") as err:
        pools_live.live_regions([own], None, None)
    assert "got list" in str(err.value) and "Cell(" not in str(err.value)


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


def test_live_cell_refuses_a_cell_of_another_map_and_runs_on_the_built_in_model(lm):
    """A cell not of ``m`` was placed by m's SLO rules and served on m's link; cost None (the built-in, as
    gap_cells reads it) was "'NoneType' object has no attribute 'prefill_s'" from inside the probe."""
    cell, other = _cell(16, 2.5, WIN), _cell(256, 2.5, WIN)
    with pytest.raises(ValueError, match="cell must be a cell of the map m"):
        pools_live.live_cell(_map([cell]), other, lm, None, seeds=(0, 1), **SMALL)
    with pytest.raises(TypeError, match="cell must be a cell of a split map"):
        pools_live.live_cell(_map([cell]), None, lm, None, seeds=(0, 1), **SMALL)
    with pytest.raises(TypeError, match="needs a splitlab.costmodel.CostModel, got str"):
        pools_live.live_cell(_map([cell]), cell, lm, "tiny", seeds=(0, 1), **SMALL)
    lc = pools_live.live_cell(_map([cell]), cell, lm, None, seeds=(0, 1), **SMALL)
    assert lc.workers == 2 and lc.probe["prefill"] > 0 and "built-in" in CostModel().source
    assert lc.runs is None or list(lc.runs.attainment.index) == [0, 1]


def test_the_probe_and_rescaling_take_the_built_in_model_and_numpy_factors():
    """rescaled(cost, np.int64(2), 1) was refused as 'must be a finite factor > 0, got np.int64(2)'; cost None was
    "'NoneType' object has no attribute 'prefill_base_s'" (and 'max_context', 'prefill_s')."""
    cost = CostModel()
    two = pools_live.rescaled(cost, np.int64(2), np.float32(0.5))
    assert two.prefill_s(300) == pytest.approx(2 * cost.prefill_s(300))
    assert two.decode_s(1, 300) == pytest.approx(0.5 * cost.decode_s(1, 300))
    assert pools_live.rescaled(None, 2.0, 0.5).prefill_s(300) == pytest.approx(two.prefill_s(300))
    cell = _cell(400, 2.5, WIN)
    assert pools_live.cell_now(_map([cell]), cell, None) == pools_live.cell_now(_map([cell]), cell, cost)
    for bad in (np.bool_(True), np.float64("nan"), -np.int64(1)):
        with pytest.raises(ValueError, match="decode must be a finite factor > 0"):
            pools_live.rescaled(cost, 1.0, bad)
    with pytest.raises(TypeError, match="needs a splitlab.costmodel.CostModel, got dict"):
        pools_live.rescaled({}, 1.0, 1.0)


def test_cell_now_refuses_a_cell_without_prefill_steps_or_a_context_with_no_prompt_room():
    """A NaN prefill cost placed the cell at the longest prompt in silence; answers that fill the context returned
    a prompt of 0 tokens or fewer."""
    cell = _cell(400, 2.5, WIN)
    cell.prefill_steps = float("nan")
    with pytest.raises(ValueError, match="prefill_steps must be finite and > 0, got nan"):
        pools_live.cell_now(_map([cell]), cell, None)
    cell = _cell(400, 2.5, WIN)
    full = SplitMap([cell], 2, [400], [], [2.5], CostModel().max_context, 5.0, None, 0.1, "built-in", [256])
    with pytest.raises(ValueError, match="leave no prompt room"):
        pools_live.cell_now(full, cell, None)


def test_step_probe_runs_on_the_built_in_model(lm):
    probe = pools_live.step_probe(lm, None, 16, requests=2)
    assert probe["prefill"] > 0 and probe["decode"] > 0 and list(probe["steps"].index) == ["prefill", "decode"]


def test_pick_rate_refuses_scores_that_are_not_a_series_of_rates():
    """A dict or list was "'dict' object has no attribute 'max'"; a rate of NaN, 0 or -1 came back as the rate to
    serve; a score of +inf won; a cell no layout wins got a rate."""
    import pandas as pd
    win = _cell(16, 2.5, WIN)
    for bad in ({1.0: 30.0}, [30.0], None):
        with pytest.raises(TypeError, match="scores must be a pandas Series"):
            pools_live.pick_rate(win, bad)
    for rate in (np.nan, 0.0, -1.0, np.inf, "a"):
        with pytest.raises(ValueError, match="scores' index must be rates"):
            pools_live.pick_rate(win, pd.Series({rate: 30.0}))
    for score in (np.inf, "30"):
        with pytest.raises(ValueError, match="scores must be numbers"):
            pools_live.pick_rate(win, pd.Series({1.0: score, 2.0: 12.0}))
    with pytest.raises(ValueError, match="got winner 'none'"):
        pools_live.pick_rate(_cell(16, 2.5, {"split": 0, "prefill-first": 0, "chunked": 0}), pd.Series({1.0: 30.0}))
    # what stays: NaN is no score, -inf and negative never qualify, an empty Series picks nothing
    assert pools_live.pick_rate(win, pd.Series({1.0: np.nan, 2.0: 12.0, 3.0: -np.inf})) == 2.0
    assert pools_live.pick_rate(win, pd.Series([], dtype=float)) is None
    assert pools_live.pick_rate(win, pd.Series({np.int64(3): -5.0})) is None


def test_rate_score_and_gap_interval_refuse_what_has_no_gap():
    """rate_score({}) was 'min() arg is an empty sequence', runs of one layout a TypeError about gap_interval's
    arguments; an attainment of inf made the interval NaN in silence, a dict "no attribute 'columns'"."""
    import pandas as pd
    from splitlab.teach.figures.split_seeds import PairedRuns
    win = _cell(16, 2.5, WIN)
    one = PairedRuns(pd.DataFrame({"a": [50.0, 60.0]}), None, 6, 1.0, True)
    for bad in ({}, {1.0: one}, [one]):
        with pytest.raises(ValueError, match="runs must be a non-empty dict"):
            pools_live.rate_score(win, bad)
    with pytest.raises(ValueError, match="must be finite percentages"):
        pools_live.gap_interval(pd.DataFrame({"a": [np.inf, 2.0], "b": [1.0, 2.0]}), "a", "b")
    with pytest.raises(TypeError, match="attainment must be a DataFrame"):
        pools_live.gap_interval({"a": [1, 2], "b": [1, 2]}, "a", "b")


def test_live_words_and_table_refuse_lives_they_cannot_read():
    """A list, a misspelt region or a cell keyed by another region gave a paragraph of 'no cell' for every region
    (the list: an AttributeError from live_table); a served cell with a NaN rate was a KeyError: nan; a map of
    another cluster size than the cells were served on gave per-worker rates off by its ratio."""
    m = _map([_cell(16, 2.5, WIN)])
    lc = _live("split", [100, 90, 95], [60, 50, 50])
    with pytest.raises(TypeError, match="lives must be a dict"):
        pools_live.live_words([lc], m)
    with pytest.raises(TypeError, match="lives must be a dict"):
        pools_live.live_table([lc])
    with pytest.raises(ValueError, match=r"lives names no region 'Split'"):
        pools_live.live_words({"Split": lc}, m)
    with pytest.raises(ValueError, match=r"lives\['tie'\] is a cell 'split' won"):
        pools_live.live_table({"tie": lc})
    with pytest.raises(TypeError, match="m must be a split map"):
        pools_live.live_words({"split": lc}, None)
    nan = _live("split", [100, 90, 95], [60, 50, 50])
    nan.rate_per_s = float("nan")
    with pytest.raises(ValueError, match=r"served at nan requests/s, not a rate of its predicted scores"):
        pools_live.live_words({"split": nan}, m)
    lc.workers = 8
    with pytest.raises(ValueError, match="served on a map of 8 workers, m has 2"):
        pools_live.live_words({"split": lc}, m)
    lc.workers = 2
    assert pools_live.live_words({"split": lc}, m).startswith("**The split**")
    assert pools_live.live_table({}).empty  # nothing served: an empty table, and words for each region
    assert pools_live.live_words({}, m).count("unconfirmed live") == 3
    with pytest.raises(TypeError, match="live must be a LiveCell"):
        pools_live.live_outcome(None)


def test_no_model_or_an_unknown_option_is_refused_before_the_simulations(lm, monkeypatch):
    """live_regions(maps, None, cost) simulated every region's cells (minutes in the chapter) before
    'ModelExecutor takes a splitlab LoadedModel'; max_batch=16 was "got multiple values for keyword argument
    'max_batch'" at the first cell, and a misspelt option passed in silence where a map had no cell."""
    def never(*a, **k):
        raise AssertionError("simulated before checking its arguments")
    monkeypatch.setattr(pools_live, "_contest", never)
    m = _map([_cell(16, 2.5, WIN)])
    with pytest.raises(TypeError, match="live_regions takes a splitlab LoadedModel"):
        pools_live.live_regions({None: m}, None, None, seeds=(0, 1), **SMALL)
    with pytest.raises(TypeError, match="'max_batch'"):
        pools_live.live_regions({None: m}, lm, None, seeds=(0, 1), max_batch=16, **SMALL)
    with pytest.raises(TypeError, match="'link_bytes' \\(not a ServingConfig field\\)"):
        pools_live.gap_cells(_map([]), None, seeds=(0, 1), link_bytes=1e9, **SMALL)
    with pytest.raises(TypeError, match="live_cell\\(\\) got an unknown option: 'policy'"):
        pools_live.live_cell(m, m.cells[0], lm, None, seeds=(0, 1), policy="chunked", **SMALL)


def test_a_cell_with_no_finite_steps_or_goodputs_is_refused_by_name():
    """A goodput of inf or NaN was 'rate_per_s must be a finite rate > 0 requests/s, got inf' from inside a
    workload; a TPOT of NaN steps went on to an SLO of NaN s."""
    for field, value in (("goodput", {"split": np.inf, "prefill-first": 5, "chunked": 4}),
                         ("goodput", {"split": 10, "prefill-first": np.nan, "chunked": 4}),
                         ("tpot_steps", float("nan")), ("prefill_steps", 0.0)):
        cell = _cell(16, 2.5, WIN if field != "goodput" else value)
        if field != "goodput":
            setattr(cell, field, value)
        with pytest.raises(ValueError, match="the cell's steps must be finite and > 0 and its goodputs"):
            pools_live.gap_cells(_map([cell]), None, seeds=(0, 1), **SMALL)


def test_words_refuse_a_probe_without_its_ratios_and_rate_score_says_what_runs_held():
    import pandas as pd
    from splitlab.teach.figures.split_seeds import PairedRuns
    lc = _live("split", [100, 90, 95], [60, 50, 50])
    lc.probe = {}
    with pytest.raises(ValueError, match="probe must be step_probe's dict"):
        pools_live.live_words({"split": lc}, _map([lc.cell]))
    one = PairedRuns(pd.DataFrame({"a": [50.0, 60.0]}), None, 6, 1.0, True)
    with pytest.raises(ValueError, match=r"got a dict of 1: \[\['a'\]\]$"):
        pools_live.rate_score(_cell(16, 2.5, WIN), {1.0: one})


def test_one_map_where_one_is_asked_for(lm):
    """gap_cells(maps, ...) and live_words(lives, maps) were "'dict' object has no attribute 'cells'" (or
    'workers')."""
    m = _map([_cell(16, 2.5, WIN)])
    with pytest.raises(TypeError, match=r"m must be a split map .*got dict: a dict of maps\? give one"):
        pools_live.gap_cells({None: m}, None, seeds=(0, 1), **SMALL)
    with pytest.raises(TypeError, match="m must be a split map .*got NoneType"):
        pools_live.live_cell(None, m.cells[0], lm, None, seeds=(0, 1), **SMALL)
    with pytest.raises(TypeError, match="m must be a split map .*got dict"):
        pools_live.live_words({}, {None: m})
