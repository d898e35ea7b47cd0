"""plan's and map's searches in two stages (issue 20 item 2, issue 19's plan target; planning.refine): a plain
search brackets and ranks every layout, then the contenders within the plain search's measured error of the best
are searched again on runs that go on while unsettled, the same search for each."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from splitlab.planning import refine as R


def _result(g, lo_passed=True, outcome="found", hi=None):
    points = [dict(rate_per_worker=g, passed=lo_passed)]
    if hi is not None:
        points.append(dict(rate_per_worker=hi, passed=False))
    return SimpleNamespace(goodput_rps_per_worker=g, outcome=outcome, points=points, binding_slo="ttft")


def test_bracket_is_the_highest_pass_and_the_lowest_failure_above_it():
    res = _result(10.0, hi=10.3)
    res.points += [dict(rate_per_worker=12.0, passed=False), dict(rate_per_worker=9.0, passed=True)]
    assert R.bracket(res) == (10.0, 10.3)
    assert R.bracket(_result(0.0, outcome="unmet")) is None
    assert R.bracket(_result(50.0, outcome="unbounded")) is None


def test_contenders_are_those_within_the_margin_of_the_best():
    g = {"a": 10.0, "b": 9.2, "c": 8.9, "d": 5.0}
    assert R.contenders(g, set()) == ["a", "b"]  # c is 11% below: out
    assert R.contenders(g, {"a"}) == ["b"]
    assert R.contenders({"a": 0.0, "b": 0.0}, set()) == []  # no layout meets the SLOs: nothing to refine


def test_a_refined_best_that_drops_brings_the_next_layouts_in():
    results = {"a": _result(10.0, hi=10.3), "b": _result(9.2, hi=9.5), "c": _result(8.5, hi=8.8),
               "d": _result(5.0, hi=5.1), "e": _result(8.8, outcome="unbounded")}
    after = {"a": 8.6, "b": 9.0, "c": 8.9}

    def again(key, plain):
        return _result(after[key], hi=after[key] * 1.03)

    refined = R.refine_contenders(results, again)
    assert refined == ["a", "b", "c"]  # c (8.5) came within 10% of the new best (9.0) once a dropped to 8.6
    assert results["c"].goodput_rps_per_worker == 8.9 and results["d"].goodput_rps_per_worker == 5.0
    assert "e" not in refined  # no bracket (a lower bound): longer runs would not move it


@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan"), True, "0.1"])
def test_a_bad_margin_is_refused(bad):
    with pytest.raises(ValueError, match="margin must be a share in"):
        R.refine_contenders({}, lambda k, r: r, margin=bad)


def test_refine_starts_at_the_bracket_and_refuses_a_plain_extend(monkeypatch):
    calls = []
    monkeypatch.setattr(R, "goodput", lambda *a, **kw: calls.append(kw) or "refined")
    assert R.refine("chat", None, None, _result(10.0, hi=10.3), extend=8, ttft_slo_s=1, tpot_slo_s=1, step=1.25,
                    start_rate_per_worker=3.0) == "refined"
    assert calls[0]["start_rate_per_worker"] == 10.0 and calls[0]["step"] == pytest.approx(1.03)
    assert calls[0]["extend"] == 8
    unmet = _result(0.0, outcome="unmet")
    assert R.refine("chat", None, None, unmet) is unmet and len(calls) == 1  # nothing to refine: no search
    with pytest.raises(ValueError, match="extend of a refined search must be an integer in 2"):
        R.refine("chat", None, None, _result(10.0, hi=10.3), extend=1)


def test_plan_refines_its_contenders_and_says_so():
    from splitlab.planning.planner import plan
    p = plan(None, "code", 0.5, 0.05, max_workers=2, chunk_tokens=(256,), max_requests=200, progress=False)
    best = p.best.goodput_rps_per_worker
    for c in p.candidates:  # every layout left plain is more than 10% below the best, or found no boundary
        assert c.refined or R.bracket(c.result) is None or c.goodput_rps_per_worker < (1 - R.REFINE_MARGIN) * best, \
            c.name
    assert p.search["refined"] == sum(c.refined for c in p.candidates) > 0
    assert [c["refined"] for c in p.to_json()["candidates"]] == list(p.table()["refined"])
    plain = plan(None, "code", 0.5, 0.05, max_workers=2, chunk_tokens=(256,), max_requests=200, progress=False,
                 extend=1)
    assert not any(c.refined for c in plain.candidates) and "plain, never going on" in plain.search_line
    for c in p.candidates:  # stage 1 is the plain search itself
        same = next(d for d in plain.candidates if d.name == c.name)
        assert (c.plain_rps_per_worker if c.refined else c.goodput_rps_per_worker) == same.goodput_rps_per_worker


@pytest.mark.parametrize("bad", [0, 65, 2.5, True])
def test_plan_refuses_a_bad_extend_before_any_search(bad, monkeypatch):
    from splitlab.planning import planner
    monkeypatch.setattr(planner, "goodput", lambda *a, **k: pytest.fail("searched"))
    with pytest.raises(ValueError, match="extend must be an integer in 1 .. 64"):
        planner.plan(None, "code", 0.5, 0.05, max_workers=2, extend=bad, progress=False)


def test_the_map_refines_only_its_close_cells():
    from splitlab.planning import split_map as SM
    m = SM.split_map(None, 2, [16, 1024], [2.5], min_requests=100, max_requests=400, progress=False)
    assert m.refined == sum(len(c.refined) for c in m.cells) and m.extend == SM.MAP_EXTEND
    for c in m.cells:
        best = max(c.goodput.values())
        for kind in ("split", "prefill-first", "chunked"):
            unbounded = any(note.startswith(f"{c.names[kind]} at {c.prompt_tokens} tokens") for note in m.notes)
            if c.names[kind] not in c.refined and not unbounded:  # left plain: more than the margin below the best
                assert c.goodput[kind] < (1 - R.REFINE_MARGIN) * best, (c.prompt_tokens, kind)
        assert c.to_json()["refined"] == list(c.refined)


def test_a_refined_search_lands_within_5_percent_of_runs_20x_longer_where_the_plain_one_does_not():
    """DistServe's toy, 2P+2D, seed 2 (its first 1,000 arrivals 8% faster than the rate asked): the plain search
    lands 7.3% below the search on runs 20x longer (5.424 against 5.853, benchmarks/results/
    goodput_steady_settle_2026-12-03.txt). Refined from its bracket (the planner's and the map's second stage) it
    lands within 5%. Two runs 20x longer (400 lifetimes, 40,000 requests) bound the long-run goodput: one at 6%
    above the plain answer passes (so the plain answer is more than 5% low, and the refined one is not above it),
    one 5% above the refined answer fails (so the refined one is less than 5% low)."""
    from splitlab.costmodel import roofline_cost_model
    from splitlab.serving import CostModelExecutor, Fixed, ServingConfig, WorkloadSpec, attainment_curve, goodput
    toy = WorkloadSpec("toy", Fixed(512), Fixed(64))
    ex = CostModelExecutor(roofline_cost_model("OPT-13B", "A100-80GB", "fp16", link="NVLink 3 (A100)"))
    cfg = ServingConfig.disaggregated(2, 2, max_batch=64)
    search = dict(ttft_slo_s=0.4, tpot_slo_s=0.04, scale=1.0, seed=2)
    plain = goodput(toy, cfg, ex, step=1.25, extend=1, **search)
    refined = R.refine(toy, cfg, ex, plain, **search)
    g0, g1 = plain.goodput_rps_per_worker, refined.goodput_rps_per_worker
    above_plain, above_refined = max(1.06 * g0, g1), 1.05 * g1
    long = attainment_curve(toy, cfg, ex, rates_per_worker=[above_plain, above_refined], lifetimes=400,
                            min_requests=40000, max_requests=40000, **search)
    assert list(long["passed"]) == [True, False], long[["rate_per_worker", "attainment", "passed"]]
    assert any(p["extended"] for p in refined.points) and g1 > g0
