"""Bad input to serving found by a hostile tester's pass over ServingConfig, workloads, validate() and goodput:
each is refused early, in one line, naming the problem (before: 300-digit TPOTs, runs without a TPOT, NaN tables,
errors after the expensive runs, or a "did not converge" that named options the CLI does not have)."""
from __future__ import annotations

import math

import pytest

from conftest import cli
from splitlab.serving import ServingConfig, make_workload
from splitlab.serving.workload import Fixed, WorkloadSpec


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


# --- 2, 3. workload scales and contexts too small for a TPOT ----------------------------------------------------

class _Context:
    """What make_workload reads of a model."""

    def __init__(self, max_context: int):
        self.max_context, self.vocab_size = max_context, 256


@pytest.mark.parametrize("scale", [1e-300, 0.001, 0.0156])
def test_a_scale_that_cuts_every_answer_to_one_token_is_refused_with_the_smallest_that_works(scale):
    # "completed 5/5" with TPOT n/a: chat's longest answer (96 tokens) x 0.0156 rounds to 1
    with pytest.raises(ValueError, match=r"scale .* cuts every chat answer to one token \(the longest, 96 tokens, "
                                         r"becomes .*\): no TPOT could be measured; use a scale >= 0.0157"):
        make_workload("chat", 3, 1.0, scale=scale)
    reqs = make_workload("chat", 50, 1.0, scale=0.0157)  # the smallest scale it names works
    assert max(r.max_new_tokens for r in reqs) == 2
    err = _one_line(*cli("simulate", "--scale", str(scale), "--requests", "5"))
    assert "no TPOT could be measured; use a scale >= 0.0157" in err


def test_a_scale_that_shrinks_every_prompt_below_a_token_is_refused():
    spec = WorkloadSpec("ttft only", Fixed(1), Fixed(1))  # one answer token by design: allowed at scale 1
    assert len(make_workload(spec, 2, 1.0, scale=1.0)) == 2
    with pytest.raises(ValueError, match=r"scale 0.4 shrinks every ttft only prompt below one token \(the longest, "
                                         r"1 tokens, becomes 0.4\); use a scale >= 0.501"):
        make_workload(spec, 2, 1.0, scale=0.4)


@pytest.mark.parametrize("scale", [None, 1.0])
def test_a_context_of_one_token_gets_its_own_message(scale):
    # was "use a scale <= -0.0312" (with a scale) or "request 0: empty prompt" (without)
    with pytest.raises(ValueError, match="a context of 1 token cannot hold a prompt and one answer token: a workload "
                                         "needs a model \\(or cost model\\) with max_context >= 2"):
        make_workload("chat", 3, 1.0, model=_Context(1), scale=scale)


def test_no_scale_fits_a_context_of_two_tokens():
    # was "use a scale <= 0"
    with pytest.raises(ValueError, match="no scale fits a context of 2 tokens: .* a scale needs max_context >= 3"):
        make_workload("chat", 3, 1.0, model=_Context(2), scale=0.5)
    with pytest.raises(ValueError, match="use a scale <= 0.0312"):  # a context of 3: the old message, positive
        make_workload("chat", 3, 1.0, model=_Context(3), scale=1.0)
