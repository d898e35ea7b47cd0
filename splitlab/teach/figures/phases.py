"""Chapter 1's figures and tables (one request, phase by phase), and the axis helpers the figures of the book's first
part share (the colours and number formats are :mod:`.style`'s).

Every function draws on a given matplotlib Axes (or makes one of the book's size), labels both axes with units,
sets a short title, and returns the Axes, so a notebook cell that only draws is one line."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import ticker

from ...phases.engine import Generation
from .phone import legend_below
from .style import DECODE, PREDICTED, PREFILL, fmt2, fmt3, fmt_table, sig3  # noqa: F401  (chapters import them here)

__all__ = ["PREFILL", "DECODE", "PREDICTED", "sig3", "fmt3", "fmt_table", "new_ax", "plain_log_ticks",
           "request_latencies", "itl_note", "ttft_tpot_s", "off_note", "rule_note", "phase_rates", "token_timeline",
           "cached_vs_recompute"]


def new_ax(ax=None, figsize=None):
    """``ax``, or a new Axes of the book's default size (``notebook.BOOK_STYLE``) or ``figsize``, laid out by
    constrained layout (so that a legend below it, :func:`.phone.legend_below`, takes room of its own)."""
    return ax if ax is not None else plt.subplots(figsize=figsize, layout="constrained")[1]


def _minor_label(value: float, _pos=None, fmt=lambda v: f"{v:g}") -> str:
    """Label the minor ticks 2, 3 and 5 of each decade (0.2, 3, 50, ...) with ``fmt``, leave the others blank
    (a tick formatter; figures/transfer.py uses it too)."""
    mantissa = value / 10 ** np.floor(np.log10(value) + 1e-9)
    return fmt(value) if any(abs(mantissa - m) < 1e-6 for m in (2, 3, 5)) else ""


def plain_log_ticks(axis, fmt=lambda v: f"{v:g}", minor: bool = True) -> None:
    """Numbers (1, 2, 5, 10, ...) instead of powers of ten on a log-scaled ``axis``; with ``minor`` the minor
    ticks 2, 3 and 5 of each decade are labelled too (for axes that span few decades)."""
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: fmt(v)))
    if not minor:
        axis.set_minor_formatter(ticker.NullFormatter())
        return
    axis.set_minor_formatter(ticker.FuncFormatter(lambda v, pos: _minor_label(v, pos, fmt)))


def _times(gen: Generation) -> np.ndarray:
    if len(gen.token_time_s) < 2:
        raise ValueError("a request needs at least two output tokens to have an inter-token latency")
    return np.asarray(gen.token_time_s, dtype=float)


def request_latencies(gen: Generation) -> pd.DataFrame:
    """The latencies of one request from :func:`splitlab.generate` (its first row; all rows of a batch get their
    tokens at the same times), in milliseconds, with their definitions.

    TTFT = time to the first token; ITL = each gap between consecutive tokens (median and max of the n - 1 gaps);
    TPOT = (E2E - TTFT) / (n - 1), the mean ITL; E2E = time to the last token. Times count from the call's start,
    so no queueing is included. Raises ValueError for fewer than two output tokens."""
    t = _times(gen)
    itl = np.diff(t)
    rows = [("TTFT", t[0], "start -> first output token"),
            ("ITL, median", np.median(itl), f"middle of the {len(itl)} gaps between tokens"),
            ("ITL, max", itl.max(), "longest gap between two tokens"),
            ("TPOT", (t[-1] - t[0]) / (len(t) - 1), "(E2E - TTFT) / (n - 1): the mean ITL"),
            ("E2E", t[-1], f"start -> last (n = {len(t)}) output token")]
    return pd.DataFrame([dict(metric=m, ms=fmt3(s * 1e3), meaning=d) for m, s, d in rows]).set_index("metric")


def itl_note(gen: Generation) -> str:
    """What the gaps of one request say, as Markdown computed from its times: TPOT beside the median ITL, and the
    longest gap against the median (on a shared machine a long one is another program's pause, not the model's:
    every decode step of a request does nearly the same work)."""
    t = _times(gen)
    itl = np.diff(t) * 1e3
    med, longest, tpot = float(np.median(itl)), float(itl.max()), (t[-1] - t[0]) / (len(t) - 1) * 1e3
    text = f"Here the median ITL is {med:.3g} ms and TPOT {tpot:.3g} ms"
    text += ", close to it" if abs(tpot / med - 1) <= 0.2 else f", {fmt3(tpot / med)}x it"
    if longest <= 1.5 * med:
        return text + (f"; even the longest gap, {longest:.3g} ms, is within {longest / med - 1:.0%} of the median: "
                       "on an idle worker the gaps stay even, which chapter 4 will change.")
    return text + (f"; the longest gap, {longest:.3g} ms, is {fmt2(longest / med)}x the median. Every decode step of "
                   "this request does nearly the same work, so that gap is a pause of this machine (another program "
                   "held the core for a moment), not of the model; in chapter 4 other requests' prefills make such "
                   "gaps on purpose.")


def ttft_tpot_s(gen: Generation) -> tuple[float, float]:
    """(TTFT, TPOT) of one request in seconds: its first token's time and (E2E - TTFT) / (n - 1)."""
    t = _times(gen)
    return float(t[0]), float((t[-1] - t[0]) / (len(t) - 1))


def off_note(pairs: dict, within: float = 0.15) -> str:
    """``{name: (measured, predicted)}`` -> a sentence saying which measured ratios miss their prediction by more
    than ``within``, by how much, and why that happens to a single run on a shared machine ('' if none do)."""
    off = {name: m / p - 1 for name, (m, p) in pairs.items() if abs(m / p - 1) > within}
    if not off:
        return f"Both are within {within:.0%} of their prediction."
    misses = " and ".join(f"{name} {v:+.0%}" for name, v in off.items())
    return (f"Off by more than {within:.0%}: {misses}. Each is the fastest of a few wall-clock runs, and on a "
            "shared machine other programs slow such runs (taking the core, or sharing its caches and memory) by "
            "different amounts at different moments: rerun the cell to see it move.")


def rule_note(gen: Generation, name: str) -> str:
    """The chapter's rule of thumb with one request's numbers, as Markdown, each computed from the same floats
    as the tables of :func:`request_latencies` (TPOT) and :func:`phase_rates` (forward-pass times), so that the
    sentence and the tables agree: the prefill's time per prompt token, TPOT per output token and how much of it
    the decode forward pass took (the rest is the loop's own work between passes)."""
    n = int(gen.prompt_lengths[0])
    _, tpot = ttft_tpot_s(gen)
    steps = np.asarray(gen.decode_step_s, dtype=float)
    per_prompt = gen.prefill_s / n
    return (f"In this run on {name}: the prefill took {fmt3(gen.prefill_s * 1e3)} ms for {n} prompt tokens, "
            f"{fmt3(per_prompt * 1e6)} µs per prompt token (the table of phases); TPOT was {fmt3(tpot * 1e3)} ms "
            f"per output token (the first table), {fmt3(steps.mean() * 1e3)} ms of it the decode forward pass "
            f"({fmt3(steps.sum() * 1e3)} ms for {len(steps)} steps in the table of phases) and the rest the loop's "
            f"own work between passes (choosing the token, Python). One output token cost as much time as "
            f"{tpot / per_prompt:.0f} prompt tokens.")


def phase_rates(gen: Generation) -> pd.DataFrame:
    """Tokens, forward-pass time (ms, as text of 3 significant digits) and tokens per second (int) of each phase
    of one request: the prefill's prompt tokens in one pass, the decode steps' output tokens (one per step; the
    first output token comes from the prefill)."""
    decode_s = float(np.sum(gen.decode_step_s))
    rows = [dict(phase="prefill", tokens=int(gen.prompt_lengths[0]), passes=1, ms=gen.prefill_s * 1e3,
                 tokens_per_s=gen.prompt_lengths[0] / gen.prefill_s),
            dict(phase="decode", tokens=len(gen.decode_step_s), passes=len(gen.decode_step_s), ms=decode_s * 1e3,
                 tokens_per_s=len(gen.decode_step_s) / decode_s)]
    df = pd.DataFrame(rows).set_index("phase")
    df["ms"] = df["ms"].map(fmt3)
    df["tokens_per_s"] = df["tokens_per_s"].map(lambda v: int(sig3(v)))
    return df.rename(columns={"ms": "time (ms)", "tokens_per_s": "tokens/s"})


def token_timeline(gen: Generation, ax=None, title: str | None = None):
    """When each output token of the request became available (ms after the call started): the prefill shaded,
    TTFT and TPOT marked."""
    ax = new_ax(ax)
    t_ms = _times(gen) * 1e3
    n = np.arange(1, len(t_ms) + 1)
    ax.axvspan(0, gen.prefill_s * 1e3, color=PREFILL, alpha=0.25, label=f"prefill ({gen.prompt_lengths[0]} tokens)")
    ax.plot(t_ms, n, ".", color=DECODE, label="output token ready")
    tpot = (t_ms[-1] - t_ms[0]) / (len(t_ms) - 1)
    ax.annotate(f"TTFT {t_ms[0]:.3g} ms", (t_ms[0], 1), xytext=(0.25, 0.45), textcoords="axes fraction",
                arrowprops=dict(arrowstyle="->"))
    ax.annotate(f"then a token every\nTPOT = {tpot:.3g} ms", (t_ms[len(t_ms) // 2], n[len(n) // 2]),
                xytext=(0.55, 0.15), textcoords="axes fraction", arrowprops=dict(arrowstyle="->"))
    ax.set_xlim(0, t_ms[-1] * 1.03)
    ax.set_ylim(0, len(t_ms) * 1.05)
    ax.set_xlabel("time since the request started (ms)")
    ax.set_ylabel("output tokens")
    ax.set_title(title or "One request: one prefill, then a token per step")
    ax.legend(loc="upper left")
    return ax


def cached_vs_recompute(df: pd.DataFrame, prefill_df: pd.DataFrame | None = None, ax=None):
    """Per-token time with the KV cache vs recomputing the whole sequence (log scale); optionally the prediction
    'recompute = a prefill of the whole sequence', interpolated from a prefill sweep."""
    ax = new_ax(ax)
    ax.plot(df["context"], df["recompute_s"] * 1e3, ".", color=PREFILL, label="measured: no cache")
    if prefill_df is not None:
        pred = np.interp(df["context"] + 1, prefill_df["prompt_tokens"], prefill_df["prefill_s"]) * 1e3
        ax.plot(df["context"], pred, "-", color=PREDICTED, label="predicted: a prefill of it all")
    ax.plot(df["context"], df["cached_s"] * 1e3, ".", color=DECODE, label="measured: cached decode step")
    ax.set_xlabel("tokens already in the sequence")
    ax.set_ylabel("time for the next token (ms)")
    ax.set_yscale("log")
    plain_log_ticks(ax.yaxis)
    ax.set_title("Without a cache, every token is a prefill")
    legend_below(ax.figure, ax)
    return ax
