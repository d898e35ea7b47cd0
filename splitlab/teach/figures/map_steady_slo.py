"""What a live verdict of chapter 7's records rests on besides its runs (:mod:`.map_steady`'s cells): the KV link
it was served on, and the TPOT SLO's statistic where a colocated winner stalls its streams for longer than the SLO.

splitlab judges TPOT on each request's mean time per output token (:func:`splitlab.serving.metrics.meets_slo`),
which spreads a stall over the answer; a bound on each gap (a P99 inter-token latency, as Sarathi-Serve reports)
counts every stall instead. A colocated worker stalls its streams for a whole prefill (prefill-first) or for one
fused step carrying a chunk (chunked): where that is more decode steps than the SLO, its win holds under the mean
only (:func:`mean_tpot_words`, :func:`qualifiers`).
"""
from __future__ import annotations

from ...planning.options import chunk_of
from .map_steady import SteadyCell
from .map_steady_place import _positive

__all__ = ["stall_of", "stall_steps", "mean_tpot_words", "qualifiers"]


def stall_of(kind: str, name: str, prompt_tokens: int, prefill_steps: float) -> float | None:
    """Decode steps one prefill stalls the streams beside it on a colocated layout of ``kind`` named ``name`` (its
    prompts of ``prompt_tokens`` costing ``prefill_steps``): the prefill on prefill-first; on chunked where the whole
    prompt fits one chunk (:func:`~splitlab.planning.options.chunk_of`), its fused step at least that prefill; None
    for any other layout or a prompt longer than a chunk."""
    if kind == "prefill-first":
        return prefill_steps
    chunk = chunk_of(name) if kind == "chunked" else None
    return prefill_steps if chunk is not None and prompt_tokens <= chunk else None


def stall_steps(c: SteadyCell) -> float | None:
    """:func:`stall_of` the colocated winner of ``c`` (a tie's chunked layout). TypeError: not a SteadyCell;
    ValueError: its steps not finite > 0."""
    if not isinstance(c, SteadyCell):
        raise TypeError(f"stall_steps: c must be a SteadyCell, got {type(c).__name__}")
    steps = _positive(f"the {c.region!r} cell's prefill_steps", c.prefill_steps)
    _positive(f"the {c.region!r} cell's tpot_steps", c.tpot_steps)
    if c.region == "tie":
        chunked = next((n for n in (c.winner, c.rival) if chunk_of(n) is not None), "")
        return stall_of("chunked", chunked, c.map_prompt_tokens, steps)
    return stall_of(c.region, c.winner, c.map_prompt_tokens, steps)


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
