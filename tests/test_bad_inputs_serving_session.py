"""Bad input to serving found by a hostile tester's pass over ServingConfig, workloads, validate() and goodput:
each is refused early, in one line, naming the problem (before: 300-digit TPOTs, runs without a TPOT, NaN tables,
errors after the expensive runs, or a "did not converge" that named options the CLI does not have)."""
from __future__ import annotations

import math

import pytest

from conftest import cli
from splitlab.serving import ServingConfig


def _one_line(status, out, err, expected_status=1):
    assert status == expected_status and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


# --- 1. the link between the pools ---------------------------------------------------------------------------

@pytest.mark.parametrize("bandwidth", [1e-291, 1e-300, 999.0])
def test_a_link_slower_than_1_kb_per_s_is_refused(bandwidth):
    with pytest.raises(ValueError, match=r"link_bytes_per_s must be >= 1000 bytes/s \(1 kB/s.*got .* bytes/s"):
        ServingConfig.disaggregated(link_bytes_per_s=bandwidth)
    assert ServingConfig.disaggregated(link_bytes_per_s=1e3).link_bytes_per_s == 1e3


def test_the_cli_refuses_a_link_of_1e_300_gbps_before_serving():
    # it printed a TPOT P50 of ~300 digits of ms and a clock near 1e297 s
    err = _one_line(*cli("simulate", "--layout", "disaggregated", "--link-gbps", "1e-300"))
    assert "link_bytes_per_s must be >= 1000 bytes/s" in err and "(1e-300 GB/s)" in err


@pytest.mark.parametrize("options, message", [
    (dict(link_bytes_per_s=math.inf), "link_bytes_per_s must be > 0 and finite, in bytes/s .*got inf"),
    (dict(link_bytes_per_s=-math.inf), "link_bytes_per_s must be > 0 and finite, in bytes/s .*got -inf"),
    (dict(link_bytes_per_s=1e9, link_latency_s=math.inf), "link_latency_s must be a finite time >= 0 s, got inf"),
    (dict(link_bytes_per_s=1e9, link_latency_s=math.nan), "link_latency_s must be a finite time >= 0 s, got nan"),
    (dict(link_bytes_per_s=1e9, link_latency_s=1e300), r"link_latency_s must be <= 3600 s \(an hour"),
])
def test_a_link_that_is_not_finite_is_refused_saying_finite(options, message):
    with pytest.raises(ValueError, match=message):
        ServingConfig.disaggregated(**options)
