"""What a search of this part (the planner, the map, the pools planner) passes to every layout it builds, checked
before its first run: the chunk sizes of its chunked layouts (:func:`chunk_sizes`) and the other
:class:`~splitlab.serving.ServingConfig` fields given as keyword options (:func:`layout_options`)."""
from __future__ import annotations

import dataclasses
import numbers
import re
from collections.abc import Iterable

from ..serving import ServingConfig
from .chunk_budget import TPOT

__all__ = ["chunk_sizes", "layout_options", "colocated_name", "chunk_of", "LAYOUT_FIELDS"]

#: the words of a chunk_tokens error for the searches that take "tpot"
OR_TPOT = f" or {TPOT!r} (the budget the TPOT SLO allows)"
#: the ServingConfig fields a search sets itself for each layout it builds: never an option of the search
LAYOUT_FIELDS = ("layout", "workers", "prefill_workers", "decode_workers", "policy", "chunk_tokens")


def chunk_sizes(chunk_tokens, max_batch, least: int = 0, tpot: bool = False) -> tuple:
    """``chunk_tokens`` (the token budgets per step of the chunked layouts) as a tuple in the order given, each size
    once (a size given twice would be searched twice, and listed twice); None: (). With ``tpot``, an entry
    ``"tpot"`` stands for the budget the TPOT SLO allows (:func:`~.chunk_budget.tpot_budget`), resolved by the search.

    Raises:
        ValueError: a string, a number or anything else that is no list of sizes; fewer than ``least`` sizes; a size
            that is not an integer above ``max_batch`` (or above 1 with no ``max_batch``: a chunked step holds every
            decode row and at least one prompt token), other than ``"tpot"`` with ``tpot``; a ``max_batch`` that is not
            None or an integer >= 1."""
    if max_batch is not None and (isinstance(max_batch, bool) or not isinstance(max_batch, numbers.Integral)
                                  or max_batch < 1):
        raise ValueError(f"max_batch must be an integer >= 1 or None (no cap), got {max_batch!r}")
    if chunk_tokens is None:
        chunk_tokens = ()
    if isinstance(chunk_tokens, (str, bytes)) or not isinstance(chunk_tokens, Iterable):
        raise ValueError(f"chunk_tokens must be a list of chunk sizes (integers, tokens per step), e.g. [256], got "
                         f"{chunk_tokens!r}")
    chunks = tuple(chunk_tokens)
    floor = max_batch or 1
    bad = [c for c in chunks if not (tpot and c == TPOT) and (
        isinstance(c, bool) or not isinstance(c, numbers.Integral) or c <= floor)]
    if bad or len(chunks) < least:
        raise ValueError(f"chunk_tokens must be {'one or more ' if least else ''}integers above "
                         f"{f'max_batch ({max_batch})' if max_batch else 1} (chunk sizes, tokens per step)"
                         f"{OR_TPOT if tpot else ''}, got {list(chunks)!r}")
    return tuple(dict.fromkeys(c if c == TPOT else int(c) for c in chunks))  # numpy integers as ints (JSON)


def layout_options(who: str, options: dict) -> dict:
    """``options``, the :class:`~splitlab.serving.ServingConfig` fields ``who`` (a search, e.g. "plan") passes to
    every layout it builds, once checked by name (their values are ServingConfig's to check).

    Raises:
        TypeError: a name that is no ServingConfig field, or one of :data:`LAYOUT_FIELDS`, which the search sets
            for each layout (as Python refuses an unexpected keyword argument), naming it and the valid options."""
    fields = [f.name for f in dataclasses.fields(ServingConfig)]
    bad = [k for k in options if k not in fields or k in LAYOUT_FIELDS]
    if bad:
        why = ", ".join(f"{k!r} ({who}() sets it for each layout)" if k in fields else
                        f"{k!r} (not a ServingConfig field)" for k in bad)
        valid = ", ".join(k for k in fields if k not in LAYOUT_FIELDS)
        raise TypeError(f"{who}() got an unknown option: {why}; the options it takes: {valid}")
    return options


def colocated_name(workers: int, policy: str, chunk_tokens: int | None = None) -> str:
    """A colocated layout's name in the searches' results (the planner's, the map's): "4 colocated
    (prefill-first)", "4 colocated (chunked, 256-token chunks)"; :func:`chunk_of` reads the chunk size back."""
    chunk = f", {chunk_tokens}-token chunks" if policy == "chunked" else ""
    return f"{workers} colocated ({policy}{chunk})"


def chunk_of(name: str) -> int | None:
    """The chunk size (tokens) in a layout name of :func:`colocated_name`; None for any other name."""
    found = re.search(r"chunked, (\d+)-token chunks", name)
    return int(found[1]) if found else None
