"""break28: hostile input to the command line and the public API. Each test reproduces a failure found by trying
it (an error naming an argument the caller does not have, a traceback, a claim the numbers do not hold)."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

import splitlab as sl
from conftest import cli
from splitlab.planning.split_map import split_map
from splitlab.teach.figures import split_loss, split_seeds


@pytest.mark.parametrize("args, names", [
    (["--prompt-tokens", "5000", "5000000"], "--prompt-tokens HIGH (5000000) and --output-tokens (64)"),
    (["--output-tokens", "5000"], "the default range's shortest prompt (16 tokens) and --output-tokens (5000)"),
    (["--columns", "2", "--output-tokens", "2040"], "and --output-tokens (2040)"),
])
def test_map_past_the_context_names_the_callers_flags_and_the_limit(args, names):
    """``map --prompt-tokens 5000 5000000`` said "output_tokens (64)", split_map's argument, not the flag."""
    status, out, err = cli("map", *args)
    assert status == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert names in err and "context of 2048 tokens: keep their sum at most 2048" in err
    assert "output_tokens" not in err.replace("--output-tokens", "")


@pytest.mark.parametrize("chunks", ["abc", 256, [1.5], [True], [0]])
def test_plan_chunk_tokens_not_a_list_of_sizes_names_the_argument(chunks):
    """``plan(chunk_tokens="abc")`` said "chunk sizes must be integers above 1, got ['a', 'b', 'c']"."""
    with pytest.raises(ValueError, match=r"^chunk_tokens must be .*(chunk sizes|integers)") as err:
        sl.planner.plan(chunk_tokens=chunks)
    assert "['a', 'b', 'c']" not in str(err.value)


@pytest.mark.parametrize("search", ["plan", "split_map"])
@pytest.mark.parametrize("option, why", [("bogus", "not a ServingConfig field"), ("policy", "sets it for each layout"),
                                         ("layout", "sets it for each layout")])
def test_an_unknown_option_is_refused_before_any_run_naming_it_and_the_valid_ones(search, option, why):
    """``plan(bogus=3)`` surfaced as ``ServingConfig.__init__() got an unexpected keyword argument``; ``policy=``
    as ``colocated() got multiple values for keyword argument 'policy'``."""
    call = sl.planner.plan if search == "plan" else lambda **kw: split_map(None, 4, [64], [2.0], **kw)
    with pytest.raises(TypeError, match=f"^{search}\\(\\) got an unknown option: '{option}' \\(.*{why}") as err:
        call(**{option: 3})
    assert "the options it takes: max_batch, max_prefill_tokens, kv_budget_bytes" in str(err.value)
    assert "__init__" not in str(err.value) and "policy," not in str(err.value)


def test_a_valid_option_still_reaches_every_layout():
    m = split_map(None, 2, [64], [2.5], max_requests=100, transfer_mode="layerwise", progress=False)
    assert len(m.cells) == 1 and m.cells[0].winner in ("split", "prefill-first", "chunked", "tie", "none")


def _one_seed(a: float, b: float) -> pd.DataFrame:
    return pd.DataFrame({"3P+1D": [a], "4 colocated (prefill-first)": [b]}, index=pd.Index([0], name="seed"))


def test_one_seed_is_never_decisive_it_has_no_spread():
    """paired_gaps called a single seed's gap "decisive", "outside the runs' own spread": one seed has none."""
    a, b = "3P+1D", "4 colocated (prefill-first)"
    g = split_seeds.paired_gaps(_one_seed(100, 69), a, b)
    assert g["seeds"] == 1 and g["spread"] == 0 and not g["decisive"] and g["leader"] == a
    words = split_seeds.paired_verdict(_one_seed(100, 69), a, b, 32)
    assert "a gap of +31 points from one seed, which has no spread to judge it against" in words
    assert "outside" not in words and "cannot tell the two layouts apart" in words
    two = pd.DataFrame({a: [100, 97], b: [69, 72]}, index=pd.Index([0, 1], name="seed"))
    assert split_seeds.paired_gaps(two, a, b)["decisive"]  # two seeds of one sign still are
    cell = SimpleNamespace(tpot_steps=2.5)
    words = split_loss.takeaway([], cell, "research", 11.3, SimpleNamespace(name=a, goodput_rps_per_worker=8.0),
                                SimpleNamespace(name=b, goodput_rps_per_worker=8.3), _one_seed(100, 69))
    assert "one seed: no spread to judge its gap against" in words and "ahead in every seed" not in words
