"""Progress bars of long simulations: serving.run(progress=True) and goodput(progress=True) draw a tqdm bar on
stderr once a run has gone on for a few seconds; without progress (the API's default, and --json) nothing is
drawn."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from splitlab.serving import ServingConfig, goodput, make_workload, run
from splitlab.serving import virtual


@pytest.fixture
def at_once(monkeypatch):
    """Bars show from the first second (instead of after a few), so a short test run draws one."""
    monkeypatch.setattr(virtual, "PROGRESS_DELAY_S", 0.0)


def test_a_run_with_progress_draws_a_bar_of_its_requests(at_once, capsys):
    reqs = make_workload("chat", 400, 50.0, seed=0)
    quiet = run(reqs, ServingConfig.colocated(2, trace=False))
    assert capsys.readouterr().err == ""
    shown = run(reqs, ServingConfig.colocated(2, trace=False), progress=True)
    err = capsys.readouterr().err
    assert "serving (simulated)" in err and "/400" in err
    assert [r.token_times_s for r in shown.requests] == [r.token_times_s for r in quiet.requests]


def test_a_short_run_draws_nothing_even_with_progress(capsys):
    run(make_workload("chat", 20, 50.0, seed=0), ServingConfig.colocated(1), progress=True)
    assert capsys.readouterr().err == ""


def test_goodput_with_progress_draws_a_bar_of_its_runs(at_once, capsys):
    res = goodput("code", ServingConfig.colocated(1), ttft_slo_s=1.0, tpot_slo_s=0.1, max_requests=300,
                  start_rate_per_worker=5.0, progress=True)
    err = capsys.readouterr().err
    assert f"goodput of {res.name}" in err and "per worker" in err and res.goodput_rps_per_worker > 0


def test_simulate_json_prints_no_bar():
    out = subprocess.run([sys.executable, "-m", "splitlab", "simulate", "--requests", "30", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "serving (simulated)" not in out.stderr and json.loads(out.stdout)["layout"] == "colocated"


def test_simulate_says_it_draws_a_large_workload_first(monkeypatch):
    # QA of issue 18 ("also seen"): simulate --requests 1000000 ran 194 s with no output; the requests' prompt ids
    # alone took minutes before the simulation's bar could start (100,000 took 21 s at load 12). Lowered here so
    # that a small run shows the line
    from conftest import cli
    from splitlab.cli import serving as cli_serving
    monkeypatch.setattr(cli_serving, "MANY_REQUESTS", 50)
    status, out, err = cli("simulate", "--requests", "50", "--rate", "20", "--ttft-slo", "1", "--tpot-slo", "0.1")
    assert status == 0 and "splitlab simulate [" in err and "drawing 50 chat requests" in err, err
    status, out, err = cli("simulate", "--requests", "50", "--rate", "20", "--ttft-slo", "1", "--tpot-slo", "0.1",
                           "--json")
    assert status == 0 and err == ""
    status, out, err = cli("simulate", "--requests", "49", "--rate", "20", "--ttft-slo", "1", "--tpot-slo", "0.1")
    assert status == 0 and "drawing" not in err
