"""What a fresh reader met in the quick tour and the CLI (issue 18, items 3, 4 and 6, and the QA's "also seen"):
threads chosen for a CPU run (and the user's kept), progress bars where a call runs long, the README's
``load_model(model, tokenizer)``, options that were silently ignored, and the units and meanings of the output."""
from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

import splitlab as sl
from splitlab import serving
from splitlab.common import progress as progress_mod
from splitlab.common.threads import choose_threads, max_threads, physical_cores
from splitlab.phases import cpu_threads

from conftest import cli

ROOT = Path(__file__).resolve().parents[1]


# --- threads --------------------------------------------------------------------------------------------------
def test_choose_threads_one_for_weights_in_the_cache_else_the_idle_cpus():
    n, why = choose_threads(11 << 20, 32 << 20, load=0.0)
    assert n == 1 and "fit in the 32 MiB last-level cache" in why
    n, why = choose_threads(500 << 20, 32 << 20, cap=64, load=max_threads() + 5.0)  # every CPU busy: one thread
    assert n == 1 and f"0 of {max_threads()} CPUs idle" in why
    n, _ = choose_threads(500 << 20, 32 << 20, cap=64, load=0.0)  # an idle machine: every CPU
    assert n == max_threads()
    assert choose_threads(500 << 20, 32 << 20, cap=1, load=0.0)[0] == 1
    assert 1 <= physical_cores() <= max_threads()


@pytest.fixture
def torch_default_threads(monkeypatch):
    """torch at its own default count (as in a fresh process without OMP_NUM_THREADS); restored afterwards."""
    before, last = torch.get_num_threads(), dict(cpu_threads._LAST)
    for name in cpu_threads.THREAD_ENV:
        monkeypatch.delenv(name, raising=False)
    torch.set_num_threads(physical_cores())
    cpu_threads._LAST.update(set=None, pinned=None)
    yield physical_cores()
    torch.set_num_threads(before)
    cpu_threads._LAST.update(last)


def test_load_model_chooses_one_thread_for_tiny_and_says_so(torch_default_threads):
    """The README's snippet decoded at ~0.19 s per token on two threads of a busy 2-core machine, 0.0044 s on one:
    the API chose nothing and the tip came after the snippet."""
    lm = sl.load_model("tiny")
    assert lm.threads == 1 == torch.get_num_threads()
    assert "chosen by splitlab" in lm.threads_note and "last-level cache" in lm.threads_note
    again = sl.load_model("tiny")  # the count splitlab set is not mistaken for the user's
    assert again.threads == 1 and "chosen by splitlab" in again.threads_note
    asked = sl.load_model("tiny", threads=max_threads())
    assert asked.threads == max_threads() == torch.get_num_threads() and "as asked" in asked.threads_note


def test_load_model_keeps_the_users_threads(torch_default_threads, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch_default_threads))
    lm = sl.load_model("tiny")
    assert lm.threads == torch_default_threads == torch.get_num_threads()
    assert "OMP_NUM_THREADS" in lm.threads_note and "kept" in lm.threads_note
    monkeypatch.delenv("OMP_NUM_THREADS")
    if max_threads() > 2:  # a count that is not torch's default is the user's torch.set_num_threads
        torch.set_num_threads(max_threads() - 1)
        lm = sl.load_model("tiny")
        assert lm.threads == max_threads() - 1 and "torch.set_num_threads" in lm.threads_note


def test_a_pinned_count_is_kept_even_when_it_equals_torchs_default(torch_default_threads):
    """The worker processes, the chapters, the tests and transfer --threads pin their count: a count equal to
    torch's default (2 on a 2-core machine) was otherwise taken for the default and replaced by the choice."""
    cpu_threads.pin_threads(torch_default_threads)
    lm = sl.load_model("tiny")
    assert lm.threads == torch_default_threads and "kept" in lm.threads_note


@pytest.mark.parametrize("threads", [0, max_threads() + 1, 1.5, "2", True])
def test_load_model_refuses_a_bad_thread_count(threads):
    with pytest.raises(ValueError, match="threads must be an integer in 1 .."):
        sl.load_model("tiny", threads=threads)


def test_cli_demo_says_its_threads_and_takes_threads(torch_default_threads):
    status, out, err = cli("demo", "--prompt-tokens", "8", "--new-tokens", "3", "--no-reference", "--json")
    data = json.loads(out)
    assert status == 0 and err == "" and data["cpu_threads"] == 1 and "chosen by splitlab" in data["cpu_threads_note"]
    status, out, _ = cli("demo", "--prompt-tokens", "8", "--new-tokens", "3", "--no-reference", "--threads", "1")
    assert status == 0 and "threads      1 CPU thread, as asked" in out


# --- the README's load_model(model, tokenizer) ------------------------------------------------------------------
def test_load_model_takes_the_tokenizer_second_as_the_readme_writes_it(lm):
    """``sl.load_model(model, tokenizer)`` failed with a device error that printed the whole tokenizer."""
    wrapped = sl.load_model(lm.model, lm.tokenizer)
    assert wrapped.tokenizer is lm.tokenizer and wrapped.device.type == "cpu"
    assert wrapped.decode(wrapped.encode("KV")) == "KV"


def test_a_device_that_is_no_device_is_named_by_its_type_not_its_repr():
    class Huge:
        def __repr__(self):
            return "x" * 100_000

    with pytest.raises(ValueError) as err:
        sl.load_model("tiny", device=Huge())
    assert "got a Huge" in str(err.value) and len(str(err.value)) < 200


# --- progress --------------------------------------------------------------------------------------------------
def test_progress_default_follows_whether_stderr_is_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stderr", Terminal())
    assert progress_mod.show_progress(None) is True
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert progress_mod.show_progress(None) is False
    assert progress_mod.show_progress(True) is True and progress_mod.show_progress(False) is False
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        progress_mod.show_progress("yes")


def test_an_emulated_run_draws_a_bar_only_when_asked(lm, capsys, monkeypatch):
    from splitlab.serving import virtual
    monkeypatch.setattr(virtual, "PROGRESS_DELAY_S", 0.0)  # the bar shows at once, not after 2 s
    reqs = serving.make_workload("chat", 2, 4.0, model=lm, scale=0.05)
    ex = serving.ModelExecutor(lm)
    serving.run(reqs, serving.ServingConfig.colocated(1), ex, progress=True)
    err = capsys.readouterr().err
    assert "serving (emulated)" in err and "req" in err
    serving.compare(reqs, serving.contenders(prefill_workers=1, decode_workers=1), ex)  # default: not a terminal
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match="progress must be"):
        serving.run(reqs, serving.ServingConfig.colocated(1), progress=1)


def test_calibrate_draws_a_bar_of_its_points(lm, capsys):
    sl.profiling.calibrate(lm, prompt_tokens=[16, 32, 64, 128], decode_batches=[1, 2], contexts=[32, 64],
                           transfer_tokens=[16, 64], chunk_tokens=(), repeats=1, progress=True)
    err = capsys.readouterr().err
    assert "calibrate tiny" in err and "point" in err


def test_the_cli_draws_no_bar_with_json_and_none_into_a_pipe():
    from splitlab.cli.args import progress
    assert progress(type("Args", (), {"json": True})) is False
    assert progress(type("Args", (), {"json": False})) is False  # stderr is no terminal here


# --- options that were ignored without a word ---------------------------------------------------------------------
@pytest.mark.parametrize("args, named", [
    (("simulate", "--layout", "disaggregated", "--workers", "3"), "--workers only applies to the colocated"),
    (("serve", "--backend", "simulated", "--model", "nosuch"), "--model only applies to the back ends that run"),
    (("serve", "--backend", "simulated", "--threads", "1"), "--threads only applies"),
    (("simulate", "--chunk-tokens", "64"), "--chunk-tokens sets the chunked policy's budget"),
    (("serve", "--backend", "simulated", "--policy", "decode-first", "--chunk-tokens", "64"), "--policy chunked"),
    (("serve", "--backend", "simulated", "--prefill-workers", "2"), "--prefill-workers only applies to the disagg"),
    (("simulate", "--transfer-mode", "layerwise"), "--transfer-mode only applies to the disaggregated"),
    (("simulate", "--layout", "disaggregated", "--policy", "chunked"), "--policy only applies to the colocated"),
])
def test_options_no_run_reads_are_refused(args, named):
    status, out, err = cli(*args, "--requests", "2")
    assert status == 2 and out == "" and named in err and len(err.strip().splitlines()) == 1, (status, err)


def test_the_options_each_layout_reads_still_run():
    status, out, _ = cli("compare", "--backend", "simulated", "--requests", "4", "--policy", "chunked",
                         "--chunk-tokens", "64", "--prefill-workers", "1", "--decode-workers", "2", "--json")
    data = json.loads(out)
    assert status == 0 and len(data["colocated"]["workers"]) == 3  # compare: colocated on P + D workers
    assert len(data["disaggregated"]["workers"]) == 3
    status, out, _ = cli("simulate", "--layout", "disaggregated", "--prefill-workers", "2", "--requests", "4", "--json")
    assert status == 0 and json.loads(out)["disaggregated"]["workers"] == ["P0", "P1", "D0"]


def test_serve_on_the_simulated_back_end_names_its_cost_model():
    status, out, _ = cli("serve", "--backend", "simulated", "--requests", "2")
    assert status == 0 and "cost model: built-in" in out
    status, out, _ = cli("serve", "--backend", "simulated", "--requests", "2", "--json")
    assert json.loads(out)["cost_source"].startswith("built-in")


# --- units and meanings ----------------------------------------------------------------------------------------
def test_kv_size_of_a_preset_uses_the_dtype_demo_and_serve_run_it_in(lm):
    """``kv-size tiny`` said 1,024 B/token (fp16) while demo and serve used 2,048 (the preset's fp32)."""
    status, out, _ = cli("kv-size", "tiny", "--json")
    data = json.loads(out)
    assert status == 0 and data["dtype"] == "fp32"
    assert data["kv_bytes_per_token"] == lm.kv_bytes(1) == 2048 and "preset's dtype" in data["dtype_source"]
    assert "KV in fp32 (the preset's dtype" in cli("kv-size", "tiny")[1]
    assert json.loads(cli("kv-size", "tiny", "--dtype", "fp16", "--json")[1])["kv_bytes_per_token"] == 1024
    assert json.loads(cli("kv-size", "Llama-3-8B", "--json")[1])["dtype"] == "fp16"  # not a preset: as before


def _fake_transfer_rows(hidden: float) -> list[dict]:
    common = dict(prompt_tokens=8, batch=1, nbytes=16384, repeats=1, backend="gloo", model="tiny", dtype="float32")
    rows = [dict(common, method=m, seconds=s, gbps=16384 / s / 1e9, seconds_min=s)
            for m, s in (("in-process", 1e-5), ("whole", 2e-3), ("layerwise", 3e-3), ("raw", 1e-3))]
    rows[2].update(prefill_s=0.01, stream_prefill_s=0.01, total_s=0.014, exposed_s=2e-3 * (1 - hidden),
                   hidden_fraction=hidden)
    return rows


@pytest.mark.parametrize("hidden, said", [(-0.95, "negative: streaming layer by layer cost more than it hid"),
                                          (0.5, "streaming during the prefill hid 50% of a whole transfer")])
def test_transfer_json_says_gigabytes_and_what_a_hidden_fraction_means(monkeypatch, hidden, said):
    from splitlab.transfer import bench
    monkeypatch.setattr(bench, "measure_transfers", lambda *a, **k: _fake_transfer_rows(hidden))
    status, out, _ = cli("transfer", "--prompt-tokens", "8", "--json")
    rows = json.loads(out)
    assert status == 0 and all("gbps" not in r and r["gb_per_s"] == 16384 / r["seconds"] / 1e9 for r in rows)
    layerwise = next(r for r in rows if r["method"] == "layerwise")
    assert layerwise["hidden_fraction"] == hidden and layerwise["hidden_note"].startswith(said)


def test_the_readmes_calibration_file_is_ignored_by_git():
    """``calibrate --out tiny.json`` as in the README left an untracked file in the repository root."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "check-ignore", "-q", "tiny.json"], cwd=ROOT, env=dict(os.environ))
    assert out.returncode == 0
    assert "--out tiny.json" in (ROOT / "README.md").read_text()


def test_validate_draws_a_bar_of_its_emulated_runs(lm, capsys):
    table = serving.validate(lm, serving.CostModelExecutor().cost, workloads={"chat": 2.0},
                             contenders={"one": serving.ServingConfig.colocated(1)}, n_requests=2, scale=0.05,
                             progress=True)
    assert len(table) == 4 and "validate: emulated runs" in capsys.readouterr().err


def test_the_demo_draws_a_bar_of_its_stages_when_stderr_is_a_terminal(monkeypatch):
    """demo ran 56 s without a word (two threads on a busy machine)."""
    monkeypatch.setattr("splitlab.cli.demo.progress", lambda args: not args.json)  # as on a terminal
    status, _, err = cli("demo", "--prompt-tokens", "8", "--new-tokens", "3")
    assert status == 0 and "demo:" in err and "stage" in err and "transformers generate" in err
    status, _, err = cli("demo", "--prompt-tokens", "8", "--new-tokens", "3", "--json")
    assert status == 0 and err == ""
