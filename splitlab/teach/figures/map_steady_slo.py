"""What a live verdict of chapter 7's records rests on besides its runs (:mod:`.map_steady`'s cells): the KV link
it was served on, and the TPOT SLO's statistic where a colocated winner stalls its streams for longer than the SLO.

splitlab judges TPOT on each request's mean time per output token (:func:`splitlab.serving.metrics.meets_slo`),
which spreads a stall over the answer; a bound on each gap (a P99 inter-token latency, as Sarathi-Serve reports)
counts every stall instead. A colocated worker stalls its streams for a whole prefill (prefill-first) or for one
fused step carrying a chunk (chunked): where that is more decode steps than the SLO, its win holds under the mean
only (:func:`mean_tpot_words`, :func:`qualifiers`).
"""
from __future__ import annotations

import re

from .map_steady import SteadyCell
from .map_steady_place import _positive

__all__ = ["stall_steps", "mean_tpot_words", "qualifiers"]


def stall_steps(c: SteadyCell) -> float | None:
    """Decode steps one prefill stalls the streams beside it in the colocated winner of ``c`` (a tie's chunked
    layout): its prefill (prefill-first; chunked where the whole prompt fits one chunk, its fused step at least that
    prefill); None for other cells or a prompt longer than a chunk. TypeError: not a SteadyCell; ValueError: its
    steps not finite > 0."""
    if not isinstance(c, SteadyCell):
        raise TypeError(f"stall_steps: c must be a SteadyCell, got {type(c).__name__}")
    steps = _positive(f"the {c.region!r} cell's prefill_steps", c.prefill_steps)
    _positive(f"the {c.region!r} cell's tpot_steps", c.tpot_steps)
    chunk = re.search(r"(\d+)-token chunks", c.winner if c.region != "tie" else f"{c.winner} {c.rival}")
    if c.region == "prefill-first" or c.region in ("chunked", "tie") and chunk and c.map_prompt_tokens <= int(
            chunk[1]):
        return steps
    return None


def mean_tpot_words(c: SteadyCell) -> str:
    """A colocated win whose stall (:func:`stall_steps`) is longer than its TPOT SLO, in a sentence: the SLO judges
    each request's mean, and these runs do not test a bound on each gap. "" otherwise. Errors: :func:`stall_steps`'."""
    stall = stall_steps(c)
    if stall is None or not stall > c.tpot_steps:
        return ""
    what = "one prefill" if c.region == "prefill-first" else "one fused step carrying a whole prompt"
    return (f"Its TPOT SLO judges each request's mean time per output token: {what} here stalls the streams beside "
            f"it for {stall:.3g} decode steps or more, past the {c.tpot_steps:g}-step SLO, and a request's mean "
            f"spreads that stall over its answer; a bound on each inter-token gap (a P99 ITL SLO) would count every "
            f"such stall against {'prefill-first' if c.region == 'prefill-first' else 'chunked prefill'}, and these "
            f"runs do not test one.")


def qualifiers(c: SteadyCell) -> str:
    """What a verdict of ``c`` holds under, in a clause: "at 0.01 GB/s" (a slow link), "under a mean-TPOT SLO"
    (:func:`mean_tpot_words`' condition), "" for neither. Errors: :func:`stall_steps`'."""
    stall = stall_steps(c)
    out = ([] if c.link_gbps is None else [f"at {c.link_gbps:g} GB/s"]) + (
        ["under a mean-TPOT SLO"] if stall is not None and stall > c.tpot_steps else [])
    return ", ".join(out)
