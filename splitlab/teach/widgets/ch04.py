"""Chapter 4's explorers. Each one's static figure is drawn from the runs the page already made (``initial``),
so the figure and the page's tables show the same numbers; moving a control serves the workload again, for real."""
from __future__ import annotations

import ipywidgets as widgets

from ...phases.models import LoadedModel
from .base import explorer

__all__ = ['stall_explorer', 'ttft_load_explorer']

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
        plots.policies({f"{p}: longest gap {worst[p]:.0f} ms, TTFT "
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
    import numpy as np

    from ... import serving
    from ...phases import profiling
    from ...serving.interference import queueing_ttft_s, ttft_runs
    from ..figures import interference as plots

    step_s = decode_step_s or profiling.measure_decode(lm, [2], context=prompt_tokens, steps=4).step_s[0]
    backend = serving.ModelExecutor(lm, warm=False)

    def prefill_alone_s(n: int) -> float:
        if prefill_table is not None and prefill_table.prompt_tokens.min() <= n <= prefill_table.prompt_tokens.max():
            return float(np.interp(n, prefill_table.prompt_tokens, prefill_table.prefill_s))
        return float(profiling.measure_prefill(lm, [n], repeats=3).prefill_s[0])

    def draw(rate_per_s: float, prompt_tokens: int) -> None:
        if initial is not None and (rate_per_s, prompt_tokens) == defaults:
            point, runs = initial
        else:
            point, runs = ttft_runs(lm, prompt_tokens, rate_per_s, n_requests, new_tokens, seeds, backend=backend)
        p = prefill_alone_s(prompt_tokens)
        plots.ttft_load(runs, p, queueing_ttft_s(rate_per_s, p, step_s),
                        f"{prompt_tokens} tokens at {rate_per_s:g}/s (\u03c1 = {rate_per_s * p:.2f}): "
                        f"mean TTFT {point['ttft_mean_s'] * 1e3:.0f} ms")

    defaults = (rate_per_s, prompt_tokens)
    cap = min(2048, lm.max_context) - new_tokens
    step = float(f"{max_rate_per_s / 20:.1g}")  # about 20 positions on the rate slider
    return explorer(draw,
                    rate_per_s=widgets.FloatSlider(value=rate_per_s, min=step, max=max_rate_per_s, step=step,
                                                   description="rate /s"),
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 64, cap, 64, description="prompt"))
