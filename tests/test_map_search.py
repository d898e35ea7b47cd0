"""How the map searches its cells (splitlab.planning.map_search): starts learned from the nearest cell searched
before, and the splits one run rules out. The map they make is the map that searching every layout of every cell
in full from its closed form makes, within the searches' tolerance, in fewer runs."""
from __future__ import annotations

import math

import pytest

from splitlab.costmodel import CostModel
from splitlab.planning.closed_form import first_guess, link_capacity, split_capacity
from splitlab.planning.map_search import CellSearch, MapStarts
from splitlab.planning.split_map import _spec, split_map
from splitlab.serving import CostModelExecutor, ServingConfig, goodput

#: tests/test_split_map.py's crafted model: 10 ms decode steps whatever the batch, 1 ms per prompt token
CRAFTED = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-3, decode_base_s=0.01, decode_per_seq_s=0.0,
                    decode_per_token_s=0.0, transfer_base_s=0.0, transfer_bytes_per_s=math.inf,
                    kv_bytes_per_token=64, max_context=2048,
                    source="crafted: 10 ms decode steps, 1 ms per prompt token")
MAP = dict(prompt_tokens=[10, 500], tpot_steps=[1.5, 4.0], output_tokens=128, max_batch=16, max_requests=300,
           chunk_tokens=(256,))  # the chunk _full searches
TOL = 0.05


class _Result:
    def __init__(self, outcome, g):
        self.outcome, self.goodput_rps_per_worker = outcome, g


def test_the_nearest_cell_teaches_the_same_column_first():
    s = MapStarts()
    assert s.factor(("chunked 256",), (1, 1)) is None
    s.learn(("chunked 256",), (0, 1), 10.0, _Result("found", 30.0))  # above: 3x its closed form
    s.learn(("chunked 256",), (1, 0), 10.0, _Result("found", 20.0))  # to the left: 2x
    assert s.factor(("chunked 256",), (1, 1)) == pytest.approx(3.0)  # both one cell away: the same column
    assert s.factor(("chunked 256",), (1, 2)) == pytest.approx(3.0)  # two away from both: the column nearer
    assert s.factor(("chunked 256",), (2, 0)) == pytest.approx(2.0)
    s.learn(("split 2", "split"), (0, 0), 4.0, _Result("found", 2.0))
    assert s.factor(("split 3", "split"), (0, 1)) == pytest.approx(0.5)  # no 3P+1D seen: any split's
    for outcome, g, first in (("unmet", 0.0, 4.0), ("unbounded", 9.0, 4.0), ("found", 2.0, math.inf),
                              ("found", 2.0, 0.0)):
        t = MapStarts()
        t.learn(("prefill-first",), (0, 0), first, _Result(outcome, g))
        assert t.factor(("prefill-first",), (0, 0)) is None  # only a boundary found from a finite guess teaches


def _full(cell_args):
    """Every layout of one cell searched in full from its closed form (the map before map_search): goodputs."""
    ex, prompt, k = CostModelExecutor(CRAFTED), *cell_args
    ttft, tpot = 5 * CRAFTED.prefill_s(prompt), k * CRAFTED.decode_s(1, prompt)
    guess = first_guess(CRAFTED, [prompt], [128], ttft, tpot, 4, 16)
    search = dict(ttft_slo_s=ttft, tpot_slo_s=tpot, tolerance=TOL, min_requests=100, max_requests=300, scale=1.0,
                  extend=1, step=1.25)
    out, runs = {"split": 0.0}, 0
    for x in (1, 2, 3):
        r = goodput(_spec(prompt, 128), ServingConfig.disaggregated(x, 4 - x, max_batch=16), ex, **search,
                    start_rate_per_worker=split_capacity(guess["prefill_rps"], guess["decode_rps"], x, 4 - x))
        out["split"], runs = max(out["split"], r.goodput_rps_per_worker), runs + len(r.points)
    for kind, cfg in (("prefill-first", ServingConfig.colocated(4, max_batch=16)),
                      ("chunked", ServingConfig.colocated(4, policy="chunked", chunk_tokens=256, max_batch=16))):
        r = goodput(_spec(prompt, 128), cfg, ex, **search, start_rate_per_worker=guess["colocated_rps"])
        out[kind], runs = r.goodput_rps_per_worker, runs + len(r.points)
    return out, runs


def test_the_map_matches_full_searches_in_fewer_runs():
    m = split_map(CRAFTED, 4, progress=False, **MAP)
    runs = 0
    for c in m.cells:
        full, n = _full((c.prompt_tokens, c.tpot_steps))
        runs += n
        for kind, g in full.items():  # each search lands within its tolerance below the boundary: 2 x apart at most
            assert c.goodput[kind] == pytest.approx(g, rel=2 * TOL), (c.prompt_tokens, c.tpot_steps, kind)
    assert 4 * len(m.cells) <= m.searches <= 5 * len(m.cells)  # 2 or 3 splits (x +- 1 within 1 .. 3), 2 colocated
    assert 0 < m.runs < 0.75 * runs, (m.runs, runs)  # 55 against 103 when written
    assert m.to_json()["runs"] == m.runs


def test_a_split_below_the_best_is_ruled_out_in_one_run():
    prompt, k = 500, 1.5  # the long-prompt corner: 3P+1D serves 1.5 per worker, 1P+3D at most 2 / 4 = 0.5
    ex = CostModelExecutor(CRAFTED)
    ttft, tpot = 5 * CRAFTED.prefill_s(prompt), k * CRAFTED.decode_s(1, prompt)
    guess = first_guess(CRAFTED, [prompt], [128], ttft, tpot, 4, 16)
    mu = (guess["prefill_rps"], guess["decode_rps"])
    layouts = [(x, ServingConfig.disaggregated(x, 4 - x, max_batch=16), split_capacity(*mu, x, 4 - x), math.inf)
               for x in (3, 1)]
    finder = CellSearch(ex, dict(tolerance=TOL, min_requests=100, max_requests=300, seed=0, extend=1))
    (best_cfg, best), (cfg, ruled_out) = finder.splits((0, 0), _spec(prompt, 128), ttft, tpot, layouts, mu)
    assert ruled_out is None and best.outcome == "found" and finder.searches == 2
    assert finder.runs == len(best.points) + 1
    full = goodput(_spec(prompt, 128), cfg, ex, ttft_slo_s=ttft, tpot_slo_s=tpot, tolerance=TOL, min_requests=100,
                   max_requests=300, scale=1.0, extend=1)
    assert full.goodput_rps_per_worker < best.goodput_rps_per_worker  # what the one run said


@pytest.mark.parametrize("bad", [1, 0, 2.5, True, "2000"])
def test_a_bad_min_requests_is_refused(bad):
    with pytest.raises(ValueError, match="min_requests must be an integer >= 2 or None"):
        split_map(CRAFTED, 4, prompt_tokens=[64], tpot_steps=[2.0], min_requests=bad, progress=False)


def test_a_slow_link_bounds_the_closed_form_of_a_split():
    # one NIC per worker, held for a whole transfer at both ends: 1P+3D carries one cache at a time, 2P+2D two
    assert link_capacity(0.5, 1, 3) == pytest.approx(1 / 0.5 / 4) and link_capacity(0.5, 2, 2) == pytest.approx(1.0)
    assert link_capacity(0.0, 1, 3) == math.inf
    with pytest.raises(ValueError, match="transfer_s must be a time >= 0 s"):
        link_capacity(float("nan"), 1, 3)
    for x, y in ((0, 0), (-1, 2), (1, 0), (1.5, 2), (True, 2)):  # (0, 0) was a ZeroDivisionError, (-1, 2) -1.0 req/s
        with pytest.raises(ValueError, match="prefill_workers and decode_workers must be integers >= 1"):
            link_capacity(0.5, x, y)
    # 500-token caches of 64 B per token (32 kB) at 20 kB/s: 1.6 s each. The closed form alone ranks 3P+1D best
    # (1.5 per worker); the link bounds it at 1 / 1.6 / 4 = 0.16 and 2P+2D at 0.31: the split the map searches first
    ex = CostModelExecutor(CRAFTED)
    slow = split_map(CRAFTED, 4, prompt_tokens=[500], tpot_steps=[1.5], output_tokens=128, max_batch=16,
                     link_bytes_per_s=2e4, max_requests=300, progress=False)
    fast = split_map(CRAFTED, 4, prompt_tokens=[500], tpot_steps=[1.5], output_tokens=128, max_batch=16,
                     max_requests=300, progress=False)
    (s,), (f,) = slow.cells, fast.cells
    assert s.names["split"] == "2P+2D" and f.names["split"] == "3P+1D", (s.names, f.names)
    full = {x: goodput(_spec(500, 128), ServingConfig.disaggregated(x, 4 - x, max_batch=16, link_bytes_per_s=2e4),
                       ex, ttft_slo_s=s.ttft_slo_s, tpot_slo_s=s.tpot_slo_s, tolerance=TOL, min_requests=100,
                       max_requests=300, scale=1.0, extend=1).goodput_rps_per_worker for x in (1, 2, 3)}
    assert s.goodput["split"] == pytest.approx(max(full.values()), rel=2 * TOL) and max(full, key=full.get) == 2
