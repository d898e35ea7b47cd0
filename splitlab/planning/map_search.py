"""How the map (:mod:`.split_map`) searches a cell in few runs: where each search starts, and the splits one run
rules out.

**Starts learned across cells.** The closed form (:mod:`.closed_form`) misses the simulation by a factor that
changes slowly over the map: on the H100 map of chapter 7 the chunked layout's goodput is 2.9-3.0 x its closed
form in 10 of 12 cells. Each search starts at its closed form times the factor (goodput / closed form) of its
kind in the nearest cell searched before it (the same column first: the same prompt at the TPOT SLO before; a
split of the same ``x`` first, else the best split), and then steps by ``1 + 2 x tolerance``, as the planner does
once it has learned (:mod:`.starts`): most searches end in three runs (the start passes, the next step fails, one
bisection). A search with nothing to learn from starts at its closed form with the map's step of 1.25.

**Splits ruled out in one run.** Only the best split of a cell enters its winner. The split the closed form ranks
best is searched first; each other split (x +- 1) whose start (:class:`~.starts.Starts`: the closed form corrected
by the split just found; at most the closed form's link bound, :func:`~.closed_form.link_capacity`, scaled as the
first split's goodput is to its own where that bound decided the first split's closed form) is not above the best
split's goodput first runs at that goodput, and a run that fails
there rules it out: by the search's own premise (attainment falls as the rate grows), its goodput lies below the
best split's, and a full search of it could only have found a lower rate. A run that passes goes on as a search
starting there. A ruled-out split's goodput is not measured; the cell never needed it.
"""
from __future__ import annotations

import math

from ..serving import goodput
from ..serving.goodput_runs import Runs
from ..serving.goodput_search import SearchNotEnded
from .starts import Starts

__all__ = ["CellSearch", "MapStarts"]


class MapStarts:
    """Factors (goodput / closed form) of each kind of layout in the cells searched so far.

    Keys are strings such as ``"prefill-first"``, ``"chunked 256"`` or ``"split 3"`` (a split of 3 prefill
    workers); cells are (row, column) of the map."""

    def __init__(self):
        self.seen: dict[str, dict[tuple[int, int], float]] = {}

    def factor(self, keys, cell: tuple[int, int]) -> float | None:
        """The factor of the first of ``keys`` seen in any cell, from the nearest such cell (fewest rows plus
        columns away; the same column first), or None when none of them was seen."""
        for key in keys:
            seen = self.seen.get(key)
            if seen:
                r, c = cell
                near = min(seen, key=lambda rc: (abs(rc[0] - r) + abs(rc[1] - c), abs(rc[1] - c), -rc[0], -rc[1]))
                return seen[near]
        return None

    def learn(self, keys, cell: tuple[int, int], first: float, result) -> None:
        """Take in a search of ``cell`` whose closed form was ``first`` (requests/s per worker): only a search that
        found a boundary from a finite first guess above 0 teaches, under each of ``keys``."""
        if result.outcome == "found" and 0 < first < math.inf and result.goodput_rps_per_worker > 0:
            for key in keys:
                self.seen.setdefault(key, {})[cell] = result.goodput_rps_per_worker / first


class CellSearch:
    """The searches of one map: every :func:`~splitlab.serving.goodput` call of its cells, with the arguments it
    shares (``search``: the SLO-free keywords of ``goodput``, tolerance among them), counting ``searches`` (layouts
    weighed, a ruled-out split included) and ``runs``."""

    def __init__(self, ex, search: dict):
        self.ex, self.search, self.starts = ex, dict(search), MapStarts()
        self.tolerance = self.search["tolerance"]
        self.searches = self.runs = 0

    def _goodput(self, workload, cfg, ttft, tpot, start: float, learned: bool):
        self.searches += 1
        step = 1 + 2 * self.tolerance if learned else 1.25
        try:
            res = goodput(workload, cfg, self.ex, ttft_slo_s=ttft, tpot_slo_s=tpot, scale=1.0, step=step,
                          start_rate_per_worker=max(start if math.isfinite(start) else 1.0, 1e-3), **self.search)
        except SearchNotEnded as e:
            raise ValueError(f"split_map: the goodput search of {cfg.name} did not end within its runs at tolerance "
                             f"{self.tolerance!r}: pass split_map() a larger tolerance (default 0.05)") from e
        self.runs += len(res.points)
        return res

    def learned(self, kind: str, cell, first: float, workload, cfg, ttft, tpot, also=()):
        """The goodput search of ``cfg`` (``kind``: "prefill-first", "chunked 256", "split 3"; ``also``: keys to
        borrow from when ``kind`` was never seen) started from the nearest cell's factor, which it then teaches."""
        k = self.starts.factor((kind, *also), cell)
        res = self._goodput(workload, cfg, ttft, tpot, first * k if k is not None else first, k is not None)
        self.starts.learn((kind, *also), cell, first, res)
        return res

    def beats(self, workload, cfg, ttft, tpot, rate: float) -> bool:
        """Whether a run of ``cfg`` at ``rate`` per worker passes: the first run of the search that would start
        there (the same request set, sizing and stop)."""
        s = self.search
        runs = Runs(workload, cfg, self.ex, None, ttft, tpot, s.get("target", 0.9), None, s.get("min_requests"),
                    s["max_requests"], s["seed"], 1.0, False, extend=s["extend"])
        self.runs += 1
        return runs(rate)["passed"]

    def splits(self, cell, workload, ttft, tpot, layouts: list, mu: tuple[float, float]) -> list:
        """The split searches of a cell: ``layouts`` of (prefill workers, config, closed form, the link's bound:
        :func:`~.closed_form.link_capacity`), the closed form's best first; ``mu``: the closed form's requests/s of
        one prefill and one decode worker (:class:`Starts`). Returns (config, result or None) per layout, None for
        a split one run ruled out (module docstring)."""
        out, best, inside, k_link = [], 0.0, Starts(*mu), 1.0
        for i, (x, cfg, first, link) in enumerate(layouts):
            y = cfg.n_workers - x
            if i == 0:
                res = self.learned(f"split {x}", cell, first, workload, cfg, ttft, tpot, also=("split",))
                if res.outcome == "found" and res.goodput_rps_per_worker > 0 and first >= link and 0 < link < math.inf:
                    # the link bound the first split's closed form
                    k_link = res.goodput_rps_per_worker / link  # and lowers the others' as much
            else:
                start, learned = inside.start("prefill-first", x, y, first)
                start = min(start, link * k_link)
                if best > 0 and start <= best:
                    self.searches += 1
                    if not self.beats(workload, cfg, ttft, tpot, best):
                        out.append((cfg, None))
                        continue
                    self.searches -= 1  # counted once, by the search that follows
                    start, learned = best, True
                res = self._goodput(workload, cfg, ttft, tpot, start, learned)
            inside.learn(_Found(res, x, y, first, cfg))
            best = max(best, res.goodput_rps_per_worker)
            out.append((cfg, res))
        return out


class _Found:
    """What :meth:`.starts.Starts.learn` reads of a searched split (a planner Candidate's fields)."""

    layout, policy = "disaggregated", "prefill-first"

    def __init__(self, res, x: int, y: int, first: float, cfg):
        self.outcome, self.goodput_rps_per_worker, self.binding_slo = res.outcome, res.goodput_rps_per_worker, \
            res.binding_slo
        self.first_guess_rps_per_worker, self.prefill_workers, self.decode_workers = first, x, y
        self.workers, self.config = x + y, cfg
