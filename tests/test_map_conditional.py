"""The conditional split as a contender of the map of where the split pays (issue 23 item 1): off by default (the
map of three layouts is unchanged), searched per cell when asked for, and the cells where it beats both pure
layouts listed with their margins."""
from __future__ import annotations

import json

import pytest

from conftest import cli
from splitlab.planning.conditional_layouts import check_queues, conditional_contenders, conditional_wins
from splitlab.planning.split_map import split_map
from splitlab.serving import ServingConfig

#: one cell of the built-in cost model's 4-worker map (405-token prompts, TPOT SLO 2.5 lone decode steps) where a
#: conditional 2P+2D (local prefill when 2 requests wait) served 15.7 requests/s per worker, the 2P+2D split 13.9
#: and 4 colocated chunked workers 13.4 (measured with the default map's searches and the map's former default cap of
#: 16 requests per decode batch, kept here: without a cap the KV budget bounds the batch and this cell changes; and
#: its 256-token chunks alone: chunked at the budget the TPOT SLO allows, the map's default since, beats all three)
CELL = dict(prompt_tokens=[405], tpot_steps=[2.5], max_batch=16, chunk_tokens=(256,))


@pytest.fixture(scope="module")
def maps():
    return split_map(None, 4, **CELL, progress=False), split_map(None, 4, **CELL, conditional_queues=(2,),
                                                                 progress=False)


def test_off_by_default_and_the_pure_layouts_unchanged(maps):
    plain, cond = maps
    (p,), (c,) = plain.cells, cond.cells
    assert p.conditional == {} and "conditional" not in p.to_json()
    assert p.goodput == c.goodput and p.winner == c.winner and p.margin == c.margin
    assert cond.searches == plain.searches + 1
    with pytest.raises(ValueError, match="no conditional contender"):
        conditional_wins(plain)


def test_the_conditional_split_beats_both_pure_layouts_here(maps):
    _, cond = maps
    (c,) = cond.cells
    assert c.conditional["layout"] == f"{c.names['split']} (local if queue >= 2)"
    assert c.conditional["local_prefill_queue"] == 2 and c.to_json()["conditional"] == c.conditional
    (win,) = conditional_wins(cond)
    g = win["goodput_rps_per_worker"]
    assert g == c.conditional["goodput_rps_per_worker"]
    assert win["margin_over_split"] == pytest.approx(1 - c.goodput["split"] / g)
    assert win["colocated_layout"] == c.names[max(("prefill-first", "chunked"), key=c.goodput.get)]
    assert min(win["margin_over_split"], win["margin_over_colocated"]) > cond.tie_tolerance
    assert conditional_wins(cond, tolerance=0.99) == []  # a margin no layout reaches


def test_bad_queues_and_tolerances():
    assert check_queues([2, 0]) == (0, 2) and check_queues(()) == ()
    for bad in ([-1], [1.5], [True], "12", 3):
        with pytest.raises(ValueError, match="conditional_queues must"):
            check_queues(bad)
    with pytest.raises(ValueError, match="holds a value twice"):
        check_queues([1, 1])
    split = ServingConfig.disaggregated(2, 2)
    assert [c.name for c in conditional_contenders(split, (1, 2))] == ["2P+2D (local if queue >= 1)",
                                                                       "2P+2D (local if queue >= 2)"]
    assert conditional_contenders(None, (1,)) == []


def test_bad_tolerance(maps):
    with pytest.raises(ValueError, match=r"tolerance must be a share in \[0, 1\)"):
        conditional_wins(maps[1], tolerance=1.0)


def test_cli_map_conditional():
    status, out, err = cli("map", "--prompt-tokens", "405", "405", "--columns", "1", "--tpot-steps", "2.5", "2.5",
                           "--rows", "1", "--conditional", "2", "--max-batch", "16", "--json",
                           "--chunk-tokens", "256")  # a fixed chunk, as when written: the TPOT budget's beats all
    data = json.loads(out)
    assert status == 0, err
    (win,) = data["conditional_wins"]
    assert win["layout"].endswith("(local if queue >= 2)") and data["cells"][0]["conditional"]["layout"] == \
        win["layout"]
    status, out, err = cli("map", "--conditional", "1", "1")
    assert status == 2 and "--conditional holds a queue length twice" in err
    status, out, err = cli("map", "--conditional", "-1")
    assert status == 2 and "waiting requests >= 0" in err
