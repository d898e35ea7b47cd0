"""Bad input found by a hostile tester's session with the CLI and the calibration files: each is refused early,
in one line, naming the option or field, what was given and what is accepted (before: a segfault, a hang, a
traceback, or an error only after minutes of measuring)."""
from __future__ import annotations

import os

import pytest

from conftest import cli
from splitlab.common.threads import check_threads, max_threads


def _one_line(status, out, err, expected_status=1):
    assert status == expected_status and out == "", (status, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def _never(what):
    def fail(*args, **kwargs):
        raise AssertionError(what)
    return fail


# --- 1. thread counts ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["calibrate", "--out", "never.json"], ["transfer"]])
@pytest.mark.parametrize("threads", ["100000", "10000", str((os.cpu_count() or 1) + 1), "0"])
def test_a_thread_count_beyond_this_machines_cpus_is_a_usage_error(command, threads, tmp_path, monkeypatch):
    # 100000: a segfault (calibrate) or an ImportError traceback then a segfault (transfer); 10000: a hang
    monkeypatch.chdir(tmp_path)
    err = _one_line(*cli(*command, "--threads", threads), expected_status=2)
    assert "argument --threads:" in err
    if threads != "0":
        assert f"must be an integer in 1 .. {max_threads()} (this machine's CPU count), got {threads}" in err
    assert not (tmp_path / "never.json").exists()


def test_the_cpu_count_itself_is_a_valid_thread_count():
    assert max_threads() == (os.cpu_count() or 1)
    assert check_threads(max_threads()) == max_threads() and check_threads(1) == 1


@pytest.mark.parametrize("bad", [0, 10 ** 5, 1.0, True, "2", None])
def test_the_python_apis_that_set_torch_threads_share_the_check(bad):
    from splitlab.teach import notebook
    from splitlab.transfer.spawn import spawn_group
    from splitlab.transfer.peer import Peer
    words = f"must be an integer in 1 .. {max_threads()} \\(this machine has {max_threads()} CPUs\\), got {bad!r}"
    with pytest.raises(ValueError, match="threads " + words):
        check_threads(bad)
    with pytest.raises(ValueError, match="^threads " + words):
        Peer(threads=bad)  # before any process starts
    with pytest.raises(ValueError, match="^threads " + words):
        spawn_group(print, 1, threads=bad)
    if bad is not None:  # None: leave torch's threads alone
        with pytest.raises(ValueError, match="^cpu_threads " + words):
            notebook.setup(cpu_threads=bad, style=False)


# --- 2-4. calibration files ------------------------------------------------------------------------------------

def _calibration_file(tmp_path, change=None, name="cal.json"):
    from splitlab.costmodel import CostModel
    from splitlab.costmodel.calibration import Calibration, save
    meta = dict(device="cpu", model="tiny", dtype="float32", torch="2", date="2026-12-02", splitlab="0.1",
                clock="wall")
    path = save(Calibration(CostModel(), {}, meta), tmp_path / name)
    if change is not None:
        text = change(path.read_text())
        path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return path


def _field(key, value, inside=None):
    import json

    def change(text):
        data = json.loads(text)
        (data[inside] if inside else data)[key] = value
        return json.dumps(data)
    return change


def _big(text):  # a JSON integer no float holds: json.dumps of a Python int, as a hand-edited file might have
    import json
    data = json.loads(text)
    data["cost_model"]["decode_base_s"] = 10 ** 400
    return json.dumps(data)


def test_a_cost_field_too_large_for_a_float_is_a_calibration_error_naming_it(tmp_path):
    from splitlab import costmodel
    path = _calibration_file(tmp_path, _big)
    with pytest.raises(costmodel.CalibrationError,  # was OverflowError: int too large to convert to float
                       match="field cost_model.decode_base_s must be a finite number >= 0, got an integer of 401 "
                             "digits, too large for a float"):
        costmodel.load(path)
    err = _one_line(*cli("simulate", "--cost", str(path), "--requests", "2"))
    assert "cost_model.decode_base_s" in err and "OverflowError" not in err


def test_a_fit_coefficient_too_large_for_a_float_is_refused(tmp_path):
    from splitlab import costmodel
    fits = {"decode": dict(terms=["1"], coef=[10 ** 400], rows=[])}
    path = _calibration_file(tmp_path, _field("fits", fits))
    with pytest.raises(costmodel.CalibrationError, match="fit 'decode' is malformed \\(coef must be 1 finite"):
        costmodel.load(path)


@pytest.mark.parametrize("key, value, inside", [
    ("model", 5, None), ("dtype", [1], None), ("date", 123, None), ("device", True, None), ("torch", 2.1, None),
    ("splitlab", {"v": 1}, None), ("clock", 0, None), ("source", {"a": 1}, "cost_model"),
])
def test_a_text_field_that_is_not_a_string_is_refused(tmp_path, key, value, inside):
    from splitlab import costmodel
    path = _calibration_file(tmp_path, _field(key, value, inside))
    name = f"{inside}.{key}" if inside else key
    with pytest.raises(costmodel.CalibrationError,
                       match=f"cal.json: field {name} must be a string, got {type(value).__name__} "):
        costmodel.load(path)
    err = _one_line(*cli("simulate", "--cost", str(path), "--requests", "2"))
    assert f"field {name} must be a string" in err  # "source": {...} printed "cost model: {'a': 1}"


def test_a_calibration_file_that_is_not_utf8_is_a_calibration_error_naming_the_file(tmp_path):
    from splitlab import costmodel
    path = _calibration_file(tmp_path, lambda text: b"\xff\xfe" + text.encode())
    with pytest.raises(costmodel.CalibrationError, match="cal.json is not a calibration JSON: not UTF-8 text "
                                                         "\\(byte 0xff at offset 0\\)"):
        costmodel.load(path)
    err = _one_line(*cli("simulate", "--cost", str(path), "--requests", "2"))
    assert str(path) in err and "not UTF-8 text" in err and "codec" not in err


def test_files_that_save_writes_still_load(lm, tmp_path):
    import splitlab as sl
    from splitlab import costmodel
    path = _calibration_file(tmp_path)  # every text field a string, cost_model.source null
    assert costmodel.load(path, model="tiny").meta["clock"] == "wall"
    cal = sl.profiling.calibrate(lm, prompt_tokens=[16, 32, 64, 128], decode_batches=[1, 2], contexts=[32, 64],
                                 transfer_tokens=[16, 64], chunk_tokens=(), repeats=1)
    back = costmodel.load(costmodel.save(cal, tmp_path / "real.json"), model="tiny")
    assert back.cost == cal.cost and back.meta == cal.meta
    status, out, err = cli("simulate", "--cost", str(tmp_path / "real.json"), "--requests", "2")
    assert status == 0 and f"cost model: {cal.cost.source}" in out, err


# --- 5. calibrate --out ----------------------------------------------------------------------------------------

@pytest.fixture
def no_measuring(monkeypatch):
    import splitlab.phases.calibrate as calibrate
    import splitlab.phases.models as models
    monkeypatch.setattr(models, "load_model", _never("the model was loaded before the output path was checked"))
    monkeypatch.setattr(calibrate, "calibrate", _never("measured before the output path was checked"))


def test_calibrate_refuses_an_empty_out_as_a_usage_error(no_measuring):
    err = _one_line(*cli("calibrate", "--out", ""), expected_status=2)  # was "cannot write : it is a directory"
    assert "error: --out needs a file name" in err


@pytest.mark.parametrize("path, reason", [
    ("/proc/x.json", "No such file or directory"),                      # a bare [Errno 2] after measuring
    ("/dev/full", "it is not a regular file (a device or a pipe)"),      # opens, then every write fails
    ("/no/such/dir/x.json", "directory '/no/such/dir' does not exist"),
])
def test_calibrate_refuses_an_out_it_cannot_write_before_measuring(no_measuring, path, reason):
    if not os.path.exists(os.path.dirname(path)) and path.startswith(("/proc", "/dev")):
        pytest.skip(f"no {os.path.dirname(path)} here")
    err = _one_line(*cli("calibrate", "--out", path))
    assert f"error: cannot write calibration to {path}: {reason}" in err


def test_calibrate_out_checks_leave_no_file_behind_and_keep_an_existing_one(no_measuring, tmp_path):
    from splitlab.cli.calibrate import check_writable
    new = tmp_path / "new.json"
    assert check_writable(str(new)) == new and not new.exists()
    old = tmp_path / "old.json"
    old.write_text("{}")
    assert check_writable(str(old)) == old and old.read_text() == "{}"
    os.chmod(tmp_path, 0o500)
    try:
        if os.access(tmp_path, os.W_OK):  # root writes anywhere
            pytest.skip("running as root: a read-only directory is still writable")
        with pytest.raises(ValueError, match=f"cannot write calibration to {tmp_path}/x.json: Permission denied"):
            check_writable(str(tmp_path / "x.json"))
    finally:
        os.chmod(tmp_path, 0o700)


# --- 6. --model-config for the roofline ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tiny", "llama-3.2-1b"])
def test_a_preset_without_a_parameter_count_says_what_the_roofline_takes_instead(name):
    from splitlab import costmodel
    from splitlab.costmodel.analytic import roofline_models
    usable = roofline_models()
    assert "Llama-3-8B" in usable and name not in usable
    words = f"the preset '{name}' has no n_params .*: give a published model \\({', '.join(usable)}\\) or a config.json"
    with pytest.raises(ValueError, match=words):
        costmodel.roofline_cost_model(name, "H100")
    err = _one_line(*cli("simulate", "--gpu", "H100", "--model-config", name))
    assert "Llama-3-8B" in err and "or a config.json path with n_params" in err


def test_an_unknown_model_config_lists_only_what_the_roofline_can_use():
    err = _one_line(*cli("simulate", "--gpu", "H100", "--model-config", "no-such-model"))
    assert "unknown model 'no-such-model' for the roofline cost model: give a published model (Llama-2-7B" in err
    assert "tiny" not in err  # the presets were listed as valid, then refused for lacking n_params


def test_a_config_json_with_n_params_still_works(tmp_path):
    import json

    from splitlab import costmodel
    from splitlab.sizing import PUBLISHED_MODELS
    path = tmp_path / "config.json"
    path.write_text(json.dumps(PUBLISHED_MODELS["Llama-3-8B"]))
    assert costmodel.roofline_cost_model(str(path), "H100").weight_bytes == \
        costmodel.roofline_cost_model("Llama-3-8B", "H100").weight_bytes


# --- 7. --link-gbps --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, words", [
    ("1e308", "must be a finite number of GB/s > 0 (at most 1.8e+299), got 1e308"),  # was "..., got inf" bytes/s
    ("1e300", "must be a finite number of GB/s > 0"),
    ("inf", "must be a finite positive number, got inf"), ("nan", "must be a finite positive number, got nan"),
    ("0", "must be a finite positive number, got 0"), ("fast", "'fast' is not a number"),
])
def test_a_link_speed_that_is_not_a_finite_number_of_bytes_per_second_is_a_usage_error(value, words):
    err = _one_line(*cli("simulate", "--layout", "disaggregated", "--link-gbps", value, "--requests", "2"),
                    expected_status=2)
    assert f"argument --link-gbps: {words}" in err and "link_bytes_per_s" not in err


def test_a_fast_but_finite_link_still_runs():
    import json
    status, out, err = cli("simulate", "--layout", "disaggregated", "--link-gbps", "1e6", "--requests", "2", "--json")
    assert status == 0 and json.loads(out)["disaggregated"]["completed"] == 2, err


def test_the_text_names_the_link_that_replaced_the_cost_models():
    """An H100 model's source says "KV over 400 Gb/s network"; with --link-gbps the run's link is another, and the
    text once said only the former (a fresh reader's 0.0001 GB/s run, 2026-12-04)."""
    status, out, err = cli("simulate", "--gpu", "H100", "--model-config", "Llama-3-8B", "--layout", "disaggregated",
                           "--link-gbps", "0.5", "--requests", "2")
    assert status == 0, err
    assert "KV link: 0.5 GB/s (--link-gbps), in place of the cost model's" in out


# --- 8. the bounds the SLO attainment counts, in the text --------------------------------------------------------

README_SIMULATE = ("simulate", "--gpu", "H100", "--model-config", "Llama-3-8B", "--layout", "disaggregated",
                   "--prefill-workers", "2", "--decode-workers", "2", "--requests", "2000", "--rate", "20",
                   "--max-batch", "16")


def test_the_text_shows_the_ttst_and_how_many_requests_missed_each_bound():
    import json

    from splitlab.cli.report import lines
    status, out, err = cli(*README_SIMULATE, "--json")
    assert status == 0, err
    data = json.loads(out)
    m = data["disaggregated"]
    miss = m["slo_misses"]  # a key added; every earlier key kept
    assert {"slo_attainment", "ttft_s", "ttst_s", "tpot_s", "rejections", "notes"} <= set(m)
    assert set(miss) == {"unfinished", "ttft", "ttst", "tpot", "transfer"}  # transfer: of the ttft/ttst misses
    assert sum(miss.values()) - miss["transfer"] == round((1 - m["slo_attainment"]) * m["submitted"])
    # the README's example (16 decode slots at 20/s): a backlog of decode slots. The first token leaves at the decode
    # worker's admission (the default), so the wait for a slot shows in TTFT (DistServe's convention, the first
    # token at the prefill's end, hid it until the second token: TTST); every TPOT inside its SLO
    assert miss["tpot"] == 0 < miss["ttft"] + miss["ttst"] and m["ttst_s"]["p50"] > 1.1
    text = "\n".join(lines("disaggregated", m))
    assert (f"SLO attainment {m['slo_attainment']:.0%} (missed: TTFT {miss['ttft']}, TTST {miss['ttst']}, TPOT 0"
            in text)
    assert f"TTST ms  p50 {m['ttst_s']['p50'] * 1e3:8.1f}  p90 {m['ttst_s']['p90'] * 1e3:8.1f}" in text
    # the SLOs now come from the cost model (chapter 6's rule), and the header says so
    assert data["chosen"]["derived"] == ["ttft_slo_s", "tpot_slo_s"]
    assert f"(second token; SLO TTFT + TPOT = {(data['ttft_slo_s'] + data['tpot_slo_s']) * 1e3:g} ms)" in text
    status, out, _ = cli(*README_SIMULATE)
    assert status == 0 and text in out


def test_the_text_says_how_many_did_not_finish():
    from splitlab.cli.report import lines
    m = dict(workers=["W0"], completed=1, submitted=3, rejected=2, failed=0, slo_attainment=1 / 3,
             throughput_tokens_per_s=1.0, ttft_s=dict(p50=0.1, p90=0.1, p99=0.1),
             ttst_s=dict(p50=None, p90=None, p99=None), tpot_s=dict(p50=None, p90=None, p99=None),
             rejections=[], slo_misses=dict(unfinished=2, ttft=0, ttst=0, tpot=0), ttft_slo_s=1.0, tpot_slo_s=0.1)
    text = "\n".join(lines("colocated", m))
    assert "SLO attainment 33% (missed: TTFT 0, TTST 0, TPOT 0, not finished 2)" in text
    assert "TTST ms  p50 n/a  p90 n/a  p99 n/a" in text


# --- 9. --requests says the range the CLI takes -------------------------------------------------------------------

@pytest.mark.parametrize("value", ["99999999999999999", "1000001", "0"])
def test_a_request_count_outside_what_the_cli_takes_states_that_range(value):
    err = _one_line(*cli("simulate", "--requests", value), expected_status=2)
    if value == "0":
        assert "argument --requests: must be a positive integer, got 0" in err
    else:  # was "must be in 0 .. 1,000,000", while the CLI refuses 0
        assert f"argument --requests: must be an integer in 1 .. 1,000,000 (a workload holds at most " \
               f"1,000,000 requests: their prompts are built in memory), got {int(value):,}" in err
        assert "0 .. " not in err


def test_the_largest_request_count_is_accepted_by_the_parser():
    from splitlab.cli import build_parser
    args = build_parser().parse_args(["simulate", "--requests", "1000000"])
    assert args.requests == 1_000_000


# --- 11. long worker lists ---------------------------------------------------------------------------------------

def test_a_long_worker_list_is_cut_in_the_text_and_kept_whole_in_the_json():
    import json
    status, out, err = cli("serve", "--backend", "simulated", "--workers", "10000", "--requests", "2")
    assert status == 0, err
    assert "workers W0,W1,W2,W3,W4,W5,W6,W7 ... and 9992 more: completed 2/2" in out and "W8," not in out
    status, out, _ = cli("serve", "--backend", "simulated", "--workers", "10000", "--requests", "2", "--json")
    assert status == 0 and len(json.loads(out)["colocated"]["workers"]) == 10000


def test_each_pool_is_cut_on_its_own_and_short_lists_are_whole():
    from splitlab.cli.report import _workers
    assert _workers(["P0", "P1", "D0"]) == "P0,P1,D0"
    names = [f"P{i}" for i in range(50)] + [f"D{i}" for i in range(3)]
    assert _workers(names) == "P0,P1,P2,P3,P4,P5,P6,P7 ... and 42 more; D0,D1,D2"
    assert _workers([f"W{i}" for i in range(8)]) == ",".join(f"W{i}" for i in range(8))


# --- 10. profiling.calibrate's arguments, checked before measuring ------------------------------------------------

@pytest.fixture
def never_measure(monkeypatch):
    import splitlab.phases.calibrate as calibrate
    monkeypatch.setattr(calibrate, "prefill", _never("measured before the arguments were checked"))
    monkeypatch.setattr(calibrate, "decode_step", _never("measured before the arguments were checked"))


@pytest.mark.parametrize("kwargs, words", [
    (dict(repeats=2.5), "repeats must be an integer >= 1, got 2.5"),   # TypeError after 2 s of measuring
    (dict(repeats=float("nan")), "repeats must be an integer >= 1, got nan"),
    (dict(repeats="3"), "repeats must be an integer >= 1, got '3'"),    # TypeError: '<' not supported
    (dict(repeats=True), "repeats must be an integer >= 1, got True"),
    (dict(rounds=0), "rounds must be an integer >= 1, got 0"),
    (dict(prefill_batch=1.5), "prefill_batch must be an integer >= 1, got 1.5"),
    (dict(seed=-1), "seed must be an integer in 0 .. 2\\*\\*63 - 1, got -1"),
    (dict(seed="0"), "seed must be an integer"),
    (dict(contexts=64), "contexts must be a list of whole numbers, got int 64"),
    (dict(prompt_tokens=["16"]), "prompt_tokens must be whole numbers, got \\['16'\\]"),
    (dict(decode_batches=[float("inf")]), "decode_batches must be whole numbers"),
    (dict(prefill_batch=100000),  # ran > 110 s
     "prefill_batch 100000 x 128 prompt tokens = 12,800,000 tokens in one forward, more than the 65,536 calibrate "
     "measures: use a prefill_batch <= 512"),
    (dict(decode_batches=[65536], contexts=[2000]),  # 134 GB asked for after 32 s
     "decode_batches up to 65536 x contexts up to 2000 tokens = 131,072,000 cached tokens built in one forward"),
])
def test_calibrate_refuses_bad_arguments_before_measuring(lm, never_measure, kwargs, words):
    import splitlab as sl
    with pytest.raises(ValueError, match=words):
        sl.profiling.calibrate(lm, **kwargs)


def test_calibrate_refuses_a_decode_grid_whose_kv_cache_exceeds_its_budget(lm, never_measure, monkeypatch):
    import splitlab as sl
    import splitlab.phases.calibrate as calibrate
    monkeypatch.setattr(calibrate, "MAX_KV_BYTES", 1 << 20)  # tiny's 2 KiB per token: 64 x 64 tokens = 8 MiB
    with pytest.raises(ValueError, match="decode_batches up to 64 x contexts up to 64 tokens need 8.0 MiB of KV "
                                         "cache \\(2,048 bytes per token\\), more than the 1.0 MiB calibrate "
                                         "allows \\(1.0 MiB or half the device's memory\\)"):
        sl.profiling.calibrate(lm, decode_batches=[1, 64], contexts=[64])


def test_calibrate_refuses_a_decode_grid_of_more_tokens_than_one_forward_may_hold(lm, never_measure):
    import splitlab as sl
    with pytest.raises(ValueError, match="64 x contexts up to 2000 tokens = 128,000 cached tokens built in one "
                                         "forward, more than the 65,536 calibrate measures"):
        sl.profiling.calibrate(lm, decode_batches=[64], contexts=[2000])  # minutes of one prefill on a CPU


@pytest.mark.parametrize("command", ["simulate", "plan"])
@pytest.mark.parametrize("options, named", [
    (["--dtype", "fp8"], "--dtype sets the analytic cost model"),
    (["--dtype", "fp8", "--compute-efficiency", "0.5"], "--dtype, --compute-efficiency set the analytic"),
    (["--memory-efficiency", "0.5"], "--memory-efficiency sets"),
    (["--model", "tiny"], "--model checks a calibration file's model: give it with --cost FILE"),
])
def test_an_option_that_would_be_ignored_is_refused(command, options, named):
    extra = ["--max-workers", "2"] if command == "plan" else ["--requests", "5"]
    status, out, err = cli(command, *extra, *options)
    assert status == 2 and out == "" and named in err and len(err.strip().splitlines()) == 1, (status, err)


def test_the_analytic_options_still_reach_the_roofline():
    status, out, err = cli("simulate", "--requests", "5", "--gpu", "H100", "--model-config", "Llama-3-8B",
                           "--dtype", "fp8", "--link", "PCIe 4.0 x16")
    assert status == 0, err
    assert "roofline of Llama-3-8B (fp8) on H100" in out and "KV over PCIe 4.0 x16" in out


def test_calibrate_out_below_a_file_says_it_is_a_file(tmp_path):
    f = tmp_path / "real.json"
    f.write_text("{}")
    status, out, err = cli("calibrate", "--out", str(f / "x.json"))
    assert status == 1 and f"cannot write calibration to {f / 'x.json'}: '{f}' is a file, not a directory" in err
