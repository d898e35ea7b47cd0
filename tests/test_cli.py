"""The command line, run as a user runs it: ``python -m splitlab ...`` in a subprocess (no model download).

Every run pays the import of torch and transformers (~2-3 s), so all runs start at once from one fixture, as
many in parallel as there are cores, each on one thread; the tests then read their results.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import splitlab as sl

DEMO_PROMPT, DEMO_NEW = 24, 6
PUBLISHED = [("Llama-2-7B", 524288, "MHA"), ("Llama-3-8B", 131072, "GQA")]
BAD_ARGS = [
    ("kv-size", "no-such-model"),                               # unknown model
    ("demo", "--model", "no-such-model"),                       # unknown model, not downloadable here
    ("kv-size", "tiny", "--tokens", "-5"),                      # negative tokens
    ("kv-size", "tiny", "--batch", "0"),                        # zero batch
    ("demo", "--new-tokens", "0"),                              # zero tokens
    ("demo", "--prompt-tokens", "3000", "--new-tokens", "1"),   # beyond the model's context of 2048
    ("kv-size", "tiny", "--dtype", "fp13"),                     # unknown dtype
    ("demo", "--device", "quantum"),                            # unknown device
    ("kv-size", "/no/such/dir/config.json"),                    # missing model path
    ("demo", "--model", "./no/such/checkpoint"),                # missing model path
    ("demo", "--prompt-tokens", "0"),
]
CONFIG = {"num_hidden_layers": 10, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
          "hidden_size": 1024}


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "splitlab", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[tuple[str, ...], subprocess.CompletedProcess]:
    """Every command line of this file, run once (in parallel); keyed by its arguments."""
    config = tmp_path_factory.mktemp("cfg") / "config.json"
    config.write_text(json.dumps(CONFIG))
    commands = [("--help",),
                ("demo", "--prompt-tokens", str(DEMO_PROMPT), "--new-tokens", str(DEMO_NEW), "--json"),
                ("kv-size", "tiny-bigcode-mqa", "--tokens", "100", "--batch", "3", "--dtype", "fp32", "--json"),
                ("kv-size", "config-path", "--tokens", "1000", "--batch", "2", "--json"),
                *[("kv-size", model, "--json") for model, _, _ in PUBLISHED], *BAD_ARGS]
    real = {c: tuple(str(config) if a == "config-path" else a for a in c) for c in commands}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {c: pool.submit(run_cli, *real[c]) for c in commands}
        return {c: f.result() for c, f in futures.items()}


def test_help_lists_subcommands(runs):
    out = runs["--help",]
    assert out.returncode == 0
    assert "demo" in out.stdout and "kv-size" in out.stdout


def test_demo_json(runs):
    prompt, new = DEMO_PROMPT, DEMO_NEW
    out = runs["demo", "--prompt-tokens", str(prompt), "--new-tokens", str(new), "--json"]
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # exactly one JSON object on stdout
    for key in ("prefill_s", "ttft_s", "decode_s_per_token_median", "decode_s_per_token_p90"):
        assert isinstance(data[key], float) and data[key] > 0, key
    assert data["ttft_s"] >= data["prefill_s"]
    assert data["decode_s_per_token_p90"] >= data["decode_s_per_token_median"]
    assert (data["model"], data["device"], data["prompt_tokens"], data["new_tokens"]) == ("tiny", "cpu", prompt, new)
    assert data["matches_reference"] is True
    assert data["random_weights"] is True
    assert isinstance(data["kv_bytes_after_prefill"], int) and isinstance(data["kv_bytes_final"], int)
    assert data["kv_bytes_final"] > data["kv_bytes_after_prefill"]
    config = sl.sizing.resolve_config("tiny")  # float32 weights on CPU; the last token is not cached
    assert data["kv_bytes_after_prefill"] == sl.sizing.kv_bytes(config, prompt, dtype="fp32")
    assert data["kv_bytes_final"] == sl.sizing.kv_bytes(config, prompt + new - 1, dtype="fp32")


@pytest.mark.parametrize("model, per_token, attention", PUBLISHED)
def test_kv_size_published(runs, model, per_token, attention):
    out = runs["kv-size", model, "--json"]
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kv_bytes_per_token"] == per_token
    assert data["kv_bytes_total"] == per_token * 4096
    assert (data["tokens"], data["batch"], data["dtype"], data["attention"]) == (4096, 1, "fp16", attention)


def test_kv_size_preset(runs):
    out = runs["kv-size", "tiny-bigcode-mqa", "--tokens", "100", "--batch", "3", "--dtype", "fp32", "--json"]
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    config = sl.sizing.resolve_config("tiny-bigcode-mqa")
    assert data["attention"] == "MQA" and data["kv_heads"] == 1
    assert data["kv_bytes_per_token"] == sl.sizing.kv_bytes_per_token(config, "fp32")
    assert data["kv_bytes_total"] == sl.sizing.kv_bytes(config, 100, 3, "fp32")


def test_kv_size_config_path(runs):
    out = runs["kv-size", "config-path", "--tokens", "1000", "--batch", "2", "--json"]
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kv_bytes_per_token"] == 2 * 10 * 4 * 64 * 2
    assert data["kv_bytes_total"] == 2 * 10 * 4 * 64 * 2 * 1000 * 2
    assert (data["layers"], data["kv_heads"], data["head_dim"], data["attention"]) == (10, 4, 64, "GQA")


@pytest.mark.parametrize("args", BAD_ARGS, ids=" ".join)
def test_bad_arguments_one_line_no_traceback(runs, args):
    out = runs[args]
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0], out.stderr
    assert out.stdout == ""
