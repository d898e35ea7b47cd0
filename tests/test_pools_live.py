"""What chapter 7's steady-state check of the map (test_map_steady.py) is built on (issue 22 item 3): the map's
layout names as ServingConfigs (pools_live), the probe and the cost model rescaled by it, the cell placed back at its
map coordinates (pools_live_probe), and the verdict's interval and tie test (pools_live_words). Maps and attainments
are crafted; one test probes the tiny model. The helpers NAMES, _cell and _map serve test_map_steady.py too."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from splitlab.costmodel import CostModel
from splitlab.planning import split_map as SM
from splitlab.planning.map_result import Cell, SplitMap
from splitlab.teach.figures import pools_live
from splitlab.teach.figures.pools_live_probe import cell_now, rescaled, step_probe, step_ratios
from splitlab.teach.figures.pools_live_words import even, gap_interval

NAMES = {"split": "1P+1D", "prefill-first": "2 colocated (prefill-first)",
         "chunked": "2 colocated (chunked, 256-token chunks)"}


def _cell(prompt: int, tpot_steps: float, goodput: dict, cost=CostModel()) -> Cell:
    return Cell(prompt, SM.prefill_steps(cost, prompt), tpot_steps, 5 * cost.prefill_s(prompt),
                tpot_steps * cost.decode_s(1, prompt), goodput, {k: "tpot" for k in goodput}, dict(NAMES)).decide(0.1)


def _map(cells) -> SplitMap:
    prompts = sorted({c.prompt_tokens for c in cells})
    return SplitMap(cells, 2, prompts, [], sorted({c.tpot_steps for c in cells}), 64, 5.0, None, 0.1, "built-in",
                    [256])


def test_layout_config_reads_every_name_a_map_writes():
    assert pools_live.layout_config("2P+2D", 4, [256]).name == "2P+2D"
    assert pools_live.layout_config("4 colocated (prefill-first)", 4, [256]).policy == "prefill-first"
    cfg = pools_live.layout_config("4 colocated (chunked, 256-token chunks)", 4, [256], max_batch=16)
    assert (cfg.policy, cfg.chunk_tokens, cfg.max_batch) == ("chunked", 256, 16)
    with pytest.raises(ValueError, match="not a layout name"):
        pools_live.layout_config("4 workers", 4, [256])


def test_rescaled_scales_prefill_and_decode_apart():
    cost = CostModel(prefill_per_token2_s=1e-8, hybrid_per_row_s=1e-4, decode_batched_s=1e-3)
    now = rescaled(cost, 1.5, 0.5)
    assert now.prefill_s(300) == pytest.approx(1.5 * cost.prefill_s(300))
    assert now.decode_s(4, 900) == pytest.approx(0.5 * cost.decode_s(4, 900))
    assert now.hybrid_s(128, 128 ** 2, 0, 3, 600) == pytest.approx(1.5 * cost.hybrid_s(128, 128 ** 2, 0, 3, 600))
    assert now.transfer_s(10 ** 6) == cost.transfer_s(10 ** 6) and "prefill x1.5, decode x0.5" in now.source
    for bad in (0, -1.0, float("inf"), float("nan"), True, "2"):
        with pytest.raises(ValueError, match="prefill must be a finite factor"):
            rescaled(cost, bad, 1.0)


def test_cell_now_puts_the_cell_back_at_its_map_coordinates():
    cost = CostModel()
    cell = _cell(400, 2.5, {"split": 10, "prefill-first": 5, "chunked": 4})
    m = _map([cell])
    assert cell_now(m, cell, cost) == (400, pytest.approx(cell.ttft_slo_s), pytest.approx(cell.tpot_slo_s))
    # prefills 2x slower, decode steps as fast: the prefill of a shorter prompt costs the cell's decode steps
    now = rescaled(cost, 2.0, 1.0)
    prompt, ttft, tpot = cell_now(m, cell, now)
    assert prompt < 300 and SM.prefill_steps(now, prompt) == pytest.approx(cell.prefill_steps, rel=0.01)
    assert ttft == pytest.approx(5 * now.prefill_s(prompt)) and tpot == pytest.approx(2.5 * now.decode_s(1, prompt))


def test_gap_interval_is_students_t_over_the_seeds():
    att = pd.DataFrame({"a": [100.0, 92.0, 100.0], "b": [96.0, 42.0, 42.0]})  # the thin lead a page once passed
    g = gap_interval(att, "a", "b")
    sd = np.std([4, 50, 58], ddof=1)
    assert g["mean"] == pytest.approx(112 / 3) and (g["low"], g["high"]) == (4, 58)
    assert (g["ci_low"], g["ci_high"]) == (pytest.approx(112 / 3 - 4.303 * sd / np.sqrt(3)), 100)  # +110: clipped
    assert not g["excludes_zero"]  # every seed ahead, but one by a single request of 24: not outside the spread
    same = gap_interval(pd.DataFrame({"a": [80.0] * 4, "b": [60.0] * 4}), "a", "b")
    assert (same["ci_low"], same["ci_high"], same["excludes_zero"]) == (20, 20, True)
    one = gap_interval(pd.DataFrame({"a": [80.0], "b": [10.0]}), "a", "b")
    assert one["ci_low"] == -np.inf and not one["excludes_zero"]  # one seed: no spread to judge against


def test_a_tie_needs_an_even_gap_not_an_interval_that_holds_zero():
    # ch07's 2026-12-05 tie: b at 100% in every simulated seed, a at 79/42/42: the interval holds zero, but no tie
    leans = gap_interval(pd.DataFrame({"a": [79.0, 42, 42], "b": [100.0, 100, 100]}), "a", "b")
    assert not leans["excludes_zero"] and not even(leans)
    # ch07's 2026-12-05 tie at 03:00: gaps of 0, -54 and -50 (a seed both served whole): no seed lean the other way
    hidden = gap_interval(pd.DataFrame({"a": [100.0, 46, 50], "b": [100.0, 100, 100]}), "a", "b")
    assert not hidden["excludes_zero"] and not hidden["decisive"] and not even(hidden)
    # an equivalence test (Schuirmann's two one-sided tests): the 90% interval within +-TIE_GAP, t of T95
    g = gap_interval(pd.DataFrame({"a": [100.0, 86, 95], "b": [100.0, 95, 92]}), "a", "b")
    se = np.std([0, -9, 3], ddof=1) / np.sqrt(3)
    assert (g["eq_low"], g["eq_high"]) == (pytest.approx(-2 - 2.920 * se), pytest.approx(-2 + 2.920 * se))
    assert not even(g)  # -2 +- 10.5: holds zero, but no tie shown
    assert even(gap_interval(pd.DataFrame({"a": [90.0, 80, 85], "b": [88.0, 81, 85]}), "a", "b"))  # 90%: +-2.6


def test_step_ratios_read_each_kind_of_step_against_the_cost_model():
    cost = CostModel()
    log = [dict(kind="decode", batch=2, context_tokens=300, batched=1, step_s=1.5 * cost.decode_s(2, 300)),
           dict(kind="decode", batch=1, context_tokens=100, batched=0, step_s=1.5 * cost.decode_s(1, 100)),
           dict(kind="decode", batch=1, context_tokens=100, batched=0, step_s=9 * cost.decode_s(1, 100)),  # a stall
           dict(kind="prefill", tokens=200, squares=200 ** 2, masked_pairs=0, prefill_s=0.5 * cost.prefill_s(200))]
    t = step_ratios(cost, log)
    assert list(t.index) == ["prefill", "decode"] and list(t["steps"]) == [1, 3]
    assert t.loc["decode", "measured / predicted"] == pytest.approx(1.5)  # the median: one stall does not move it
    assert t.loc["prefill", "measured / predicted"] == pytest.approx(0.5)


def test_step_probe_times_prefill_and_decode_on_the_real_model(lm):
    probe = step_probe(lm, CostModel(), 64, requests=2)
    assert probe["prefill"] > 0 and probe["decode"] > 0 and list(probe["steps"].index) == ["prefill", "decode"]
    with pytest.raises(ValueError, match="requests must be"):
        step_probe(lm, CostModel(), 64, requests=0)


def test_a_map_on_a_slower_link_serves_its_layouts_on_that_link():
    """A slow map's cell is served on its own link (its bandwidth, no latency), the cost model's link otherwise."""
    fast = _map([_cell(512, 2.5, {"split": 3, "prefill-first": 5.2, "chunked": 10})])
    slow = SplitMap(fast.cells, 2, [512], [], [2.5], 64, 5.0, 1e7, 0.1, "built-in", [256])
    assert pools_live._on_link(fast, {"max_batch": 8}) == {"max_batch": 8}
    cfg = pools_live.layout_config("1P+1D", 2, [256], **pools_live._on_link(slow, {"max_batch": 8}))
    assert (cfg.link_bytes_per_s, cfg.link_latency_s, cfg.max_batch) == (1e7, 0.0, 8)
