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
    from splitlab.transfer.group import spawn_group
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
