"""Chapter 4's tables, shaped to fit a 412 px phone's column: few columns, short headers with their units (they wrap
at spaces), 3 significant digits (:func:`.phases.fmt3`), token counts as integers, indexed by the prompt length."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .style import and_list, change_words, fmt3, fmt_table, signed_pct, fmt2

__all__ = ["prefill_alone_table", "stall_table", "ttft_table", "remedies_frame", "remedies_table", "run_spread",
           "length_note", "load_note", "chunk_steps", "chunk_note", "stall_check", "stall_summary"]

PROMPT = "prompt (tokens)"


def prefill_alone_table(alone: pd.DataFrame) -> pd.DataFrame:
    """The prefill timed alone (``profiling.measure_prefill``: ``prompt_tokens``, ``prefill_s``), in ms."""
    return fmt_table(alone, {"prompt_tokens": PROMPT, "prefill_s": ("prefill alone (ms)", 1e3)}, index=PROMPT)


def stall_table(spikes: pd.DataFrame) -> pd.DataFrame:
    """One row per run of ``serving.interference.spike_table``: the long prompt's prefill inside the run, the gap the
    streams saw across it (the stall), their usual gap and the long prompt's TTFT, in ms."""
    return fmt_table(spikes, {"prompt_tokens": PROMPT, "prefill_s": ("prefill in run (ms)", 1e3),
                              "spike_s": ("stall (ms)", 1e3), "typical_itl_s": ("usual gap (ms)", 1e3),
                              "ttft_s": ("TTFT (ms)", 1e3)}, index=PROMPT)


def ttft_table(points: pd.DataFrame) -> pd.DataFrame:
    """One row per point of ``serving.interference.ttft_runs`` (with a ``load`` column, rate x prefill alone): the
    rate, the load, the mean and P90 TTFT (medians over the runs) and the median prefill inside the runs, in ms."""
    return fmt_table(points, {"prompt_tokens": PROMPT, "rate_per_s": "rate (1/s)", "load": "load ρ",
                              "ttft_mean_s": ("mean TTFT (ms)", 1e3), "ttft_p90_s": ("P90 TTFT (ms)", 1e3),
                              "in_run_prefill_s": ("prefill in run (ms)", 1e3)}, index=PROMPT)


def remedies_frame(runs: dict, n_streams: int) -> pd.DataFrame:
    """What each policy's run of run 1's workload (``{policy: ServingResult}``; requests ``0 .. n_streams - 1`` the
    streams, ``n_streams`` the long prompt) did, in ms: the streams' longest and median gap, the long prompt's
    TTFT. Rows: the measures with their units; columns: the policies."""
    return pd.DataFrame({name: {
        "longest stream gap (ms)": r.request_table().max_itl_s[:n_streams].max() * 1e3,
        "median stream gap (ms)": r.token_table().query(f"request_id < {n_streams}").gap_s.median() * 1e3,
        "long prompt's TTFT (ms)": r.request_table().ttft_s[n_streams] * 1e3} for name, r in runs.items()})


def remedies_table(remedies: pd.DataFrame) -> pd.DataFrame:
    """The policies' table (rows: measures with their units; columns: policies), as text of 3 significant digits."""
    return remedies.map(fmt3)


def run_spread(sweep_runs: dict) -> pd.DataFrame:
    """``{key: (point, runs)}`` of ``serving.interference.ttft_runs`` as one row per point with the runs' spread:
    the point's columns plus ``ttft_lo_s`` and ``ttft_hi_s``, the lowest and highest of the runs' mean TTFTs (one
    per arrival seed), around the median the point reports."""
    rows = []
    for point, runs in sweep_runs.values():
        means = [r.metrics()["ttft_s"]["mean"] for r in runs]
        rows.append(dict(point, ttft_lo_s=float(np.min(means)), ttft_hi_s=float(np.max(means))))
    return pd.DataFrame(rows)


def length_note(by_length: pd.DataFrame, prefill_s) -> str:
    """What the length sweep (rows of :func:`run_spread` at one rate, with ``load`` = rate x the prefill timed
    alone) says, as Markdown computed from it and from ``prefill_s`` (prompt tokens -> the prefill timed alone, s):
    whether the load rose with the length, as it does when the prefill timed alone grows with the prompt (where it
    did not, the lengths at which a shorter prompt timed slower are named: the machine's own variation), and
    whether the mean TTFT grew with the length beyond the runs' spread (the longest length's lowest run above the
    shortest length's highest)."""
    t = by_length.sort_values("prompt_tokens")
    ms = lambda v: fmt3(v * 1e3)  # noqa: E731
    n = [int(v) for v in t.prompt_tokens]
    p = [float(prefill_s[k]) for k in n]
    arrow = lambda xs: " → ".join(xs)  # noqa: E731
    text = (f"Top, at {fmt3(t.rate_per_s.iloc[0])} requests/s, the prompt grew {arrow(f'{k:,}' for k in n)} tokens; "
            f"the prefill timed alone went {arrow(ms(v) for v in p)} ms and with it the load ρ = λP "
            f"{arrow(fmt3(v) for v in t.load)}")
    down = [(n[i], n[i + 1]) for i in range(len(n) - 1) if p[i + 1] <= p[i]]
    if not down:
        text += ", rising with the length as the formula has it. "
    else:
        pairs = and_list([f"{b:,} tokens timed no slower than {a:,}" for a, b in down])
        everywhere = " everywhere" if len(down) < len(n) - 1 else ""
        text += (f": not rising{everywhere}, because {pairs}. A longer prompt does more work and cannot truly prefill "
                 "faster: one of the two timings caught a busier moment of this machine, which is why the table also "
                 f"gives the prefill inside the runs ({arrow(ms(v) for v in t.in_run_prefill_s)} ms). ")
    first, last = t.iloc[0], t.iloc[-1]
    path = arrow(f"{ms(m)} ({ms(lo)}-{ms(hi)})" for m, lo, hi in zip(t.ttft_mean_s, t.ttft_lo_s, t.ttft_hi_s))
    text += f"The mean TTFT went {path} ms (median of the runs; lowest and highest in brackets): "
    if last.ttft_lo_s > first.ttft_hi_s:
        return text + "it grows with the length beyond the runs' spread."
    return text + ("within the runs' spread it does not clearly grow with the length (the longest prompt's lowest run "
                   "is not above the shortest's highest).")


def load_note(by_rate: pd.DataFrame, prefill_s: float, decode_step_s: float) -> str:
    """What the rate sweep (rows of :func:`run_spread` at one prompt length, with ``load``) says, as Markdown
    computed from it: whether the mean TTFT grows with the load beyond the runs' own spread (the last point's
    lowest run above the first point's highest), and how far the means sit from the M/D/1 prediction with the
    prefill timed alone (``prefill_s``, ``decode_step_s``), above or below, with what the formula leaves out."""
    from ...serving.interference import queueing_ttft_s

    t = by_rate.sort_values("load")
    ms = lambda v: fmt3(v * 1e3)  # noqa: E731
    path = " → ".join(f"{ms(m)} ({ms(lo)}-{ms(hi)})" for m, lo, hi in zip(t.ttft_mean_s, t.ttft_lo_s, t.ttft_hi_s))
    first, last = t.iloc[0], t.iloc[-1]
    grows = last.ttft_lo_s > first.ttft_hi_s
    steady = bool(np.all(np.diff(t.ttft_mean_s) > 0))
    text = (f"Bottom, as the load rose from {fmt3(first.load)} to {fmt3(last.load)}, the mean TTFT went {path} ms "
            f"(the median of {int(first.runs)} runs, and in brackets their lowest and highest mean). ")
    if grows:
        text += ("It grows with the load: the busiest point's lowest run lies above the lightest point's highest"
                 + ("." if steady else ", though not at every step (neighbouring points overlap).") + " ")
    else:
        text += ("Within these runs' spread it does not clearly grow with the load: the busiest point's lowest run "
                 "is not above the lightest point's highest. ")
    pred = np.array([queueing_ttft_s(r, prefill_s, decode_step_s) for r in t.rate_per_s])
    off = t.ttft_mean_s.to_numpy() / pred - 1
    side = "above" if off.min() > 0 else "below" if off.max() < 0 else "on both sides of"
    text += (f"The means sit {signed_pct(off.min())} to {signed_pct(off.max())} from the M/D/1 prediction, {side} it. "
             "The formula "
             "serves one prompt at a time at its time alone and starts from a queue in steady state; the worker "
             "runs its prefills at the in-run time of the table, batches the prompts waiting together (each gets its "
             "first token when the batched prefill ends) and runs decode steps between prefills, and a short run "
             "starts with an empty queue.")
    return text


def chunk_steps(res, request_id: int) -> pd.DataFrame:
    """The steps that carried ``request_id``'s prompt chunks in a chunked-prefill run ``res``: one row per chunk,
    ``tokens`` (the chunk), ``context`` (prompt tokens before it, which its attention reads) and ``seconds`` (the
    whole step: a chunk and the decode rows that rode in the same forward, i.e. a decode row ending where the
    chunk's row starts is counted with it)."""
    tl = res.timeline.reset_index(drop=True)
    rows, before = [], 0
    for i, r in tl.iterrows():
        if r.kind != "prefill" or list(r.request_ids) != [request_id]:
            continue
        seconds = r.end_s - r.start_s
        if i > 0 and tl.kind[i - 1] == "decode" and tl.end_s[i - 1] == r.start_s and tl.worker[i - 1] == r.worker:
            seconds += tl.end_s[i - 1] - tl.start_s[i - 1]
        rows.append(dict(tokens=int(r.tokens), context=before, seconds=float(seconds)))
        before += int(r.tokens)
    return pd.DataFrame(rows, columns=["tokens", "context", "seconds"])


def chunk_note(steps: pd.DataFrame, chunk_tokens: int, chunk_alone_s: float, longest_gap_s: float) -> str:
    """Why a chunked worker's longest stream gap exceeds the prefill of one chunk timed alone, as Markdown
    computed from :func:`chunk_steps`: the first chunk's step (attending to nothing before it) and the full chunks'
    longest step (attending to most of the prompt) against ``chunk_alone_s``, a ``chunk_tokens``-token prefill
    timed alone."""
    full = steps[steps.tokens == steps.tokens.max()]
    first, worst = full.iloc[0], full.loc[full.seconds.idxmax()]
    pc = fmt3(chunk_alone_s * 1e3)
    text = (f"Why the chunked worker's longest gap, {fmt3(longest_gap_s * 1e3)} ms, is "
            f"{fmt2(longest_gap_s / chunk_alone_s)}x P({chunk_tokens}) = {pc} ms timed alone: its {len(steps)} chunk "
            f"steps took {fmt3(first.seconds * 1e3)} ms for the first chunk ({fmt2(first.seconds / chunk_alone_s)}x "
            f"P({chunk_tokens}))")
    grow, at_first = worst.seconds / first.seconds, first.seconds / chunk_alone_s
    first_words = (f"about P({chunk_tokens}) for the first chunk" if abs(at_first - 1) <= 0.1 else  # 'about': 10%
                   f"{fmt2(at_first)}x P({chunk_tokens}) for the first chunk (its forward carries the streams' decode "
                   "rows too)")
    if grow > 1.1:
        return text + (f" up to {fmt3(worst.seconds * 1e3)} ms for the one after {int(worst.context):,} prompt tokens "
                       f"({fmt2(worst.seconds / chunk_alone_s)}x). A chunk's attention reads every chunk before it, so "
                       f"the step {change_words(grow)} from the first full chunk to that one: the stall is one "
                       f"chunk's step: {first_words}, more for later ones.")
    return text + (f" and at most {fmt3(worst.seconds * 1e3)} ms later on: the steps hardly grow with the chunks "
                   "before them here, so what a step adds to P(C) is the decode rows riding in its forward and "
                   "this machine's own variation, not the attention to earlier chunks.")


def stall_check(spikes: pd.DataFrame, predicted_s, decode_step_s: float, tolerance: float = 0.2) -> str:
    """Each stall of run 1 (``spikes``: ``prompt_tokens``, ``spike_s``, the in-run ``prefill_s``, in s) against the
    in-run prefill plus one decode step and against ``predicted_s`` (the prefill alone plus one decode step, one
    per row), as lines of text; a miss beyond ``tolerance`` (compared in whole percent) says how much longer the
    prefill took in the run than alone."""
    lines = []
    for row, pred in zip(spikes.itertuples(), predicted_s):
        inside, ahead = row.spike_s / (row.prefill_s + decode_step_s) - 1, row.spike_s / pred - 1
        why = "" if round(abs(ahead) * 100) <= round(tolerance * 100) else (
            f"\n      missed by more than {tolerance:.0%}: the prefill took "
            f"{fmt3(row.prefill_s / (pred - decode_step_s))}x its time alone")
        lines.append(f"{row.prompt_tokens:5d} tokens: stall {fmt3(row.spike_s * 1e3):>5} ms\n      vs in-run prefill "
                     f"+ D {inside:+.0%}\n      vs prefill alone + D {ahead:+.0%}{why}")
    return "\n".join(lines)


def stall_summary(spikes: pd.DataFrame, decode_step_s: float, tolerance: float = 0.2) -> str:
    """The summary's line on stalls, computed from run 1 (``spikes``: ``spike_s`` and the in-run ``prefill_s``):
    how far each stall was from the in-run prefill plus one decode step, against ``tolerance``."""
    off = spikes.spike_s / (spikes.prefill_s + decode_step_s) - 1
    missed = int((off.abs().round(2) > tolerance).sum())
    verdict = (f"within {tolerance:.0%} at all {len(off)} lengths" if not missed else
               f"off by more than {tolerance:.0%} at {missed} of {len(off)} lengths")
    return ("* A prefill-first worker runs a new prompt's prefill between two decode steps, so every stream's gap "
            f"there is one prefill long; measured against the prefill inside the run plus one decode step, the "
            f"stalls here were {signed_pct(off.min())} to {signed_pct(off.max())} from it, {verdict}.")
