"""Chapter 4's explorers."""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from ...phases.models import LoadedModel
from ..figures import phases as plots
from .base import explorer

__all__ = ['stall_explorer', 'ttft_load_explorer']


def stall_explorer(lm: LoadedModel, prompt_tokens: int = 512, policy: str = "prefill-first", n_streams: int = 4,
                   schedule: tuple[float, int] | None = None) -> widgets.VBox:
    """Ch. 4: ``n_streams`` streams (16-token prompts) decode on one colocated worker; one prompt of
    ``prompt_tokens`` arrives while they run. Runs it for real (emulated worker) under the chosen policy and draws
    the streams' inter-token gaps over time. ``schedule``: ``(arrive_s, stream_tokens)`` from
    :func:`splitlab.serving.interference.stall_schedule` (measured here if not given)."""
    from ... import serving
    from ...serving.interference import stall_schedule, streams_and_long_prompts
    from ..figures import serving as serving_plots

    arrive_s, stream_tokens = schedule or stall_schedule(lm, n_streams)

    def draw(prompt_tokens: int, policy: str) -> None:
        reqs = streams_and_long_prompts([prompt_tokens], [arrive_s], n_streams, 16, stream_tokens, model=lm)
        res = serving.run(reqs, serving.ServingConfig(policy=policy, kv_budget_bytes=None, chunk_tokens=128),
                          model=lm)
        table = res.request_table()
        ax = plt.subplots(figsize=(9, 3.5))[1]
        serving_plots.itl_over_time(res, marked=[n_streams], ax=ax, title=(
            f"{policy}: longest stream gap {table.max_itl_s[:n_streams].max() * 1e3:.0f} ms, "
            f"TTFT of the {prompt_tokens}-token prompt {table.ttft_s.iloc[-1] * 1e3:.0f} ms"))

    cap = min(2048, lm.max_context) - 8
    return explorer(draw,
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 64, cap, 64, description="prompt"),
                    policy=widgets.Dropdown(options=["prefill-first", "decode-first", "chunked"], value=policy,
                                            description="policy"))


def ttft_load_explorer(lm: LoadedModel, rate_per_s: float = 2.0, prompt_tokens: int = 512,
                       max_rate_per_s: float = 10.0, n_requests: int = 12, new_tokens: int = 4,
                       prefill_table=None, decode_step_s: float | None = None) -> widgets.VBox:
    """Ch. 4: ``n_requests`` prompts of ``prompt_tokens`` tokens arrive at ``rate_per_s`` (Poisson) on one
    colocated worker; runs them for real and draws each request's TTFT against its arrival time, with the
    prefill floor and the queueing prediction. The prediction's prefill time is interpolated in
    ``prefill_table`` (columns prompt_tokens, prefill_s, measured alone) within its range and measured otherwise;
    ``decode_step_s`` is measured if not given."""
    import numpy as np

    from ... import serving
    from ...phases import profiling
    from ...serving.interference import queueing_ttft_s

    step_s = decode_step_s or profiling.measure_decode(lm, [2], context=prompt_tokens, steps=4).step_s[0]

    def prefill_alone_s(n: int) -> float:
        if prefill_table is not None and prefill_table.prompt_tokens.min() <= n <= prefill_table.prompt_tokens.max():
            return float(np.interp(n, prefill_table.prompt_tokens, prefill_table.prefill_s))
        return float(profiling.measure_prefill(lm, [n], repeats=3).prefill_s[0])

    def draw(rate_per_s: float, prompt_tokens: int) -> None:
        prefill_s = prefill_alone_s(prompt_tokens)
        spec = serving.WorkloadSpec(f"fixed-{prompt_tokens}", serving.Fixed(prompt_tokens), serving.Fixed(new_tokens))
        res = serving.run(serving.make_workload(spec, n_requests, rate_per_s, model=lm),
                          serving.ServingConfig(kv_budget_bytes=None), model=lm)
        table = res.request_table()
        ax = plt.subplots(figsize=(8, 3.5))[1]
        ax.plot(table.arrival_s, table.ttft_s * 1e3, "o", color=plots.PREFILL, label="measured TTFT")
        ax.axhline(prefill_s * 1e3, color=plots.PREDICTED, ls=":", label="floor: prefill alone")
        pred = queueing_ttft_s(rate_per_s, prefill_s, step_s)
        if np.isfinite(pred):
            ax.axhline(pred * 1e3, color=plots.PREDICTED, ls="--", label="predicted mean (M/D/1 queue)")
        ax.set_ylim(bottom=0)
        ax.set_xlabel("arrival time (s)")
        ax.set_ylabel("time to first token (ms)")
        ax.set_title(f"{prompt_tokens}-token prompts at {rate_per_s:g}/s: load \u03c1 = {rate_per_s * prefill_s:.2f}, "
                     f"mean TTFT {table.ttft_s.mean() * 1e3:.0f} ms")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)

    cap = min(2048, lm.max_context) - new_tokens
    step = float(f"{max_rate_per_s / 20:.1g}")  # about 20 positions on the rate slider
    return explorer(draw,
                    rate_per_s=widgets.FloatSlider(value=rate_per_s, min=step, max=max_rate_per_s, step=step,
                                                   description="rate /s"),
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 64, cap, 64, description="prompt"))

