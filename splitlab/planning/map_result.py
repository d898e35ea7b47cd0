"""What :func:`splitlab.planning.split_map.split_map` finds: one :class:`Cell` per (prompt length, TPOT SLO) with
each layout's goodput per worker, the winner (a tie within the tie tolerance), the runner-up and the margin, and
the :class:`SplitMap` of them all (a table, a grid, JSON)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..common.numbers import fmt3
from .batch import chunked_cap_words

__all__ = ["Cell", "SplitMap", "KINDS", "KIND_LABELS", "lead_text"]


def lead_text(margin: float) -> str:
    """A winner's lead as a reader takes '+N%', from its ``margin`` (1 - runner-up / winner's goodput, a share):
    '+25%' for 0.2 (the winner serves 25% more), 'x4' for 0.75 (from twice the runner-up on), 'alone' for 1 (the
    runner-up serves nothing). The map's cells once printed the margin as '+75%' beside a 4x lead.

    Raises:
        ValueError: a margin outside [0, 1]."""
    if not 0 <= margin <= 1:  # NaN too
        raise ValueError(f"margin must be a share in [0, 1] (1 - runner-up / winner), got {margin!r}")
    if margin >= 1:
        return "alone"
    ratio = 1 / (1 - margin)
    return f"x{fmt3(ratio, 2)}" if ratio >= 2 else f"+{ratio - 1:.0%}"

#: the three contenders of a cell, and what a cell's ``winner`` may also be
KINDS = ("split", "prefill-first", "chunked")
KIND_LABELS = {"split": "split (best xPyD)", "prefill-first": "colocated, prefill-first",
               "chunked": "colocated, chunked (fused)", "tie": "tie", "none": "none meets the SLOs"}


@dataclass
class Cell:
    """One cell of the map: its coordinates (``prompt_tokens``; ``prefill_steps``: the prefill cost in lone
    decode steps; ``tpot_steps``: the TPOT SLO in lone decode steps), its SLOs (s), each kind's goodput per worker
    (``goodput``, requests/s), binding SLO (``binding``) and layout name (``names``: "3P+1D"), the ``winner``
    (a kind, "tie" or "none"), ``tied`` (the kinds within the tie tolerance of the best), ``runner_up`` (the best
    kind of the other family: :meth:`decide`) and ``margin`` (1 - runner-up / winner's goodput, 0 when none meets
    the SLOs); ``conditional``: the best
    conditional split of the cell (``layout``, ``goodput_rps_per_worker``, ``binding_slo``,
    ``local_prefill_queue``) when the map searched one, else empty: it never enters ``winner``
    (:func:`~.conditional_layouts.conditional_wins` compares it with the pure layouts)."""

    prompt_tokens: int
    prefill_steps: float
    tpot_steps: float
    ttft_slo_s: float
    tpot_slo_s: float
    goodput: dict
    binding: dict
    names: dict
    winner: str = ""
    tied: tuple = ()
    runner_up: str = ""
    margin: float = 0.0
    conditional: dict = field(default_factory=dict)

    def decide(self, tie_tolerance: float) -> "Cell":
        """Set ``winner``, ``tied``, ``runner_up`` and ``margin`` from ``goodput``. The map asks the split against
        colocated serving, so the runner-up is the best kind of the other family (the split's is the better
        colocated kind, a colocated kind's the split) and the margin is over it; kinds within ``tie_tolerance`` (a
        share) of the best goodput tie with it, and the cell is a "tie" when the runner-up does. Where only the two
        colocated kinds tie, colocated serving wins the cell and its better kind is the winner (a "tie" there once
        painted a cell grey that colocated won by 18%). No goodput above 0 is "none". Returns the cell."""
        order = sorted(KINDS, key=lambda k: -self.goodput[k])
        best = self.goodput[order[0]]
        rival = ("split" if order[0] != "split" else
                 max(("prefill-first", "chunked"), key=lambda k: self.goodput[k]))
        if best <= 0:
            self.winner, self.tied, self.runner_up, self.margin = "none", (), rival, 0.0
            return self
        self.tied = tuple(k for k in order if self.goodput[k] >= best * (1 - tie_tolerance))
        self.winner = "tie" if rival in self.tied else order[0]
        self.runner_up = rival
        self.margin = 1 - self.goodput[rival] / best
        return self

    @property
    def verdict(self) -> str:
        """The split against colocated: "split" (it beats both colocated layouts by more than the tie tolerance),
        "colocated" (the better colocated layout beats it by more), "tie", or "none" (no layout meets the SLOs)."""
        if self.winner == "none":
            return "none"
        if self.winner == "split":
            return "split"
        return "tie" if "split" in self.tied else "colocated"

    @property
    def leader(self) -> str:
        """The kind with the highest goodput (the winner, or the first of a tie)."""
        return max(KINDS, key=lambda k: self.goodput[k])

    def to_json(self) -> dict:
        lead = self.leader
        return dict(prompt_tokens=self.prompt_tokens, prefill_steps=self.prefill_steps, tpot_steps=self.tpot_steps,
                    ttft_slo_s=self.ttft_slo_s, tpot_slo_s=self.tpot_slo_s, winner=self.winner, tied=list(self.tied),
                    verdict=self.verdict,
                    winner_layout=None if self.winner == "none" else self.names[lead],  # none: no layout serves
                    goodput_rps_per_worker=self.goodput[lead],
                    binding_slo=self.binding[lead], runner_up=self.runner_up,
                    runner_up_layout=self.names[self.runner_up],
                    runner_up_goodput_rps_per_worker=self.goodput[self.runner_up], margin=self.margin,
                    layouts={k: dict(layout=self.names[k], goodput_rps_per_worker=self.goodput[k],
                                     binding_slo=self.binding[k]) for k in KINDS},
                    **({"conditional": dict(self.conditional)} if self.conditional else {}))


@dataclass
class SplitMap:
    """What :func:`split_map` found: ``cells`` (row by row: TPOT steps outer, prompt lengths inner), the axes
    (``prompt_tokens``, ``prefill_steps``, ``tpot_steps``), the inputs, ``searches`` made (layouts weighed, a split
    one run ruled out included: :mod:`.map_search`), ``notes`` (searches whose goodput is only a lower bound),
    ``chunk_steps`` (per column: one step of the first chunk size beside a decode row, in lone decode steps:
    :func:`~.map_axes.chunk_steps`), ``runs`` (the goodput runs of all its searches) and ``search`` (what its
    searches were given: ``max_requests``, ``min_requests``, ``tolerance``, ``extend``, the layouts' ``options``)."""

    cells: list[Cell]
    workers: int
    prompt_tokens: list[int]
    prefill_steps: list[float]
    tpot_steps: list[float]
    output_tokens: int
    ttft_prefills: float
    link_bytes_per_s: float | None
    tie_tolerance: float
    cost_source: str
    chunk_tokens: list[int] = field(default_factory=list)
    max_batch: int | None = None
    seed: int = 0
    searches: int = 0
    notes: list[str] = field(default_factory=list)
    chunk_steps: list[float] = field(default_factory=list)
    runs: int = 0
    search: dict = field(default_factory=dict)  # the searches' max_requests, min_requests, tolerance, extend, options

    def table(self) -> pd.DataFrame:
        """One row per cell (its :meth:`Cell.to_json` less the per-layout detail)."""
        return pd.DataFrame([{k: v for k, v in c.to_json().items() if k != "layouts"} for c in self.cells])

    def grid(self, key: str) -> np.ndarray:
        """``key`` of every cell as an array of shape (len(tpot_steps), len(prompt_tokens)): row i is
        ``tpot_steps[i]``, column j ``prompt_tokens[j]``; ``key`` is a Cell attribute or "goodput:KIND"."""
        def value(c):
            return c.goodput[key.split(":")[1]] if key.startswith("goodput:") else getattr(c, key)
        vals = [value(c) for c in self.cells]
        return np.array(vals, dtype=object).reshape(len(self.tpot_steps), len(self.prompt_tokens))

    @property
    def batch_words(self) -> str:
        """What bounded every layout's decode batch, in words: no cap (each worker's KV budget) or ``max_batch``."""
        if self.max_batch is not None:
            return f"at most {self.max_batch} requests per worker (max_batch)"
        return "no cap, each worker's KV budget bounds it" + chunked_cap_words(self.chunk_tokens, None)

    def counts(self, tpot_steps=None) -> dict:
        """Cells won by each kind, tied and met by none; on the rows ``tpot_steps`` only where given (a sequence of
        the map's TPOT SLOs, in decode steps: two maps compared on the rows they share). ValueError: none, or a row
        the map does not have; TypeError: not a sequence of numbers."""
        try:
            rows = self.tpot_steps if tpot_steps is None else None if isinstance(tpot_steps, (str, bytes)) else [
                float(t) for t in tpot_steps]
        except (TypeError, ValueError):  # a number, a 0-d or 2-d array, words: numpy's own messages
            rows = None
        if rows is None:
            raise TypeError(f"counts: tpot_steps must be a sequence of the map's rows, got {tpot_steps!r}")
        if not rows:
            raise ValueError("counts: tpot_steps is empty: no row to count (None counts them all)")
        missing = [t for t in rows if t not in self.tpot_steps]
        if missing:
            raise ValueError(f"counts: the map has no row at tpot_steps {missing} (its rows: {self.tpot_steps})")
        on = [c for c in self.cells if c.tpot_steps in rows]
        return {w: sum(c.winner == w for c in on) for w in (*KINDS, "tie", "none")}

    def to_json(self) -> dict:
        return dict(workers=self.workers, prompt_tokens=self.prompt_tokens, prefill_steps=self.prefill_steps,
                    tpot_steps=self.tpot_steps, output_tokens=self.output_tokens, ttft_prefills=self.ttft_prefills,
                    link_bytes_per_s=self.link_bytes_per_s, tie_tolerance=self.tie_tolerance,
                    cost_source=self.cost_source, chunk_tokens=self.chunk_tokens, max_batch=self.max_batch,
                    seed=self.seed, searches=self.searches, runs=self.runs, counts=self.counts(), notes=self.notes,
                    chunk_steps=self.chunk_steps,
                    cells=[c.to_json() for c in self.cells])
