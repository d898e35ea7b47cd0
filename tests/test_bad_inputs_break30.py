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
