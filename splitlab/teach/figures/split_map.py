"""The map of :mod:`splitlab.planning.split_map` as a heatmap: one colour per layout (the book's
:data:`splitlab.teach.figures.style.LAYOUT_COLORS`: colocated prefill-first cyan, chunked purple, the split
red), its shade the margin over the runner-up (pale: a close win; full from :data:`FULL_MARGIN` on), ties grey,
cells no layout serves white. Each cell says who won and by how much.

- :func:`map_heatmap`: the static figure (matplotlib), drawn for a 412 px phone (:mod:`.phone`).
- :func:`map_words`: how many cells each layout wins, in a sentence computed from the map.
- :func:`rule_table`: the rule of thumb applied to GPU rows, as a table a 412 px phone shows whole.
- :func:`cell_color`, :func:`cell_text`: one cell's colour (RGB, 0..1) and words, which the kernel-free explorer
  (:func:`splitlab.teach.widgets.split_map.split_map_figure`) uses too, so both show the same map.
"""
from __future__ import annotations

import numbers
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch

from ...planning.map_result import lead_text
from .phone import figure, legend_below, styled
from .style import LAYOUT_COLORS, fmt3, gb_per_s, pct2

__all__ = ["map_heatmap", "map_words", "rule_table", "cell_color", "cell_text", "KIND_COLORS", "FULL_MARGIN",
           "TIE_COLOR", "NONE_COLOR", "full_runs_cell", "wins_words", "short_run", "marked_text", "SHORT_LABEL"]

#: a map's kinds in the book's layout colours (:data:`.style.LAYOUT_COLORS`)
KIND_COLORS = {"split": LAYOUT_COLORS["split"], "prefill-first": LAYOUT_COLORS["prefill-first"],
               "chunked": LAYOUT_COLORS["chunked"]}
TIE_COLOR, NONE_COLOR = "#b3b3b3", "#ffffff"
#: a margin at which a cell's colour is full (1 - runner-up / winner); below it the colour pales toward white
FULL_MARGIN = 0.5
#: the palest shade of a win (a margin just above the tie tolerance)
PALEST = 0.3
SHORT = {"split": "S", "prefill-first": "P", "chunked": "C"}


def cell_color(cell) -> tuple[float, float, float]:
    """RGB (0..1) of a :class:`~splitlab.planning.split_map.Cell`: its winner's colour blended with white by the
    margin (:data:`PALEST` at no margin, full at :data:`FULL_MARGIN`), grey for a tie, white where none wins."""
    if cell.winner == "tie":
        return to_rgb(TIE_COLOR)
    if cell.winner == "none":
        return to_rgb(NONE_COLOR)
    a = PALEST + (1 - PALEST) * min(cell.margin / FULL_MARGIN, 1.0)
    return tuple(float(1 - a + a * c) for c in to_rgb(KIND_COLORS[cell.winner]))


def cell_text(cell, multiline: str = "\n") -> str:
    """Two short lines for a cell: the winning layout ("3P+1D", "pf": prefill-first, "chunk") and its lead ("+53%",
    "x4": :func:`~splitlab.planning.map_result.lead_text`); a tie names the tied kinds by letter ("S=C": split,
    chunked; P: prefill-first); "none" where no layout serves."""
    if cell.winner == "none":
        return f"none{multiline}0/s"
    if cell.winner == "tie":
        return f"tie{multiline}" + "=".join(SHORT[k] for k in SHORT if k in cell.tied)
    name = cell.names["split"] if cell.winner == "split" else {"prefill-first": "pf", "chunked": "chunk"}[cell.winner]
    return f"{name}{multiline}{lead_text(cell.margin)}"


def marked_text(m, cell, multiline: str = "\n") -> str:
    """:func:`cell_text` of a cell of the map ``m``, with a "*" where its goodput runs were short (:func:`short_run`):
    what both the static heatmap and the kernel-free explorer write in it."""
    return cell_text(cell, multiline) + ("*" if short_run(m, cell) else "")


def _dark(rgb) -> bool:
    r, g, b = rgb
    return 0.299 * r + 0.587 * g + 0.114 * b < 0.5


def axis_ticks(m) -> list[str]:
    """The columns' tick labels: prefill cost in decode steps over the prompt length in tokens."""
    return [f"{s:.2g}\n({n:,})" if s < 100 else f"{s:.0f}\n({n:,})" for s, n in zip(m.prefill_steps, m.prompt_tokens)]


def predicted(m) -> bool:
    """Whether the map's cost model is a prediction (the analytic roofline) rather than measured or built in."""
    return m.cost_source.startswith("predicted")


@styled
def map_heatmap(m, ax=None, title: str | None = None):
    """Draw the :class:`~splitlab.planning.split_map.SplitMap` ``m`` as a heatmap (module docstring): across, the
    prefill cost in lone decode steps (prompt tokens below); up, the TPOT SLO in lone decode steps (tight at the
    bottom). A map on an analytic cost model says "predicted" in its title; a cell whose goodput runs its request cap
    cut below 20 request lifetimes (:func:`short_run`) carries a "*". Returns the Axes."""
    if ax is None:
        fig, (ax,) = figure(1, height=0.55 * len(m.tpot_steps) + 2.2)
    rows, cols = len(m.tpot_steps), len(m.prompt_tokens)
    rgb = np.array([cell_color(c) for c in m.cells]).reshape(rows, cols, 3)
    ax.imshow(rgb, origin="lower", aspect="auto", interpolation="nearest")
    size = 11.5 if cols <= 6 else 9.5
    for c, color in zip(m.cells, rgb.reshape(-1, 3)):
        i, j = m.tpot_steps.index(c.tpot_steps), m.prompt_tokens.index(c.prompt_tokens)
        ax.text(j, i, marked_text(m, c), ha="center", va="center", fontsize=size, linespacing=1.0,
                color="white" if _dark(color) else "black")
        if c.winner == "none":
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", lw=0, color="0.75"))
    ax.set_xticks(range(cols), axis_ticks(m), fontsize=11.5)
    ax.set_yticks(range(rows), [f"{k:g}" for k in m.tpot_steps])
    ax.set_xlabel("prefill cost, in decode steps\n(prompt tokens)")
    ax.set_ylabel("TPOT SLO\n(lone decode steps)")
    ax.set_xticks(np.arange(cols + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(rows + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", lw=1.5)
    ax.tick_params(which="minor", length=0)
    link = "" if m.link_bytes_per_s is None else f", link {gb_per_s(m.link_bytes_per_s / 1e9)}"
    ax.set_title(title or f"Most goodput per worker, {m.workers} workers{link}"
                          f"{' (predicted)' if predicted(m) else ''}")
    handles = [Patch(color=KIND_COLORS[k], label=label) for k, label in
               (("split", "split (xPyD)"), ("prefill-first", "colocated, pf-first"), ("chunked", "colocated, chunk"))]
    handles.append(Patch(color=TIE_COLOR, label=f"tie (within {pct2(m.tie_tolerance)})"))
    if any(c.winner == "none" for c in m.cells):
        handles.append(Patch(facecolor=NONE_COLOR, edgecolor="0.6", hatch="//", label="none meets the SLOs"))
    if any(short_run(m, c) for c in m.cells):
        handles.append(Patch(facecolor="none", edgecolor="none", label=SHORT_LABEL))
    legend_below(ax.figure, handles, [h.get_label() for h in handles], ncols=2)
    return ax


def map_words(m) -> str:
    """A sentence on the :class:`~splitlab.planning.split_map.SplitMap` ``m``: how many of its cells each layout
    wins (by more than the tie tolerance), how many are ties (and how a tie's cell names its kinds), how many no
    layout serves, and how many were read off runs too short for a decode backlog (:func:`short_run`: the "*")."""
    n = m.counts()
    parts = [f"{n[k]} to {label}" for k, label in (("split", "the split"), ("prefill-first", "colocated prefill-first"),
                                                    ("chunked", "colocated chunked")) if n.get(k)]
    cells = f"{len(m.cells)} cell{'s' if len(m.cells) != 1 else ''}"  # not '1 cells'
    text = f"Of the map's {cells}, " + (", ".join(parts) if parts else "none to any layout")
    if n.get("tie"):
        text += (f"; {n['tie']} {'is a tie' if n['tie'] == 1 else 'are ties'} (within {pct2(m.tie_tolerance)}; a "
                 "tie's cell names the tied kinds by letter: S the split, P prefill-first, C chunked)")
    if n.get("none"):
        text += f"; in {n['none']} no layout meets the SLOs"
    short = sum(short_run(m, c) for c in m.cells)
    if short:  # the counts' weakest part: runs too short for a decode backlog (the figure's "*")
        from ...serving.goodput_runs import LIFETIMES
        text += (f"; {short} of the {len(m.cells)} {'was' if short == 1 else 'were'} read off goodput runs under "
                 f"{LIFETIMES} request lifetimes (marked *)")
    return text + "."


def run_length_words(long_map, short_map, long_requests: int = 2000, short_requests: int = 400) -> str:
    """A sentence on one column of the map ``long_map`` (runs of ``long_requests``) searched again on shorter runs
    (``short_map``, runs of ``short_requests``): each cell's winner and its lead over the runner-up on both,
    computed; "" when the short map has no cell of ``long_map``."""
    def said(c) -> str:
        return ("a tie" if c.winner == "tie" else f"{c.winner} {lead_text(c.margin)}") + f" at {c.tpot_steps:g} steps"
    long = {(c.prompt_tokens, c.tpot_steps): c for c in long_map.cells}
    pairs = [(long[c.prompt_tokens, c.tpot_steps], c) for c in short_map.cells
             if (c.prompt_tokens, c.tpot_steps) in long]
    if not pairs:
        return ""
    moved = sum(a.winner != b.winner for a, b in pairs)
    return (f"On its {pairs[0][0].prompt_tokens}-token prompts runs of {short_requests} requests find "
            f"{', '.join(said(b) for _, b in pairs)}; runs of {long_requests:,} "
            f"{', '.join(said(a) for a, _ in pairs)} ({moved} of {len(pairs)} cells change hands): a short run ends "
            f"before a decode backlog builds, and the backlog weighs on the layouts differently.")


#: the legend's words for a cell marked by :func:`short_run`
SHORT_LABEL = "*: runs < 20 lifetimes"


def short_run(m, cell) -> bool:
    """Whether ``cell``'s goodput runs spanned fewer request lifetimes than a goodput run should
    (:func:`run_lifetimes` below :data:`splitlab.serving.goodput_runs.LIFETIMES`): a cell the map marks, since a short
    run ends before a decode backlog builds (:func:`capped_words`)."""
    from ...serving.goodput_runs import LIFETIMES
    return run_lifetimes(m, cell) < LIFETIMES


def run_lifetimes(m, cell) -> float:
    """Request lifetimes a goodput run of the map ``m``'s cap (``max_requests``) spans at ``cell``'s best goodput
    ``g`` per worker: cap / (g x workers x lifetime), a lifetime TTFT SLO + (answer tokens - 1) x TPOT SLO; inf for a
    map without a cap or a cell no layout serves (:func:`capped_words` says it for every cell)."""
    from .map_steady import lifetime_s
    from .map_steady_place import settings_of
    cap, g = settings_of(m)["max_requests"], max(cell.goodput.values(), default=0)
    if not cap or not g > 0:
        return float("inf")
    return cap / (g * m.workers * lifetime_s(m, cell))


def full_runs_cell(cost, workers: int, prompt_tokens: int, tpot_steps: float, max_requests: int = 2000,
                   tries: int = 3, **kw) -> tuple:
    """One cell's map (:func:`splitlab.planning.split_map.split_map` of ``cost`` on ``workers`` at ``prompt_tokens``
    and a TPOT SLO of ``tpot_steps`` decode steps; ``kw`` its other arguments) whose goodput runs span the 20 request
    lifetimes a goodput run should (:data:`splitlab.serving.goodput_runs.LIFETIMES`): its request cap raised to
    ``max_requests`` x 20 / the lifetimes spanned (:func:`run_lifetimes`) x 1.1 and the cell searched again, at most
    ``tries`` searches (chapter 6's 8-worker cell was read off runs of 11 lifetimes, then its reading withdrawn).
    Returns (the map, its cell, the lifetimes its runs spanned: still under 20 after ``tries``, a caveat to print).
    Errors: those of ``split_map``; ValueError: tries not a whole number >= 1."""
    import math

    from ...planning.split_map import split_map
    from ...serving.goodput_runs import LIFETIMES
    if isinstance(tries, bool) or not isinstance(tries, numbers.Integral) or tries < 1:
        raise ValueError(f"tries must be a whole number >= 1, got {tries!r}")
    cap = max_requests
    for _ in range(tries):
        m = split_map(cost, workers, [prompt_tokens], [tpot_steps], max_requests=cap, progress=False, **kw)
        spanned = run_lifetimes(m, m.cells[0])
        if spanned >= LIFETIMES:
            break
        cap = math.ceil(cap * LIFETIMES / spanned * 1.1)
    return m, m.cells[0], spanned


def capped_words(m, lifetimes: float | None = None, whose: str = "the map's") -> str:
    """A sentence on the cells of the map ``m`` whose goodput runs its ``max_requests`` cut short. A run's arrivals
    span ``lifetimes`` request lifetimes (default :data:`splitlab.serving.goodput_runs.LIFETIMES`; a lifetime is TTFT
    SLO + (answer tokens - 1) x TPOT SLO) unless that takes more requests than the cap: at the cell's best goodput
    ``g`` per worker a run of the cap spans cap / (g x workers x lifetime) lifetimes: the cells it cuts are those
    with many requests in flight at once (a high rate times a long lifetime); ``whose`` names the map ("the
    eight-worker map's"); "" for a map without a cap. The fewest lifetimes are said to as many digits as keep them
    below ``lifetimes`` (19.7 of 20 read "20").

    Raises:
        TypeError: ``m`` not a split map (an AttributeError), ``whose`` not a string (None was "of None 12").
        ValueError: ``lifetimes`` not a finite number > 0 (NaN was "spanning nan request lifetimes"), a map with
            no cells."""
    from ...serving.goodput_runs import LIFETIMES
    from .map_steady_place import settings_of
    cap = settings_of(m)["max_requests"]
    span = LIFETIMES if lifetimes is None else lifetimes
    if isinstance(span, (bool, np.bool_)) or not isinstance(span, numbers.Real) or not 0 < span < np.inf:
        raise ValueError(f"lifetimes must be a finite number > 0 (request lifetimes a run spans), got {lifetimes!r}")
    if not isinstance(whose, str):
        raise TypeError(f"whose must be a string naming the map (\"the eight-worker map's\"), got {whose!r}")
    if not m.cells:
        raise ValueError("m has no cells: no goodput runs to speak of")
    if not cap:
        return ""
    short = sorted(((run_lifetimes(m, c), c) for c in m.cells if max(c.goodput.values(), default=0) > 0),
                   key=lambda t: t[0])
    short = [(got, c) for got, c in short if got < span]
    if not short:
        return (f"Every cell of {whose} {len(m.cells)} had goodput runs spanning {span:g} request lifetimes within the "
                f"cap of {cap:,} requests.")
    got, c = short[0]
    digits = next(p for p in range(2, 18) if float(f"{got:.{p}g}") < span)
    few = "those cells' margins are" if len(short) > 1 else "that cell's margin is"
    return (f"In {len(short)} of {whose} {len(m.cells)} cell{'s' * (len(m.cells) > 1)} the cap of {cap:,} requests cut "
            f"the goodput runs at the best layout's goodput below {span:g} request lifetimes, to as few as "
            f"{got:.{digits}g} ({c.prompt_tokens}-token prompts, TPOT {c.tpot_steps:g} steps), where many requests are "
            f"in flight at once (a high rate times a long lifetime). A short run ends before a decode backlog builds, "
            f"so {few} the least sure.")


def wins_words(m, kind: str = "split") -> str:
    """The cells of the map ``m`` that ``kind`` wins, out of all, and how many of them were read off goodput runs its
    request cap cut below 20 request lifetimes (:func:`run_lifetimes`: too short for a decode backlog to build, as
    :func:`capped_words` says): "10 of the 16 cells (5 of them off runs under 20 request lifetimes)".
    ValueError: a map with no cells."""
    from ...serving.goodput_runs import LIFETIMES
    if not m.cells:
        raise ValueError("m has no cells: no wins to count")
    won = [c for c in m.cells if c.winner == kind]
    short = sum(short_run(m, c) for c in won)
    return f"{len(won)} of the {len(m.cells)} cells" + (
        f" ({short} of {'them' if len(won) > 1 else 'it'} off runs under {LIFETIMES} request lifetimes)" if short
        else "")


#: the winners as :func:`rule_table` names them: short, as the map's legend does ("colocated, pf-first")
RULE_NAMES = {"prefill-first": "pf-first"}


def rule_table(rows: pd.DataFrame) -> pd.DataFrame:
    """:func:`splitlab.planning.rule_of_thumb.apply_rule`'s ``rows`` (with ``own map says``, ``check=True``) as a
    phone-wide display: one row per case ("8B bf16, 2,048" under the models' shared name, "Llama-3"), the prefill and
    one chunk in decode steps (3 significant digits), what the rule says and what the row's own map says. Chapter
    7's table of the same rows in full names (two index levels, "256-token chunk (decode steps)", "prefill-first")
    was 415 px wide in a 365 px column at 412 px."""
    models = [str(m) for m in rows["model"]]
    shared = os.path.commonprefix(models)
    shared = shared[:shared.rfind("-") + 1] if "-" in shared else ""
    chunk = next(c for c in rows.columns if c.endswith("-token chunk (decode steps)"))
    out = pd.DataFrame({
        shared.rstrip("-") or "model": [f"{m[len(shared):]} {dt}, {int(t):,}" for m, dt, t in zip(
            models, rows["dtype"], rows["prompt tokens"])],  # the dtype: 70B is fp8 (its weights fit one H100)
        "prefill (steps)": [fmt3(v) for v in rows["prefill (decode steps)"]],
        f"chunk of {chunk.split('-')[0]} (steps)": [fmt3(v) for v in rows[chunk]],
        "rule": list(rows["rule says"])})
    if "own map says" in rows:
        out["own map"] = [RULE_NAMES.get(v, v) for v in rows["own map says"]]
    return out.set_index(out.columns[0])
