"""Chapters 1-5: the sentences computed from a page's numbers say what the numbers say (issue 22, item 6): each
note is fed numbers on either side of its thresholds and must change its words with them. Model-free."""
from __future__ import annotations

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from splitlab import serving, sizing  # noqa: E402
from splitlab.serving import CostModelExecutor, Request  # noqa: E402
from splitlab.teach.check import ch01  # noqa: E402
from splitlab.teach.figures import interference, kv_cache, phases, roofline, transfer_notes  # noqa: E402


def test_ch01_rule_of_thumb_quotes_the_tables_numbers():
    gen = SimpleNamespace(prompt_lengths=[512], prefill_s=0.162, decode_step_s=[0.0115] * 63,
                          token_time_s=list(0.163 + 0.0122 * np.arange(64)))
    note = phases.rule_note(gen, "tiny")
    rates, latencies = phases.phase_rates(gen), phases.request_latencies(gen)
    assert f"{rates.loc['prefill', 'time (ms)']} ms for 512 prompt tokens" in note
    assert f"TPOT was {latencies.loc['TPOT', 'ms']} ms" in note
    assert f"({rates.loc['decode', 'time (ms)']} ms for 63 steps" in note


def test_ch01_doubling_words_follow_the_ratios():
    m = dict(ttft_ratio=2.7, tpot_ratio=1.02, spread={"ttft": 0.2, "tpot": 0.51},
             tolerance={"ttft": 0.35, "tpot": 0.51})
    note = ch01.doubling_note(2.32, 1.08, m)
    assert "TTFT grows 2.7x" in note and "about doubles" not in note
    assert "TPOT stays about the same" in note and "up to 51%" in note
    assert "+16%: within the checker's 35%" in note
    m["ttft_ratio"] = 3.3
    assert "outside the checker's 35%" in ch01.doubling_note(2.32, 1.08, m)
    assert "fixed cost" not in ch01.doubling_note(2.32, 1.08, m)  # above the FLOPs' ratio: not that reason
    m["ttft_ratio"] = 1.05  # an H200 running the tiny model: every prefill about one kernel-launch cost
    slow = ch01.doubling_note(2.32, 1.08, m)
    assert "-55%: outside the checker's 35%). A forward's fixed cost" in slow


def test_ch01_hint_follows_what_the_prefill_did(capsys):
    """Where twice the prompt barely moved TTFT (a GPU running the tiny model), the hint does not send the reader
    to the FLOPs, which would fail the check again."""
    from types import SimpleNamespace as NS
    run = lambda ttft_s, tpot_s: NS(ttft_s=ttft_s, token_time_s=[ttft_s + i * tpot_s for i in range(9)],
                                    prefill_s=ttft_s, decode_step_s=[tpot_s] * 8)  # noqa: E731
    assert not ch01.prompt_doubling(2.3, 1.0, [run(0.0055, 0.004)] * 3, [run(0.0058, 0.004)] * 3)
    out = " ".join(capsys.readouterr().out.split())  # the checker wraps its lines
    assert "barely moved TTFT here" in out and "set TTFT" not in out
    assert not ch01.prompt_doubling(1.0, 1.0, [run(0.005, 0.004)] * 3, [run(0.011, 0.004)] * 3)
    assert "the prefill's FLOPs, about 2 x parameters x prompt tokens, set TTFT" in " ".join(
        capsys.readouterr().out.split())


def test_ch02_attention_note_follows_the_steps():
    v = pd.DataFrame({"cache (KiB)": [2300, 574, 287], "decode step (ms)": [3.5, 4.79, 4.25]},
                     index=["tiny-mha", "tiny", "tiny-mqa"])
    note = kv_cache.attention_note(v)
    assert "largest cache took the shortest step" in note and "8.01x" in note and "0.824x" in note
    v["decode step (ms)"] = [6.0, 4.2, 4.0]
    assert "costs time, but far less than in proportion" in kv_cache.attention_note(v)
    v["decode step (ms)"] = [4.1, 4.2, 4.0]
    assert "barely differ" in kv_cache.attention_note(v)


def test_ch03_batching_note_says_past_the_ridge_only_where_a_batch_is():
    dc = pd.DataFrame({"batch": [1, 2, 4, 8], "step_s": [0.020, 0.021, 0.024, 0.040],
                       "intensity": [0.5, 1.0, 1.9, 3.7]})
    assert "Every batch measured here sits left of the ridge" in roofline.batching_note(dc, ridge=5.0)
    note = roofline.batching_note(dc, ridge=3.5)
    assert "Batch 8 sits past the ridge" in note and "1.67x as long" in note
    assert "1.05x to 1.67x as long" in note


def test_ch03_ops_note_reconciles_two_timings_of_one_step():
    shares = pd.DataFrame({"operator": ["aten::mm"], "share": [0.8]})
    shares.attrs.update(step_s=0.0214, profiled_step_s=0.022, ops_s=0.018)
    assert "wall clock" in roofline.ops_note(shares, timed_step_s=0.0192)
    assert "about the same" in roofline.ops_note(shares, timed_step_s=0.021)
    assert "this thread's CPU time" in roofline.ops_note(shares, timed_step_s=0.0192)
    on_gpu = roofline.ops_note(shares, timed_step_s=0.0192, device="cuda")  # an H200 once read "this thread's CPU"
    assert "CUDA events" in on_gpu and "CPU time" not in on_gpu


def test_ch03_roofline_chart_has_at_least_two_labelled_y_ticks():
    ax = roofline.roofline(8e10, 2.3e10, points={"decode": ([0.5, 1.0], [2e9, 3e9])})
    ax.figure.canvas.draw()
    lo, hi = ax.get_ylim()
    assert sum(lo <= t <= hi for t in ax.get_yticks()) >= 2
    plt.close("all")


def test_ch04_notes_follow_the_runs():
    spikes = pd.DataFrame({"spike_s": [0.09, 0.343], "prefill_s": [0.066, 0.273]})
    assert "within 20% at all 2 lengths" in interference.stall_summary(spikes, 0.024)
    spikes.loc[1, "spike_s"] = 0.45
    assert "off by more than 20% at 1 of 2 lengths" in interference.stall_summary(spikes, 0.024)
    rows = dict(load=[0.2, 0.4, 0.75], rate_per_s=[1.0, 2.0, 3.75], runs=[3, 3, 3])
    flat = pd.DataFrame(rows | dict(ttft_mean_s=[.122, .110, .149], ttft_lo_s=[.1, .1, .13], ttft_hi_s=[.14, .13, .17]))
    note = interference.load_note(flat, 0.2, 0.02)
    assert "does not clearly grow" in note and "below it" in note
    up = pd.DataFrame(rows | dict(ttft_mean_s=[.25, .30, .90], ttft_lo_s=[.24, .28, .8], ttft_hi_s=[.26, .33, .95]))
    note = interference.load_note(up, 0.2, 0.02)
    assert "It grows with the load" in note and "above it" in note


def test_ch04_chunk_note_reads_the_runs_chunk_steps():
    reqs = [Request(i, 0.0, [1] * 16, 60) for i in range(4)] + [Request(4, 0.05, [1] * 512, 4)]
    res = serving.run(reqs, serving.ServingConfig(policy="chunked", chunk_tokens=128, kv_budget_bytes=None),
                      CostModelExecutor())
    steps = interference.chunk_steps(res, 4)
    assert list(steps.tokens) == [124, 124, 124, 124, 16] and list(steps.context) == [0, 124, 248, 372, 496]
    assert "hardly grow" in interference.chunk_note(steps, 128, 0.008, 0.011)
    steps.loc[3, "seconds"] = 2 * steps.seconds[0]
    assert "about doubles from the first full chunk" in interference.chunk_note(steps, 128, 0.008, 0.022)
    first = steps.seconds[0]  # the first chunk's step said against P(C) as the numbers have it, not always 'about'
    assert "about P(128) for the first chunk" in interference.chunk_note(steps, 128, first / 1.05, 0.022)
    assert "1.4x P(128) for the first chunk" in interference.chunk_note(steps, 128, first / 1.4, 0.022)


def test_ch05_notes_follow_the_sweep_and_the_table():
    n = np.array([1, 2, 4, 8]) * 2 ** 20
    sweep = pd.DataFrame({"nbytes": n, "raw_s": n / 2e9, "predicted_s": n / 2e9, "whole_s": n / 2e9 * 1.05})
    assert "the largest cache lands on it" in transfer_notes.sweep_note(sweep)
    sweep.loc[3, "whole_s"] *= 1.35
    assert "lands on it" not in transfer_notes.sweep_note(sweep) and "+42%" in transfer_notes.sweep_note(sweep)
    links = {k: v["bandwidth_bytes_per_s"] for k, v in sizing.LINKS.items()} | {"here": 1.5e9}
    h = pd.DataFrame({k: sizing.handoff("Llama-3-8B", 2048, bw, "H100") for k, bw in links.items()}).T
    rate = transfer_notes.link_rate_note(h, "here")
    need = h.kv_bytes.iloc[0] / h.prefill_s.iloc[0]
    assert f"{need / 1e9:.3g} GB/s of KV" in rate and "25 Gb/s network is 250% busy" in rate  # the slowest link
    assert "4.41 to 17.6 decode steps" in transfer_notes.handoff_note(h, "here")
    assert "4.41 over 100 Gb/s network" in transfer_notes.takeaway_note(h, "here", "Llama-3-8B", 2048)
    text = transfer_notes.summary(sweep, 4e-4, 6e-4, pd.Series({128: -0.2, 512: 0.1, 1024: 0.6}))
    assert "streaming hid -20% to 60%" in text and "what the streaming section printed" not in text
    assert "at the largest size, 8 MiB, the bytes alone took" in text


@pytest.mark.parametrize("value,shown", [(0.0811798, "0.0812"), (104950, "104,950"), (0.02, "0.02")])
def test_checkers_print_no_false_precision(value, shown, capsys):
    from splitlab.teach.check.verdict import verdict
    assert verdict(value, value, 0.35 if isinstance(value, float) else 0, "x", "h")
    assert capsys.readouterr().out.strip().endswith(f"= {shown}.")


def test_ch03_experiment_tolerance_is_never_below_its_repeats_spread(capsys):
    from splitlab.teach.check import ch03
    assert ch03.measured_step([0.050, 0.080]) == pytest.approx((0.050, 0.6))
    assert ch03.decode_step_prediction(0.075, [0.050, 0.080])  # 50% off the fastest, within the 60% spread
    assert "repeats 60% apart" in capsys.readouterr().out
    assert not ch03.decode_step_prediction(0.080, [0.050, 0.052])  # tight repeats: the 35% holds
    with pytest.raises(ValueError, match="at least one"):
        ch03.measured_step([])


def test_no_minus_zero_percent_and_a_noisy_raw_share_is_said():
    from splitlab.teach.figures.style import signed_pct
    assert [signed_pct(v) for v in (-0.001, 0.12, -0.07)] == ["+0%", "+12%", "-7%"]
    n = np.array([1, 16]) * 2 ** 20
    sweep = pd.DataFrame({"nbytes": n, "raw_s": n / 2e9, "predicted_s": n / 2e9, "whole_s": n / 2e9 * 0.999})
    assert "-0%" not in transfer_notes.sweep_note(sweep)
    text = transfer_notes.summary(sweep, 4e-4, 6e-4, pd.Series({128: 0.1}))
    assert "lost in the timings' noise" in text
