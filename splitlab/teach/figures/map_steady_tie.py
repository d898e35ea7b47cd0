"""A tie of chapter 7's map tested by the goodputs themselves: a ladder of rates served live (:func:`tie_ladder`).

A map's tie says two layouts' goodputs lie within its tie tolerance (10%: the runner-up's at least 90% of the
winner's). One run at one rate cannot test that: below both knees both layouts keep 90% (the record of 2026-12-05
at 0.85 of the goodputs: 100% and 100% on every seed), and past them a few percent of rate drop a run from 90% to
30% (at 1.0 of another calibration's goodputs: 37% and 16%), so the attainment gap there says little of the rates.
A goodput is found the way the map finds it, by rates: :func:`tie_ladder` serves both layouts on the real model
(emulated) at rungs :data:`LADDER_STEP` of the goodputs' geometric mean apart, every seed per rung, the two layouts
in turn (the first alternating from seed to seed), climbing while some seed keeps 90% at a layout's highest rung
and descending while some seed misses it at its lowest, until every bootstrap resample of the seeds brackets each
layout's goodput; the bracket, on the mean over the seeds: the highest rung it held, the lowest it did not.
:func:`ladder_outcome` reads the brackets: a tie where even the brackets' extremes lie within the tolerance of each
other, no tie where even their nearest ends lie beyond it, undecided between (in words and a table:
:mod:`.map_steady_tie_words`); and it keeps that reading only where the seeds' bootstrap resamples (:func:`support`)
give it :data:`CONFIDENCE` or more, since a rung is called held or not on a mean over a few seeds that scatter by
tens of points near a knee.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Sequence

from .pools_live_args import whole
from .map_steady_tie_read import (CONFIDENCE, GOOD, RESAMPLES, TOLERANCE, _finite, brackets, cell_ladder,
                                  ladder_outcome, ladder_seeds, seeds_in, support, verdict)

__all__ = ["LADDER_STEP", "LADDER_RUNGS", "TOLERANCE", "CONFIDENCE", "RESAMPLES", "GOOD", "tie_ladder",
           "check_resume", "check_more_seeds", "left_to_serve", "ladder_seeds", "seeds_in", "brackets", "support",
           "verdict", "ladder_outcome", "cell_ladder"]

#: rungs apart, as a share of the cell's two goodputs' geometric mean: the map's searches find a goodput within 5%
LADDER_STEP = 0.05

#: rungs served per layout at most (a layout still bracketed by none after them: its bracket stays open)
LADDER_RUNGS = 10


def tie_ladder(c, lm, start: float | None = None, step: float | None = None, rungs: int = LADDER_RUNGS,
               progress: bool | None = None, resume: dict | None = None,
               more_seeds: Sequence[int] | None = None) -> dict:
    """Serve the tie ``c`` (a :class:`~.map_steady.SteadyCell` of region "tie", as :func:`~.map_steady.steady_cell`
    made it) on ``lm`` at a ladder of rates per worker: ``start`` (default the share of the goodputs' geometric mean
    the cell's runs were served at) times that mean, then ``step`` of it up while some seed keeps 90% at a layout's
    highest rung, down while some seed misses 90% at its lowest, until that layout's goodput is bracketed on every
    bootstrap resample of the seeds (:func:`support`'s): its highest rung missed by every seed and its lowest held
    by every seed; or until it has served ``rungs`` rungs (``step`` default :data:`LADDER_STEP`).
    ``resume``: a ladder served before for this cell (this function's result) to go on from, its rungs kept, its
    step used, this run's rungs and CPU time added. ``more_seeds`` (with ``resume``): seeds to add to its ladder,
    served first on every rung it holds (rung by rung in rate order, the layouts in turn), then on the rungs the
    ladder still needs over all its seeds. Each rung's runs are the cell's (its prompt, answers, SLOs, request
    limits, link; its seeds, then the ladder's added ones), simulated on nothing: live only.

    Returns {"step", "geomean_per_worker" (requests/s per worker), "seeds" (in the order of each rung's attainments),
    "added" (where seeds were added: [{"seeds", "rungs_before": {layout: rungs served before them}}, ...]),
    "served": {layout: [{"share", "rate_per_worker", "measured": [% per seed], "load_average" (the machine's 1-min
    load as the rung's runs ended; the highest, where seeds were added to it later)}, ...] in the order served},
    "cpu_s"}.

    Raises:
        ValueError: ``c`` not a tie that can be served (:func:`~.map_steady_checks.check_tie`); start or step not a
            finite number >= 1e-6; rungs not a whole number >= 2; ``resume`` not a ladder of this cell (its layouts,
            seeds and geometric mean) or given with ``start`` or ``step``; ``more_seeds`` without ``resume``, or not
            distinct whole numbers new to the ladder.
        TypeError: ``lm`` not a LoadedModel; ``progress`` not a bool or None."""
    from ...common.progress import progress_bar, show_progress
    from ...phases.loaded import require_loaded
    from ...serving import ModelExecutor, attainment_curve
    from .map_steady_checks import check_tie
    from .map_steady_in_run import cell_runs
    from .map_steady_place import _positive, _whole
    check_tie(c)
    mean, names = _geomean(c), [c.winner, c.rival]
    served, seeds = {n: [] for n in names}, list(c.seeds)
    if resume is not None:
        if start is not None or step is not None:
            raise ValueError("resume goes on from a ladder's own rungs and step: give no start or step with it")
        served, start, step = check_resume(c, resume)
        seeds = ladder_seeds(c, resume)
    more = check_more_seeds(seeds, more_seeds, resume)
    start = c.rate_per_worker / mean if start is None else start
    step = LADDER_STEP if step is None else step
    for name, v in (("start", start), ("step", step)):  # shares kept to 6 places: a rate of 0, or one rate again
        if _positive(name, v) < 1e-6:
            raise ValueError(f"{name} must be at least 1e-06 (the rungs' shares are kept to 6 places), got {v!r}")
    _whole("rungs", rungs, 2)
    show_progress(progress)
    require_loaded(lm, "tie_ladder's lm")
    cpu0 = time.process_time()
    spec, configs, runs = cell_runs(c)  # the cell's own runs, as map_steady.in_run simulates them
    executors = {n: ModelExecutor(lm) for n in names}
    def serve(n: str, rung: dict, seed: int):
        r = attainment_curve(spec, configs[n], executors[n], rates_per_worker=[rung["rate_per_worker"]], seed=seed,
                             **runs).iloc[0]
        rung["measured"].append(100 * float(r.attainment))
        bar.update()

    with progress_bar(None, "tie ladder live", progress, unit="run") as bar:
        added = ([] if resume is None else list(resume.get("added", []))) + (
            [dict(seeds=list(more), rungs_before={n: len(served[n]) for n in names})] if more else [])
        for share in sorted({r["share"] for v in served.values() for r in v}) if more else ():  # added seeds first
            at = [(n, r) for n in names for r in served[n] if r["share"] == share]
            for i, s in enumerate(more, start=len(seeds)):
                for n, rung in (at if i % 2 == 0 else at[::-1]):
                    serve(n, rung, s)
            for n, rung in at:
                rung["load_average"] = max(rung.get("load_average", 0.0), round(os.getloadavg()[0], 2))
        seeds += more
        # until each is bracketed, out of rungs, or (descending) out of rates above zero: its bracket open
        while now := {n: share for n in names if (share := _next(served[n], start, step, rungs)) is not None}:
            for n, share in now.items():
                served[n].append(dict(share=share, rate_per_worker=share * mean, measured=[]))
            live = list(now)
            for i, s in enumerate(seeds):
                for n in (live if i % 2 == 0 else live[::-1]):  # ABBA, as the cell's own runs
                    serve(n, served[n][-1], s)
            for n in live:  # the machine's load as each rung ended: rungs are served in rate order, so a load that
                served[n][-1]["load_average"] = round(os.getloadavg()[0], 2)  # drifts moves the later rungs
    before = 0.0 if resume is None else resume["cpu_s"]
    return dict(step=step, geomean_per_worker=mean, seeds=seeds, served=served,
                cpu_s=before + time.process_time() - cpu0, **(dict(added=added) if added else {}))


def check_more_seeds(seeds: list, more, resume) -> list:
    """``more`` (:func:`tie_ladder`'s ``more_seeds``) as a list ([] for None), once it is seeds to add to the ladder
    ``resume`` served on ``seeds`` (:func:`ladder_seeds`): ValueError unless given with ``resume`` and distinct whole
    numbers none of ``seeds`` (``benchmarks/map_live.py`` asks before it loads the model)."""
    if more is None:
        return []
    if resume is None:
        raise ValueError("more_seeds add seeds to a ladder served before: give it as resume")
    if not isinstance(seeds, list):
        raise ValueError(f"seeds must be the ladder's seeds, a list (ladder_seeds'), got {seeds!r:.100}")
    given = list(more) if hasattr(more, "__iter__") and not isinstance(more, (str, bytes, dict)) else None
    if not given or any(not whole(s) or s < 0 for s in given) or len(set(given)) != len(given):
        raise ValueError(f"more_seeds must be distinct whole numbers >= 0, at least one, got {more!r:.100}")
    given = [int(s) for s in given]
    if set(given) & set(seeds):
        raise ValueError(f"more_seeds {sorted(set(given) & set(seeds))} were served already (the ladder's seeds "
                         f"{seeds})")
    return given


def check_resume(c, ladder: dict) -> tuple:
    """(a copy of the rungs ``ladder`` served for the tie ``c``: {layout: [rung, ...]}, its start: its first rung's
    share, its step), once it is one :func:`tie_ladder` can go on from: ``c``'s (:func:`cell_ladder`), at the geometric
    mean of ``c``'s goodputs, every rung on its grid (start + k x step, at share x that mean: a rung that names no
    rate is given that one), any load average a finite number >= 0, a CPU time finite >= 0.
    ValueError naming what is wrong (``benchmarks/map_live.py`` asks before it loads the model)."""
    mean = _geomean(c)
    cell_ladder(dataclasses.replace(c, extra=dict(c.extra, ladder=ladder)))
    if not _finite(ladder.get("cpu_s")) or ladder["cpu_s"] < 0:
        raise ValueError(f"resume: the ladder's cpu_s must be a finite number >= 0, got {ladder.get('cpu_s')!r}")
    if not math.isclose(ladder["geomean_per_worker"], mean, rel_tol=1e-9):
        raise ValueError(f"resume: the ladder was served at a geometric mean of {ladder['geomean_per_worker']!r}/s "
                         f"per worker, this tie's goodputs give {mean!r}/s: a ladder of another cell")
    served = {n: [dict(r, measured=list(r["measured"])) for r in ladder["served"][n]] for n in (c.winner, c.rival)}
    start, step = served[c.winner][0]["share"], ladder["step"]
    for n, rungs in served.items():
        for r in rungs:
            k = round((r["share"] - start) / step)
            if abs(r["share"] - (start + k * step)) > 1e-6:
                raise ValueError(f"resume: {n!r}'s rung at {r['share']!r} is not on the ladder's grid ({start!r} + "
                                 f"k x {step!r}): its brackets would be uneven")
            if "rate_per_worker" in r and not (_finite(r["rate_per_worker"]) and math.isclose(
                    r["rate_per_worker"], r["share"] * mean, rel_tol=1e-6)):
                raise ValueError(f"resume: {n!r}'s rung at {r['share']!r} was served at {r['rate_per_worker']!r}/s "
                                 f"per worker, not its share of {mean!r}/s")
            r.setdefault("rate_per_worker", r["share"] * mean)  # a record kept before the rate was: its share's
            if "load_average" in r and not (_finite(r["load_average"]) and r["load_average"] >= 0):
                raise ValueError(f"resume: {n!r}'s rung at {r['share']!r} has a load_average of "
                                 f"{r['load_average']!r}, not a finite number >= 0")
    return served, start, step


def left_to_serve(c, ladder: dict, rungs: int = LADDER_RUNGS) -> list:
    """The layouts of the tie ``c`` whose goodput the ``ladder`` (checked by :func:`check_resume`) leaves to serve:
    a bracket some resample would leave open, within ``rungs`` rungs ([] : nothing left)."""
    served, start, step = check_resume(c, ladder)
    return [n for n, v in served.items() if _next(v, start, step, rungs) is not None]


def _geomean(c) -> float:
    """The geometric mean of the tie ``c``'s goodputs (requests/s per worker): the unit of a rung's share."""
    return math.sqrt(c.goodput_now[c.winner] * c.goodput_now[c.rival])


def _next(served: list, start: float, step: float, rungs: int) -> float | None:
    """The share (kept to 6 places) of a layout's next rung, ``step`` apart from ``start``: above while some seed
    holds its highest rung, below while some seed misses its lowest; None once every resample brackets its goodput
    (the highest missed and the lowest held by every seed), ``rungs`` are served or no rate above 0 is left."""
    if len(served) >= rungs:
        return None
    j = 0
    if served:  # the first rung at start
        low, high = min(served, key=lambda r: r["share"]), max(served, key=lambda r: r["share"])
        if max(high["measured"]) >= GOOD:
            j = round((high["share"] - start) / step) + 1
        elif min(low["measured"]) < GOOD:
            j = round((low["share"] - start) / step) - 1
        else:
            return None
    share = round(start + j * step, 6)
    return share if share > 0 else None

