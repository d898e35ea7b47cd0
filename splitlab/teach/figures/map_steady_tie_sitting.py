"""A tie of chapter 7's map tested in one sitting (:func:`serve_sitting`): a grid of rates fixed in advance, served
seed by seed, and the two goodputs' ratio read against the map's tie tolerance (:func:`sitting_outcome`).

The ladder of :mod:`.map_steady_tie` came first, and it taught two things. Its seeds were served in sittings hours
apart, and a later sitting found both goodputs a fifth lower: the machine's speed moved, and a ladder served rung by
rung in rate order puts that drift between its rates. And its verdict reads brackets a rung (0.05x) wide against a
tolerance of 10%: below 0.95x, two equal goodputs whose brackets land a rung apart leave extremes more than 10%
apart, so there equal goodputs are called a tie no more often than they land in one bracket.

So a sitting serves every rung of :data:`SITTING_SHARES` (of the goodputs' geometric mean) on both layouts for one
seed, then the next seed (:data:`SITTING_SEEDS`, new to the ladder), the two layouts in turn (the first alternating
from rung to rung and from seed to seed, so that at every rung each goes first on half the seeds): drift within the
sitting falls mostly between seeds, where the bootstrap of the seeds sees it, and the two layouts' runs at a rung are
back to back, so the paired ratio largely cancels what it does to both. A layout's goodput is read where its mean
attainment over the seeds first falls below 90%, linearly between that rung and the one below it (:func:`crossing`);
the verdict is the map's tie (the smaller goodput at least 90% of the larger) read on that ratio, kept where at least
:data:`~.map_steady_tie_read.CONFIDENCE` of the seeds' bootstrap resamples read the same (:func:`support`). The grid
and the rule were fixed from the ladder (a pilot) before the sitting was served; the verdict is the sitting's alone.
"""
from __future__ import annotations

import os
import time
from datetime import datetime, timezone

from .map_steady_tie_sitting_read import (_seeds, _shares, cell_sitting, check_sitting, complete, crossing, goodputs,
                                          interval, ratio, ratio_range, rung_bounds, sitting_outcome, support)

__all__ = ["SITTING_SHARES", "SITTING_SEEDS", "serve_sitting", "check_sitting", "complete", "crossing", "goodputs",
           "rung_bounds", "ratio", "ratio_range", "support", "interval", "sitting_outcome", "cell_sitting"]

#: the rungs, as shares of the tie's two goodputs' geometric mean: the ladder's two sittings, read as a sitting reads
#: them on its rungs of this grid, put both goodputs at 0.82-0.84 and 1.03-1.04 of it (its brackets on every rung:
#: 0.80-0.85 and 1.05-1.10), and a crossing needs a rung held below it and one missed above
SITTING_SHARES = (0.7, 0.8, 0.9, 1.0, 1.1, 1.2)

#: the sitting's seeds, none of them the ladder's (0-11): 6 seeds of one sitting of the ladder gave a 95% interval
#: of the ratio 2.5% wide
SITTING_SEEDS = tuple(range(12, 20))


def serve_sitting(c, lm, shares=None, seeds=None, progress: bool | None = None,
                  on_seed=None, resume: dict | None = None) -> dict:
    """Serve the tie ``c`` (a :class:`~.map_steady.SteadyCell` of region "tie") on ``lm`` (the real model, emulated)
    at every rate of ``shares`` times the geometric mean of its two goodputs (requests/s per worker), both layouts,
    seed by seed in the order of ``seeds``, each seed's rungs in rising rate, the two layouts in turn (the winner
    first where the seed's and the rung's indices add up to an even number: at every rung each layout goes first on
    every other seed). Each run is the cell's own (:func:`~.map_steady_in_run.cell_runs`: prompt, answers, SLOs, request
    limits, link). ``on_seed(sitting)`` is called after each seed with the sitting so far (a run stopped later keeps
    what it served). ``resume``: a sitting of this cell stopped before its last seed (this function's result, as
    ``on_seed`` saw it) to go on from: its shares and planned seeds, the seeds it served kept.

    Returns {"shares", "plan" (the seeds it was to serve), "seeds" (those served), "geomean_per_worker", "measured":
    {layout: [[% within both SLOs, per share], per seed]}, "load_average": [the machine's 1-min load as each seed
    ended], "started_utc", "ended_utc", "cpu_s", and where it was resumed "resumed_utc": [when, ...]}.

    Raises:
        ValueError: ``c`` not a tie that can be served (:func:`~.map_steady_checks.check_tie`); shares not at least
            two distinct rising finite numbers > 0; seeds not distinct whole numbers >= 0, at least two; ``resume``
            not a sitting of this cell (:func:`cell_sitting`), given with shares or seeds, or served to its end.
        TypeError: ``lm`` not a LoadedModel; ``progress`` not a bool or None; ``on_seed`` not callable or None."""
    from ...common.progress import progress_bar, show_progress
    from ...phases.loaded import require_loaded
    from ...serving import ModelExecutor, attainment_curve
    from .map_steady_checks import check_tie
    from .map_steady_in_run import cell_runs
    from .map_steady_tie import _geomean
    check_tie(c)
    if resume is not None:
        if shares is not None or seeds is not None:
            raise ValueError("resume goes on with a sitting's own shares and planned seeds: give no shares or seeds")
        import copy
        import dataclasses
        out = copy.deepcopy(cell_sitting(dataclasses.replace(c, extra=dict(c.extra, sitting=resume))))
        if complete(out):
            raise ValueError(f"resume: the sitting served all its {len(out['plan'])} seeds: nothing to go on with")
        out.setdefault("resumed_utc", []).append(_now())
    shares = _shares(SITTING_SHARES if shares is None else shares) if resume is None else out["shares"]
    seeds = _seeds(SITTING_SEEDS if seeds is None else seeds) if resume is None else out["plan"]
    if on_seed is not None and not callable(on_seed):
        raise TypeError(f"on_seed must be callable or None, got {type(on_seed).__name__}")
    show_progress(progress)
    require_loaded(lm, "serve_sitting's lm")
    names, mean, cpu0 = [c.winner, c.rival], _geomean(c), time.process_time()
    spec, configs, runs = cell_runs(c)
    executors = {n: ModelExecutor(lm) for n in names}
    if resume is None:
        out = dict(shares=shares, plan=seeds, seeds=[], geomean_per_worker=mean, measured={n: [] for n in names},
                   load_average=[], started_utc=_now(), ended_utc=_now(), cpu_s=0.0)
    before, done = out["cpu_s"], len(out["seeds"])
    with progress_bar((len(seeds) - done) * len(shares) * 2, "tie sitting live", progress, unit="run") as bar:
        for i, s in list(enumerate(seeds))[done:]:
            row = {n: [] for n in names}
            for j, share in enumerate(shares):
                for n in (names if (i + j) % 2 == 0 else names[::-1]):
                    r = attainment_curve(spec, configs[n], executors[n], rates_per_worker=[share * mean], seed=s,
                                         **runs).iloc[0]
                    row[n].append(100 * float(r.attainment))
                    bar.update()
            out["seeds"].append(s)
            for n in names:
                out["measured"][n].append(row[n])
            out["load_average"].append(round(os.getloadavg()[0], 2))
            out.update(ended_utc=_now(), cpu_s=before + time.process_time() - cpu0)
            if on_seed is not None:
                on_seed(out)
    return out


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
