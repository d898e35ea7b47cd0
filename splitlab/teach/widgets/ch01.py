"""Chapter 1's explorer: one request's token timeline, live (ipywidgets) and in the rendered book (plotly).

Both draw their prediction from :func:`timeline_grid`, so the two cannot disagree."""
from __future__ import annotations

from typing import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...phases.engine import Generation, generate
from ...phases.models import LoadedModel
from ...phases.profiling import random_prompt
from ..figures import phases as plots
from .base import explorer

__all__ = ['timeline_grid', 'decode_step_of', 'two_phases_explorer', 'two_phases_figure']


def _check_prefill(prefill: pd.DataFrame) -> None:
    if not {"prompt_tokens", "prefill_s"} <= set(prefill.columns) or prefill.prompt_tokens.nunique() < 2:
        raise ValueError("prefill needs columns prompt_tokens and prefill_s with at least two prompt lengths "
                         "(profiling.measure_prefill)")
    if not np.isfinite(prefill.prefill_s.astype(float)).all():
        raise ValueError("prefill.prefill_s must be finite times (a NaN or inf would make every timeline NaN)")


def timeline_grid(prefill: pd.DataFrame, decode_step_s: float, prompt_tokens: Sequence[int],
                  new_tokens: Sequence[int]) -> pd.DataFrame:
    """Predicted token timeline of one request on an idle worker, for every (prompt length, new tokens) pair.

    The prediction is the chapter's rule: TTFT = P(T), a straight line a + b T fitted by least squares to the
    measured prefills ``prefill`` (columns prompt_tokens, prefill_s; ``profiling.measure_prefill``), and then one
    token per decode step: token k (1-based) is ready at TTFT + (k - 1) D, with D = ``decode_step_s`` measured.

    Returns:
        one row per (prompt_tokens, new_tokens, token): columns prompt_tokens, new_tokens, token, time_s
        (seconds since the request started).

    Raises:
        ValueError: fewer than two prefill lengths, a prefill time that is not finite, decode_step_s <= 0, an
        empty list, a prompt or a new-token count < 1.
    """
    _check_prefill(prefill)
    if not decode_step_s > 0:
        raise ValueError(f"decode_step_s must be > 0 seconds, got {decode_step_s}")
    if not len(prompt_tokens) or not len(new_tokens):
        raise ValueError("prompt_tokens and new_tokens need at least one value each")
    if min(prompt_tokens) < 1 or min(new_tokens) < 1:
        raise ValueError("prompt lengths and new-token counts must be >= 1")
    slope, intercept = np.polyfit(prefill.prompt_tokens.astype(float), prefill.prefill_s.astype(float), 1)
    rows = []
    for t in prompt_tokens:
        ttft = intercept + slope * t
        for n in new_tokens:
            k = np.arange(1, n + 1)
            rows.append(pd.DataFrame(dict(prompt_tokens=int(t), new_tokens=int(n), token=k,
                                          time_s=ttft + (k - 1) * decode_step_s)))
    return pd.concat(rows, ignore_index=True)


def two_phases_explorer(lm: LoadedModel, prompt_tokens: int = 256, new_tokens: int = 32,
                        prefill: pd.DataFrame | None = None, decode_step_s: float | None = None) -> widgets.VBox:
    """Ch. 1: run one real request for the chosen prompt length and output length; plot its token timeline and,
    given the chapter's prefill sweep ``prefill`` and decode step ``decode_step_s``, the timeline that
    :func:`timeline_grid` predicts for it."""
    def draw(prompt_tokens: int, new_tokens: int) -> None:
        gen = generate(lm, [random_prompt(lm, prompt_tokens)], max_new_tokens=new_tokens)
        ax = plt.subplots()[1]
        plots.token_timeline(gen, ax=ax, title=f"{prompt_tokens}-token prompt, {new_tokens} new tokens ({lm.name})")
        if prefill is not None and decode_step_s is not None:
            p = timeline_grid(prefill, decode_step_s, [prompt_tokens], [new_tokens])
            ax.plot(p.time_s * 1e3, p.token, "-", color=plots.PREDICTED, lw=1, label="predicted")
            ax.set_xlim(0, max(ax.get_xlim()[1], p.time_s.max() * 1e3 * 1.03))
            ax.legend(loc="upper left")

    cap = min(2048, lm.max_context) - 128
    return explorer(draw,
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 16, cap, 16, description="prompt"),
                    new_tokens=widgets.IntSlider(new_tokens, 4, 128, 4, description="new tokens"))


def decode_step_of(gen: Generation) -> float:
    """The median decode step (s) of a request from :func:`splitlab.generate`."""
    if not gen.decode_step_s:
        raise ValueError("the request has no decode step (it generated one token)")
    return float(np.median(gen.decode_step_s))


def two_phases_figure(gen: Generation, prefill: pd.DataFrame, prompt_tokens: Sequence[int] = (128, 256, 512, 1024),
                      new_tokens: Sequence[int] = (16, 32, 64), decode_step_s: float | None = None):
    """Ch. 1, in the rendered book: the token timeline predicted by :func:`timeline_grid` for each prompt length
    (slider) and number of new tokens (dropdown), beside the measured timeline of ``gen`` (the page's request, its
    first tokens up to the chosen count). ``decode_step_s``: the median decode step of ``gen`` if not given.
    Returns the plotly figure (show it with :func:`splitlab.teach.interactive.show`)."""
    from ..interactive import Trace, explorer_figure, room_for_legend

    step = decode_step_s if decode_step_s is not None else decode_step_of(gen)
    grid = timeline_grid(prefill, step, prompt_tokens, new_tokens)
    t_ms, measured_prompt = np.asarray(gen.token_time_s) * 1e3, int(gen.prompt_lengths[0])

    def traces(n: int, t: int) -> list[Trace]:
        p = grid[(grid.prompt_tokens == t) & (grid.new_tokens == n)]
        return [Trace("predicted", p.time_s * 1e3, p.token, "lines", color=plots.PREDICTED),  # as on the page
                Trace(f"measured ({measured_prompt}-token prompt)", t_ms[:n],
                      np.arange(1, len(t_ms[:n]) + 1), "markers", color=plots.DECODE)]

    default = list(prompt_tokens).index(measured_prompt) if measured_prompt in prompt_tokens else 0
    fig = explorer_figure(traces, slider=("prompt (tokens)", list(prompt_tokens)),
                          dropdown=("new tokens", list(new_tokens)), title="Token timeline of one request",
                          x_title="time since the request started (ms)", y_title="output tokens",
                          slider_default=default, dropdown_default=len(new_tokens) - 1)
    fig.update_xaxes(rangemode="tozero")
    return room_for_legend(fig, 1)
