"""Whether the split's loss in a cell of chapter 6's map is pool granularity (:func:`granularity_note`): the same
cell on a larger cluster, whose splits take prefill:decode ratios a small one cannot, and larger pools; and the gap
of two goodputs as the map's tie rule reads it (:func:`_margin`, :func:`_ahead`), which :mod:`.split_loss` shares.
"""
from __future__ import annotations

from .pools_live import split_pools
from .split_tables import short_name
from .style import pct2

__all__ = ["granularity_note"]


def _colocated(cell) -> str:
    """The better colocated kind of a map cell."""
    return max(("prefill-first", "chunked"), key=lambda k: cell.goodput[k])


def _short_runs(lifetimes: float | None) -> str:
    """A caveat for goodputs whose runs spanned fewer than 20 request lifetimes (a map's request cap), else ""."""
    from ...serving.goodput_runs import LIFETIMES
    if lifetimes is None or not lifetimes < LIFETIMES:
        return ""
    return (f" But those goodputs come from runs spanning {lifetimes:.2g} request lifetimes (the map's request cap at "
            f"that rate, where a run should span {LIFETIMES}), too short for a decode backlog to build, so this "
            f"reading is among the least sure of the map (chapter 7).")


def _still_lost(cell, big, small_n: int, tie_tolerance: float | None) -> tuple[str, str]:
    """(the split's loss on ``big``, still a colocated win, against its loss on the ``small_n`` workers of ``cell``;
    what that says): smaller there, the finer ratios shrink it without removing it (and where it is left within
    1.5x of ``tie_tolerance``, just past it); as large or larger, the loss is not the coarse ratios."""
    numbers = f"by {pct2(big.margin)} against {pct2(cell.margin)} on {small_n}"
    if big.margin < cell.margin:
        edge = (f", and what is left lies just past the map's {pct2(tie_tolerance)} tie tolerance"
                if tie_tolerance is not None and big.margin < 1.5 * tie_tolerance else "")
        return numbers, f"the finer ratios shrink the loss but do not remove it{edge}"
    return numbers, f"the loss is not the coarse ratios of {small_n} workers"


def granularity_note(cell, big, lifetimes: float | None = None, tie_tolerance: float | None = None) -> str:
    """Whether the split's loss in ``cell`` (of a map of few workers) is pool granularity: ``big`` is the same cell
    (prompt and TPOT SLO) on a map of more workers, whose splits take ratios the small cluster cannot (4 workers:
    1P+3D, 2P+2D, 3P+1D; 8 workers: seven). Says the best split and the best colocated layout there, per worker,
    and reads the change: still lost (not granularity), a tie, or won (the small cluster's ratios were the loss);
    ``lifetimes``: the request lifetimes ``big``'s goodput runs spanned (:func:`.split_map.run_lifetimes`), a
    caveat added where fewer than 20; ``tie_tolerance``: the map's (a share), to say a loss left just past it.

    Raises:
        ValueError: ``big`` not the same prompt and TPOT SLO as ``cell``."""
    if (big.prompt_tokens, big.tpot_steps) != (cell.prompt_tokens, cell.tpot_steps):
        raise ValueError(f"big must be the same cell ({cell.prompt_tokens} tokens, {cell.tpot_steps:g} steps), got "
                         f"{big.prompt_tokens} tokens, {big.tpot_steps:g} steps")
    small_n, big_n = _cluster(cell), _cluster(big)
    kind = _colocated(big)
    gs, gc = big.goodput["split"], big.goodput[kind]
    there = (f"On {big_n} workers the same cell ({cell.prompt_tokens}-token prompts, TPOT {cell.tpot_steps:g} "
             f"decode steps), where a split may take {big_n - 1} prefill:decode ratios against {small_n - 1} on "
             f"{small_n}, the best split, {big.names['split']}, serves {gs:.3g} requests/s per worker and "
             f"{short_name(big.names[kind])} {gc:.3g}")
    if big.verdict == "colocated":
        numbers, meaning = _still_lost(cell, big, small_n, tie_tolerance)
        return f"{there}: the split still loses, {numbers}: {meaning}." + _short_runs(lifetimes)
    state, meaning = _reading(big, small_n)
    return f"{there}: {state}, so {meaning}." + _short_runs(lifetimes)


def _reading(big, n: int) -> tuple[str, str]:
    """What the loss cell on a larger cluster (``big``, not lost there) is, and what that says of the loss on the
    ``n`` workers of the small one. A tie is read by who leads it: the split ahead means the loss is gone."""
    kind = _colocated(big)
    gs, gc = big.goodput["split"], big.goodput[kind]
    if big.verdict == "tie":
        if gs >= gc:
            return (f"a tie with the split {_ahead(gs, gc)}, within the tie tolerance",
                    f"the loss on {n} workers does not survive more workers (their finer ratios or larger pools: the "
                    f"map does not tell the two apart)")
        return (f"a tie with colocated {_ahead(gs, gc)}, within the tie tolerance",
                f"part of the loss on {n} workers was their coarse ratios or small pools")
    if big.verdict == "split":
        return "a split win", f"the loss on {n} workers was their coarse ratios or small pools, not the split"
    return "met on no layout", "it says nothing of the loss"


def _margin(a: float, b: float) -> float:
    """The map's margin of the better of two goodputs over the other (``map_result.Cell``: 1 - runner-up / winner;
    0 when neither serves)."""
    return 1 - min(a, b) / max(a, b) if max(a, b) > 0 else 0.0


def _ahead(a: float, b: float) -> str:
    """Two goodputs' gap as a lead (the map's labels) and as the margin its tie tolerance judges: "10.6% ahead (the
    other 9.9% behind, what the tie tolerance judges)"; 16.7 and 15.1 were "9.9% ahead"."""
    lead = max(a, b) / min(a, b) - 1 if min(a, b) > 0 else float("inf")
    return f"{pct2(lead)} ahead (the other {pct2(_margin(a, b))} behind, what the tie tolerance judges)"


def _cluster(cell) -> int:
    return sum(split_pools(cell.names["split"]) or (0, 0))


def _finer(cell, big, lifetimes: float | None = None, tie_tolerance: float | None = None) -> str:
    """:func:`granularity_note` in one sentence, for the takeaway (its caveat on short runs too)."""
    kind = _colocated(big)
    small, gs = _colocated(cell), cell.goodput["split"]
    lead = (f"{pct2(cell.goodput[small] / gs - 1)} ahead of {cell.names['split']}" if gs > 0 else
            f"serving where {cell.names['split']} serves nothing")
    head = (f"On {_cluster(cell)} workers the map's cell there has {short_name(cell.names[small])} {lead}; on "
            f"{_cluster(big)} workers, whose splits take finer ratios, the same cell")
    both = (f"({big.names['split']} {big.goodput['split']:.3g} requests/s per worker, "
            f"{short_name(big.names[kind])} {big.goodput[kind]:.3g})")
    if big.verdict == "colocated":
        numbers, meaning = _still_lost(cell, big, _cluster(cell), tie_tolerance)
        return f"{head} is still a loss {both}, {numbers}: {meaning}." + _short_runs(lifetimes)
    state, meaning = _reading(big, _cluster(cell))
    return f"{head} is {state} {both}: {meaning}." + _short_runs(lifetimes)
