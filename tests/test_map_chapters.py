"""Chapters 06-07 on the map: the live check of a map's cells, the sentences computed from a map, a plan's
batch line and a fit's zero terms (issue 22 items 1, 3, 5)."""
import re

import pandas as pd
import pytest

from splitlab import serving
from splitlab.planning import split_map as SM
from splitlab.planning.planner import plan
from splitlab.teach.figures import pools, pools_live, split_tables
from splitlab.teach.figures.split_map import map_words


@pytest.fixture(scope="module")
def small_map():
    return SM.split_map(None, 2, [16, 1024], [2.5], max_requests=100, progress=False)


def test_layout_config_reads_every_name_a_map_writes():
    assert pools_live.layout_config("2P+2D", 4, [256]).name == "2P+2D"
    assert pools_live.layout_config("4 colocated (prefill-first)", 4, [256]).policy == "prefill-first"
    cfg = pools_live.layout_config("4 colocated (chunked, 256-token chunks)", 4, [256], max_batch=16)
    assert (cfg.policy, cfg.chunk_tokens, cfg.max_batch) == ("chunked", 256, 16)
    with pytest.raises(ValueError, match="not a layout name"):
        pools_live.layout_config("4 workers", 4, [256])


def test_region_cells_and_live_cells_on_the_simulator(small_map):
    cells = pools_live.region_cells(small_map)
    assert cells, small_map.table()
    for region, c in cells.items():
        assert (c.winner == "split") == (region == "split")
    short = pools_live.region_cells(small_map, max_prompt_tokens=16)
    assert all(c.prompt_tokens <= 16 for c in short.values())
    table = pools_live.live_cells(small_map, serving.CostModelExecutor(None), cells, n_requests=12, seeds=(0, 1))
    assert len(table) == 2 * len(cells)
    assert (table["spread (pp)"] >= 0).all() and table["mean (%)"].between(0, 100).all()
    shown = table.drop(columns=["map", "kind"]).set_index(["cell", "layout"]).round(3).to_string()  # as ch07 does
    assert not re.search(r"\d\.\d*0\b", shown), shown  # ch07 showed 100.000, 71.875 and 0.00 beside 18.75
    text = pools_live.live_verdict(table)
    assert text.count("met the SLOs") == len(cells)
    with pytest.raises(ValueError, match="n_requests"):
        pools_live.live_cells(small_map, serving.CostModelExecutor(None), cells, n_requests=1)
    with pytest.raises(ValueError, match="n_requests"):
        pools_live.live_cells(small_map, serving.CostModelExecutor(None), cells, n_requests={})
    with pytest.raises(ValueError, match="toward_winner"):
        pools_live.live_cells(small_map, serving.CostModelExecutor(None), cells, toward_winner=1.5)
    near = pools_live.live_cells(small_map, serving.CostModelExecutor(None), cells, n_requests=12, seeds=(0,),
                                 toward_winner=1.0)
    assert near["rate (req/s per worker)"].iloc[0] == pytest.approx(near["goodput (sim.)"].iloc[0])


def test_live_verdict_says_when_the_gap_is_within_the_spread():
    rows = [dict(cell="c", map="split", kind="split", layout="1P+1D", **{"mean (%)": 80.0, "spread (pp)": 30.0}),
            dict(cell="c", map="split", kind="chunked", layout="2 chunked", **{"mean (%)": 70.0, "spread (pp)": 5.0})]
    assert "cannot tell the two apart" in pools_live.live_verdict(pd.DataFrame(rows))
    rows[1]["mean (%)"] = 90.0
    rows[0]["spread (pp)"] = 5.0
    text = pools_live.live_verdict(pd.DataFrame(rows))
    assert "outside the runs' own spread of 5" in text and "did not win live" in text


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
    text = split_tables._split_tpot_note(steps, "3P+1D", 0.2)
    assert "+57%" in text and "beyond the 20%" in text and "+36%" in text
    steps.loc["TPOT, measured (ms)", "3P+1D"] = 7.5
    assert "within the 20%" in split_tables._split_tpot_note(steps, "3P+1D", 0.2)


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
