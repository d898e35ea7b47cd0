"""What :func:`splitlab.planner.plan` found: one :class:`Candidate` per layout searched, and the :class:`Plan` of them
all (best first: a table, the winner and why, JSON)."""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field

import pandas as pd

from ..serving import ServingConfig

__all__ = ["Plan", "Candidate"]


@dataclass
class Candidate:
    """One layout the planner tried, with its search (``result``: a :class:`~splitlab.serving.GoodputResult`).

    ``goodput_rps_per_worker`` is simulated; ``first_guess_rps_per_worker`` is the closed form of
    :mod:`.closed_form` for this layout (``colocated_rps``, or ``min(x mu_p, y mu_d) / (x + y)``) on the very
    request set, SLOs, ``max_batch`` and ``max_prefill_tokens`` of the simulation, never copied from its result;
    the goodput search starts there corrected by the layouts searched before it (:mod:`.starts`).
    ``plain_rps_per_worker``: the plain search's goodput of a layout searched again on runs that go on while
    unsettled (:mod:`.refine`; ``refined``), else None."""

    layout: str
    policy: str
    workers: int
    prefill_workers: int
    decode_workers: int
    chunk_tokens: int | None
    goodput_rps_per_worker: float
    cost_per_million_tokens: float
    binding_slo: str
    first_guess_rps_per_worker: float
    config: ServingConfig = field(repr=False, default=None)
    result: object = field(repr=False, default=None)
    plain_rps_per_worker: float | None = None

    @property
    def refined(self) -> bool:
        """True if the layout was within the refine margin of the best and searched again (:mod:`.refine`)."""
        return self.plain_rps_per_worker is not None

    @property
    def batch_cap(self) -> int | None:
        """The cap on a worker's batch this layout ran with (None: none, KV memory bounds it; chunked layouts
        without ``max_batch``: ``chunk_tokens - 1``)."""
        cap = self.config.batch_cap if self.config is not None else math.inf
        return None if math.isinf(cap) else int(cap)

    @property
    def outcome(self) -> str:
        """How its goodput search ended: "found", "unmet" (no rate meets the SLOs: goodput 0) or "unbounded" (no
        rate breaks them: the goodput is a lower bound); see :mod:`splitlab.serving.goodput_result`."""
        return getattr(self.result, "outcome", "found")

    @property
    def reason(self) -> str:
        """Why its goodput is what it is, in one sentence (the search's ``reason``)."""
        return getattr(self.result, "reason", "")

    @property
    def name(self) -> str:
        if self.layout == "disaggregated":  # a conditional split's name says its rule
            return self.config.name if self.config is not None else f"{self.prefill_workers}P+{self.decode_workers}D"
        chunk = f", {self.chunk_tokens}-token chunks" if self.policy == "chunked" else ""
        return f"{self.workers} colocated ({self.policy}{chunk})"

    def to_json(self) -> dict:
        keys = ("layout", "policy", "workers", "prefill_workers", "decode_workers", "chunk_tokens",
                "goodput_rps_per_worker", "cost_per_million_tokens", "binding_slo", "first_guess_rps_per_worker")
        out = {k: getattr(self, k) for k in keys}
        cost = None if math.isinf(self.cost_per_million_tokens) else self.cost_per_million_tokens
        return dict(out, name=self.name, outcome=self.outcome, reason=self.reason, cost_per_million_tokens=cost,
                    batch_cap=self.batch_cap, local_prefill_tokens=getattr(self.config, "local_prefill_tokens", None),
                    refined=self.refined, plain_rps_per_worker=self.plain_rps_per_worker)


@dataclass
class Plan:
    """What :func:`plan` found: ``candidates`` (best first), ``best``, ``first_guess`` (the closed form) and the
    inputs (``ttft_slo_s``, ``tpot_slo_s``, ``max_workers``, ``price_per_hour``, ``mean_output_tokens``,
    ``cost_source``); ``chosen``: the SLOs left out, chosen, and why (:meth:`.defaults.Chosen.to_json`; None if
    both were given); ``batch``: the decode batch bound of a worker, stated (:class:`.batch.BatchBound`: the KV
    budget, the requests it holds, the cap and which binds; ``batch_line`` says it in words); ``search``: how the
    goodputs were searched (``extend`` of the refined searches, 1: plain only; ``margin``; ``refined``: how many;
    ``search_line`` says it in words)."""

    candidates: list[Candidate]
    first_guess: dict
    ttft_slo_s: float
    tpot_slo_s: float
    max_workers: int
    price_per_hour: float
    mean_output_tokens: float
    cost_source: str
    chosen: dict | None = None
    batch: dict | None = None  # the decode batch bound every layout ran with (planning.batch.BatchBound.to_json)
    search: dict | None = None  # the two stages of the search (extend, margin, refined)

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    def best_of(self, layout: str | None = None, policy: str | None = None) -> Candidate:
        """The best candidate of a ``layout`` ("colocated" or "disaggregated") and/or ``policy``
        ("prefill-first", "chunked").

        Raises:
            KeyError: no candidate is of that kind.
        """
        for c in self.candidates:
            if (layout is None or c.layout == layout) and (policy is None or c.policy == policy):
                return c
        raise KeyError(f"no candidate with layout={layout!r}, policy={policy!r}")

    def table(self) -> pd.DataFrame:
        """One row per candidate, best first: goodput per worker (simulated and closed-form guess, requests/s),
        cost per million output tokens, the binding SLO, and why (the search's reason: the rates either side of
        the boundary, or why no rate meets the SLOs or none breaks them).

        Each goodput search starts at its candidate's first guess corrected by the layouts searched before it
        (:mod:`.starts`; a good start saves runs), so the goodput is a rate the search tested, and the true
        boundary lies within the search's tolerance (3%) above it. ``refined``: searched again, on runs going on
        while unsettled, as a contender within the refine margin of the best (:mod:`.refine`)."""
        rows = [{"layout": c.name, "workers": c.workers, "batch cap": c.batch_cap or "none (KV)",
                 "goodput (req/s per worker)": c.goodput_rps_per_worker,
                 "first guess (req/s per worker)": c.first_guess_rps_per_worker,
                 "cost per 1M tokens": c.cost_per_million_tokens, "binding SLO": c.binding_slo, "why": c.reason,
                 "refined": c.refined}
                for c in self.candidates]
        return pd.DataFrame(rows).set_index("layout")

    @property
    def batch_line(self) -> str:
        """The decode batch bound every layout ran with, in one sentence (empty if unknown)."""
        return self.batch.get("line", "") if self.batch else ""

    @property
    def search_line(self) -> str:
        """How the goodputs were searched, in one sentence (empty if unknown; :mod:`.refine`)."""
        if not self.search:
            return ""
        if self.search["extend"] == 1:
            return "goodput runs: plain, never going on past their requests (every layout alike)"
        n, total = self.search["refined"], len(self.candidates)
        return (f"goodput runs: plain for every layout, then the {n} of {total} within {self.search['margin']:.0%} "
                f"of the best searched again on runs going on up to {self.search['extend']}x while unsettled "
                f"(marked +)")

    def why(self, width: int | None = None) -> str:
        """Why the winner wins: its goodput against the best of the other kind, and the SLO binding each; on
        lines of at most ``width`` characters if given (a phone's column holds about 60)."""
        best = self.best
        if best.outcome != "found":  # every search ended "unmet", or the winner's SLOs break at no rate
            text = (f"No layout meets TTFT <= {self.ttft_slo_s:g} s and TPOT <= {self.tpot_slo_s:g} s at any rate; "
                    f"{best.name}: {best.reason}." if best.goodput_rps_per_worker == 0 else
                    f"{best.name} ranks first at {best.goodput_rps_per_worker:.3g} requests/s per worker, which says "
                    f"little: {best.reason}.")
            return text if width is None else textwrap.fill(text, width, break_on_hyphens=False)
        other = next((c for c in self.candidates if (c.layout == "colocated") != (best.layout == "colocated")), None)
        text = (f"{best.name} wins: {best.goodput_rps_per_worker:.3g} requests/s per worker within TTFT <= "
                f"{self.ttft_slo_s:g} s and TPOT <= {self.tpot_slo_s:g} s (binding: {best.binding_slo})")
        if other is not None:
            kind = "colocated" if other.layout == "colocated" else "split"
            less = 1 - other.goodput_rps_per_worker / best.goodput_rps_per_worker if best.goodput_rps_per_worker else 0
            text += (f"; the best {kind} layout, {other.name}, serves {other.goodput_rps_per_worker:.3g} (binding: "
                     f"{other.binding_slo}), {less:.0%} less per worker")
        text += "."
        return text if width is None else textwrap.fill(text, width, break_on_hyphens=False)

    def to_json(self) -> dict:
        return dict(candidates=[c.to_json() for c in self.candidates], best=self.best.to_json(),
                    first_guess=self.first_guess, ttft_slo_s=self.ttft_slo_s, tpot_slo_s=self.tpot_slo_s,
                    max_workers=self.max_workers, price_per_hour=self.price_per_hour,
                    mean_output_tokens=self.mean_output_tokens, cost_source=self.cost_source, chosen=self.chosen,
                    batch=self.batch, search=self.search)
