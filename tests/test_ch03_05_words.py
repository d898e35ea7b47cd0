"""Chapters 3-5: sentences a teacher found contradicted by the numbers printed beside them (issue 22, item 6), each
fed crafted numbers on either side of its threshold: the words must follow the numbers on a quiet or a noisy run.
Model-free."""
from __future__ import annotations

import numpy as np
import pytest
import pandas as pd

from splitlab.teach.figures import interference, roofline, transfer_notes


def test_ch03_gpu_ridge_ratios_are_the_quotients_of_the_printed_ridges():
    note = roofline.gpu_ridge_note(3.46)
    assert "403 FLOP/B" in note and "3.46 FLOP/B" in note
    assert "116x" in note and "120x" not in note  # 403 / 3.46 = 116.5, not rounded to 2 digits
    assert "2.5x to 6.7x" in roofline.gpu_ridge_note(60.0)  # below 10: 2 significant digits


def test_ch04_load_follows_the_prefill_timed_alone():
    points = pd.DataFrame(dict(prompt_tokens=[128, 256], rate_per_s=[4.0, 4.0], load=[0.16, 0.145],
                               ttft_mean_s=[0.06, 0.07], ttft_lo_s=[0.05, 0.06], ttft_hi_s=[0.08, 0.09],
                               in_run_prefill_s=[0.03, 0.05], runs=[3, 3]))
    note = interference.length_note(points, {128: 0.040, 256: 0.036})  # the shorter prompt timed slower
    assert "0.16 → 0.145" in note and "40 → 36 ms" in note
    assert "not rising, because 256 tokens timed no slower than 128" in note and "rising with the length" not in note
    assert "does not clearly grow with the length" in note
    up = points.assign(load=[0.16, 0.3], ttft_lo_s=[0.05, 0.1], ttft_hi_s=[0.08, 0.12])
    note = interference.length_note(up, {128: 0.040, 256: 0.075})
    assert "rising with the length as the formula has it" in note and "not rising" not in note
    assert "it grows with the length beyond the runs' spread" in note
    three = pd.concat([points, up.iloc[[1]].assign(prompt_tokens=512)], ignore_index=True)
    note = interference.length_note(three, {128: 0.040, 256: 0.036, 512: 0.075})
    assert "not rising everywhere, because 256 tokens timed no slower than 128" in note


def test_ch04_load_note_prints_the_loads_as_the_table_does():
    rows = pd.DataFrame(dict(load=[0.199, 0.391, 0.746], rate_per_s=[0.56, 1.1, 2.1], runs=[3, 3, 3],
                             ttft_mean_s=[.384, .414, .553], ttft_lo_s=[.352, .405, .476],
                             ttft_hi_s=[.403, .561, .638]))
    assert "as the load rose from 0.199 to 0.746" in interference.load_note(rows, 0.355, 0.026)  # not 0.20 to 0.75


def _lw(plain, plain_lo, plain_hi, stream, stream_lo, stream_hi):
    return pd.DataFrame(dict(prefill_s=plain, prefill_lo_s=plain_lo, prefill_hi_s=plain_hi, stream_prefill_s=stream,
                             stream_prefill_lo_s=stream_lo, stream_prefill_hi_s=stream_hi), index=[128, 512, 1024])


def test_ch05_streaming_cost_is_said_only_beyond_the_repeats_spread():
    # the teacher's run: 22.5 vs 22.1, 128 vs 129, 333 vs 265 ms (streamed no slower anywhere)
    lw = _lw([.0225, .128, .333], [.021, .12, .30], [.024, .135, .36], [.0221, .129, .265], [.020, .125, .25],
             [.023, .14, .28])
    note = transfer_notes.stream_cost_note(lw)
    assert "sends compete with the forward" not in note and "can compete with the forward" in note
    assert "within the repeats' spread at 128 and 512 tokens (-2% to +1%)" in note
    assert "faster beyond it at 1,024 tokens (-20%)" in note and "nothing measurable" in note
    lines = transfer_notes.stream_prefill_lines(lw)
    assert "1,024: 333 (300-360) vs 265 (250-280)" in lines
    slow = _lw([.02, .1, .3], [.019, .09, .29], [.021, .11, .31], [.026, .13, .39], [.025, .12, .35],
               [.03, .14, .42])
    note = transfer_notes.stream_cost_note(slow)
    assert "took +30% longer than the plain ones, beyond the repeats' spread at every length" in note
    mixed = slow.assign(stream_prefill_lo_s=[.02, .12, .35])
    note = transfer_notes.stream_cost_note(mixed)
    assert "slower beyond the repeats' spread at 512 and 1,024 tokens (+30%)" in note
    assert "within the repeats' spread at 128 tokens (+30%)" in note and "measurably cost" in note


def _sweep(whole_factor, raw_factor=None):
    n = np.array([0.25, 1, 2, 4, 16]) * 2 ** 20
    line = n / 2e9 + 1e-4
    raw = line * (np.ones(5) if raw_factor is None else np.array(raw_factor))
    return pd.DataFrame(dict(nbytes=n, raw_s=raw, whole_s=raw * np.array(whole_factor), predicted_s=line))


def test_ch05_a_cache_below_the_line_is_not_blamed_on_a_fixed_cost():
    below = transfer_notes.sweep_note(_sweep([1, 1, 1, 1, 0.72]))  # 16 MiB ran 28% faster than predicted
    assert "-28%" in below and "more than 20% below it" in below
    assert "fixed cost shows" not in below and "no fixed cost explains" in below
    fast_link = transfer_notes.sweep_note(_sweep([1, 1, 1, 1, 1.02], [1, 1, 1, 1, 0.7]))
    assert "the link ran faster while this size was timed" in fast_link and "took +2%" in fast_link
    slow_link = transfer_notes.sweep_note(_sweep([1, 1, 1, 1, 1.02], [1, 1, 1, 1, 2.03]))
    assert "the link ran slower while this size was timed" in slow_link and "fixed cost shows" not in slow_link
    above = transfer_notes.sweep_note(_sweep([1, 1, 1, 1, 1.5]))
    assert "more than 20% above it" in above and "the cache's own fixed cost shows" in above
    assert "lands on it" in transfer_notes.sweep_note(_sweep([1, 1, 1, 1, 1.1]))


def test_ch05_cache_cost_names_the_sizes_where_a_cache_cost_more():
    note = transfer_notes.cache_cost_note(_sweep([0.98, 1.25, 0.9, 1.3, 0.72]))  # the teacher's 0.25 to 16 MiB
    assert "took longer at 1 and 4 MiB; about as long at 0.25 MiB; less time at 2 and 16 MiB" in note
    assert "here the smallest (0.25 MiB) shows none of it" in note and "It weighs most" not in note
    note = transfer_notes.cache_cost_note(_sweep([1.5, 1.25, 1.1, 1.03, 1.0]))
    assert "took longer at 0.25, 1 and 2 MiB; about as long at 4 and 16 MiB" in note
    assert "It weighs most on small caches: the raw share is 0.667 at 0.25 MiB, 1 at 16 MiB" in note
    none = transfer_notes.cache_cost_note(_sweep([1, 1, 1, 1, 1]))
    assert "about as long at 0.25, 1, 2, 4 and 16 MiB" in none and "what the longer ones show" not in none


def test_ch05_layerwise_against_whole_follows_the_bench_table():
    rows = [dict(prompt_tokens=n, method=m, seconds=s) for n, w, lw in ((128, 4.09e-3, 2.07e-3),
                                                                         (512, 1.96e-3, 2.84e-3))
            for m, s in (("whole", w), ("layerwise", lw))]
    note = transfer_notes.layerwise_note(pd.DataFrame(rows))
    assert "0.506x to 1.45x the whole transfer's time, less at 128 tokens" in note
    rows[1]["seconds"] = 4.5e-3
    assert "1.1x to 1.45x the whole transfer's time." in transfer_notes.layerwise_note(pd.DataFrame(rows))


def test_ch05_this_machines_link_is_compared_with_the_slowest_published_one():
    assert transfer_notes.link_words(1.17e9) == "2.7x slower than the slowest published link, the 25 Gb/s network"
    assert transfer_notes.link_words(3.0e9).startswith("about as fast as the slowest published link")
    assert transfer_notes.link_words(6.25e9).startswith("2x faster than the slowest published link")
    assert "moved 1.17 GB/s (the raw fit), 2.7x slower than" in transfer_notes.gloo_note(1.17e9)
    text = transfer_notes.summary(_sweep([1, 1, 1, 1, 1]), 4e-4, 6e-4, pd.Series({128: 0.1}), 6.25e9)
    assert "gloo link is 2x faster than the slowest published link" in text and "far slower" not in text


def test_fit_sweep_falls_back_to_the_fastest_repeats_and_says_so():
    """ch05 crashed on a machine at load 12 (issue 22's pages22a report): the whole caches' medians did not grow
    with the bytes, and sizing.fit_latency_bandwidth raised. The sweep's fit then takes the fastest repeats, says so,
    and raises naming both columns only when those do not grow either."""
    import pandas as pd
    from splitlab.teach.figures.transfer import fit_sweep
    nbytes = [2 ** 18, 2 ** 20, 2 ** 22, 2 ** 24]
    fastest = [1e-3 + n / 2e9 for n in nbytes]  # 1 ms + bytes / 2 GB/s
    sweep = pd.DataFrame(dict(nbytes=nbytes, whole_s=[0.05, 0.04, 0.05, 0.03], whole_min_s=fastest,
                              raw_s=fastest, raw_min_s=fastest))
    lat, bw, basis = fit_sweep(sweep, "raw_s")
    assert basis == "medians" and abs(lat - 1e-3) < 1e-9 and abs(bw / 2e9 - 1) < 1e-6
    lat, bw, basis = fit_sweep(sweep, "whole_s")
    assert basis == "fastest repeats" and abs(lat - 1e-3) < 1e-9 and abs(bw / 2e9 - 1) < 1e-6
    flat = sweep.assign(whole_min_s=[0.03, 0.02, 0.03, 0.01])
    with pytest.raises(ValueError, match="whole_s: .*whole_min_s: .*quieter machine"):
        fit_sweep(flat, "whole_s")
    with pytest.raises(ValueError, match="no 'whole_min_s' column"):
        fit_sweep(sweep.drop(columns="whole_min_s"), "whole_s")
