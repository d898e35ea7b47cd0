"""Chapter 4's tables, shaped to fit a 412 px phone's column: few columns, short headers with their units (they wrap
at spaces), 3 significant digits (:func:`.phases.fmt3`), token counts as integers, indexed by the prompt length."""
from __future__ import annotations

import pandas as pd

from .phases import fmt3, fmt_table

__all__ = ["prefill_alone_table", "stall_table", "ttft_table", "remedies_table"]

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


def remedies_table(remedies: pd.DataFrame) -> pd.DataFrame:
    """The policies' table (rows: measures with their units; columns: policies), as text of 3 significant digits."""
    return remedies.map(fmt3)
