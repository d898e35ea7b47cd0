"""``simulate``, ``plan`` and ``calibrate`` on the command line: the JSON contract, and one-line errors."""
from __future__ import annotations

import json

import pytest

from conftest import cli
from splitlab.cli import main


def _json(capsys, args):
    assert main([*args, "--json"]) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out and "Infinity" not in out
    return json.loads(out)


def test_simulate_prints_the_keys_of_serve_plus_wall_s(capsys):
    serve = _json(capsys, ["serve", "--backend", "simulated", "--requests", "12", "--layout", "disaggregated"])
    sim = _json(capsys, ["simulate", "--requests", "12", "--layout", "disaggregated"])
    assert set(sim) == set(serve) | {"wall_s", "cost_source"} and sim["wall_s"] > 0
    assert set(sim["disaggregated"]) == set(serve["disaggregated"])
    assert sim["disaggregated"]["ttft_s"] == serve["disaggregated"]["ttft_s"]  # the same built-in cost model
    gpu = _json(capsys, ["simulate", "--requests", "12", "--gpu", "H100", "--model-config", "Llama-3-8B"])
    assert gpu["cost_source"].startswith("predicted: roofline of Llama-3-8B")


def test_plan_ranks_candidates(capsys):
    data = _json(capsys, ["plan", "--workload", "research", "--ttft-slo", "0.5", "--tpot-slo", "0.02",
                          "--max-workers", "3", "--chunk-tokens", "128", "--price-per-hour", "1.5"])
    keys = {"layout", "policy", "workers", "prefill_workers", "decode_workers", "goodput_rps_per_worker",
            "cost_per_million_tokens", "binding_slo"}
    assert len(data["candidates"]) == 2 + 3 and all(keys <= set(c) for c in data["candidates"])
    goodputs = [c["goodput_rps_per_worker"] for c in data["candidates"]]
    assert goodputs == sorted(goodputs, reverse=True) and data["best"] == data["candidates"][0]
    assert data["price_per_hour"] == 1.5 and data["first_guess"]["prefill_rps"] > 0
    assert main(["plan", "--workload", "code", "--max-workers", "2", "--chunk-tokens", "64"]) == 0
    text = capsys.readouterr().out
    assert "goodput/worker" in text and "wins:" in text and "closed form:" in text


def test_calibrate_writes_a_file_simulate_and_plan_read(capsys, tmp_path):
    out = tmp_path / "tiny.json"
    data = _json(capsys, ["calibrate", "--model", "tiny", "--out", str(out), "--repeats", "1", "--threads", "1"])
    assert out.exists() and data["model"] == "tiny" and set(data["fits"]) == {"prefill", "decode", "transfer"}
    saved = json.loads(out.read_text())
    assert {"device", "model", "dtype", "torch", "date"} <= set(saved)
    sim = _json(capsys, ["simulate", "--cost", str(out), "--model", "tiny", "--requests", "6"])
    assert sim["cost_source"].startswith("measured: tiny")
    assert main(["simulate", "--cost", str(out), "--model", "smollm2-135m"]) == 1
    assert "measured on model 'tiny'" in capsys.readouterr().err


@pytest.mark.parametrize("args, status", [
    (("plan", "--max-workers", "1"), 2), (("plan", "--ttft-slo", "0"), 2), (("plan", "--tpot-slo", "-1"), 2),
    (("plan", "--chunk-tokens", "8", "--max-batch", "16"), 2), (("plan", "--chunk-tokens", "1"), 2),
    (("simulate", "--gpu", "H100"), 2),
    (("simulate", "--cost", "x.json", "--gpu", "H100", "--model-config", "Llama-3-8B"), 2),
    (("simulate", "--gpu", "B900", "--model-config", "Llama-3-8B"), 2), (("simulate", "--rate", "0"), 2),
    (("simulate", "--cost", "/no/such/file.json"), 1), (("plan", "--cost", "/no/such/file.json"), 1),
    (("simulate", "--model-config", "Llama-3-70B", "--gpu", "T4"), 1),  # weights do not fit the GPU
    (("calibrate", "--out", "/no/such/dir/cal.json"), 1), (("calibrate",), 2),
])
def test_bad_arguments_fail_in_one_line(tmp_path, args, status):
    got, out, err = cli(*args)
    assert got == status and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_corrupt_calibration_is_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "splitlab-calibration/1", "model"')
    assert main(["simulate", "--cost", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "not valid JSON" in err and len(err.strip().splitlines()) == 1
