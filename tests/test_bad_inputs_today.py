"""Hostile but realistic input to the day's new work (issues 18 and 21): goodput's and plan's limits, the
defaults chosen from the device, progress bars, threads and the trained model's cache. Each test reproduces a
failure found by trying it (a traceback, an error naming an argument the caller does not have, silent garbage)."""
from __future__ import annotations

import pytest

import splitlab as sl
from splitlab.planning.defaults import choose_defaults
from splitlab.serving import ServingConfig, goodput

ONE = ServingConfig.colocated(1)


@pytest.mark.parametrize("slo", [1e300, 1e308])
def test_goodput_huge_slos_answer_or_name_the_slos(slo):
    # 1e300 raised OverflowError (cannot convert float infinity to integer); 1e308 named duration_s and
    # min_requests, which the caller never gave
    if slo == 1e308:
        with pytest.raises(ValueError, match=r"^ttft_slo_s \+ tpot_slo_s must be at most"):
            goodput("chat", ONE, ttft_slo_s=slo, tpot_slo_s=slo, max_requests=200)
    else:
        res = goodput("chat", ONE, ttft_slo_s=slo, tpot_slo_s=slo, max_requests=200)
        assert res.outcome == "unbounded" and res.goodput_rps_per_worker > 0


def test_goodput_huge_start_rate_is_an_answer():
    # a start rate of 1e308 raised OverflowError: rate x workers x duration was inf requests
    res = goodput("chat", ONE, ttft_slo_s=0.1, tpot_slo_s=0.01, max_requests=200, start_rate_per_worker=1e308)
    assert res.outcome == "found" and 5 < res.goodput_rps_per_worker < 100


def test_goodput_target_as_text_is_one_clear_error():
    # "'<' not supported between instances of 'int' and 'str'"
    with pytest.raises(ValueError, match=r"target must be in \(0, 1\].*got '0.9'"):
        goodput("chat", ONE, ttft_slo_s=0.1, tpot_slo_s=0.01, target="0.9")
