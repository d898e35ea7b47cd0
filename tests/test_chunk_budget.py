"""The chunked layout's token budget from the TPOT SLO (splitlab.planning.chunk_budget, Sarathi-Serve's rule)."""
import pytest

from splitlab.costmodel import CostModel, roofline_cost_model
from splitlab.planning.chunk_budget import resolve_chunks, tpot_budget
from splitlab.planning.options import chunk_sizes
from splitlab.planning.planner import plan
from splitlab.planning.split_map import split_map


def _step_s(cost, budget, rows=1, context=512):  # the prompt's last chunk: attends to the whole prompt before it
    chunk = budget - rows
    squares = sum(2 * p + 1 for p in range(context - chunk, context)) if chunk <= context else chunk * context
    return cost.hybrid_s(chunk, squares, 0, rows, rows * context)


@pytest.mark.parametrize("cost", [CostModel(), roofline_cost_model("Llama-3-8B", "H100", "bf16")],
                         ids=["built-in", "h100"])
@pytest.mark.parametrize("steps", [1.5, 2.5, 8.0])
def test_budget_is_the_largest_whose_step_fits(cost, steps):
    slo = steps * cost.decode_s(1, 512)
    b = tpot_budget(cost, slo, 512)
    assert 2 <= b < cost.max_context
    assert _step_s(cost, b) <= slo < _step_s(cost, b + 1)


def test_budget_grows_with_the_slo_and_shrinks_with_rows():
    cost = roofline_cost_model("Llama-3-8B", "H100", "bf16")  # rows' attention costs: more rows, a smaller budget
    d = cost.decode_s(1, 4096)
    tight, loose = tpot_budget(cost, 1.5 * d, 4096), tpot_budget(cost, 8 * d, 4096)
    assert tight < loose
    assert tpot_budget(cost, 8 * d, 4096, decode_rows=64, least=65) < loose


def test_no_budget_fits_gives_the_least():
    cost = CostModel()
    assert tpot_budget(cost, cost.decode_s(1, 512) * 0.5, 512, least=9, decode_rows=1) == 9


@pytest.mark.parametrize("kw, match", [
    (dict(tpot_slo_s=0.0), "tpot_slo_s"), (dict(tpot_slo_s=float("nan")), "tpot_slo_s"),
    (dict(tpot_slo_s=True), "tpot_slo_s"), (dict(prompt_tokens=0), "prompt_tokens"),
    (dict(decode_rows=2.5), "decode_rows"), (dict(least=1), "exceed decode_rows"),
    (dict(least=100, most=50), "is below least"),
])
def test_bad_input_is_refused(kw, match):
    args = dict(tpot_slo_s=0.01, prompt_tokens=512) | kw
    with pytest.raises(ValueError, match=match):
        tpot_budget(CostModel(), **args)


def test_resolve_keeps_order_and_drops_a_duplicate():
    cost = CostModel()
    slo = 2.5 * cost.decode_s(1, 256)
    budget = tpot_budget(cost, slo, 256)
    assert resolve_chunks((256, "tpot"), cost, slo, 256, None) == ((256, budget), budget)
    assert resolve_chunks((budget, "tpot"), cost, slo, 256, None) == ((budget,), budget)
    assert resolve_chunks((64,), cost, slo, 256, None) == ((64,), None)
    sizes, b = resolve_chunks(("tpot",), cost, slo, 256, 40)  # above max_batch, as every chunk size
    assert sizes == (b,) and b > 40


def test_tpot_entry_only_where_a_search_resolves_it():
    assert chunk_sizes((256, "tpot"), None, 1, tpot=True) == (256, "tpot")
    with pytest.raises(ValueError, match="integers above 1"):
        chunk_sizes((256, "tpot"), None, 1)  # the pools planner has no TPOT budget
    with pytest.raises(ValueError, match="'tpot'"):
        chunk_sizes((256, "tpo"), None, 1, tpot=True)


def test_plan_searches_the_tpot_budget_and_says_it():
    p = plan(None, "chat", max_workers=2, chunk_tokens=(256, "tpot"), progress=False, max_requests=400)
    budget = p.batch["tpot_chunk_tokens"]
    chunked = sorted(c.chunk_tokens for c in p.candidates if c.policy == "chunked")
    assert chunked == sorted({256, budget})
    assert f"the 'tpot' chunk size is {budget} tokens" in p.batch_line


def test_map_budget_follows_each_rows_slo():
    m = split_map(None, 2, [200], (1.5, 8.0), chunk_tokens=("tpot",), max_requests=200, progress=False)
    sizes = [int(c.names["chunked"].split("chunked, ")[1].split("-token")[0]) for c in m.cells]
    assert sizes[0] < sizes[1]  # the tight row's budget is the smaller
    assert m.chunk_steps == []  # no fixed chunk size to count a stall for
    assert "one less than the TPOT budget" in m.batch_words


def test_a_budget_that_cannot_fit_is_said_so():
    p = plan(None, "chat", max_workers=2, chunk_tokens=("tpot",), max_batch=3000, progress=False, max_requests=400)
    budget = p.batch["tpot_chunk_tokens"]
    assert budget == 3001
    assert f"the 'tpot' chunk size is {budget} tokens, the smallest allowed: no budget's hybrid step fits" in \
        p.batch_line


def test_cli_takes_tpot_in_any_case_and_refuses_other_words():
    from conftest import cli
    status, out, err = cli("plan", "--max-workers", "2", "--chunk-tokens", "TPOT", "--json")
    assert status == 0, err
    assert '"tpot_chunk_tokens"' in out
    status, out, err = cli("map", "--chunk-tokens", "256,tpo")
    assert status == 2 and "'tpo' is neither a chunk size (a positive integer) nor tpot" in err


def test_a_fused_step_costs_at_least_its_decode_rows():
    cost = CostModel()  # built in: a 2 ms prefill base against a 3 ms decode base
    for rows, context in ((1, 512), (32, 32 * 512)):
        assert cost.fused_hybrid_s(1, 1, 0, rows, context) == cost.decode_s(rows, context)
        assert cost.fused_hybrid_s(400, 400 ** 2, 0, rows, context) > cost.decode_s(rows, context)
    assert cost.fused_hybrid_s(64, 64 ** 2, 0, 0, 0) == cost.prefill_s(64, 64 ** 2, 0)  # no rows: no floor


def test_a_nan_step_is_never_said_to_fit():
    import dataclasses
    from splitlab.planning.chunk_budget import tpot_budget_words
    nan = dataclasses.replace(CostModel(), prefill_base_s=float("nan"))
    assert tpot_budget(nan, 0.01, 512) == 2
    assert "no budget's hybrid step fits" in tpot_budget_words(nan, 2, 0.01, 512)


def test_numpy_sizes_come_back_as_ints():
    import json
    import numpy as np
    sizes = chunk_sizes([np.int64(128), "tpot"], None, 1, tpot=True)
    assert sizes == (128, "tpot") and type(sizes[0]) is int
    json.dumps(sizes)


def test_rule_of_thumb_on_a_tpot_map_shows_the_budget_step():
    from splitlab.planning.rule_of_thumb import apply_rule
    m = split_map(None, 2, [200, 1000], (1.5, 2.5), chunk_tokens=("tpot",), max_requests=200, progress=False)
    rows = apply_rule(m, [("Llama-3-8B", "H100", "bf16", 2048)], tpot_steps=2.5, check=False)
    step = rows["tpot-token chunk (decode steps)"].iloc[0]
    assert 0 < step <= 2.5  # the budget's step fits the row's SLO of 2.5 decode steps


def test_cli_map_text_names_the_cells_chunk_sizes():
    from conftest import cli
    status, out, err = cli("map", "--workers", "2", "--prompt-tokens", "200", "200", "--columns", "1",
                           "--tpot-steps", "1.5", "1.5", "--rows", "1", "--chunk-tokens", "tpot")
    assert status == 0, err
    assert "one step of a" not in out  # no fixed chunk size to count a stall for
    line = next(x for x in out.splitlines() if x.startswith("best chunked layout's chunk sizes"))
    assert line.endswith(" tokens") and int(line.rsplit(": ", 1)[1].split()[0]) > 1
