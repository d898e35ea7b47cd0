"""Interference on a colocated worker: running streams stall while a long prompt is prefilled.

- :func:`streams_and_long_prompts`: a workload of ``n_streams`` short-prompt streams that start together and
  keep decoding, plus long prompts arriving at chosen times while they run.
- :func:`stall_schedule`: when to send the long prompt, and how long the streams must be, so that it arrives
  while they are decoding, on this device.
- :func:`spike_table`: for each long prompt, its prefill as the run measured it and the gap that the running
  streams saw across it (the ITL spike), beside their typical gap.
- :func:`queueing_ttft_s` and :func:`wave_ttft_s`: the two TTFT predictions of chapter 4 (queueing behind other
  prompts; waiting for KV memory).

Under the prefill-first policy (Orca; vLLM before chunked prefill) the worker runs a new prompt's prefill as soon
as it is admitted, between two decode steps, so a stream's token that would have come one decode step later comes
one prefill later still:

    spike ~= prefill_s(prompt) + decode_step_s(streams + 1)

(the newcomer joins the decode batch right after its prefill). Sarathi-Serve (Agrawal et al., OSDI'24) calls
these "generation stalls".
"""
from __future__ import annotations

from typing import Sequence

import math

import numpy as np
import pandas as pd

from . import metrics as M
from .request import Request
from .workload import random_ids

__all__ = ["streams_and_long_prompts", "stall_schedule", "spike_table", "queueing_ttft_s", "wave_ttft_s",
           "longest_gap", "ttft_runs"]


def streams_and_long_prompts(long_prompts: Sequence[int], arrivals_s: Sequence[float], n_streams: int = 4,
                             stream_prompt: int = 16, stream_tokens: int = 120, long_new_tokens: int = 4,
                             model=None, seed: int = 0) -> list[Request]:
    """Requests ``0..n_streams-1``: streams of ``stream_prompt`` prompt tokens and ``stream_tokens`` output
    tokens, all arriving at t = 0; then one request per entry of ``long_prompts`` (prompt tokens), arriving at
    the matching ``arrivals_s`` (s) and asking for ``long_new_tokens`` tokens. Prompt ids are seeded (byte range,
    or the model's vocabulary if smaller).

    Raises:
        ValueError: ``long_prompts`` and ``arrivals_s`` differ in length, or a count is below 1.
    """
    if len(long_prompts) != len(arrivals_s):
        raise ValueError(f"{len(long_prompts)} long prompts but {len(arrivals_s)} arrival times")
    if min(n_streams, stream_prompt, stream_tokens, long_new_tokens) < 1:
        raise ValueError("n_streams, stream_prompt, stream_tokens and long_new_tokens must be >= 1")
    vocab = min(256, int(model.vocab_size)) if model is not None else 256
    reqs = [Request(i, 0.0, random_ids(stream_prompt, seed + i, vocab), stream_tokens) for i in range(n_streams)]
    for j, (n, t) in enumerate(zip(long_prompts, arrivals_s)):
        i = n_streams + j
        reqs.append(Request(i, float(t), random_ids(int(n), seed + i, vocab), long_new_tokens))
    return reqs


def stall_schedule(lm, n_streams: int = 4, stream_prompt: int = 16, steps_before: int = 30,
                   stream_tokens: int = 120) -> tuple[float, int]:
    """``(arrive_s, stream_tokens)`` for :func:`streams_and_long_prompts` on this device: the long prompt
    arrives after about ``steps_before`` decode steps of the streams (their fastest step, measured), and the
    streams ask for ``stream_tokens`` tokens, so they are still decoding then even if the run's steps come out up
    to ``stream_tokens / steps_before`` times faster than measured, or many times slower (short stream prompts
    keep their own prefill shorter than the wait). Capped by the model's context.
    """
    from ..phases.profiling import measure_decode

    step_s = measure_decode(lm, [n_streams], context=stream_prompt, steps=8, rounds=2, statistic="min").step_s[0]
    return float(steps_before * step_s), int(min(stream_tokens, lm.max_context - stream_prompt - 1))


def spike_table(res, long_ids: Sequence[int] | None = None, min_prompt_tokens: int | None = None) -> pd.DataFrame:
    """One row per long request (``long_ids``, or every request with at least ``min_prompt_tokens`` prompt
    tokens): ``id``, ``prompt_tokens``, ``arrival_s``, ``ttft_s``, ``prefill_s`` (the in-run prefill steps that
    carried its prompt, summed), ``spike_s`` (median over the other requests that were decoding across that
    prefill of the gap that spans it; NaN if none was), ``streams`` (how many such requests).
    The other requests' median gap outside spikes is in ``typical_itl_s``.

    Raises:
        ValueError: neither ``long_ids`` nor ``min_prompt_tokens`` given.
    """
    if long_ids is None:
        if min_prompt_tokens is None:
            raise ValueError("give long_ids or min_prompt_tokens")
        long_ids = [r.id for r in res.requests if r.prompt_len >= min_prompt_tokens]
    long_ids = set(long_ids)
    others = [r for r in res.requests if r.id not in long_ids]
    tl = res.timeline
    prefills = tl[tl.kind == "prefill"]
    rows, spike_gaps = [], set()
    for r in sorted((q for q in res.requests if q.id in long_ids), key=lambda q: q.arrival_s):
        steps = prefills[prefills.request_ids.apply(lambda ids: r.id in ids)]
        gaps = []
        if len(steps):
            start, end = steps.start_s.min(), steps.end_s.max()
            for o in others:
                t = np.asarray(o.token_times_s)
                k = np.searchsorted(t, end)  # first token at or after the prefill ends
                if 0 < k < len(t) and t[k - 1] <= start:
                    gaps.append(t[k] - t[k - 1])
                    spike_gaps.add((o.id, int(k)))
        rows.append(dict(id=r.id, prompt_tokens=r.prompt_len, arrival_s=r.arrival_s,
                         ttft_s=M.ttft_s(r),
                         prefill_s=float((steps.end_s - steps.start_s).sum()) if len(steps) else np.nan,
                         spike_s=float(np.median(gaps)) if gaps else np.nan, streams=len(gaps)))
    typical = [g for o in others for k, g in enumerate(M.itl_s(o), start=1) if (o.id, k) not in spike_gaps]
    out = pd.DataFrame(rows, columns=["id", "prompt_tokens", "arrival_s", "ttft_s", "prefill_s", "spike_s",
                                      "streams"])
    out["typical_itl_s"] = float(np.median(typical)) if typical else np.nan
    return out


def queueing_ttft_s(rate_per_s, prefill_s: float, decode_step_s: float = 0.0):
    """Mean TTFT of same-length prompts arriving as a Poisson process at ``rate_per_s`` on one prefill-first
    worker: the prefill itself, plus the mean wait of an M/D/1 queue whose service time is one prefill
    (prefill-first lets a prompt queue only behind other prompts), plus half a decode step (a prompt that
    arrives during a decode step waits for it to end):

        TTFT ~= P + rho * P / (2 * (1 - rho)) + D / 2,   rho = rate * P

    (Pollaczek-Khinchine formula for deterministic service). ``inf`` where ``rho >= 1``: the queue grows without
    bound. Works on scalars and numpy arrays of rates.
    """
    rate = np.asarray(rate_per_s, dtype=float)
    rho = rate * prefill_s
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(rho < 1, prefill_s + rho * prefill_s / (2 * (1 - rho)) + decode_step_s / 2, math.inf)
    return float(out) if out.ndim == 0 else out


def wave_ttft_s(index, fit: int, prefill_s: float, decode_step_s: float, new_tokens: int):
    """TTFT of the ``index``-th (0-based) of identical requests that all arrive at t = 0 on one worker whose KV
    budget holds ``fit`` of them at once (admission reserves prompt + new tokens). They are served in waves of
    ``fit``: a wave is one batched prefill (``prefill_s``) and ``new_tokens - 1`` decode steps of ``fit``
    sequences (``decode_step_s``), and the next wave is admitted only when its memory is released:

        TTFT(index) = (index // fit) * (prefill_s + (new_tokens - 1) * decode_step_s) + prefill_s

    Raises:
        ValueError: fit < 1.
    """
    if fit < 1:
        raise ValueError(f"fit must be >= 1 request, got {fit}")
    wave = np.asarray(index) // fit
    out = wave * (prefill_s + (new_tokens - 1) * decode_step_s) + prefill_s
    return float(out) if np.ndim(out) == 0 else out


def longest_gap(res) -> dict:
    """The longest gap between two output tokens of any request of ``res`` (a ServingResult), and what the
    worker that produced the later token ran inside it.

    Returns ``{"request_id", "gap_s", "worker", "steps"}``; ``steps`` is a DataFrame of the timeline rows of that
    worker overlapping the gap (``kind``, ``batch``, ``tokens``, ``seconds``), e.g. a prefill of 765 tokens and
    a decode step of 3 sequences; a hybrid step that ran as one fused forward (``res.hybrid_path``) is one row
    of kind "hybrid" (``batch`` decode rows, ``tokens`` chunk tokens). A request's first gap on a split also
    holds the wait for its transfer and for the decode step in flight when its cache arrived. ``gap_s`` is NaN
    when no request has two tokens.
    """
    best = (float("nan"), None, 0)
    for r in res.requests:
        gaps = M.itl_s(r)
        if gaps.size and not float(gaps.max()) <= best[0]:
            best = (float(gaps.max()), r, int(gaps.argmax()))
    gap, r, i = best
    if r is None:
        return dict(request_id=None, gap_s=gap, worker=None, steps=pd.DataFrame(columns=["kind", "batch", "tokens",
                                                                                        "seconds"]))
    t0, t1 = r.token_times_s[i], r.token_times_s[i + 1]
    tl = res.timeline
    worker = r.decode_worker or r.prefill_worker
    rows = tl[(tl.worker == worker) & (tl.kind != "idle") & (tl.end_s > t0 + 1e-12) & (tl.start_s < t1 - 1e-12)]
    steps = rows.assign(seconds=rows.end_s - rows.start_s)[["kind", "batch", "tokens", "seconds", "start_s", "end_s"]]
    if res.hybrid_path == "fused":
        steps = _fused_rows(steps)
    steps = steps.drop(columns=["start_s", "end_s"]).reset_index(drop=True)
    return dict(request_id=r.id, gap_s=gap, worker=worker, steps=steps)


def _fused_rows(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` with each fused hybrid step as one "hybrid" row: a decode row and the prefill row that starts
    where it ends, their seconds split by tokens (``StepOutcome.fused_step``: decode / prefill = batch / tokens)."""
    rows, i, recs = [], 0, steps.to_dict("records")
    while i < len(recs):
        a = recs[i]
        b = recs[i + 1] if i + 1 < len(recs) else None
        if (b is not None and a["kind"] == "decode" and b["kind"] == "prefill"
                and b["start_s"] == a["end_s"]
                and math.isclose(a["seconds"] * b["tokens"], b["seconds"] * a["batch"], rel_tol=1e-9)):
            rows.append(dict(kind="hybrid", batch=a["batch"], tokens=b["tokens"], seconds=a["seconds"] + b["seconds"],
                             start_s=a["start_s"], end_s=b["end_s"]))
            i += 2
        else:
            rows.append(a)
            i += 1
    return pd.DataFrame(rows, columns=steps.columns)


def ttft_runs(lm, prompt_tokens: int, rate_per_s: float, n_requests: int = 12, new_tokens: int = 4,
              seeds: Sequence[int] = (0, 1, 2), config=None, backend=None) -> tuple[dict, list]:
    """Serve ``n_requests`` prompts of ``prompt_tokens`` tokens arriving as a Poisson process of ``rate_per_s``
    on one colocated worker (emulated on ``lm``), once per arrival seed.

    Returns ``(point, runs)``: ``point`` = ``{prompt_tokens, rate_per_s, ttft_mean_s, ttft_p90_s, in_run_prefill_s,
    runs}``, where the TTFTs are the median over the runs of each run's mean (P90) TTFT and ``in_run_prefill_s``
    the median duration of the prefill forwards inside the runs; ``runs`` the ServingResults (in seed order).
    ``backend``: an executor to reuse (default: one :class:`~splitlab.serving.ModelExecutor` of ``lm`` for all runs).
    """
    from .emulated import ModelExecutor
    from .config import ServingConfig
    from .runner import run
    from .workload import Fixed, WorkloadSpec, make_workload

    spec = WorkloadSpec(f"fixed-{prompt_tokens}", Fixed(prompt_tokens), Fixed(new_tokens))
    cfg = config or ServingConfig(kv_budget_bytes=None)
    backend = backend or ModelExecutor(lm)
    runs = [run(make_workload(spec, n_requests, rate_per_s, seed=seed, model=lm), cfg, backend) for seed in seeds]
    ttft = [res.metrics()["ttft_s"] for res in runs]
    pre = pd.concat([res.timeline[res.timeline.kind == "prefill"] for res in runs])
    point = dict(prompt_tokens=prompt_tokens, rate_per_s=rate_per_s,
                 ttft_mean_s=float(np.median([m["mean"] for m in ttft])),
                 ttft_p90_s=float(np.median([m["p90"] for m in ttft])),
                 in_run_prefill_s=float(np.median(pre.end_s - pre.start_s)), runs=len(runs))
    return point, runs
