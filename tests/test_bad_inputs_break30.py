"""Bad input against the teaching notes and checkers of the week's new code (break30): each of these once said
something false, printed inf or nan, or crashed from inside."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pandas as pd
import pytest

from splitlab.teach.check import ch01


def _run(ttft_s, tpot_s):
    return NS(ttft_s=ttft_s, token_time_s=[ttft_s + i * tpot_s for i in range(9)], prefill_s=ttft_s,
              decode_step_s=[tpot_s] * 8)


@pytest.mark.parametrize("before, after, what", [
    (_run(0.0, 0.004), _run(0.01, 0.004), "TTFT"),  # was 'the measured TTFT ratio is inf ... disagree by nan%'
    (_run(0.0, 0.004), _run(0.0, 0.004), "TTFT"),  # nan
    (_run(0.01, 0.0), _run(0.01, 0.0), "TPOT"),
])
def test_doubling_refuses_a_run_timed_at_0_s(before, after, what):
    with pytest.raises(ValueError, match=f"a run's {what} was measured as 0 s"):
        ch01.doubling_ratios(before, after)


def test_doubling_hint_and_note_say_a_longer_prompt_that_prefilled_faster_is_noise(capsys):
    """Twice the prompt, half the TTFT: the hint said it 'barely moved TTFT', the note blamed a fixed cost, which
    adds time to both and cannot make the longer prompt faster."""
    assert not ch01.prompt_doubling(2.0, 1.0, [_run(0.02, 0.004)] * 3, [_run(0.01, 0.004)] * 3)
    out = " ".join(capsys.readouterr().out.split())
    assert "barely moved" not in out and "the longer prompt's prefill came out faster" in out
    m = ch01.doubling_ratios([_run(0.02, 0.004)] * 3, [_run(0.01, 0.004)] * 3)
    note = ch01.doubling_note(2.0, 1.0, m)
    assert "TTFT falls by 50%" in note and "fixed cost" not in note and "the machine's noise" in note
    for bad in (0.0, -1.0, float("nan")):  # 0 was a ZeroDivisionError
        with pytest.raises(ValueError, match="flops_ratio and bytes_ratio must be ratios > 0"):
            ch01.doubling_note(bad, 1.0, m)


def test_chat_note_says_warm_prefills_all_slower_than_cold_ones_without_claiming_an_overlap():
    from splitlab.teach.figures import confusions_real as notes
    reuse = pd.DataFrame(dict(prompt_tokens=[100, 104, 98], shared_tokens=[90] * 3, cached_tokens=[0, 80, 80],
                              computed_tokens=[100, 24, 18], cold_s=[0.50, 0.52, 0.48], warm_s=[0.50, 0.60, 0.58],
                              same_token=[True] * 3, logit_err=[0.0] * 3))
    chat = notes.chat_note(reuse, 16)  # warm 0.58 .. 0.60 s, cold 0.48 .. 0.52 s: no overlap (it said one)
    assert "overlap" not in chat and "the fastest warm prefill was slower than the slowest cold one" in chat


def _colocated_run(output_tokens):
    from splitlab.costmodel import CostModel
    from splitlab.serving import CostModelExecutor, Request, ServingConfig, run
    reqs = [Request(i, 0.01 * i, list(range(100)), output_tokens) for i in range(4)]
    return run(reqs, ServingConfig.colocated(1), CostModelExecutor(CostModel()))


@pytest.mark.parametrize("rate, prefill", [(float("nan"), 0.1), (-20.0, 0.1), (5.0, -0.1), (5.0, float("inf"))])
def test_step_table_refuses_a_rate_or_prefill_that_makes_no_rho(rate, prefill):
    """nan said 'none: rho >= 1', a negative rate predicted a TPOT below the step (1 / (1 - rho) < 1)."""
    from splitlab.costmodel import CostModel
    from splitlab.teach.figures import split_tables as T
    with pytest.raises(ValueError, match="rate_per_s and mean_prefill_s must be finite numbers >= 0"):
        T.step_table({"1 colocated (prefill-first)": _colocated_run(10)}, CostModel(), rate, prefill)


def test_step_table_says_which_run_decoded_no_step():
    from splitlab.costmodel import CostModel
    from splitlab.teach.figures import split_tables as T
    with pytest.raises(ValueError, match="1 colocated: no decode step to compare"):  # was 'cannot convert float NaN'
        T.step_table({"1 colocated (prefill-first)": _colocated_run(1)}, CostModel(), 5.0, 0.1)


def test_the_tpot_note_refuses_a_rho_that_is_no_share():
    from splitlab.teach.figures import split_tables as T
    from splitlab.teach.figures import split_tpot as W
    steps = pd.DataFrame({"1P+1D": {"TPOT, measured (ms)": 10.0, "TPOT, predicted (ms)": 10.0},
                          "1 colocated": {"TPOT, measured (ms)": 9.0, "TPOT, predicted (ms)": T.NO_STEADY_STATE}})
    for rho in (float("nan"), -0.5):  # nan said 'At rho = nan% the formula's colocated worker would ...'
        with pytest.raises(ValueError, match="rho must be a finite number >= 0"):
            W.tpot_prediction_note({}, steps, rho, "1P+1D")


def _book_on_gpu():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "book_on_gpu.py"
    spec = importlib.util.spec_from_file_location("book_on_gpu", path)
    mod = importlib.util.module_from_spec(spec)
    import sys
    sys.modules["book_on_gpu"] = mod  # a pool's child finds run_chapter by the module's name
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("argv, message", [
    (["--chapters"], "--chapters needs at least one chapter number"),  # ran the whole book, hours on a GPU
    (["--quick", "--chapters", "06"], "--quick runs chapter 1's set-up alone: drop --chapters"),  # 06 ignored
])
def test_book_on_gpu_refuses_arguments_it_would_ignore(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        _book_on_gpu().main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_book_on_gpu_records_a_chapter_whose_process_died(tmp_path, monkeypatch, capsys):
    """A chapter's worker process killed (out of memory, a crash in the kernel's client) broke the pool: the
    script raised BrokenProcessPool and the chapters still running were never recorded."""
    import json
    mod = _book_on_gpu()
    monkeypatch.setenv("OUT", str(tmp_path))
    monkeypatch.setattr(mod, "run_chapter", _die)
    assert mod.main(["--quick", "--allow-cpu"]) == 1
    (chapter,) = json.loads((tmp_path / "book_on_gpu.json").read_text())["chapters"]
    assert not chapter["ok"] and chapter["error"]["kind"] == "BrokenProcessPool" and chapter["chapter"].startswith("01")
    assert "FAILED (cell None: BrokenProcessPool)" in capsys.readouterr().out  # not "in None s"


def _die(path, timeout_s, quick):
    import os
    os._exit(3)
