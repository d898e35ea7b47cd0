"""Metric definitions (DESIGN.md section 3) on hand-made timestamps: no model, no simulation."""
from __future__ import annotations

import math

import numpy as np
import pytest

from splitlab.serving import Request, metrics as M


def served(arrival: float, times: list[float], rid: int = 0) -> Request:
    r = Request(rid, arrival, [1, 2, 3], len(times))
    for i, t in enumerate(times):
        r.emit(i, t)
    return r


def test_ttft_itl_tpot_e2e_of_one_request():
    r = served(1.0, [1.5, 1.6, 1.8, 2.1])
    assert M.ttft_s(r) == pytest.approx(0.5)
    np.testing.assert_allclose(M.itl_s(r), [0.1, 0.2, 0.3])      # 3 gaps for 4 tokens; TTFT is not one
    assert M.e2e_s(r) == pytest.approx(1.1)
    assert M.tpot_s(r) == pytest.approx((1.1 - 0.5) / 3)          # (E2E - TTFT) / (tokens - 1)
    assert M.tpot_s(r) == pytest.approx(M.itl_s(r).mean())


def test_single_token_request_has_no_tpot_but_meets_any_tpot_slo():
    r = served(0.0, [0.2])
    assert math.isnan(M.tpot_s(r)) and M.itl_s(r).size == 0
    assert M.meets_slo(r, ttft_slo_s=0.3, tpot_slo_s=1e-9)
    assert not M.meets_slo(r, ttft_slo_s=0.1, tpot_slo_s=None)


def test_unfinished_and_rejected_requests():
    r = Request(0, 0.0, [1], 3)
    r.emit(5, 0.4)
    assert M.ttft_s(r) == pytest.approx(0.4) and math.isnan(M.e2e_s(r)) and math.isnan(M.tpot_s(r))
    rej = Request(1, 0.0, [1], 3)
    rej.reject("too big", 0.0)
    assert math.isnan(M.ttft_s(rej)) and not M.meets_slo(rej, None, None)


def test_slo_attainment_needs_both_slos_and_counts_rejections_as_misses():
    fast = served(0.0, [0.1, 0.2, 0.3], 0)           # TTFT 0.1, TPOT 0.1
    slow_first = served(0.0, [0.9, 1.0, 1.1], 1)     # TTFT 0.9, TPOT 0.1
    slow_stream = served(0.0, [0.1, 0.6, 1.1], 2)    # TTFT 0.1, TPOT 0.5
    rejected = Request(3, 0.0, [1], 2)
    rejected.reject("no room", 0.0)
    reqs = [fast, slow_first, slow_stream, rejected]
    assert M.slo_attainment(reqs, 0.5, 0.2) == pytest.approx(1 / 4)
    assert M.slo_attainment(reqs, 1.0, 0.2) == pytest.approx(2 / 4)
    assert M.slo_attainment(reqs, None, None) == pytest.approx(3 / 4)
    assert math.isnan(M.slo_attainment([], 1, 1))


def test_percentiles_match_numpy_linear_interpolation():
    p = M.percentiles(range(1, 101))
    assert p["p50"] == pytest.approx(50.5) and p["p90"] == pytest.approx(90.1) and p["p99"] == pytest.approx(99.01)
    assert p["mean"] == pytest.approx(50.5)
    assert all(math.isnan(v) for v in M.percentiles([]).values())
    assert M.percentiles([float("nan"), 2.0])["p50"] == 2.0


def test_throughput_counts_output_tokens_over_the_run_and_every_worker():
    a = served(0.0, [0.5, 1.0], 0)
    b = served(1.0, [1.5, 2.0, 3.0, 4.0], 1)
    t = M.throughput([a, b], n_workers=2)
    assert t["duration_s"] == pytest.approx(4.0)
    assert t["throughput_tokens_per_s"] == pytest.approx(6 / 4.0)
    assert t["throughput_tokens_per_s_per_worker"] == pytest.approx(6 / 4.0 / 2)
    assert t["input_tokens_per_s"] == pytest.approx(6 / 4.0)
    with pytest.raises(ValueError):
        M.throughput([a], n_workers=0)


def test_goodput_is_the_highest_rate_before_attainment_first_drops_below_target():
    pts = [(3, 0.85), (1, 1.0), (2, 0.95), (4, 0.92)]            # 4 passes by luck after 3 failed
    assert M.goodput(pts) == 2
    assert M.goodput(pts, workers=2) == 1.0                       # per worker
    assert M.goodput(pts, target=0.8) == 4
    assert M.goodput([(1, 0.5)]) == 0.0
    with pytest.raises(ValueError):
        M.goodput([])


def test_summary_and_request_table():
    reqs = [served(0.0, [0.1, 0.2, 0.3], 0), served(0.5, [0.7, 0.8], 1)]
    s = M.summarize(reqs, n_workers=1, ttft_slo_s=0.15, tpot_slo_s=0.2)
    assert (s["submitted"], s["completed"], s["rejected"]) == (2, 2, 0)
    assert s["slo_attainment"] == 0.5 and set(s["ttft_s"]) == {"p50", "p90", "p99", "mean"}
    assert s["itl_s"]["mean"] == pytest.approx(0.1)
    table = M.request_table(reqs)
    assert list(table.id) == [0, 1] and table.ttft_s.tolist() == pytest.approx([0.1, 0.2])


def test_request_refuses_bad_input_and_time_running_backwards():
    with pytest.raises(ValueError):
        Request(0, 0.0, [], 3)
    with pytest.raises(ValueError):
        Request(0, 0.0, [1], 0)
    with pytest.raises(ValueError):
        Request(0, -1.0, [1], 1)
    r = served(0.0, [1.0])
    with pytest.raises(RuntimeError):
        r.emit(1, 2.0)                                            # already finished
    r2 = Request(1, 0.0, [1], 3)
    r2.emit(1, 1.0)
    with pytest.raises(RuntimeError):
        r2.emit(1, 0.5)
    fresh = r2.fresh()
    assert fresh.output == [] and fresh.token_times_s == [] and fresh.prompt == r2.prompt


def _per_request_summary(reqs, ttft_slo, tpot_slo):
    """The metrics of summarize, request by request with the per-request functions (the reference its numpy
    arrays must equal, float for float)."""
    done = [r for r in reqs if r.state.value == "finished"]
    return dict(ttft=[M.ttft_s(r) for r in done], ttst=[M.ttst_s(r) for r in done], tpot=[M.tpot_s(r) for r in done],
                e2e=[M.e2e_s(r) for r in done], met=sum(M.meets_slo(r, ttft_slo, tpot_slo) for r in reqs),
                tokens=sum(len(r.output) for r in done), duration=max(r.finish_s for r in done) - min(
                    r.arrival_s for r in reqs))


@pytest.mark.parametrize("slos", [(1.0, 0.1), (0.05, 0.01), (None, 0.02), (0.3, None), (None, None)])
def test_summarize_over_arrays_equals_the_per_request_definitions(slos):
    """summarize, slo_attainment and slo_misses work on numpy arrays of the requests' times; they give the very
    floats and counts of the per-request functions, with rejected, failed, unfinished, one-token requests and an
    integer arrival time among them."""
    from splitlab.serving import ServingConfig, make_workload, run
    reqs = make_workload("chat", 300, 60.0, seed=1)
    res = run(reqs, ServingConfig.disaggregated(1, 2, trace=False))
    extra = [served(3, [3.5], 900), Request(901, 1.0, [1], 3), Request(902, 2.0, [1, 2], 2)]
    extra[1].emit(7, 1.2)  # unfinished: one token of three
    extra[2].fail("worker lost", 2.5)
    requests = res.requests + extra
    m, ref = M.summarize(requests, 3, *slos), _per_request_summary(requests, *slos)
    for name in ("ttft", "ttst", "tpot", "e2e"):
        assert m[f"{name}_s"] == M.percentiles(ref[name]), name
    assert m["slo_attainment"] == ref["met"] / len(requests) == M.slo_attainment(requests, *slos)
    assert m["duration_s"] == ref["duration"] and m["throughput_tokens_per_s"] == ref["tokens"] / ref["duration"]
    misses = M.slo_misses(requests, *slos)
    first_miss = [M._miss(r, *slos) for r in requests]  # the per-request reason, in the order of slo_misses
    transfer = sum(M.transfer_caused(r, k, *slos) for r, k in zip(requests, first_miss) if k in ("ttft", "ttst"))
    assert misses == {**{k: first_miss.count(k) for k in ("unfinished", "ttft", "ttst", "tpot")}, "transfer": transfer}
    assert sum(misses.values()) - transfer == len(requests) - ref["met"] and misses["unfinished"] == 2
    assert (m["submitted"], m["completed"], m["failed"]) == (len(requests), len(requests) - 2, 1)
