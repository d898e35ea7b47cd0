"""Chapters 06-07 on the map: the sentences computed from a map, a plan's batch line and a fit's zero terms
(issue 22 items 1, 5; the live check of a map's cells: test_pools_live.py)."""
import pandas as pd
import pytest

from splitlab.planning import split_map as SM
from splitlab.planning.planner import plan
from splitlab.teach.figures import pools, split_tables
from splitlab.teach.figures.split_map import map_words


@pytest.fixture(scope="module")
def small_map():
    return SM.split_map(None, 2, [16, 1024], [2.5], max_requests=100, progress=False)


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


def test_run_length_words_compare_a_column_on_short_and_long_runs():
    """Chapter 7's sentence on its GPU map searched on runs of 2,000 and, for one column, of 400 requests."""
    from types import SimpleNamespace as C
    from splitlab.teach.figures.split_map import run_length_words
    long = C(cells=[C(prompt_tokens=64, tpot_steps=1.5, winner="tie", margin=0.05),
                    C(prompt_tokens=64, tpot_steps=2.5, winner="chunked", margin=0.2),
                    C(prompt_tokens=743, tpot_steps=1.5, winner="chunked", margin=0.25)])
    short = C(cells=[C(prompt_tokens=64, tpot_steps=1.5, winner="chunked", margin=0.48),
                     C(prompt_tokens=64, tpot_steps=2.5, winner="chunked", margin=0.21)])
    assert run_length_words(long, short) == (
        "On its 64-token prompts runs of 400 requests find chunked by 48% at 1.5 steps, chunked by 21% at 2.5 "
        "steps; runs of 2,000 a tie at 1.5 steps, chunked by 20% at 2.5 steps (1 of 2 cells change hands): a short "
        "run ends before a decode backlog builds, and the backlog weighs on the layouts differently.")
    assert run_length_words(long, C(cells=[C(prompt_tokens=16, tpot_steps=1.5, winner="split", margin=0.1)])) == ""
