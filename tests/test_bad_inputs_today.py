"""Hostile but realistic input to the day's new work (issues 18 and 21): goodput's and plan's limits, the
defaults chosen from the device, progress bars, threads and the trained model's cache. Each test reproduces a
failure found by trying it (a traceback, an error naming an argument the caller does not have, silent garbage)."""
from __future__ import annotations

import pytest

import splitlab as sl
from conftest import cli
from splitlab.planning.defaults import choose_defaults
from splitlab.serving import ServingConfig, goodput

ONE = ServingConfig.colocated(1)


@pytest.mark.parametrize("slo", [1e300, 1e308])
def test_goodput_huge_slos_answer_or_name_the_slos(slo):
    # 1e300 raised OverflowError (cannot convert float infinity to integer); 1e308 named duration_s and
    # min_requests, which the caller never gave
    if slo == 1e308:
        with pytest.raises(ValueError, match=r"^ttft_slo_s \+ tpot_slo_s( x output tokens)? must be at most"):
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


@pytest.mark.parametrize("call", ["plan", "choose_defaults"])
def test_fewer_max_requests_than_goodputs_minimum_runs(call):
    # plan(max_requests=50) and choose_defaults(..., max_requests=50, rate=True) raised "duration_s must be ...
    # 2 <= min_requests <= max_requests, got None, 100, 50": neither takes duration_s nor min_requests
    if call == "plan":
        p = sl.planner.plan(max_workers=2, max_requests=50, chunk_tokens=(), progress=False)
        assert p.best.goodput_rps_per_worker > 0
    else:
        chosen = choose_defaults(None, "chat", {"one": ONE}, rate=True, max_requests=50)
        assert chosen.rate_per_s > 0


@pytest.mark.parametrize("max_requests", [0, 1, 2.5, True])
def test_plan_and_choose_defaults_refuse_too_few_requests(max_requests):
    # choose_defaults(max_requests=0) returned SLOs of nan s (the mean of no prompts); plan raised
    # "cannot convert float NaN to integer"
    with pytest.raises(ValueError, match="max_requests must be an integer >= 2"):
        choose_defaults(None, "chat", max_requests=max_requests)
    with pytest.raises(ValueError, match="max_requests must be an integer >= 2"):
        sl.planner.plan(max_workers=2, max_requests=max_requests, chunk_tokens=(), progress=False)


@pytest.mark.parametrize("slo", [-1, 0, float("nan"), float("inf"), "1", True])
def test_choose_defaults_checks_the_slo_it_keeps(slo):
    # without rate=True a given SLO of -1 or nan came back in Chosen as if it were one
    with pytest.raises(ValueError, match="ttft_slo_s must be a finite time > 0 s"):
        choose_defaults(None, "chat", ttft_slo_s=slo)


@pytest.mark.parametrize("configs, kind", [([ONE], "a list"), ({"a": "colocated"}, "a dict of str")])
def test_choose_defaults_wrong_configs(configs, kind):
    # AttributeError: 'list' object has no attribute 'items' / 'str' object has no attribute 'with_'
    with pytest.raises(TypeError, match=f"configs must map names to ServingConfig layouts, got {kind}$"):
        choose_defaults(None, "chat", configs, rate=True)


def test_choose_defaults_rate_must_be_a_bool():
    with pytest.raises(TypeError, match="rate must be True"):
        choose_defaults(None, "chat", {"one": ONE}, rate="yes")


def test_a_rate_chosen_where_no_rate_breaks_the_slos_says_so():
    chosen = choose_defaults(None, "chat", {"one": ONE}, ttft_slo_s=1e9, tpot_slo_s=1e9, rate=True)
    assert "a lower bound: no rate breaks them" in chosen.why[-1]


def test_plan_progress_is_checked_and_off_in_a_pipe(capsys):
    # plan(progress="no") drew a bar, and plan's default drew one into pipes and logs (the CLI too)
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        sl.planner.plan(max_workers=2, progress="no")
    sl.planner.plan(max_workers=3, chunk_tokens=(), max_requests=100)  # 4 splits + colocated: 5 candidates
    assert "planner" not in capsys.readouterr().err
    status, out, err = cli("plan", "--max-workers", "3", "--chunk-tokens", "128")
    assert status == 0 and "planner" not in err, err


@pytest.mark.parametrize("command", ["plan", "simulate"])
def test_cli_huge_slos_one_line_naming_the_flag(command):
    # "error: duration_s must be a finite time > 0 ... min_requests <= max_requests, got None, 100, 3000"
    status, out, err = cli(command, "--ttft-slo", "1e308", "--tpot-slo", "1e308")
    assert status == 2 and "argument --ttft-slo: must be a time in seconds > 0 and <= 1e+12" in err, err
    assert "min_requests" not in err and len(err.strip().splitlines()) <= 2  # usage line + the error


FREE = {"decode": dict(decode_base_s=0.0, decode_per_seq_s=0.0, decode_per_token_s=0.0),
        "prefill": dict(prefill_base_s=0.0, prefill_per_token_s=0.0)}


def _cost_file(tmp_path, **fields):
    from splitlab.costmodel import CostModel
    from splitlab.costmodel.calibration import Calibration, save
    meta = dict(device="cpu", model="tiny", dtype="float32", torch="2", date="2026-12-03")
    return str(save(Calibration(CostModel(**fields), {}, meta), tmp_path / "free.json"))


@pytest.mark.parametrize("phase, slo, flag", [("decode", "tpot_slo_s", "--tpot-slo"),
                                              ("prefill", "ttft_slo_s", "--ttft-slo")])
def test_an_slo_a_free_phase_cannot_choose_names_what_to_give(tmp_path, phase, slo, flag):
    # a cost model with a free phase (allowed: an idealisation) gave a chosen SLO of 0 s, then refused it as if
    # the caller had given it: "tpot_slo_s must be a time > 0 s ..., got 0.0" (the command line has --tpot-slo)
    from splitlab.costmodel import CostModel
    from splitlab.planning.defaults import NoDefault
    with pytest.raises(NoDefault, match=f"^{slo} cannot be chosen from this cost model .*a {phase} of 0 s"):
        choose_defaults(CostModel(**FREE[phase]), "chat")
    path = _cost_file(tmp_path, **FREE[phase])
    for command in ("simulate", "plan"):
        status, out, err = cli(command, "--cost", path)
        assert status == 2 and f"{flag} cannot be chosen" in err and f"give {flag}" in err and slo not in err, err


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_plan_on_a_free_phase_with_slos_given(phase):
    # ZeroDivisionError in the closed form's decode_capacity / prefill_capacity / colocated_capacity
    from splitlab.costmodel import CostModel
    p = sl.planner.plan(CostModel(**FREE[phase]), ttft_slo_s=0.5, tpot_slo_s=0.05, max_workers=2, chunk_tokens=(),
                        max_requests=200, progress=False)
    assert p.best.goodput_rps_per_worker > 0
    assert p.first_guess["decode_rps" if phase == "decode" else "prefill_rps"] == float("inf")


@pytest.mark.parametrize("junk", ["abc", "0", "-1", "1.5", "2,x"])
def test_junk_omp_num_threads_is_not_the_users_count(monkeypatch, junk):
    # OMP_NUM_THREADS=abc: libgomp ignores it and torch runs its default, but load_model said "2 CPU threads:
    # yours (OMP_NUM_THREADS=abc is set), kept" and kept 2 threads for the tiny model (1 otherwise)
    import torch
    from splitlab.common.threads import physical_cores
    from splitlab.phases import cpu_threads
    before, last = torch.get_num_threads(), dict(cpu_threads._LAST)
    try:
        for name in cpu_threads.THREAD_ENV:
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("OMP_NUM_THREADS", junk)
        torch.set_num_threads(physical_cores())  # torch's default, as in a fresh process
        cpu_threads._LAST.update(set=None, pinned=None)
        n, note = cpu_threads.settle_threads(torch.device("cpu"), weight_bytes=1 << 20, cache_bytes=1 << 25)
        assert n == 1 and "chosen by splitlab" in note, note
        assert f"OMP_NUM_THREADS={junk} is not a thread count (OpenMP ignored it)" in note
        monkeypatch.setenv("OMP_NUM_THREADS", "1,1")  # nested levels: a count
        assert "yours (OMP_NUM_THREADS=1,1 is set)" in cpu_threads.settle_threads(torch.device("cpu"), 1 << 20)[1]
    finally:
        torch.set_num_threads(before)
        cpu_threads._LAST.update(last)


SMOL = "smollm2-135m-instruct"


def _spec():
    from splitlab.phases.trained import offline_model
    return offline_model(SMOL)


def test_a_converted_folder_without_its_tokenizer_is_not_converted(tmp_path):
    # a folder that lost tokenizer.json loaded with bytes for tokens; encode_chat then said that
    # 'smollm2-135m-instruct' has no chat template and to load 'smollm2-135m-instruct'
    from splitlab.phases.trained import CONVERTED_FILES, is_converted
    for name in CONVERTED_FILES:
        (tmp_path / name).write_text("{}")
    assert is_converted(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    assert not is_converted(tmp_path)


@pytest.mark.parametrize("lost", ["config.json", "model.safetensors", "tokenizer.json"])
def test_a_damaged_conversion_is_converted_again(tmp_path, monkeypatch, capsys, lost):
    # a converted folder missing a file (deleted, or a copy cut short) was converted again for half a minute,
    # then the rename onto the old folder failed: "could not write the weights ... (OSError: [Errno 39] Directory
    # not empty ...); set SPLITLAB_CACHE to a writable folder"
    from pathlib import Path
    from splitlab.phases import gguf_model
    from splitlab.phases.trained import CONVERTED_FILES, converted_dir, is_converted
    monkeypatch.setenv("SPLITLAB_CACHE", str(tmp_path))
    gguf = Path("/nowhere") / _spec().gguf_file

    def convert(spec, gguf, out):  # the half minute of dequantizing, in a few files
        for name in CONVERTED_FILES:
            (out / name).write_text("new")

    monkeypatch.setattr(gguf_model, "_convert", convert)
    target = converted_dir(_spec(), gguf)
    target.mkdir(parents=True)
    for name in CONVERTED_FILES:
        if name != lost:
            (target / name).write_text("old")
    assert gguf_model.converted(_spec(), gguf) == target and is_converted(target)
    assert all((target / name).read_text() == "new" for name in CONVERTED_FILES)
    assert f"lacks {lost}: converting again" in capsys.readouterr().err
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".")] == []  # no temporary folder left


def test_a_truncated_converted_weights_file_says_what_to_delete(tmp_path, monkeypatch):
    # SafetensorError: "Error while deserializing header: incomplete metadata, file not fully covered", a
    # traceback that named neither the file nor what to do
    from pathlib import Path
    import transformers
    from splitlab.phases import pretrained
    from splitlab.phases.tokenizer import ModelLoadError
    from splitlab.phases.trained import converted_dir
    monkeypatch.setenv("SPLITLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(pretrained, "in_hub_cache", lambda spec: False)
    monkeypatch.setattr(pretrained, "find_gguf", lambda spec: Path("/nowhere") / spec.gguf_file)
    target = converted_dir(_spec(), Path("/nowhere") / _spec().gguf_file)
    transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                             num_key_value_heads=2, vocab_size=300).save_pretrained(target)
    (target / "model.safetensors").write_bytes(b"\x40\x00\x00\x00\x00\x00\x00\x00{\"a\":")  # cut short
    (target / "tokenizer.json").write_text("{}")
    with pytest.raises(ModelLoadError, match=f"SafetensorError.*damaged: delete {target} and load again"):
        sl.load_model(SMOL)


@pytest.mark.parametrize("message, system, error, text", [
    ([], None, ValueError, "message is an empty list"),
    (None, None, TypeError, "message must be a str .* got NoneType"),
    (b"hi", None, TypeError, "got bytes"),  # was encoded as the text "b'hi'"
    ({"role": "user", "content": "hi"}, None, TypeError, "got dict"),
    (["hi"], None, ValueError, r"message\[0\] must be a dict"),
    ([{"who": "user", "text": "hi"}], None, ValueError, r"message\[0\] must be a dict with a 'role'"),
    ([{"role": "user", "content": 5}], None, ValueError, "and a str 'content'"),
    ([{"role": "wizard", "content": "hi"}], None, ValueError, "'role' of system, user, assistant, tool"),
    ("hi", 3, TypeError, "system must be a str"),
    ([{"role": "user", "content": "hi"}], "be brief", ValueError, "system goes with a single message"),  # ignored
])
def test_encode_chat_messages_are_checked(message, system, error, text):
    # jinja's UndefinedError "'dict object' has no attribute 'content'" and "can only concatenate str (not
    # "int") to str" from inside the template, bytes encoded as their repr, a system prompt silently dropped
    from splitlab.phases.loaded import _chat_messages
    with pytest.raises(error, match=text):
        _chat_messages(message, system)
    assert _chat_messages("hi", "be brief") == [{"role": "system", "content": "be brief"},
                                                {"role": "user", "content": "hi"}]


@pytest.mark.parametrize("env, where", [
    (dict(SPLITLAB_CACHE=" "), "~/.cache/splitlab"),  # was a folder named " " in the current directory
    (dict(SPLITLAB_CACHE="", XDG_CACHE_HOME="relative/dir"), "~/.cache/splitlab"),  # XDG: relative is invalid
    (dict(SPLITLAB_CACHE="", XDG_CACHE_HOME=" /abs/xdg "), "/abs/xdg/splitlab"),
    (dict(SPLITLAB_CACHE="~/mine"), "~/mine"),
])
def test_cache_root_of_odd_environments(monkeypatch, env, where):
    from pathlib import Path
    from splitlab.phases.trained import cache_root
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cache_root() == Path(where).expanduser()


@pytest.mark.parametrize("name", [SMOL, "HuggingFaceTB/SmolLM2-135M-Instruct"])
def test_kv_size_of_the_trained_model(name):
    # "unknown model 'smollm2-135m-instruct'" / "config file 'HuggingFaceTB/SmolLM2-135M-Instruct' does not
    # exist", for the name load_model takes offline
    import json
    status, out, err = cli("kv-size", name, "--tokens", "2048", "--json")
    data = json.loads(out)
    assert status == 0 and data["layers"] == 30 and data["kv_heads"] == 3 and data["dtype"] == "fp32"
    assert data["kv_bytes_per_token"] == 2 * 30 * 3 * 64 * 4, data
    assert "trained model's dtype" in data["dtype_source"]


@pytest.mark.parametrize("threshold", [-1, float("nan"), "x", True])
def test_fit_warnings_threshold_must_be_a_share(threshold):
    # -1 flagged every fit as missing "by 50% (more than -100%)", nan flagged none, "x" raised "'>' not
    # supported between instances of 'float' and 'str'"
    from splitlab.costmodel import Calibration, CostModel
    cal = Calibration(CostModel(), {}, dict(device="cpu", model="tiny"))
    with pytest.raises(ValueError, match="threshold must be a share >= 0"):
        sl.profiling.fit_warnings(cal, threshold)
    assert sl.profiling.fit_warnings(cal, float("inf")) == [] == sl.profiling.fit_warnings(cal, 0)


@pytest.mark.parametrize("cal", [None, "tiny.json"])
def test_fit_warnings_takes_a_calibration(cal):
    # AttributeError: 'str' object has no attribute 'fits'
    with pytest.raises(TypeError, match="fit_warnings takes a Calibration"):
        sl.profiling.fit_warnings(cal)


@pytest.fixture(scope="module")
def tiny():
    return sl.load_model("tiny")


def test_kv_quant_quality_takes_what_prefill_takes(tiny):
    # a numpy array of prompts: "The truth value of an array ... is ambiguous"; a text prompt: "prompt 0 must
    # hold integer token ids, got 'h'"; n_tokens=np.int64(3) refused as not an integer; schemes="int8" was the
    # unknown schemes 'i', 'n', 't', '8'
    import numpy as np
    from splitlab.phases.kv_quality import kv_quant_quality
    ids = tiny.encode("hello there")
    rows = kv_quant_quality(tiny, np.array([ids]), np.int64(3), schemes=("int8",)).set_index("scheme")
    assert list(rows.index) == ["full", "int8"] and rows.loc["full", "tokens"] == 3
    assert kv_quant_quality(tiny, ["hello there"], 3, schemes=("int8",)).equals(rows.reset_index())
    with pytest.raises(TypeError, match=r"schemes must be a list of names, e.g. \['int8'\]"):
        kv_quant_quality(tiny, [ids], 3, schemes="int8")


@pytest.mark.parametrize("kw, text", [(dict(max_n=1.5), "max_n must be an integer >= 1, got 1.5"),
                                      (dict(max_n=0), "max_n must be an integer >= 1, got 0"),  # named min_n
                                      (dict(ks="2"), "every k must be an integer >= 1"),
                                      (dict(n_tokens=1), "n_tokens must be an integer >= 2")])
def test_prompt_lookup_runs_arguments(tiny, kw, text):
    # max_n=1.5: "'float' object cannot be interpreted as an integer"; max_n=0: "need 1 <= min_n <= max_n"
    from splitlab.phases.prompt_lookup import prompt_lookup_runs
    with pytest.raises(ValueError, match=text):
        prompt_lookup_runs(tiny, [tiny.encode("hello there")], **{**dict(n_tokens=4), **kw})


def test_prompt_lookup_runs_numpy_counts_and_text(tiny):
    import numpy as np
    from splitlab.phases.prompt_lookup import prompt_lookup_runs
    rows = prompt_lookup_runs(tiny, "hello there hello there", ks=[np.int64(2)], n_tokens=np.int64(4))
    assert list(rows["k"]) == [0, 2] and rows["same_tokens"].all()


def test_chat_prefix_reuse_and_shared_prefix_arguments(tiny):
    # a string of questions was one question per character (20 rows for "What is the capital?"); block_tokens=1.5
    # ran as 1; shared_prefix_tokens([]) was an IndexError
    from splitlab.serving.prefix_chat import chat_prefix_reuse, shared_prefix_tokens
    with pytest.raises(TypeError, match="questions must be a list of user messages"):
        chat_prefix_reuse(tiny, "What is the capital?")
    with pytest.raises(TypeError, match="questions must be a list of user messages"):
        chat_prefix_reuse(tiny, [1, 2])
    with pytest.raises(ValueError, match="block_tokens must be an integer >= 1, got 1.5"):
        chat_prefix_reuse(tiny, ["a", "b"], block_tokens=1.5)
    with pytest.raises(ValueError, match="needs at least one prompt"):
        shared_prefix_tokens([])


def test_a_cost_model_of_sub_nanosecond_steps_is_refused(tmp_path):
    # prefill and decode coefficients of 1e-300 s: choosing a rate stepped the goodput search up until its step
    # factor overflowed (OverflowError: Numerical result out of range, a traceback from `simulate --cost`)
    from splitlab.costmodel import CostModel
    from splitlab.serving import CostModelExecutor
    tiny_times = dict(prefill_base_s=1e-300, prefill_per_token_s=1e-300, decode_base_s=1e-300, decode_per_seq_s=0.0,
                      decode_per_token_s=0.0)
    with pytest.raises(ValueError, match="less than a nanosecond: a coefficient is out of scale"):
        CostModelExecutor(CostModel(**tiny_times))
    status, out, err = cli("simulate", "--cost", _cost_file(tmp_path, **tiny_times))
    assert status == 1 and "less than a nanosecond" in err and "Traceback" not in err, err


@pytest.mark.parametrize("kw, text", [(dict(load=float("nan")), "load must be a 1-minute load average"),
                                      (dict(load=-1e308), "load must be a 1-minute load average"),
                                      (dict(cap=0), "cap must be an integer >= 1"),
                                      (dict(cap=1.5), "cap must be an integer >= 1")])
def test_choose_threads_arguments(kw, text):
    # load=nan: "cannot convert float NaN to integer"; load=-1e308: a note with a 300-digit count of idle CPUs;
    # cap=0 or 1.5 chose 1 thread without a word
    from splitlab.common.threads import choose_threads
    with pytest.raises(ValueError, match=text):
        choose_threads(10 ** 9, 10 ** 6, **kw)
    assert choose_threads(10 ** 9, 10 ** 6, cap=64, load=0.0)[0] >= 1
