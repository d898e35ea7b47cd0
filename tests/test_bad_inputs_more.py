"""More bad inputs and edge cases, each found by trying to break the public API and CLI: every one must fail early
with a clear error (or be served correctly), never give silent garbage or lose a request."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import cli
import torch

import splitlab as sl
from splitlab.common.presets import CONFIG_DIR
from splitlab import KVCache, SamplingParams, serving
from splitlab.serving import DecodeBatch, ModelExecutor, Request, Slot


@pytest.fixture(scope="module")
def executor(lm):
    return ModelExecutor(lm, warm=False)


# --- request ids ---------------------------------------------------------------------------------------------

def test_a_slot_that_reuses_an_old_request_id_brings_its_own_cache(lm, executor):
    """A decode worker keeps its batch between runs; the next run's request 0 must not decode on the last run's
    cache of request 0 (it did: the merged batch cache was matched to slots by request id)."""
    batch = DecodeBatch()
    for prompt in ([1, 2, 3], [1, 2, 3], [7, 8, 9, 10]):  # the same id three times, one run after another
        slot = Slot(Request(0, 0.0, prompt, 3))
        slot.last_token = executor.prefill([slot], [len(prompt)]).first_tokens[0]
        slot.request.emit(slot.last_token, 0.0)
        batch.slots = [slot]
        while not slot.request.done:
            tok = executor.decode(batch).tokens[0]
            slot.request.emit(tok, 0.0)
            slot.last_token = tok
        batch.slots = []
        assert slot.request.output == sl.generate(lm, prompt, max_new_tokens=3).tokens[0]


@pytest.mark.parametrize("layout", ["colocated", "disaggregated"])
def test_duplicate_request_ids_are_refused_before_any_work(layout):
    reqs = [Request(0, 0.0, [1, 2, 3], 2), Request(0, 0.0, [4, 5, 6, 7], 8), Request(1, 0.0, [9], 6)]
    with pytest.raises(ValueError, match="request id 0 appears more than once"):
        serving.run(reqs, serving.ServingConfig(layout=layout))  # cost model: nothing is loaded
    assert all(r.state.value == "waiting" for r in reqs)


# --- sampling parameters -----------------------------------------------------------------------------------------

def test_an_integer_temperature_samples_like_the_float(lm):
    """SamplingParams(temperature=1) failed inside transformers ('has to be a strictly positive float')."""
    as_int = sl.generate(lm, "hello", max_new_tokens=4, sampling=SamplingParams(temperature=1, top_k=50, seed=3))
    as_float = sl.generate(lm, "hello", max_new_tokens=4, sampling=SamplingParams(temperature=1.0, top_k=50, seed=3))
    assert as_int.tokens == as_float.tokens
    assert SamplingParams(temperature=2, top_p=1).temperature == 2.0


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(temperature=float("nan")), ValueError, "temperature must be >= 0 and finite"),
    (dict(temperature=float("inf")), ValueError, "temperature must be >= 0 and finite"),
    (dict(temperature="1"), TypeError, "temperature must be a number, got '1'"),
    (dict(temperature=None), TypeError, "temperature must be a number"),
    (dict(temperature=1.0, top_k=2.5), TypeError, "top_k must be an integer, got 2.5"),
    (dict(temperature=1.0, top_k=True), TypeError, "top_k must be an integer"),
    (dict(temperature=1.0, top_p=float("nan")), ValueError, "top_p must be in"),
    (dict(temperature=1.0, seed=1.5), TypeError, "seed must be an integer, got 1.5"),
    (dict(temperature=1.0, seed=2 ** 70), ValueError, "seed must be in"),
])
def test_sampling_params_of_the_wrong_kind(kwargs, error, message):
    with pytest.raises(error, match=message):
        SamplingParams(**kwargs)


@pytest.mark.parametrize("sampling", [0.7, dict(temperature=1.0)])
def test_sampling_that_is_not_sampling_params(lm, sampling):
    with pytest.raises(TypeError, match="sampling must be None \\(greedy\\) or a splitlab.SamplingParams"):
        sl.generate(lm, "hello", max_new_tokens=2, sampling=sampling)


# --- prompts and tokens of the wrong kind ------------------------------------------------------------------------

@pytest.mark.parametrize("prompts, error, message", [
    (torch.tensor([1.5, 2.7]), TypeError, "prompts must be integer token ids, got a torch.float32 array"),
    (torch.tensor([[1.0, 2.0]]), TypeError, "prompts must be integer token ids"),
    (np.array([1.5, 2.5]), TypeError, "prompts must be integer token ids, got a float64 array"),
    ([1.5, 2.7], TypeError, "prompt 0 must hold integer token ids, got 1.5"),
    ([[1, 2], [3, 4.5]], TypeError, "prompt 1 must hold integer token ids, got 4.5"),
    ([["a", "b"]], TypeError, "prompt 0 must hold integer token ids, got 'a'"),
    (5, TypeError, "prompts must be a string, a list of token ids"),
    (["ab", 3], TypeError, "prompt 1 must be a string or a sequence of token ids, got int"),
    (torch.tensor(5), ValueError, "must be 1-D \\(one prompt\\) or 2-D \\[batch, tokens\\], got shape \\(\\)"),
    (torch.zeros(1, 2, 3, dtype=torch.long), ValueError, "got shape \\(1, 2, 3\\)"),
    (torch.zeros(0, 0, dtype=torch.long), sl.EmptyPromptError, "no prompts given"),
])
def test_prompts_of_the_wrong_kind(lm, prompts, error, message):
    """Float ids were truncated to other tokens silently (1.5, 2.7 -> 1, 2); other kinds gave errors that did not
    say what was wrong ("'int' object is not iterable")."""
    with pytest.raises(error, match=message):
        sl.prefill(lm, prompts)


def test_integer_arrays_are_prompts(lm):
    ids = [5, 6, 7, 8]
    expected = sl.generate(lm, ids, max_new_tokens=3).tokens
    assert sl.generate(lm, np.array(ids), max_new_tokens=3).tokens == expected
    assert sl.generate(lm, [np.int64(t) for t in ids], max_new_tokens=3).tokens == expected
    assert sl.generate(lm, [torch.tensor(ids)], max_new_tokens=3).tokens == expected


@pytest.mark.parametrize("n", [2.5, None, "3"])
def test_max_new_tokens_must_be_an_integer(lm, n):
    with pytest.raises(TypeError, match="max_new_tokens must be an integer"):
        sl.generate(lm, "hello", max_new_tokens=n)
    with pytest.raises(TypeError, match="max_new_tokens must be an integer"):
        sl.prefill(lm, "hello", max_new_tokens=n)  # 1.5 was accepted for the context check


@pytest.fixture(scope="module")
def pre2(lm):
    return sl.prefill(lm, ["ab", "abcd"])


@pytest.mark.parametrize("tokens, message", [
    ([1.7, 2.2], "tokens must be integer token ids, got a torch.float32 array"),
    (None, "tokens must be integer token ids, one per row; got None"),
    ("ab", "tokens must be integer token ids, one per row; got 'ab'"),
])
def test_decode_tokens_of_the_wrong_kind(lm, pre2, tokens, message):
    with pytest.raises(TypeError, match=message):
        sl.decode_step(lm, pre2.cache, tokens)


def test_decode_step_checks_what_it_is_given(lm, pre2):
    with pytest.raises(TypeError, match="cache must be a splitlab.KVCache, got NoneType"):
        sl.decode_step(lm, None, [1, 2])
    with pytest.raises(sl.CacheMismatchError, match="0 tokens for a cache of batch 2"):
        sl.decode_step(lm, pre2.cache, [])
    c = pre2.cache
    cut = KVCache(c.keys[:2], c.values[:2], c.attention_mask, c.model_id)  # same identity, 2 layers of 4
    with pytest.raises(sl.CacheMismatchError, match="do not fit this model \\(4 layers"):
        sl.decode_step(lm, cut, [1, 2])
    cast = KVCache([k.half() for k in c.keys], [v.half() for v in c.values], c.attention_mask, c.model_id)
    with pytest.raises(sl.CacheMismatchError, match="do not fit this model"):
        sl.decode_step(lm, cast, [1, 2])


# --- serving options and requests --------------------------------------------------------------------------------

def test_a_prompt_outside_the_vocabulary_is_rejected_at_arrival_not_mid_run(lm, executor):
    """It stopped the whole run with 'prompt 0 has token id 999' (the index within a prefill batch) and every
    other request was lost."""
    reqs = [Request(0, 0.0, [1, 2, 3], 3), Request(1, 0.1, [4, 5, 999], 3), Request(2, 0.2, [-2, 6], 3)]
    for layout in ("colocated", "disaggregated"):
        res = serving.run(reqs, serving.ServingConfig(layout=layout, kv_budget_bytes=None), executor)
        states = [r.state.value for r in res.requests]
        assert states == ["finished", "rejected", "rejected"]
        assert res.requests[1].reject_reason == "prompt token id 999 is outside the model's vocabulary 0..258"
        assert "token id -2" in res.requests[2].reject_reason
        assert res.requests[0].output == sl.generate(lm, [1, 2, 3], max_new_tokens=3).tokens[0]


@pytest.mark.parametrize("options, message", [
    (dict(transfer_mode="fast"), "transfer_mode must be one of \\('whole', 'layerwise'\\), got 'fast'"),
    (dict(link_bytes_per_s=1e9, link_latency_s=-5), "link_latency_s must be >= 0 s, got -5"),
    (dict(link_bytes_per_s=float("nan")), "link_bytes_per_s must be > 0"),
    (dict(kv_budget_bytes="big"), "kv_budget_bytes must be a number of bytes > 0"),
    (dict(kv_budget_bytes=float("nan")), "kv_budget_bytes must be a number of bytes > 0"),
    (dict(prefill_workers=1.5), "prefill_workers must be an integer, got 1.5"),
])
def test_serving_options_out_of_range_fail_before_any_work(options, message):
    """A bad transfer_mode was ignored by the cost model and failed after the prefills with a model; a negative link
    latency crashed mid-run ('token ... earlier than the previous one')."""
    with pytest.raises(ValueError, match=message):
        serving.ServingConfig(layout="disaggregated", **options)


def test_requests_hold_integer_ids():
    assert Request(0, 0.0, (np.int64(3), 4), 2).prompt == [3, 4]
    with pytest.raises(TypeError, match="request 0: prompt must be a sequence of integer token ids"):
        Request(0, 0.0, [1.5, 2], 2)
    with pytest.raises(TypeError, match="request 1: max_new_tokens must be an integer, got 2.5"):
        Request(1, 0.0, [1, 2], 2.5)


# --- sizing from malformed configs -------------------------------------------------------------------------------

BASE = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}


@pytest.mark.parametrize("change, message", [
    (dict(num_hidden_layers=-2), "config field num_hidden_layers must be a positive integer, got -2"),
    (dict(num_hidden_layers=2.5), "config field num_hidden_layers must be a positive integer, got 2.5"),
    (dict(num_hidden_layers="two"), "config field num_hidden_layers must be a positive integer, got 'two'"),
    (dict(num_attention_heads=0), "config field num_attention_heads must be a positive integer, got 0"),
    (dict(num_key_value_heads=3), "num_key_value_heads \\(3\\) must divide num_attention_heads \\(4\\)"),
    (dict(num_key_value_heads=8), "num_key_value_heads \\(8\\) must divide"),
    (dict(hidden_size=65), "hidden_size \\(65\\) is not a multiple of num_attention_heads \\(4\\)"),
    (dict(head_dim=-16), "config field head_dim must be a positive integer"),
])
def test_a_malformed_config_is_refused_not_sized(change, message):
    """-2 layers gave -512 bytes per token, 2.5 layers and hidden_size 65 were floored, 'two' said
    "invalid literal for int() with base 10"."""
    with pytest.raises(ValueError, match=message):
        sl.sizing.kv_geometry({**BASE, **change})


def test_a_whole_number_written_as_a_float_is_fine():
    assert sl.sizing.kv_geometry({**BASE, "num_hidden_layers": 2.0}) == sl.sizing.KVGeometry(2, 4, 4, 16)


@pytest.mark.parametrize("what, message", [
    ("negative", "config field num_hidden_layers must be a positive integer, got -2"),
    ("directory", "has no config.json"),
    ("binary", "is not valid JSON"),
    ("empty name", "model name is empty"),
])
def test_kv_size_cli_on_malformed_configs(tmp_path, capsys, what, message):
    from splitlab.cli import main
    (tmp_path / "neg.json").write_text('{"num_hidden_layers": -2, "num_attention_heads": 4, "hidden_size": 64}')
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe")
    (tmp_path / "empty").mkdir()
    arg = {"negative": tmp_path / "neg.json", "directory": tmp_path / "empty", "binary": tmp_path / "bin.json",
           "empty name": " "}[what]
    assert main(["kv-size", str(arg)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


# --- models: identity, loading --------------------------------------------------------------------------------

def test_a_preset_from_another_seed_is_another_model(lm, pre2):
    """Other random weights used to carry the same model_id, so their caches were decoded silently by the wrong
    weights (and a transfer header naming the other seed passed the receiver's check)."""
    other = sl.load_model("tiny", device="cpu", seed=1)
    assert other.model_id == "tiny@seed1|llama|L4|H8|KV2|D32|float32" and lm.model_id.startswith("tiny|")
    with pytest.raises(sl.CacheMismatchError, match="cache was made by 'tiny\\|.*not by this model 'tiny@seed1\\|"):
        sl.decode_step(other, pre2.cache, [1, 2])
    from splitlab.transfer.header import check, make_header
    with pytest.raises(sl.CacheMismatchError, match="model_id: sent 'tiny\\|"):
        check(make_header(pre2.cache), other)
    assert sl.load_model("tiny", device="cpu", seed=1).model_id == other.model_id


@pytest.mark.parametrize("what, message", [
    ("json file", "could not load model '.*config.json': it is a file; give the directory .*'tiny'"),
    ("empty dir", "could not load model '.*empty': the directory has no config.json .*'tiny'"),
])
def test_load_model_from_a_file_or_an_empty_directory(tmp_path, what, message):
    """A config.json path ended in torch's UnpicklingError (many lines); an empty directory was said to lack
    'a model_type key in its config.json'."""
    (tmp_path / "config.json").write_text((CONFIG_DIR / "tiny.json").read_text())
    (tmp_path / "empty").mkdir()
    target = tmp_path / ("config.json" if what == "json file" else "empty")
    with pytest.raises(sl.ModelLoadError, match=message):
        sl.load_model(str(target), device="cpu")


@pytest.mark.parametrize("kwargs, message", [
    (dict(device="tpu"), "unknown device 'tpu'"),
    (dict(dtype=torch.int8), "dtype torch.int8 is not a floating-point type"),
    (dict(seed=1.5), "seed must be an integer"),
    (dict(seed=2 ** 70), "seed must be an integer in"),
])
def test_load_model_arguments_out_of_range(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sl.load_model("tiny", **{"device": "cpu", **kwargs})


# --- transfer headers ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    (dict(lengths=(3,)), "lengths: 1 for a batch of 2"),
    (dict(lengths=(3, 99)), "lengths: \\[3, 99\\], each row holds 1..seq_len \\(5\\) tokens"),
    (dict(lengths=(-3, 5)), "lengths: \\[-3, 5\\]"),
    (dict(first_tokens=(1, 9999)), "first_tokens: \\[9999\\] outside the receiver's vocabulary 0..258"),
    (dict(request_ids=(7,)), "request_ids: 1 for a batch of 2"),
])
def test_a_header_that_disagrees_with_itself_is_rejected(lm, pre2, change, message):
    """These passed the receiver's check when it was given the header alone (as a decode worker is, before the
    payload lands): the mask would then be rebuilt from impossible lengths."""
    import dataclasses
    from splitlab.transfer.header import check, make_header
    header = dataclasses.replace(make_header(pre2.cache, [1, 2], [0, 1]), **change)
    with pytest.raises(sl.CacheMismatchError, match=message):
        check(header, lm)


def test_wire_header_with_impossible_lengths_is_a_protocol_error(pre2):
    import dataclasses
    import struct
    from splitlab.transfer import wire as kv_wire
    header = dataclasses.replace(kv_wire.make_header(pre2.cache), lengths=(0, 99))
    body = header.to_bytes()
    blob = struct.pack("<6q", kv_wire.MAGIC, kv_wire.VERSION, 1, 1, len(body), 0) + body
    msg = torch.frombuffer(bytearray(blob.ljust(kv_wire.HEADER_BYTES, b"\0")), dtype=torch.uint8)
    with pytest.raises(kv_wire.ProtocolError, match="impossible KV header"):
        kv_wire._parse_header(msg, 1)


def test_header_with_an_unknown_dtype_has_no_size(pre2):
    import dataclasses
    from splitlab.transfer.header import make_header
    with pytest.raises(ValueError, match="header dtype 'nope' is not a torch dtype"):
        dataclasses.replace(make_header(pre2.cache), dtype="nope").nbytes


# --- command line (cli() from conftest) -----------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (("demo", "--seed", "-1"), "argument --seed: must be an integer in 0 .. 2**63 - 1, got -1"),
    (("demo", "--seed", str(2 ** 70)), "argument --seed: must be an integer in 0 .. 2**63 - 1"),
    # it said "expected non-negative integer"
    (("serve", "--backend", "simulated", "--seed", "-1"), "argument --seed: must be an integer"),
    (("compare", "--backend", "simulated", "--seed", "x"), "argument --seed: 'x' is not an integer"),
])
def test_cli_seeds_out_of_range(args, message):
    status, out, err = cli(*args)
    assert status == 2 and out == "" and message in err and err.count("\n") == 1


def test_cli_demo_of_a_file_says_it_is_a_file(tmp_path):
    """It said the (existing) path 'does not exist'."""
    path = tmp_path / "config.json"
    path.write_text("{}")
    status, _, err = cli("demo", "--model", str(path))
    assert status == 1 and "is a file, not a directory saved with save_pretrained" in err  # it names a bad thing


def test_cli_demo_of_one_token_has_no_decode_line_of_nonsense():
    status, out, _ = cli("demo", "--prompt-tokens", "4", "--new-tokens", "1", "--no-reference")
    assert status == 0 and "n/a/token" not in out and "no decode step (one new token" in out


def test_cli_says_why_requests_were_rejected_and_when_tokens_were_not_compared():
    """Every request rejected gave 'rejected 3' with no reason, and 'tokens identical in both layouts: yes' about
    zero requests (and about the cost model's placeholder tokens)."""
    status, out, _ = cli("compare", "--backend", "simulated", "--requests", "3", "--kv-budget-bytes", "1")
    assert status == 3  # every request rejected: nothing served (issue 22)
    assert "rejected: request 0: needs" in out and "but a worker's KV budget is 1 bytes (and 2 more" in out
    assert "tokens identical in both layouts: not checked: the cost model emits no real tokens" in out
    status, out, _ = cli("compare", "--backend", "simulated", "--requests", "3", "--kv-budget-bytes", "1", "--json")
    data = json.loads(out)
    assert data["tokens_compared"] == 0
    for layout in ("colocated", "disaggregated"):
        m = data[layout]
        assert m["completed"] + m["rejected"] == m["submitted"] == 3
        assert [r["id"] for r in m["rejections"]] == [0, 1, 2] and all("KV budget" in r["reason"]
                                                                       for r in m["rejections"])


def test_cli_compare_on_the_model_counts_the_requests_it_compared():
    status, out, _ = cli("compare", "--requests", "3", "--scale", "0.1")
    assert status == 0 and "tokens identical in both layouts: yes (3 requests completed in both)" in out
    status, out, _ = cli("compare", "--requests", "2", "--kv-budget-bytes", "1")
    assert "tokens identical in both layouts: nothing to compare: no request completed in both layouts" in out


def test_cli_output_into_a_closed_pipe_is_no_traceback():
    """``python -m splitlab kv-size tiny | head -1`` printed a BrokenPipeError traceback."""
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "splitlab", "kv-size", "tiny"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line is written
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"BrokenPipeError" not in err
    assert proc.returncode == 141


@pytest.mark.parametrize("args, message", [
    (["--rate", "0"], "argument --rate: must be a finite positive number, got 0"),
    (["--workload", "nope"], "argument --workload: invalid choice: 'nope'"),
    (["--requests", "0"], "argument --requests: must be a positive integer, got 0"),
    (["--seed", "-1"], "argument --seed: must be an integer in 0 .. 2**63 - 1"),
])
def test_torchrun_entry_checks_its_arguments_before_joining(monkeypatch, args, message):
    """They were only checked after every rank had joined the group and loaded the model: --workload nope or
    --rate 0 then ended in a KeyError/ValueError traceback on the router."""
    monkeypatch.delenv("RANK", raising=False)
    status, out, err = cli("serve", "--backend", "distributed", "--torchrun", *args)
    assert status == 2 and out == "" and message in err and err.count("\n") == 1


def test_torchrun_entry_outside_torchrun_is_one_line(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    status, out, err = cli("serve", "--backend", "distributed", "--torchrun")
    assert status == 1 and out == ""
    assert err == "splitlab serve: error: RANK is not set: start this with torchrun\n"


@pytest.mark.parametrize("kwargs, message", [
    (dict(scale=0), "scale must be a finite number > 0"),            # every prompt and output was 1 token
    (dict(scale=-1), "scale must be a finite number > 0"),           # 'negative dimensions are not allowed'
    (dict(scale=float("nan")), "scale must be a finite number > 0"),  # 'cannot convert float NaN to integer'
    (dict(seed=-1), "seed must be an integer >= 0, got -1"),         # numpy's 'expected non-negative integer'
    (dict(seed=1.5), "seed must be an integer >= 0"),
])
def test_make_workload_out_of_range(kwargs, message):
    with pytest.raises(ValueError, match=message):
        serving.make_workload("chat", 3, 1.0, **kwargs)


@pytest.mark.parametrize("slos, message", [
    ((-1.0, 0.1), "ttft_slo_s must be a time > 0 s"),
    ((1.0, 0.0), "tpot_slo_s must be a time > 0 s"),
    ((float("nan"), 0.1), "ttft_slo_s must be a time > 0 s"),
])
def test_slos_out_of_range_are_refused_not_missed_by_every_request(slos, message):
    """A negative or NaN SLO gave attainment 0.0 without a word."""
    res = serving.run(serving.make_workload("chat", 2, 2.0))
    with pytest.raises(ValueError, match=message):
        res.metrics(*slos)
    assert res.metrics(None, None)["slo_attainment"] == 1.0


def test_transfer_cli_never_reports_a_negative_hidden_share(monkeypatch):
    """When streaming left more than a whole transfer after the forward it printed '-95% of whole hidden'."""
    from splitlab.transfer import bench as transfer_bench
    common = dict(prompt_tokens=8, batch=1, nbytes=16384, repeats=1, backend="gloo", model="tiny", dtype="float32")
    rows = [dict(common, method=m, seconds=s, gbps=16384 / s / 1e9, seconds_min=s)
            for m, s in (("in-process", 1e-5), ("whole", 2e-3), ("layerwise", 3e-3), ("raw", 1e-3))]
    rows[2].update(prefill_s=0.01, stream_prefill_s=0.01, total_s=0.014, exposed_s=0.0039, hidden_fraction=-0.95)
    monkeypatch.setattr(transfer_bench, "measure_transfers", lambda *a, **k: rows)
    status, out, _ = cli("transfer", "--prompt-tokens", "8")
    assert status == 0 and "-95%" not in out and "3.90 ms left after the forward = nothing hidden" in out


def test_select_rows_outside_the_batch(pre2):
    with pytest.raises(IndexError, match="select\\(\\) rows \\[5\\] outside 0..1"):
        pre2.cache.select([5])
    with pytest.raises(IndexError, match="outside 0..1"):
        pre2.cache.select([-1])


def test_plots_of_a_run_with_no_requests():
    """The CDFs of an empty run failed with "'DataFrame' object has no attribute 'state'" (the request table of
    no requests had no columns)."""
    import matplotlib
    matplotlib.use("Agg")
    from splitlab.teach.figures import serving as serving_plots
    res = serving.run([])
    assert list(res.request_table().columns)[:5] == ["id", "arrival_s", "prompt_tokens", "output_tokens", "state"]
    ax = serving_plots.ttft_cdf({"empty": res})
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["empty (n=0: no value)"]
    serving_plots.latency_cdf({"empty": res}, "tpot")
    serving_plots.worker_timeline(res)
    import matplotlib.pyplot as plt
    plt.close("all")
