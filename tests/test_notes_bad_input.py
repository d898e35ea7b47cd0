"""The chapters' notes and fits fed bad numbers (break27): a NaN (a size never timed), a zero or negative time, an
empty table, an infinite or NaN goodput. Each must stop with an error naming the column or argument at fault, not
print '+nan%' or '-100%' in a sentence, raise numpy's internals, or index past an empty list."""
from __future__ import annotations

import pandas as pd
import pytest

from splitlab import sizing
from splitlab.teach.figures import pools, transfer_notes
from splitlab.teach.figures.transfer_tables import fit_sweep

NAN, INF = float("nan"), float("inf")
NB = [2 ** 18, 2 ** 20, 2 ** 22, 2 ** 24]
GROWS = [1e-3, 2e-3, 5e-3, 2e-2]


def _sweep(whole, raw=None, predicted=None) -> pd.DataFrame:
    raw = raw or list(whole)
    return pd.DataFrame({"nbytes": NB[:len(whole)], "whole_s": whole, "raw_s": raw,
                         "predicted_s": predicted or list(raw)})


def test_a_fit_on_a_nan_or_infinite_time_says_so_instead_of_lapacks_svd_error():
    for bad in (NAN, INF):
        with pytest.raises(ValueError, match="must be finite"):
            sizing.fit_latency_bandwidth(NB, [1e-3, bad, 5e-3, 2e-2])


def test_fit_sweep_falls_back_past_a_nan_median_and_names_a_missing_column():
    sweep = pd.DataFrame({"nbytes": NB, "raw_s": [1e-3, NAN, 5e-3, 2e-2], "raw_min_s": GROWS})
    assert fit_sweep(sweep, "raw_s")[2] == "fastest repeats"
    with pytest.raises(ValueError, match="raw_s: sizes and times must be finite"):
        fit_sweep(sweep.drop(columns="raw_min_s"), "raw_s")
    with pytest.raises(KeyError, match="no 'whole_s' column"):
        fit_sweep(sweep, "whole_s")


@pytest.mark.parametrize("note", [transfer_notes.sweep_note, transfer_notes.cache_cost_note])
def test_sweep_notes_refuse_nan_zero_negative_times_and_an_empty_sweep(note):
    for whole in ([1e-3, NAN], [0.0, 2e-3], [-1e-3, 2e-3]):
        with pytest.raises(ValueError, match="'whole_s' must be finite and > 0"):
            note(_sweep(whole, raw=[1e-3, 2e-3]))
    with pytest.raises(ValueError, match="no rows"):
        note(_sweep([]))
    assert "1 MiB" in note(_sweep([1e-3, 2e-3]))  # two good rows still speak
    assert "0.25 MiB" in note(_sweep([1e-3]))  # and one


def test_stream_cost_note_refuses_nan_zero_negative_prefills_and_no_lengths():
    def lw(p, sp):
        return pd.DataFrame({"prefill_s": p, "stream_prefill_s": sp, "prefill_lo_s": p, "prefill_hi_s": p,
                             "stream_prefill_lo_s": sp, "stream_prefill_hi_s": sp}, index=[128, 256][:len(p)])
    for p in ([0.02, NAN], [0.0, 0.04], [-0.02, 0.04]):
        with pytest.raises(ValueError, match="'prefill_s' must be finite and > 0"):
            transfer_notes.stream_cost_note(lw(p, [0.025, 0.04]))
    with pytest.raises(ValueError, match="no rows"):
        transfer_notes.stream_cost_note(lw([], []))
    assert "+50% longer" in transfer_notes.stream_cost_note(lw([0.02], [0.03]))


def test_falls_words_refuses_nan_infinite_or_negative_goodputs_and_a_nan_tolerance():
    for goodputs in ({"a": NAN, "b": 2.0}, {"a": 1.0, "b": INF}, {"a": -1.0, "b": 2.0}):
        with pytest.raises(ValueError, match="goodputs must be finite and >= 0"):
            pools.falls_words(goodputs, 0.03)
    with pytest.raises(ValueError, match="finite tolerance"):
        pools.falls_words({"a": 1.0, "b": 2.0}, NAN)
    assert pools.falls_words({"a": 0.0, "b": 2.0}, 0.03) == "a falls first, b last"


def _spec(tpot_ms, acceptance) -> pd.DataFrame:
    return pd.DataFrame({"draft": "n-gram", "k": [2, 4][:len(tpot_ms)], "tpot_ms": tpot_ms, "acceptance": acceptance})


def test_draft_note_refuses_no_rows_nan_or_zero_tpots_and_acceptance_outside_0_1():
    from splitlab.teach.figures.confusions_runs import draft_note
    with pytest.raises(ValueError, match="no rows"):
        draft_note(_spec([], []), 0.011, True)  # was '' on the page
    for tpot, plain in (([NAN, 12.0], 0.011), ([10.0, 12.0], 0.0), ([10.0, 12.0], NAN), ([10.0, 12.0], -1.0)):
        with pytest.raises(ValueError, match="finite and > 0"):  # was '... against nan ms plain', '-1,000 ms'
            draft_note(_spec(tpot, [0.5, 0.6]), plain, True)
    with pytest.raises(ValueError, match=r"shares in \[0, 1\]"):
        draft_note(_spec([10.0, 12.0], [-0.5, 1.6]), 0.011, True)
    assert "tried none of its proposals" in draft_note(_spec([10.0, 12.0], [NAN, NAN]), 0.011, True)  # was 'nan'
    assert "(TPOT 10 ms against 11 ms plain)" in draft_note(_spec([10.0], [0.5]), 0.011, True)  # was '10 to 10'


def test_quant_note_names_a_missing_variant_and_refuses_zero_nan_or_negative_bytes_and_times():
    from types import SimpleNamespace

    from splitlab.teach.figures.confusions_tables import quant_note
    v = {k: SimpleNamespace(nbytes=n) for k, n in (("fp16", 100), ("int8", 50), ("fp8", 50))}
    ok = {"fp16": 1.0, "int8": 0.5, "fp8": 0.6}
    assert "0.55x" in quant_note(v, ok)
    for k, bad in (("fp16", 0.0), ("int8", NAN), ("int8", -0.5)):  # was ZeroDivisionError, 'nanx', '-0.50x'
        with pytest.raises(ValueError, match="must be finite and > 0"):
            quant_note(v, {**ok, k: bad})
    with pytest.raises(ValueError, match="must be finite and > 0"):
        quant_note({**v, "fp16": SimpleNamespace(nbytes=0)}, ok)
    with pytest.raises(KeyError, match=r"moved_s needs fp16, int8 and fp8; missing \['fp8'\]"):
        quant_note(v, {"fp16": 1.0, "int8": 0.5})
