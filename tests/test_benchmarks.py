"""Every script in benchmarks/ runs: each with --quick (tiny sizes, seconds) in a subprocess, so that a refactor
that breaks one fails here (transfer_vs_raw.py once failed on a private Peer method that was gone)."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))


def test_every_benchmark_is_listed():
    assert "simulator_scale.py" in SCRIPTS and "transfer_vs_raw.py" in SCRIPTS and len(SCRIPTS) >= 7


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_quick(script, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OUT=str(tmp_path))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick"], capture_output=True,
                         text=True, timeout=900, env=env, cwd=tmp_path)
    assert out.returncode == 0, f"{script} --quick failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    assert out.stdout.strip(), f"{script} --quick printed nothing"
    if script in ("gpu_check.py", "gpu_roofline.py", "book_on_gpu.py") and "skipped, no CUDA device" in out.stdout:
        pytest.skip(f"{script}: no CUDA device here (its arguments were parsed; it skipped cleanly)")


def test_gpu_roofline_on_the_cpu(tmp_path):
    """gpu_roofline.py's whole path (calibrate, each point beside the roofline, fused beside two passes) on the
    tiny preset on the CPU, where the ratios mean nothing but every row must be there and finite."""
    import json
    import math
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OUT=str(tmp_path))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_roofline.py"), "--quick", "--allow-cpu"],
                         capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads((tmp_path / "gpu_roofline.json").read_text())
    assert {r["kind"] for r in data["rows"]} == {"prefill", "chunk", "hybrid", "decode"}
    assert all(math.isfinite(r[k]) and r[k] > 0 for r in data["rows"] for k in ("measured_s", "predicted_s", "ratio"))
    assert len(data["pairs"]) == sum(r["kind"] == "hybrid" for r in data["rows"]) == 8
    for p in data["pairs"]:
        assert p["two_pass_s"] > 0 and 0 < p["predicted_saving"] < 1  # the roofline reads the weights once, not twice
    assert [r["kind"] for r in data["kernel_split"]] == ["prefill", "decode", "decode"]
    assert all(r["seconds"] > 0 and r["predicted_s"] > 0 for r in data["kernel_split"])
    assert data["hf_generate_per_token_s"] > 0
    assert data["calibration"]["format"].startswith("splitlab-calibration") and "device" in data


def test_book_on_gpu_runs_a_chapter_on_the_cpu(tmp_path):
    """book_on_gpu.py's whole path (a chapter in its own kernel, its record and the executed notebook) on chapter
    1's set-up cells on the CPU; on a GPU it ran every chapter (benchmarks/results/book_on_gpu_h200_*.json)."""
    import json
    import tarfile
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OUT=str(tmp_path))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "book_on_gpu.py"), "--quick", "--allow-cpu"],
                         capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 of 1 chapters ran whole" in out.stdout
    record = json.loads((tmp_path / "book_on_gpu.json").read_text())
    (chapter,) = record["chapters"]
    assert chapter["ok"] and chapter["error"] is None and chapter["seconds"] > 0
    assert "LoadedModel('tiny'" in chapter["cells"][0]["text"]  # what the set-up cell printed, kept
    with tarfile.open(tmp_path / "book_on_gpu_notebooks.tar.gz") as tar:
        assert tar.getnames() == [chapter["chapter"]]
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "book_on_gpu.py"), "--chapters", "42"],
                         capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "no chapter ['42'] in book/" in bad.stderr


def _benchmark(name: str):
    """The module of ``benchmarks/{name}.py``, imported as a script's sibling would."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


@pytest.mark.parametrize("argv, words", [
    (["--requests", "0"], "must be a positive integer, got 0"),
    (["--requests", "20000,-5"], "got -5"),  # refused before the 20,000-request run, not after it
    (["--requests", ""], "needs at least one count"),
    (["--workers", "1"], "at least 2 (the split needs a prefill and a decode worker)"),
    (["--rate-per-worker", "nan"], "finite positive number"),
    (["--repeats", "0"], "must be a positive integer"),
    (["--workload", "bogus"], "invalid choice"),
    (["--linear-n", "200000"], "would exceed 1,000,000 requests"),
    (["--sections", ""], "names none"),
])
def test_simulator_scale_refuses_bad_arguments_up_front(argv, words, capsys):
    with pytest.raises(SystemExit) as stop:
        _benchmark("simulator_scale").main(argv)
    assert stop.value.code == 2 and words in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["--requests", "3"], "--requests must be at least 4"),
    (["--repeats", "0"], "--repeats must be at least 1"),
    (["--workers", "1"], "--workers must be 2 to 16"),
    (["--scale", "nan"], "--scale must be a finite positive number"),
    (["--scale", "-1"], "--scale must be a finite positive number"),
    (["--link", "pigeon"], "invalid choice"),
    (["--seed", "-1"], "--seed must be an integer >= 0"),
    (["--workers", "1000"], "--workers must be 2 to 16"),
    (["--model", "no-such-model"], "--model 'no-such-model'"),  # a fresh reader's tracebacks (2026-12-05), the
    (["--scale", "1000"], "--scale 1000.0: "),  # scale's after a whole calibration
])
def test_validate_simulator_refuses_bad_arguments_before_calibrating(argv, words, capsys, monkeypatch):
    validate_simulator = _benchmark("validate_simulator")
    monkeypatch.setattr(validate_simulator.sl.profiling, "calibrate", lambda *a, **k: pytest.fail("calibrated first"))
    with pytest.raises(SystemExit) as stop:
        validate_simulator.main(argv)
    assert stop.value.code == 2 and words in capsys.readouterr().err
