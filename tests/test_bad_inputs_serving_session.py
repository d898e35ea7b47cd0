"""Bad input to serving found by a hostile tester's pass over ServingConfig, workloads, validate() and goodput:
each is refused early, in one line, naming the problem (before: 300-digit TPOTs, runs without a TPOT, NaN tables,
errors after the expensive runs, or a "did not converge" that named options the CLI does not have)."""
from __future__ import annotations

import json
import math
import re

import pytest

from conftest import cli
from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, ServingConfig, make_workload
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


# --- 4. validate(): nothing to compare, empty mappings, in-run too small, a recalibrate that returns nothing -----

def _validate(**kw):
    """validate() with the cost model standing in for the emulated executor: no model is loaded."""
    from splitlab.serving import validation as V
    options = dict(workloads={"chat": 5.0}, contenders={"split": ServingConfig.disaggregated(1, 1,
                                                                                            kv_budget_bytes=None)},
                   n_requests=6, executor=CostModelExecutor(CostModel()))
    return V.validate(_Context(2048), kw.pop("cost", CostModel()), **dict(options, **kw))


def test_validate_runs_on_a_stand_in_executor():
    table = _validate()
    assert len(table) == 4 and table.abs_error.max() < 1e-9  # the same cost model twice


@pytest.mark.parametrize("n", [0, -3, 2.5, True])
def test_validate_refuses_a_request_count_below_one_up_front(n):
    # 0 returned all-NaN rows and verdict() failed with pandas' "Encountered all NA values"
    with pytest.raises(ValueError, match=f"n_requests must be a whole number >= 1 \\(requests served per workload\\), "
                                         f"got {n!r}"):
        _validate(n_requests=n, executor=object())  # refused before the executor is touched


def test_validate_says_which_contender_completed_nothing():
    starved = {"starved": ServingConfig.colocated(1, kv_budget_bytes=1)}
    with pytest.raises(ValueError, match="contender 'starved' completed none of the 6 chat requests \\(request 0 "
                                         "rejected: needs .* bytes of KV cache .*\\): no TTFT or TPOT to compare"):
        _validate(contenders=starved)


@pytest.mark.parametrize("what, default", [("workloads", "default_rates"), ("contenders", "validation_contenders")])
def test_validate_refuses_an_empty_mapping_instead_of_the_default(what, default):
    said = f"{what} must be a non-empty mapping \\(or None: {default}\\(\\)\\), got {{}}"
    with pytest.raises(ValueError, match=said):
        _validate(**{what: {}}, executor=object())


def test_validate_checks_every_workload_before_the_first_run():
    # a misspelt second workload failed only after the first one's runs
    with pytest.raises(KeyError, match="unknown workload 'nope'"):
        _validate(workloads={"chat": 5.0, "nope": 1.0}, executor=object())
    with pytest.raises(TypeError, match="contender 'x' must be a ServingConfig, got dict"):
        _validate(contenders={"x": {}}, executor=object())


def test_validate_in_run_with_too_few_requests_fails_before_the_runs():
    # "an in-run fit needs at least 4 prefill forwards" came only after the emulated runs
    with pytest.raises(ValueError, match="in_run=True fits the cost model again on the emulated runs' steps, which "
                                         "needs at least 4 prefill and 4 decode forwards: n_requests must be >= 4, "
                                         "got 3"):
        _validate(n_requests=3, in_run=True, executor=object())


def test_validate_names_what_recalibrate_returned():
    # "combine needs one or more Calibration objects", after the runs
    from splitlab import costmodel
    cost = CostModel()
    pre = [dict(tokens=n, squares=n * n, prefill_s=cost.prefill_s(n, n * n)) for n in (16, 64, 160)]
    dec = [dict(batch=b, context_tokens=b * c, batched=int(b > 1), step_s=cost.decode_s(b, b * c))
           for b in (1, 2, 4) for c in (32, 96)]
    cal = costmodel.Calibration(cost, {"prefill": costmodel.fit_prefill(pre), "decode": costmodel.fit_decode(dec)},
                                dict(model="tiny", device="cpu", date="2026-12-02"))
    with pytest.raises(TypeError, match="recalibrate returned a NoneType, not a Calibration"):
        _validate(cost=cal, recalibrate=lambda: None)


# --- 5. goodput SLOs: bools, infinities, and SLOs no rate meets or breaks ----------------------------------------

def _goodput(**slos):
    from splitlab import serving
    return serving.goodput("chat", ServingConfig.colocated(1), max_requests=100, **slos)


@pytest.mark.parametrize("slos, name", [(dict(ttft_slo_s=True, tpot_slo_s=0.1), "ttft_slo_s"),
                                        (dict(ttft_slo_s=1.0, tpot_slo_s=False), "tpot_slo_s")])
def test_goodput_and_plan_refuse_a_bool_slo(slos, name):
    # True was taken for 1 s
    with pytest.raises(ValueError, match=f"{name} must be a time > 0 s .*got (True|False)"):
        _goodput(**slos)
    from splitlab.planning.planner import plan
    with pytest.raises(ValueError, match=f"{name} must be a number > 0, got (True|False)"):
        plan(**slos, max_workers=2)


@pytest.mark.parametrize("slos, name", [(dict(ttft_slo_s=math.inf, tpot_slo_s=0.1), "ttft_slo_s"),
                                        (dict(ttft_slo_s=1.0, tpot_slo_s=math.inf), "tpot_slo_s")])
def test_goodput_refuses_an_infinite_slo_naming_it(slos, name):
    # was "duration_s must be a finite time > 0 ... got None, 100, 4000": a parameter never passed
    with pytest.raises(ValueError, match=f"{name} must be a finite time > 0 s") as info:
        _goodput(**slos)
    assert "duration_s" not in str(info.value)


def test_goodput_and_plan_say_no_rate_meets_a_ttft_slo_one_prefill_breaks():
    # goodput() returned 0 requests/s; plan "did not converge in 40 runs ...: raise max_runs or tolerance"; then
    # both raised "no rate meets": now an answer, goodput 0 with that reason, before any run (issue 18)
    message = r"no rate meets a TTFT SLO of 1e-09 s: one prefill of the workload's shortest prompt \(\d+ tokens\) " \
              r"takes [0-9.e-]+ s on this cost model"
    res = _goodput(ttft_slo_s=1e-9, tpot_slo_s=0.1)
    assert (res.goodput_rps_per_worker, res.outcome, res.binding_slo, res.points) == (0.0, "unmet", "ttft", [])
    assert re.fullmatch(message, res.reason)
    status, out, err = cli("plan", "--ttft-slo", "1e-9", "--max-workers", "2", "--json")
    assert status == 0 and "max_runs" not in out + err
    data = json.loads(out)
    assert all(c["goodput_rps_per_worker"] == 0 and c["outcome"] == "unmet" and re.fullmatch(message, c["reason"])
               for c in data["candidates"])


def test_goodput_says_no_rate_meets_a_tpot_slo_one_decode_step_breaks():
    res = _goodput(ttft_slo_s=1.0, tpot_slo_s=1e-9)
    assert (res.goodput_rps_per_worker, res.outcome, res.binding_slo) == (0.0, "unmet", "tpot")
    assert re.match(r"no rate meets a TPOT SLO of 1e-09 s: one decode step of a single request after the "
                    r"workload's shortest prompt \(\d+ tokens\) takes", res.reason)


def test_goodput_says_slos_no_rate_breaks_are_too_loose():
    # was a ValueError ("so loose that ... tighten the SLOs"): now an answer, a lower bound that says so
    res = _goodput(ttft_slo_s=1e9, tpot_slo_s=1e9)
    assert res.outcome == "unbounded" and res.binding_slo == "none" and res.goodput_rps_per_worker > 0
    assert all(p["passed"] for p in res.points) and len(res.points) <= 4
    assert res.goodput_rps_per_worker == max(p["rate_per_worker"] for p in res.points[:-1])  # not the burst's
    assert "no rate breaks the SLOs" in res.reason and "tighten the SLOs" in res.reason
    assert "max_runs" not in res.reason


def test_a_search_out_of_runs_names_max_runs_as_an_argument_of_goodput():
    from splitlab import serving
    with pytest.raises(ValueError, match=r"did not end in 3 runs .*: pass goodput\(\) a larger max_runs or "
                                         r"tolerance"):
        serving.goodput("chat", ServingConfig.colocated(1), max_requests=100, ttft_slo_s=1.0, tpot_slo_s=0.1,
                        max_runs=3, start_rate_per_worker=1e4)  # fails at once: a boundary, not yet found
    with pytest.raises(ValueError, match=r"did not end in 3 runs \(highest rate passed 2, lowest failed [0-9.e+]+ "):
        serving.goodput("chat", ServingConfig.colocated(1), max_requests=100, ttft_slo_s=1.0, tpot_slo_s=0.1,
                        max_runs=3)  # passes twice, then a burst fails: a bracket, not yet narrowed


def test_plan_with_slos_no_rate_breaks_says_so_not_max_runs():
    # was exit 1 after 10-27 s with a message naming goodput()'s max_runs, which plan has not
    status, out, err = cli("plan", "--ttft-slo", "1e9", "--tpot-slo", "1e9", "--max-workers", "2",
                           "--chunk-tokens", "128")
    assert status == 0 and "max_runs" not in out + err and "Traceback" not in err
    assert out.count("no rate breaks the SLOs") == 3 + 1 and "which says little" in out  # 3 layouts, then why()


@pytest.mark.parametrize("scale, words", [(1e308, "becomes inf"), (1e300, "becomes 3.2e+301)")])
def test_a_scale_too_large_for_a_float_is_refused_in_one_line(scale, words):
    from splitlab.serving import make_workload
    with pytest.raises(ValueError, match=r"stretches every chat prompt past the context") as info:
        make_workload("chat", 3, 1.0, scale=scale)
    assert words in str(info.value)


def test_a_context_out_of_scale_is_refused():
    import dataclasses

    from splitlab.costmodel import CostModel
    from splitlab.serving import CostModelExecutor, workload_requests
    from splitlab.serving.workload import MAX_CONTEXT

    def on(context):
        return CostModelExecutor(dataclasses.replace(CostModel(), max_context=context))
    with pytest.raises(ValueError, match=r"a context of 1e\+20 tokens is out of scale: .* <= 2\*\*31"):
        workload_requests("chat", 3, 1.0, on(10 ** 20))
    assert len(workload_requests("chat", 3, 1.0, on(MAX_CONTEXT))) == 3


@pytest.mark.parametrize("max_runs", [0, -1, 1.5, True])
def test_goodput_refuses_a_max_runs_that_is_no_count(max_runs):
    from splitlab import serving
    with pytest.raises(ValueError, match=r"max_runs must be an integer >= 1"):
        serving.goodput("chat", ServingConfig.colocated(1), ttft_slo_s=1.0, tpot_slo_s=0.1, max_runs=max_runs)


def test_validate_refuses_a_cost_that_is_no_cost_model_before_any_run():
    from splitlab import serving
    with pytest.raises(TypeError, match=r"cost must be a CostModel or a Calibration .*got NoneType"):
        serving.validate(object(), None, n_requests=2)


@pytest.mark.parametrize("timeout_s", [1e308, 1e15, 7 * 24 * 3600.0 + 1])
def test_a_config_timeout_beyond_a_week_is_refused(timeout_s):
    # audit of issue 18 (F1 on the config): ServingConfig(timeout_s=1e308) was accepted, and a hung worker of a
    # simulated run then gave a TTFT P90 of 5e307 s, a run of 1e308 s and numpy overflow warnings
    with pytest.raises(ValueError, match=r"timeout_s must be at most 604,800 s \(a week\)"):
        ServingConfig.colocated(2, timeout_s=timeout_s)
    assert ServingConfig.colocated(2, timeout_s=7 * 24 * 3600.0).timeout_s == 7 * 24 * 3600.0
