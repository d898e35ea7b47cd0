"""Every script in benchmarks/ runs: each with --quick (tiny sizes, seconds) in a subprocess, so that a refactor
that breaks one fails here (transfer_vs_raw.py once failed on a private Peer method that was gone)."""
from __future__ import annotations

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
    if script == "gpu_check.py" and "skipped, no CUDA device" in out.stdout:
        pytest.skip("gpu_check.py: no CUDA device here (its arguments were parsed; it skipped cleanly)")
