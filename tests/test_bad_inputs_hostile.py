"""Bad input found by a hostile reader's pass over the public API and the CLI: each is refused early, in one line,
naming the problem (before: a traceback, a hang, or numbers that mean nothing)."""
from __future__ import annotations

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
    err = _one_line(*cli("serve", "--backend", "simulated", "--requests", "100000000000"))
    assert "at most 1,000,000 requests" in err and time.perf_counter() - t0 < 10
