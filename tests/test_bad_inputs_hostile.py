"""Bad input found by a hostile reader's pass over the public API and the CLI: each is refused early, in one line,
naming the problem (before: a traceback, a hang, or numbers that mean nothing)."""
from __future__ import annotations

import json
import time
import warnings

import pytest

from conftest import cli
from splitlab import costmodel, serving
from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, Request, ServingConfig, make_workload
from splitlab.serving.workload import gamma_arrivals


def _one_line(status, out, err, expected_status=1):
    assert status == expected_status and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


# --- request counts and arrival times --------------------------------------------------------------------------

def test_a_request_count_no_machine_could_hold_is_refused_at_once():
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="at most 1,000,000 requests"):  # numpy's MemoryError (745 GiB)
        make_workload("chat", 10 ** 11, 2.0)
    err = _one_line(*cli("serve", "--backend", "simulated", "--requests", "100000000000"), expected_status=2)
    assert "at most 1,000,000 requests" in err and time.perf_counter() - t0 < 10


@pytest.mark.parametrize("rate", [1e-300, 1e-12])
def test_arrivals_too_late_for_the_clock_to_resolve_a_step_are_refused(rate):
    # at 1e300 s every step of 4 ms rounded to 0: TTFT 0.0 ms and TPOT 0.0 ms, SLO attainment 100%
    with pytest.raises(ValueError, match="arrival_s .* is past 1e\\+09 s"):
        make_workload("chat", 3, rate)
    err = _one_line(*cli("serve", "--backend", "simulated", "--requests", "3", "--rate", str(rate)))
    assert "raise the arrival rate" in err


def test_a_late_but_resolvable_arrival_is_served():
    res = serving.run([Request(0, 9.9e8, [1, 2, 3], 4)], ServingConfig(), CostModelExecutor())
    (r,) = res.completed
    assert r.token_times_s[1] - r.token_times_s[0] > 1e-3  # a decode step of the built-in model, not rounded away


@pytest.mark.parametrize("cv", [1e-200, 1e200, 1e4])
def test_gamma_arrivals_whose_cv_breaks_the_gamma_shape_are_refused(cv):
    # 1e-200: ZeroDivisionError (cv**2 underflows); 1e200: OverflowError; both tracebacks on the command line
    with pytest.raises(ValueError, match="cv must be in \\[0.001, 100\\]"):
        gamma_arrivals(4, 2.0, cv)
    _one_line(*cli("serve", "--backend", "simulated", "--requests", "3", "--arrival", "gamma", "--cv", str(cv)),
              expected_status=2)  # argparse refuses it (break28), as every value out of a flag's range


@pytest.mark.parametrize("scale", [1e300, 1e18, 100.0])
def test_a_scale_that_pushes_every_prompt_past_the_context_is_refused(scale):
    # 1e18: "high is out of bounds for int64" after a RuntimeWarning; 100: every prompt clipped to 2047 tokens
    # and every answer to 1 token, served without a word
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="scale .* stretches every chat prompt past the context of 2048"):
            make_workload("chat", 3, 1.0, scale=scale)
    err = _one_line(*cli("serve", "--backend", "simulated", "--requests", "3", "--scale", str(scale)))
    assert "use a scale <= " in err


def test_a_scale_that_leaves_some_prompts_inside_the_context_still_clips_the_rest():
    reqs = make_workload("chat", 50, 1.0, scale=5.0)  # chat prompts 32..600 tokens x 5: some fit
    assert max(r.prompt_len for r in reqs) == 2047 and min(r.prompt_len for r in reqs) < 2047


# --- pools and planner sizes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [dict(workers=10 ** 7), dict(layout="disaggregated", prefill_workers=10 ** 6),
                                    dict(layout="disaggregated", decode_workers=10 ** 5 + 1)])
def test_more_workers_than_a_run_can_build_is_refused(kwargs):
    t0 = time.perf_counter()  # 10**7 workers: building them took longer than any test waits
    with pytest.raises(ValueError, match="at most 100,000 workers"):
        ServingConfig(**kwargs)
    err = _one_line(*cli("serve", "--backend", "simulated", "--workers", "10000000", "--requests", "2"))
    assert "at most 100,000 workers" in err and time.perf_counter() - t0 < 10


def test_a_plan_over_more_workers_than_it_can_search_is_refused():
    from splitlab.planning.planner import plan
    t0 = time.perf_counter()  # max_workers 100000: ~5e9 xPyD splits, each a goodput search; ran for hours
    with pytest.raises(ValueError, match="max_workers must be <= 16"):
        plan(None, "chat", 1.0, 0.1, max_workers=17)
    err = _one_line(*cli("plan", "--max-workers", "100000"), expected_status=2)
    assert "--max-workers must be >= 2" in err and "and <= 16" in err and time.perf_counter() - t0 < 10


# --- cost models -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["compute_efficiency", "memory_efficiency"])
def test_a_roofline_at_a_vanishing_efficiency_is_refused(name):
    # 1e-300 of the bandwidth: TTFT printed as a 300-digit number of milliseconds
    with pytest.raises(ValueError, match=f"{name} must be in \\[0.01, 1\\]"):
        costmodel.roofline_cost_model("Llama-3-8B", "H100", **{name: 1e-300})
    flag = "--" + name.replace("_", "-")
    _one_line(*cli("simulate", "--gpu", "H100", "--model-config", "Llama-3-8B", flag, "1e-300", "--requests", "2"))


@pytest.mark.parametrize("kwargs", [dict(decode_base_s=1e300), dict(prefill_per_token_s=1e6),
                                    dict(decode_per_token_s=100.0)])
def test_a_cost_model_whose_steps_take_longer_than_a_day_is_refused(kwargs):
    with pytest.raises(ValueError, match="longer than a day"):
        CostModelExecutor(CostModel(**kwargs))


def test_a_calibration_whose_steps_take_longer_than_a_day_is_one_line(tmp_path):
    from splitlab.costmodel.calibration import Calibration, save
    meta = dict(device="cpu", model="tiny", dtype="float32", torch="2", date="2026-12-02")
    path = save(Calibration(CostModel(decode_base_s=1e300), {}, meta), tmp_path / "slow.json")
    err = _one_line(*cli("simulate", "--cost", str(path), "--requests", "2"))
    assert "longer than a day" in err


def _calibration_file(tmp_path, change):
    from splitlab.costmodel.calibration import Calibration, save
    meta = dict(device="cpu", model="tiny", dtype="float32", torch="2", date="2026-12-02")
    path = save(Calibration(CostModel(), {}, meta), tmp_path / "cal.json")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


ROW = dict(measured_s=1.0, predicted_s=1.0, residual=0.0)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(fits=[]), "fits must be an object of fit name -> fit, got list"),  # AttributeError
    (lambda d: d.update(fits="prefill"), "fits must be an object"),                        # AttributeError
    (lambda d: d.update(fits={"prefill": 3}), "fit 'prefill' is malformed \\(an object"),
    (lambda d: d.update(fits={"prefill": dict(terms=["1"], coef=[1.0, 2.0])}), "coef must be 1 finite numbers"),
    (lambda d: d.update(fits={"prefill": dict(terms=["1"], coef=[1.0], rows="abc")}),  # TypeError on repr
     "rows must be a list of measurements"),
    (lambda d: d.update(fits={"prefill": dict(terms=["1"], coef=[1.0], rows=[dict(ROW, residual="x")])}),
     "rows must be a list of measurements"),
    (lambda d: d["cost_model"].update(padded_prefill="no"), "padded_prefill must be true or false, got 'no'"),
    (lambda d: d["cost_model"].update(max_context=100.7), "max_context must be a whole number, got 100.7"),
])
def test_a_calibration_file_with_malformed_fits_or_flags_is_refused_in_one_line(tmp_path, change, message):
    path = _calibration_file(tmp_path, change)
    with pytest.raises(costmodel.CalibrationError, match=message):
        costmodel.load(path)
    _one_line(*cli("simulate", "--cost", str(path), "--requests", "2"))


def test_a_calibration_file_with_well_formed_fits_loads():
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        fits = {"decode": dict(terms=["1", "batch"], coef=[1e-3, 2e-4], rows=[ROW, dict(ROW, residual=0.5)])}
        cal = costmodel.load(_calibration_file(Path(tmp), lambda d: d.update(fits=fits)))
    assert cal.fits["decode"].max_abs_residual == 0.5 and cal.cost.padded_prefill is False


# --- subcommands that found out too late ------------------------------------------------------------------------

def _never(what):
    def fail(*args, **kwargs):
        raise AssertionError(what)
    return fail


def test_demo_refuses_a_prompt_beyond_a_presets_context_before_loading_it(monkeypatch):
    import splitlab.phases.models as models
    monkeypatch.setattr(models, "load_model", _never("the model was loaded before the lengths were checked"))
    err = _one_line(*cli("demo", "--prompt-tokens", "2000", "--new-tokens", "100", "--no-reference"))
    assert "--prompt-tokens 2000 + --new-tokens 100 = 2100 tokens, beyond the context of tiny (2048 tokens)" in err
    err = _one_line(*cli("demo", "--model", "tiny-gpt2", "--prompt-tokens", "500", "--new-tokens", "13"))
    assert "beyond the context of tiny-gpt2 (512 tokens)" in err


def test_demo_checks_a_loaded_models_context_before_building_the_prompt(monkeypatch):
    import splitlab.cli.demo as demo
    import splitlab.phases.profiling as profiling
    monkeypatch.setattr(demo, "list_presets", lambda: [])  # as for a hub model: its context is known once loaded
    monkeypatch.setattr(profiling, "text_prompt", _never("the prompt was built before its length was checked"))
    err = _one_line(*cli("demo", "--prompt-tokens", "2000", "--new-tokens", "100", "--no-reference"))
    assert "= 2100 tokens, beyond the context of tiny (2048 tokens)" in err


def test_calibrate_refuses_an_output_path_that_is_a_directory_before_measuring(monkeypatch, tmp_path):
    import splitlab.phases.calibrate as calibrate
    # it failed after a whole calibration with [Errno 21]
    monkeypatch.setattr(calibrate, "calibrate", _never("measured before the output path was checked"))
    err = _one_line(*cli("calibrate", "--out", str(tmp_path)))
    assert f"cannot write calibration to {tmp_path}: it is a directory" in err


def test_running_out_of_memory_is_one_line_not_a_traceback(monkeypatch):
    import splitlab.serving as serving_pkg

    def too_big(*args, **kwargs):
        raise MemoryError("Unable to allocate 745. GiB for an array with shape (100000000000,)")
    monkeypatch.setattr(serving_pkg, "run", too_big)  # whatever a huge input exhausts, the CLI says so in one line
    err = _one_line(*cli("serve", "--backend", "simulated", "--requests", "2"))
    assert "out of memory: Unable to allocate 745. GiB" in err


@pytest.mark.parametrize("call, kind, words", [
    (lambda: costmodel.save(None, "never.json"), TypeError, "save writes a Calibration"),
    (lambda: costmodel.save(CostModel(), "never.json"), TypeError, "got CostModel"),
    (lambda: costmodel.load(None), TypeError, "path must be a file name"),
    (lambda: costmodel.combine(None), TypeError, "a list of Calibration objects"),
    (lambda: costmodel.combine([1, 2]), ValueError, r"got \['int', 'int'\]"),
])
def test_calibration_files_refuse_what_is_not_a_calibration_or_a_path(call, kind, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(kind, match=words):
        call()
    assert not (tmp_path / "never.json").exists()
