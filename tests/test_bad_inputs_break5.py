"""Bad input against the map's planning code and the validation helpers of issues 20 and 22 (break5): each of these
once answered with a verdict on a prompt no model holds, a map of cells no request fits, a traceback from inside
numpy or pandas, or a rate of 0 or below."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from splitlab.planning import rule_of_thumb as rot
from splitlab.planning.batch import batch_bound
from splitlab.planning.map_result import Cell, SplitMap
from splitlab.planning.split_map import prompt_axis, split_map
from splitlab.serving import CostModelExecutor, ServingConfig
from splitlab.serving import validation as V

NAMES = {"split": "1P+1D", "prefill-first": "2 colocated (prefill-first)", "chunked": "2 colocated (chunked)"}


def _cell(prompt, steps, tpot, goodputs):
    return Cell(prompt, steps, tpot, 0.1, 0.01, dict(zip(NAMES, goodputs)), {k: "tpot" for k in NAMES},
                dict(NAMES)).decide(0.1)


def _map():
    """One row: the split loses at 2 decode steps of prefill and wins at 4."""
    cells = [_cell(64, 2.0, 2.5, (5, 10, 10)), _cell(128, 4.0, 2.5, (20, 10, 10))]
    return SplitMap(cells, 2, [64, 128], [2.0, 4.0], [2.5], 64, 5, None, 0.1, "built-in", [256], None, 0)


@pytest.mark.parametrize("prompt", [0, -5, True, 2048.5, "2048", float("nan"), 10 ** 7])
def test_apply_rule_refuses_a_prompt_length_the_model_cannot_hold(prompt):
    """0, -5, True and 2048.5 once got a verdict ('colocated', 'split'); 10**7 tokens, past Llama-3-8B's 8,192, read
    'split' off a prefill of 44,000 s; '2048' was a TypeError from the roofline's arithmetic."""
    with pytest.raises(ValueError, match="prompt tokens"):
        rot.apply_rule(_map(), rows=[("Llama-3-8B", "H100", "bf16", prompt)])


def test_apply_rule_still_reads_a_good_row():
    table = rot.apply_rule(_map(), rows=[("Llama-3-8B", "H100", "bf16", 2048)])
    assert table["prompt tokens"].tolist() == [2048] and table["rule says"].iloc[0] in ("split", "colocated")


@pytest.mark.parametrize("steps", [float("nan"), "3", None, -1.0])
def test_reading_refuses_a_prefill_cost_that_is_no_number(steps):
    """NaN was 'max() arg is an empty sequence', '3' a comparison TypeError from inside; -1 read 'below the map'."""
    row = rot.split_threshold(_map()).iloc[0]
    with pytest.raises(ValueError, match="steps must be a finite number > 0"):
        rot.reading(row, steps)
    assert rot.reading(row, 3.0) == "near the threshold"


def test_order_words_and_agrees_refuse_other_types():
    with pytest.raises(TypeError, match="table must be a DataFrame"):
        rot.order_words([1])  # was AttributeError: 'list' object has no attribute 'empty'
    with pytest.raises(TypeError, match="own_says must be"):
        rot.agrees("split", None)  # was AttributeError on None.startswith


@pytest.mark.parametrize("name, kw", [("tpot_steps", dict(tpot_steps=2.5)), ("tpot_steps", dict(tpot_steps="2.5")),
                                      ("prompt_tokens", dict(prompt_tokens=64)),
                                      ("prompt_tokens", dict(prompt_tokens="64"))])
def test_split_map_refuses_an_axis_that_is_no_list(name, kw):
    """2.5 was "'float' object is not iterable"; "2.5" was read as the characters '2', '.', '5'."""
    args = dict(prompt_tokens=[64], tpot_steps=[2.5]) | kw
    with pytest.raises(ValueError, match=f"{name} must be a list"):
        split_map(None, 2, progress=False, **args)


@pytest.mark.parametrize("low, high", [(16.5, 100), (16, 100.5), (16, 10 ** 7)])
def test_prompt_axis_refuses_ends_that_are_no_prompt_length(low, high):
    """16.5 gave [16.5, 48.0, 100]; a high end of 10**7 tokens, past the built-in model's 2,048, gave it back."""
    with pytest.raises(ValueError, match="tokens"):
        prompt_axis(None, low, high, 3)


@pytest.mark.parametrize("prompts", [[float("nan")], [True], ["64"], [64.7], 64, [-1]])
def test_batch_bound_refuses_prompt_lengths_that_are_not_token_counts(prompts):
    """NaN was 'cannot convert float NaN to integer'; True, '64' and 64.7 were read as 1, 64 and 64 tokens; 64 was
    "object of type 'int' has no len()"."""
    ex = CostModelExecutor(None)
    with pytest.raises(ValueError, match="prompt_tokens"):
        batch_bound(ex, ServingConfig.colocated(1), prompts, [64])


@pytest.mark.parametrize("kw, match", [(dict(busy=0), "busy"), (dict(busy=-1), "busy"),
                                       (dict(busy=float("nan")), "busy"), (dict(busy=5), "busy"),
                                       (dict(n_workers=0), "n_workers"),
                                       (dict(n_workers=True), "n_workers"), (dict(busy=1e-4), "rounds to 0")])
def test_default_rates_refuses_a_busy_share_or_workers_that_give_no_rate(kw, match):
    """busy 0 gave rates of 0.0, -1 negative rates, NaN NaN rates, 1e-4 rates rounded to 0.0."""
    cost = CostModelExecutor(None).cost
    with pytest.raises(ValueError, match=match):
        V.default_rates(cost, **kw)


def test_default_rates_takes_none_as_the_built_in_cost_model():
    """None was AttributeError: 'NoneType' object has no attribute 'prefill_s'."""
    assert V.default_rates(None, names=["chat"]) == V.default_rates(CostModelExecutor(None).cost, names=["chat"])


def _table(errors):
    return pd.DataFrame(dict(workload="chat", contender=["a", "b"][:len(errors)], metric="ttft_p50",
                             emulated_s=0.1, simulated_s=0.1, error=errors, abs_error=[abs(e) for e in errors]))


@pytest.mark.parametrize("table, tolerance, match", [
    (_table([0.1, 0.05]).iloc[:0], 0.15, "table is empty"),  # was 'attempt to get argmax of an empty sequence'
    (_table([math.nan, math.nan]), 0.15, "no error"),  # was 'Encountered all NA values'
    (pd.DataFrame(dict(x=[1])), 0.15, "abs_error"),  # was AttributeError
    (_table([0.1, 0.05]), math.nan, "tolerance"),  # within 0 of 2, tolerance nan
    (_table([0.1, 0.05]), -1, "tolerance"),
    (_table([0.1, 0.05]), True, "tolerance"),  # within 2 of 2 at a tolerance of True
])
def test_verdict_refuses_an_empty_table_or_a_tolerance_that_is_no_share(table, tolerance, match):
    with pytest.raises(ValueError, match=match):
        V.verdict(table, tolerance)
    assert V.verdict(_table([0.1, 0.05]))["within"] == 2


@pytest.mark.parametrize("prompt, budget", [(10 ** 9, "auto"), (64, 10)])
def test_batch_bound_line_writes_no_exponent(prompt, budget):
    """A billion-token request was '0 requests of 1.95e+06 MiB', a 10-byte budget 'KV budget 9.31e-09 GiB'."""
    line = batch_bound(CostModelExecutor(None), ServingConfig.colocated(1, kv_budget_bytes=budget), [prompt],
                       [64]).line()
    assert "e+0" not in line and "e-0" not in line and "0 requests of" in line
    if budget == 10:  # a budget given in bytes was said to be '0.9 of its memory less weights and activations'
        assert "(kv_budget_bytes, as given)" in line and "of its memory" not in line


@pytest.mark.parametrize("steps", [[1, 2, 3], None, "prefill", {"kind": "prefill"}])
def test_in_run_cost_refuses_what_is_no_step_log(steps):
    """[1, 2, 3] was "'int' object has no attribute 'get'", None "'NoneType' object is not iterable"."""
    with pytest.raises(TypeError, match="steps must be a list of step records"):
        V.in_run_cost(CostModelExecutor(None).cost, steps)


@pytest.mark.parametrize("other", [{}, "x", 5])
def test_split_map_refuses_a_colocated_from_that_is_no_map(other):
    """Each was "'dict' object has no attribute 'search'" from inside."""
    with pytest.raises(TypeError, match="colocated_from must be a SplitMap"):
        split_map(None, 2, [64], [2.5], colocated_from=other, progress=False)


def test_reading_takes_a_column_within_edge_inside_the_map_too():
    """Chapter 6's research prompts (10.7 steps) read "near the threshold" beside a column of 10.8 that the split
    wins by a third: within EDGE of a column a prefill reads as that column, inside the map as past its ends."""
    row = rot.split_threshold(_map()).iloc[0]  # columns 2 (colocated) and 4 (split): the threshold between them
    assert rot.reading(row, 4.0 * (1 - rot.EDGE / 2)) == "split" and rot.reading(row, 2.0 * (1 + rot.EDGE / 2)) == \
        "colocated"
    assert rot.reading(row, 4.0 * (1 - 2 * rot.EDGE)) == "near the threshold"  # further from both: no claim
