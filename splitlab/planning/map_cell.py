"""One cell of the map (:mod:`.split_map`) searched: every layout of the cell by the plain search, then the
contenders refined (:mod:`.refine`), and each kind's best (split, prefill-first, chunked) with its binding SLO.

A cell's runs are sized by the request lifetime, as every goodput run is (:mod:`splitlab.serving.goodput_runs`):
arrivals over :data:`~splitlab.serving.goodput_runs.LIFETIMES` (20) lifetimes of the cell's SLOs, at least
:data:`MAP_MIN_REQUESTS` (2,000) requests and at most the map's ``max_requests``. A fixed cap of a few hundred requests,
as the map had, flattered the layouts whose queues build slowly: at 16-token prompts a run of 400 requests spans a
fraction of a lifetime at the rates a colocated layout reaches there.
"""
from __future__ import annotations

from types import SimpleNamespace

from ..serving import goodput
from ..serving.goodput_runs import MIN_REQUESTS
from .conditional_layouts import conditional_contenders
from .refine import PLAIN, REFINE_MARGIN, bracket, refine, refine_contenders

__all__ = ["search_cell", "MAP_MIN_REQUESTS"]

#: the fewest requests of a map's run (a run holds 20 lifetimes of arrivals or this many, whichever is more): the
#: default search's floor, 2,000, on which the plain search's error was measured (1,000 put a 1P+3D 12% high)
MAP_MIN_REQUESTS = MIN_REQUESTS


def search_cell(workload, layouts, ex, *, ttft_slo_s: float, tpot_slo_s: float, tolerance: float,
                max_requests: int, min_requests: int, seed: int, extend: int, queues=(), reused=None,
                scale: float | None = 1.0) -> dict:
    """The goodput searches of one cell.

    Args:
        workload: the cell's :class:`~splitlab.serving.WorkloadSpec`.
        layouts: ``(kind, config, first rate per worker)`` of each layout searched ("split", "prefill-first",
            "chunked").
        ex: the executor (a cost model). ttft_slo_s, tpot_slo_s: the cell's SLOs (s).
        tolerance, max_requests, min_requests, seed: of every search (:func:`~splitlab.serving.goodput`).
        extend: of the contenders' refined searches (:func:`~.refine.refine`); 1: plain runs only.
        queues: ``local_prefill_queue`` values of the conditional contenders (the best plain split again with each;
            refined when within the margin of the best of all, after the pure layouts are refined among themselves,
            so that the pure layouts' goodputs do not depend on whether a conditional contender was searched).
        reused: kind -> (goodput, binding SLO, layout name) of kinds taken from another map (not searched).
        scale: of the workload's lengths (1.0: as given, the map's cells).

    Returns:
        a dict: ``goodput``, ``binding``, ``names`` (kind -> value of the kind's best layout), ``conditional`` (the
        best conditional contender's fields, or empty), ``notes`` ((layout name, reason) of each search that found no
        rate breaking the SLOs),
        ``searches`` (goodput searches made, refined ones included), ``refined`` (names of the layouts searched
        again) and ``plain`` (layout name -> the plain search's goodput, every layout searched).
    """
    args = dict(ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, tolerance=tolerance, min_requests=min_requests,
                max_requests=max_requests, seed=seed, scale=scale)
    jobs, results = [], {}

    def plain(kind, cfg, first):
        jobs.append((kind, cfg))
        results[len(jobs) - 1] = goodput(workload, cfg, ex, start_rate_per_worker=max(first, 1e-3), extend=PLAIN,
                                         step=1.25, **args)

    for kind, cfg, first in layouts:
        plain(kind, cfg, first)
    splits = [i for i, (kind, _) in enumerate(jobs) if kind == "split"]
    if splits:
        best = max(splits, key=lambda i: results[i].goodput_rps_per_worker)
        for cfg in conditional_contenders(jobs[best][1], queues):
            plain("conditional", cfg, results[best].goodput_rps_per_worker)
    for kind, (g, _, name) in (reused or {}).items():  # searched in another map: they count for the best
        jobs.append((kind, SimpleNamespace(name=name)))
        results[len(jobs) - 1] = SimpleNamespace(goodput_rps_per_worker=g, outcome="reused", points=[])
    plain_g = {_label(*jobs[i]): r.goodput_rps_per_worker for i, r in results.items() if r.outcome != "reused"}
    refined = []
    if extend != PLAIN:  # the pure layouts among themselves (a conditional contender leaves them as they were) ...
        def again(i, res):
            return refine(workload, jobs[i][1], ex, res, extend=extend, **args)

        conditional = [i for i, (kind, _) in enumerate(jobs) if kind == "conditional"]
        pure = {i: r for i, r in results.items() if i not in conditional}
        refined = refine_contenders(pure, again)
        results.update(pure)
        top = max(r.goodput_rps_per_worker for r in results.values())
        for i in conditional:  # ... then a conditional contender within the margin of the best of all
            if results[i].goodput_rps_per_worker >= (1 - REFINE_MARGIN) * top and bracket(results[i]) is not None:
                results[i] = again(i, results[i])
                refined.append(i)
    out = dict(goodput={}, binding={}, names={}, conditional={}, notes=[], refined=[_label(*jobs[i]) for i in refined],
               plain=plain_g,
               searches=sum(r.outcome != "reused" for r in results.values()) + len(refined))
    for kind, (g, binding, name) in (reused or {}).items():
        out["goodput"][kind], out["binding"][kind], out["names"][kind] = g, binding, name
    for i, (kind, cfg) in enumerate(jobs):
        res = results[i]
        if res.outcome == "reused":
            continue
        if res.outcome == "unbounded":
            out["notes"].append((cfg.name, res.reason))
        g = res.goodput_rps_per_worker
        if kind == "conditional":
            if not out["conditional"] or g > out["conditional"]["goodput_rps_per_worker"]:
                out["conditional"] = dict(layout=cfg.name, goodput_rps_per_worker=g, binding_slo=res.binding_slo,
                                          local_prefill_queue=cfg.local_prefill_queue)
        elif kind not in out["goodput"] or g > out["goodput"][kind]:
            out["goodput"][kind], out["binding"][kind] = g, res.binding_slo
            out["names"][kind] = _label(kind, cfg)
    return out


def _label(kind: str, cfg) -> str:
    """A layout's name in the map: a chunked one's with its chunk size (a cell may try several)."""
    return f"{cfg.n_workers} colocated (chunked, {cfg.chunk_tokens}-token chunks)" if kind == "chunked" else cfg.name
