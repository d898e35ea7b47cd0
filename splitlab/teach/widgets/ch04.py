"""Chapter 4's explorers. Each one's static figure is drawn from the runs the page already made (``initial``),
so the figure and the page's tables show the same numbers; moving a control serves the workload again, for real.
The TTFT explorer's prediction, and the figure that stays interactive in the rendered book, come from
:func:`ttft_load_grid`, so the two cannot disagree."""
from __future__ import annotations

from typing import Sequence

import ipywidgets as widgets
import numpy as np
import pandas as pd

from ...phases.models import LoadedModel
from ..figures.style import PREDICTED, PREFILL
from .base import explorer

__all__ = ['stall_explorer', 'ttft_load_explorer', 'ttft_load_grid', 'ttft_load_figure']

POLICIES = ("prefill-first", "decode-first", "chunked")


def stall_explorer(lm: LoadedModel, prompt_tokens: int = 512, n_streams: int = 4,
                   schedule: tuple[float, int] | None = None, chunk_tokens: int = 128,
                   initial: dict | None = None) -> widgets.VBox:
    """Ch. 4: ``n_streams`` streams (16-token prompts) decode on one colocated worker; one prompt of
    ``prompt_tokens`` arrives while they run. Serves it under each policy (emulated worker) and stacks the
    streams' inter-token gaps over time, one panel per policy. ``schedule``: ``(arrive_s, stream_tokens)`` from
    :func:`splitlab.serving.interference.stall_schedule` (measured here if not given); ``initial``: policy ->
    ServingResult of the default settings (not served again)."""
    from ... import serving
    from ...serving.interference import stall_schedule, streams_and_long_prompts
    from ..figures import interference as plots

    arrive_s, stream_tokens = schedule or stall_schedule(lm, n_streams)
    backend = serving.ModelExecutor(lm, warm=False)

    def draw(prompt_tokens: int, chunk_tokens: int) -> None:
        if initial is not None and (prompt_tokens, chunk_tokens) == defaults:
            runs = initial
        else:
            reqs = streams_and_long_prompts([prompt_tokens], [arrive_s], n_streams, 16, stream_tokens, model=lm)
            runs = {p: serving.run(reqs, serving.ServingConfig(policy=p, kv_budget_bytes=None,
                                                               chunk_tokens=chunk_tokens), backend)
                    for p in POLICIES}
        worst = {p: r.request_table().max_itl_s[:n_streams].max() * 1e3 for p, r in runs.items()}
        plots.policies({f"{p}: max gap {worst[p]:.0f} ms, TTFT "
                        f"{r.request_table().ttft_s.iloc[-1] * 1e3:.0f} ms": r for p, r in runs.items()}, n_streams,
                       f"A {prompt_tokens}-token arrival, chunks of {chunk_tokens}")

    defaults = (prompt_tokens, chunk_tokens)
    cap = min(2048, lm.max_context) - 8
    return explorer(draw,
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 64, cap, 64, description="prompt"),
                    chunk_tokens=widgets.IntSlider(chunk_tokens, 32, 512, 32, description="chunk"))


def ttft_load_explorer(lm: LoadedModel, rate_per_s: float = 2.0, prompt_tokens: int = 512,
                       max_rate_per_s: float = 10.0, n_requests: int = 12, new_tokens: int = 4,
                       seeds=(0, 1), prefill_table=None, decode_step_s: float | None = None,
                       initial: tuple | None = None) -> widgets.VBox:
    """Ch. 4: ``n_requests`` prompts of ``prompt_tokens`` tokens arrive at ``rate_per_s`` (Poisson) on one
    colocated worker, once per arrival seed (:func:`splitlab.serving.interference.ttft_runs`); draws each
    request's TTFT against its arrival, its own prefill inside the run (the true floor), the prefill timed alone
    and the queueing prediction. The title's mean TTFT is the statistic of the page's table: the median over the
    seeds of each run's mean. The prediction's prefill time is interpolated in ``prefill_table`` (columns
    prompt_tokens, prefill_s, measured alone) within its range and measured otherwise; ``decode_step_s`` is
    measured if not given. ``initial``: ``(point, runs)`` of ``ttft_runs`` at the default settings."""
    from ... import serving
    from ...phases import profiling
    from ...serving.interference import ttft_runs
    from ..figures import interference as plots

    step_s = decode_step_s or profiling.measure_decode(lm, [2], context=prompt_tokens, steps=4).step_s[0]
    backend = serving.ModelExecutor(lm, warm=False)

    def prefill_alone(n: int) -> pd.DataFrame:
        if prefill_table is not None and prefill_table.prompt_tokens.min() <= n <= prefill_table.prompt_tokens.max():
            return prefill_table
        return profiling.measure_prefill(lm, [n], repeats=3)

    def draw(rate_per_s: float, prompt_tokens: int) -> None:
        if initial is not None and (rate_per_s, prompt_tokens) == defaults:
            point, runs = initial
        else:
            point, runs = ttft_runs(lm, prompt_tokens, rate_per_s, n_requests, new_tokens, seeds, backend=backend)
        pred = ttft_load_grid(prefill_alone(prompt_tokens), step_s, [prompt_tokens], [rate_per_s]).iloc[0]
        plots.ttft_load(runs, pred.prefill_s, pred.ttft_mean_s,
                        f"{prompt_tokens} tokens at {rate_per_s:g}/s (\u03c1 = {pred.load:.2f}): "
                        f"mean TTFT {point['ttft_mean_s'] * 1e3:.0f} ms")

    defaults = (rate_per_s, prompt_tokens)
    cap = min(2048, lm.max_context) - new_tokens
    step = float(f"{max_rate_per_s / 20:.1g}")  # about 20 positions on the rate slider
    return explorer(draw,
                    rate_per_s=widgets.FloatSlider(value=rate_per_s, min=step, max=max_rate_per_s, step=step,
                                                   description="rate /s"),
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 64, cap, 64, description="prompt"))


def ttft_load_grid(prefill_alone: pd.DataFrame, decode_step_s: float, prompt_tokens: Sequence[int],
                   rates_per_s: Sequence[float]) -> pd.DataFrame:
    """Predicted mean TTFT of same-length prompts arriving as a Poisson process on one prefill-first worker, for
    every (prompt length, rate): P + rho P / (2 (1 - rho)) + D / 2 with rho = rate x P (M/D/1, Pollaczek-Khinchine:
    ``serving.interference.queueing_ttft_s``; ``inf`` at rho >= 1). P is the prefill timed alone, interpolated
    linearly in ``prefill_alone`` (columns prompt_tokens, prefill_s: ``profiling.measure_prefill``); D =
    ``decode_step_s``.

    Returns:
        one row per (prompt_tokens, rate_per_s): columns prompt_tokens, rate_per_s, prefill_s, load (rho),
        ttft_mean_s (seconds).

    Raises:
        ValueError: a prompt length outside the measured range (measure it instead of extrapolating), a negative
        rate, decode_step_s < 0, a NaN or inf rate or step, an empty list.
    """
    from ...serving.interference import queueing_ttft_s

    if not len(prompt_tokens) or not len(rates_per_s):
        raise ValueError("prompt_tokens and rates_per_s need at least one value each")
    if not all(np.isfinite(r) for r in [*rates_per_s, decode_step_s]):
        raise ValueError(f"rates and decode_step_s must be finite, got {list(rates_per_s)} and {decode_step_s}")
    lo, hi = prefill_alone.prompt_tokens.min(), prefill_alone.prompt_tokens.max()
    if any(not lo <= t <= hi for t in prompt_tokens):
        raise ValueError(f"prompt lengths must lie within the measured {lo}..{hi} tokens, got {list(prompt_tokens)}")
    if min(rates_per_s) < 0 or decode_step_s < 0:
        raise ValueError("rates and decode_step_s must be >= 0")
    order = np.argsort(prefill_alone.prompt_tokens.to_numpy())
    xs, ys = prefill_alone.prompt_tokens.to_numpy()[order], prefill_alone.prefill_s.to_numpy()[order]
    rows = []
    for t in prompt_tokens:
        p = float(np.interp(t, xs, ys))
        rows += [dict(prompt_tokens=int(t), rate_per_s=float(r), prefill_s=p, load=float(r) * p,
                      ttft_mean_s=queueing_ttft_s(float(r), p, decode_step_s)) for r in rates_per_s]
    return pd.DataFrame(rows)


def ttft_load_figure(prefill_alone: pd.DataFrame, decode_step_s: float, measured: pd.DataFrame,
                     prompt_tokens: Sequence[int] | None = None, max_load: float = 0.9, default: int | None = None):
    """Ch. 4, in the rendered book: mean TTFT against the request rate for each prompt length (slider): the M/D/1
    prediction of :func:`ttft_load_grid` up to load ``max_load``, the prefill timed alone, and the page's measured
    points (``measured``: columns prompt_tokens, rate_per_s, ttft_mean_s, ttft_p90_s, the table of
    ``interference.ttft_runs`` points). Prompt lengths: those of ``prefill_alone`` by default; ``default`` the
    one shown first. Returns the plotly figure."""
    from ..interactive import Trace, explorer_figure, room_for_legend

    lengths = sorted(int(t) for t in (prompt_tokens if prompt_tokens is not None else prefill_alone.prompt_tokens))
    base = ttft_load_grid(prefill_alone, decode_step_s, lengths, [0.0])

    def traces(t: int) -> list[Trace]:
        p = float(base.loc[base.prompt_tokens == t, "prefill_s"].iloc[0])
        g = ttft_load_grid(prefill_alone, decode_step_s, [t], np.linspace(0, max_load, 31) / p)
        m = measured[measured.prompt_tokens == t].sort_values("rate_per_s")
        # the colours of the page's figure (interference.ttft_sweep): TTFT measured in the prefill's, predictions black
        return [Trace("predicted mean", g.rate_per_s, g.ttft_mean_s * 1e3, "lines", color=PREDICTED),
                Trace("prefill timed alone", g.rate_per_s, g.prefill_s * 1e3, "lines", dash="dot", color=PREDICTED),
                Trace("measured mean", m.rate_per_s, m.ttft_mean_s * 1e3, "markers", color=PREFILL),
                Trace("measured P90", m.rate_per_s, m.ttft_p90_s * 1e3, "markers", color=PREFILL,
                      extra=dict(marker_symbol="triangle-up-open"))]

    fig = explorer_figure(traces, slider=("prompt (tokens)", lengths), title="TTFT against the request rate",
                          x_title="request rate (requests/s)", y_title="time to first token (ms)",
                          slider_default=lengths.index(default) if default in lengths else 0)
    return room_for_legend(fig, 2)
