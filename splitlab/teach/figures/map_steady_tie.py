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
import random
import time
from typing import Sequence

__all__ = ["LADDER_STEP", "LADDER_RUNGS", "TOLERANCE", "CONFIDENCE", "RESAMPLES", "tie_ladder", "check_resume",
           "left_to_serve", "seeds_in", "brackets", "support", "verdict", "ladder_outcome", "cell_ladder"]

#: rungs apart, as a share of the cell's two goodputs' geometric mean: the map's searches find a goodput within 5%
LADDER_STEP = 0.05

#: rungs served per layout at most (a layout still bracketed by none after them: its bracket stays open)
LADDER_RUNGS = 10

#: the map's tie tolerance (:func:`splitlab.planning.split_map.split_map`'s default, chapter 7's maps')
TOLERANCE = 0.1

#: the share of the seeds' bootstrap resamples whose brackets must agree for a verdict (else "undecided")
CONFIDENCE = 0.95

#: bootstrap resamples of the seeds (drawn with replacement, from a fixed seed: the verdict is repeatable)
RESAMPLES = 2000

GOOD = 90.0  # % within both SLOs: the goodput's attainment


def tie_ladder(c, lm, start: float | None = None, step: float | None = None, rungs: int = LADDER_RUNGS,
               progress: bool | None = None, resume: dict | None = None) -> dict:
    """Serve the tie ``c`` (a :class:`~.map_steady.SteadyCell` of region "tie", as :func:`~.map_steady.steady_cell`
    made it) on ``lm`` at a ladder of rates per worker: ``start`` (default the share of the goodputs' geometric mean
    the cell's runs were served at) times that mean, then ``step`` of it up while some seed keeps 90% at a layout's
    highest rung, down while some seed misses 90% at its lowest, until that layout's goodput is bracketed on every
    bootstrap resample of the seeds (:func:`support`'s): its highest rung missed by every seed and its lowest held
    by every seed; or until it has served ``rungs`` rungs (``step`` default :data:`LADDER_STEP`).
    ``resume``: a ladder served before for this cell (this function's result) to go on from, its rungs kept, its
    step used, this run's rungs and CPU time added. Each rung's runs are the cell's (its prompt, answers, SLOs,
    seeds, request limits, link), simulated on nothing: live only.

    Returns {"step", "geomean_per_worker" (requests/s per worker), "served": {layout: [{"share", "rate_per_worker",
    "measured": [% per seed], "load_average" (the machine's, 1 min, as the rung ended)}, ...] in the order served},
    "cpu_s"}.

    Raises:
        ValueError: ``c`` not a tie that can be served (:func:`~.map_steady_checks.check_tie`); start or step not a
            finite number >= 1e-6; rungs not a whole number >= 2; ``resume`` not a ladder of this cell (its layouts,
            seeds and geometric mean) or given with ``start`` or ``step``.
        TypeError: ``lm`` not a LoadedModel; ``progress`` not a bool or None."""
    from ...common.progress import progress_bar, show_progress
    from ...phases.loaded import require_loaded
    from ...serving import ModelExecutor, attainment_curve
    from .map_steady_checks import check_tie
    from .map_steady_in_run import cell_runs
    from .map_steady_place import _positive, _whole
    check_tie(c)
    mean, names = _geomean(c), [c.winner, c.rival]
    served = {n: [] for n in names}
    if resume is not None:
        if start is not None or step is not None:
            raise ValueError("resume goes on from a ladder's own rungs and step: give no start or step with it")
        served, start, step = check_resume(c, resume)
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
    with progress_bar(None, "tie ladder live", progress, unit="run") as bar:
        # until each is bracketed, out of rungs, or (descending) out of rates above zero: its bracket open
        while now := {n: share for n in names if (share := _next(served[n], start, step, rungs)) is not None}:
            for n, share in now.items():
                served[n].append(dict(share=share, rate_per_worker=share * mean, measured=[]))
            live = list(now)
            for i, s in enumerate(c.seeds):
                for n in (live if i % 2 == 0 else live[::-1]):  # ABBA, as the cell's own runs
                    rung = served[n][-1]
                    r = attainment_curve(spec, configs[n], executors[n], rates_per_worker=[rung["rate_per_worker"]],
                                         seed=s, **runs).iloc[0]
                    rung["measured"].append(100 * float(r.attainment))
                    bar.update()
            for n in live:  # the machine's load as each rung ended: rungs are served in rate order, so a load that
                served[n][-1]["load_average"] = round(os.getloadavg()[0], 2)  # drifts moves the later rungs
    before = 0.0 if resume is None else resume["cpu_s"]
    return dict(step=step, geomean_per_worker=mean, served=served, cpu_s=before + time.process_time() - cpu0)


def check_resume(c, ladder: dict) -> tuple:
    """(a copy of the rungs ``ladder`` served for the tie ``c``: {layout: [rung, ...]}, its start: its first rung's
    share, its step), once it is one :func:`tie_ladder` can go on from: ``c``'s (:func:`cell_ladder`), at the geometric
    mean of ``c``'s goodputs, every rung on its grid (start + k x step, at share x that mean), a CPU time finite >= 0.
    ValueError naming what is wrong (``benchmarks/map_live.py`` asks before it loads the model)."""
    mean = _geomean(c)
    cell_ladder(dataclasses.replace(c, extra=dict(c.extra, ladder=ladder)))
    if not _finite(ladder.get("cpu_s")) or ladder["cpu_s"] < 0:
        raise ValueError(f"resume: the ladder's cpu_s must be a finite number >= 0, got {ladder.get('cpu_s')!r}")
    if not math.isclose(ladder["geomean_per_worker"], mean, rel_tol=1e-9):
        raise ValueError(f"resume: the ladder was served at a geometric mean of {ladder['geomean_per_worker']!r}/s "
                         f"per worker, this tie's goodputs give {mean!r}/s: a ladder of another cell")
    served = {n: [dict(r) for r in ladder["served"][n]] for n in (c.winner, c.rival)}
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


def seeds_in(ladder: dict) -> int:
    """The number of seeds of ``ladder`` (each rung holds one attainment per seed), once its shape is checked:
    ValueError unless it is :func:`tie_ladder`'s (two layouts, each a list of rungs at distinct finite shares > 0
    with one attainment in 0..100 per seed, as many seeds on every rung)."""
    served = ladder.get("served") if isinstance(ladder, dict) else None
    if not isinstance(served, dict) or len(served) != 2:
        raise ValueError("a ladder must hold 'served': {layout: rungs} of two layouts (tie_ladder's)")
    seeds = set()
    for n, rungs in served.items():
        if not isinstance(rungs, list) or not rungs:
            raise ValueError(f"the ladder served no rung of {n!r}")
        for r in rungs:
            ok = isinstance(r, dict) and _finite(r.get("share")) and r["share"] > 0 and isinstance(
                r.get("measured"), list) and r["measured"] and all(_finite(a) and 0 <= a <= 100 for a in r["measured"])
            if not ok:
                raise ValueError(f"a rung of {n!r} must hold a share > 0 and an attainment (%) per seed, got {r!r}")
            seeds.add(len(r["measured"]))
        if len({r["share"] for r in rungs}) != len(rungs):
            raise ValueError(f"the ladder served {n!r} twice at one share: {sorted(r['share'] for r in rungs)}")
    if len(seeds) != 1:
        raise ValueError(f"the ladder's rungs hold attainments of different numbers of seeds: {sorted(seeds)}")
    return seeds.pop()


def brackets(ladder: dict, sample: Sequence[int] | None = None) -> dict:
    """{layout: (lo, hi)}: the shares (of the geometric mean) a layout's goodput lies between, on its mean
    attainment over the seeds (``sample``: over these seeds, by index, repeats allowed: a bootstrap resample): lo the
    highest rung held (a mean of 90% or more) with every rung below it held too (0.0: none held), hi the lowest rung
    above lo not held (inf: none).

    Raises:
        ValueError: a ladder not of :func:`tie_ladder`'s shape (two layouts, each a list of rungs with a finite share
            > 0 and one attainment in 0..100 per seed, as many seeds on every rung); ``sample`` empty or with an
            index that is not one of its seeds'."""
    n_seeds, served = seeds_in(ladder), ladder["served"]
    pick = list(range(n_seeds)) if sample is None else list(sample) if hasattr(sample, "__iter__") else [sample]
    if not pick or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n_seeds for i in pick):
        raise ValueError(f"sample must be indices of the ladder's {n_seeds} seeds, got {sample!r}")
    return _brackets(served, pick)


def _brackets(served: dict, pick: list) -> dict:
    """:func:`brackets` of a checked ladder's ``served`` on the seeds ``pick`` (indices)."""
    out = {}
    for n, rungs in served.items():
        att = sorted((r["share"], sum(r["measured"][i] for i in pick) / len(pick)) for r in rungs)
        lo, hi = 0.0, math.inf
        for share, a in att:
            if a >= GOOD and hi == math.inf:
                lo = share
            elif a < GOOD:
                hi = min(hi, share)
        out[n] = (lo, hi)
    return out


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _read(b: dict, tolerance: float) -> str:
    """The brackets ``b`` against ``tolerance``: "matches: a tie" where each layout's lowest possible goodput is at
    least 1 - tolerance of the other's highest, "does not match" where one's highest is below 1 - tolerance of the
    other's lowest, else "undecided"."""
    (lo_a, hi_a), (lo_b, hi_b) = b.values()
    if lo_a >= (1 - tolerance) * hi_b and lo_b >= (1 - tolerance) * hi_a:
        return "matches: a tie"
    if hi_a < (1 - tolerance) * lo_b or hi_b < (1 - tolerance) * lo_a:
        return "does not match"
    return "undecided"


def _tolerance(tolerance) -> float:
    if not _finite(tolerance) or not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance!r}")
    return float(tolerance)


def support(ladder: dict, tolerance: float = TOLERANCE, resamples: int = RESAMPLES) -> dict:
    """{verdict: share of resamples}: the brackets (:func:`brackets`) read against ``tolerance`` on ``resamples``
    bootstrap resamples of the seeds (drawn with replacement from a fixed random seed, so repeatable): how far the
    verdict rests on which seeds were run. ValueError: tolerance not in [0, 1), resamples not a whole number >= 1;
    those of :func:`brackets`."""
    tolerance = _tolerance(tolerance)
    from .map_steady_place import _whole
    _whole("resamples", resamples, 1)
    n = seeds_in(ladder)
    rng = random.Random(0)
    said = [_read(_brackets(ladder["served"], [rng.randrange(n) for _ in range(n)]), tolerance)
            for _ in range(resamples)]  # the ladder checked once (seeds_in), not on every resample
    return {k: said.count(k) / resamples for k in ("matches: a tie", "does not match", "undecided")}


def ladder_outcome(ladder: dict, tolerance: float = TOLERANCE) -> str:
    """"matches: a tie" when even the brackets' extremes (:func:`brackets`, on the mean over the seeds) lie within
    ``tolerance`` of each other (each layout's lowest possible goodput at least 1 - tolerance of the other's highest:
    the map's tie, whichever the goodputs are within their brackets), "does not match" when even their nearest ends
    lie beyond it (one layout's highest below 1 - tolerance of the other's lowest); either only where at least
    :data:`CONFIDENCE` of the seeds' bootstrap resamples read the same (:func:`support`); else "undecided".
    ValueError: tolerance not in [0, 1); those of :func:`brackets`."""
    said = _read(brackets(ladder), _tolerance(tolerance))
    return said if said == "undecided" else verdict(said, support(ladder, tolerance))


def verdict(said: str, backed: dict) -> str:
    """The brackets' reading on the means (``said``, :func:`_read`'s) kept where at least :data:`CONFIDENCE` of the
    resamples (``backed``, :func:`support`'s) read the same, else "undecided"."""
    return said if said != "undecided" and backed[said] >= CONFIDENCE else "undecided"


def cell_ladder(c) -> dict | None:
    """The cell ``c``'s ladder (its ``extra["ladder"]``), or None where it has none. ValueError naming the cell: a
    ladder on a cell not a tie, of other layouts than its winner and rival, of another number of seeds than its
    own, a step or geometric mean not a finite number > 0; those of :func:`brackets`."""
    ladder = c.extra.get("ladder") if isinstance(getattr(c, "extra", None), dict) else None
    if ladder is None:
        return None
    where = f"the {getattr(c, 'region', c)!r} cell's extra['ladder']"
    try:
        n = seeds_in(ladder)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    if c.region != "tie":
        raise ValueError(f"{where}: only a tie is served on a ladder of rates, this is a {c.region!r} cell")
    if set(ladder["served"]) != {c.winner, c.rival} or n != len(c.seeds):
        raise ValueError(f"{where} must be of a tie's two layouts ({c.winner!r}, {c.rival!r}) on its {len(c.seeds)} "
                         f"seeds, got {sorted(ladder['served'])} on {n} seeds")
    bad = [k for k in ("step", "geomean_per_worker") if not _finite(ladder.get(k)) or ladder[k] <= 0]
    if bad:
        raise ValueError(f"{where}: {bad} must be finite numbers > 0, got {[ladder.get(k) for k in bad]}")
    return ladder
