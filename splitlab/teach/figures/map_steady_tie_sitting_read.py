"""A tie's sitting read (:mod:`.map_steady_tie_sitting` serves it): its shape checked (:func:`check_sitting`,
:func:`cell_sitting`), each layout's goodput where its mean attainment first falls below 90% (:func:`crossing`,
:func:`goodputs`), their ratio (:func:`ratio`, :func:`ratio_range` where a goodput lies off the grid) against the
map's tie tolerance, how far that rests on which seeds were served (:func:`support`, :func:`interval`: a bootstrap
of the seeds) and the verdict (:func:`sitting_outcome`)."""
from __future__ import annotations

import math
import numbers
import random
from datetime import datetime

from .map_steady_tie_read import GOOD, RESAMPLES, TOLERANCE, _finite, _tolerance, verdict

__all__ = ["check_sitting", "complete", "crossing", "goodputs", "rung_bounds", "ratio", "ratio_range", "support",
           "interval", "sitting_outcome", "cell_sitting"]

_READINGS = ("matches: a tie", "does not match", "undecided")


def _shares(shares) -> list:
    got = list(shares) if hasattr(shares, "__iter__") and not isinstance(shares, (str, bytes, dict)) else None
    got = None if got is None else [float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else v
                                    for v in got]  # numpy's floats and ints too
    if not got or len(got) < 2 or not all(_finite(v) and v > 0 for v in got) or any(
            b <= a for a, b in zip(got, got[1:])):
        raise ValueError(f"shares must be at least two rising finite numbers > 0, got {shares!r:.100}")
    return [float(v) for v in got]


def _seeds(seeds, least: int = 2, what: str = "seeds") -> list:
    from .pools_live_args import whole
    got = list(seeds) if hasattr(seeds, "__iter__") and not isinstance(seeds, (str, bytes, dict)) else None
    if got is None or len(got) < least or any(not whole(s) or s < 0 for s in got) or len(set(got)) != len(got):
        raise ValueError(f"{what} must be at least {'two' if least == 2 else least} distinct whole numbers >= 0, got "
                         f"{seeds!r:.100}")
    return [int(s) for s in got]


_WHEN = "%Y-%m-%d %H:%M UTC"


def _is_when(t) -> bool:
    try:
        datetime.strptime(t, _WHEN)
    except (TypeError, ValueError):
        return False
    return True


def complete(sitting: dict) -> bool:
    """Whether ``sitting`` (checked: :func:`check_sitting`) served every seed it planned: one stopped earlier gives
    no verdict (:func:`sitting_outcome`), and :func:`serve_sitting` can go on from it (``resume``)."""
    return len(sitting["seeds"]) == len(sitting["plan"])


def check_sitting(sitting) -> int:
    """The number of seeds ``sitting`` (:func:`serve_sitting`'s result) holds, once its shape is checked: ValueError
    naming what is wrong unless it has rising shares, two layouts, each an attainment (%, 0..100) per share per
    seed, as many seeds as its ``seeds`` (distinct whole numbers, at least one: the first of its ``plan``, the seeds it
    was to serve), a geometric mean finite > 0, a load average per seed (finite >= 0), its start and end
    ("YYYY-MM-DD HH:MM UTC", the end not before the start), where it was resumed a list of such times between them
    (``resumed_utc``), and its CPU time (finite >= 0)."""
    if not isinstance(sitting, dict):
        raise ValueError(f"a sitting must be a dict (serve_sitting's), got {type(sitting).__name__}")
    shares, measured = _shares(sitting.get("shares")), sitting.get("measured")
    if not isinstance(measured, dict) or len(measured) != 2:
        raise ValueError("a sitting must hold 'measured': {layout: attainments} of two layouts")
    plan = _seeds(sitting.get("plan"), what="a sitting's plan")
    seeds = _seeds(sitting.get("seeds"), 1, "a sitting's seeds")
    if seeds != plan[:len(seeds)]:
        raise ValueError(f"a sitting's seeds must be the first of its plan {plan}, got {seeds}")
    for n, rows in measured.items():
        ok = isinstance(rows, list) and len(rows) == len(seeds) and all(
            isinstance(r, list) and len(r) == len(shares) and all(_finite(a) and 0 <= a <= 100 for a in r)
            for r in rows)
        if not ok:
            raise ValueError(f"a sitting's {n!r} must hold an attainment in 0..100 (%) per share ({len(shares)}) per "
                             f"seed ({len(seeds)}), got {rows!r:.200}")
    if not _finite(sitting.get("geomean_per_worker")) or sitting["geomean_per_worker"] <= 0:
        raise ValueError(f"a sitting's geomean_per_worker must be finite > 0, got "
                         f"{sitting.get('geomean_per_worker')!r}")
    load = sitting.get("load_average")
    if not isinstance(load, list) or len(load) != len(seeds) or not all(_finite(x) and x >= 0 for x in load):
        raise ValueError(f"a sitting's load_average must be a finite number >= 0 per seed, got {load!r:.100}")
    try:
        start, end = (datetime.strptime(sitting.get(k), _WHEN) for k in ("started_utc", "ended_utc"))
    except (TypeError, ValueError):
        raise ValueError(f"a sitting must say when it started and ended (started_utc, ended_utc: \"YYYY-MM-DD HH:MM "
                         f"UTC\"), got {sitting.get('started_utc')!r} and {sitting.get('ended_utc')!r}") from None
    if end < start:
        raise ValueError(f"a sitting cannot end ({sitting['ended_utc']}) before it started ({sitting['started_utc']})")
    resumed = sitting.get("resumed_utc", [])
    if not isinstance(resumed, list) or not all(_is_when(t) and start <= datetime.strptime(t, _WHEN) <= end
                                                for t in resumed):
        raise ValueError(f"a sitting's resumed_utc must be a list of times (\"YYYY-MM-DD HH:MM UTC\") between its "
                         f"start and end, got {resumed!r:.100}")
    if not _finite(sitting.get("cpu_s")) or sitting["cpu_s"] < 0:
        raise ValueError(f"a sitting's cpu_s must be finite >= 0, got {sitting.get('cpu_s')!r}")
    return len(seeds)


def crossing(shares, attainments) -> float:
    """The share where ``attainments`` (% within both SLOs, one per share of the rising ``shares``) first fall below
    90%, linear between that rung and the one below it: 0.0 where the lowest rung already misses (the goodput lies
    below the grid), inf where no rung misses (above it). A goodput is the highest rate up to which 90% hold, so a
    rung held again above the first missed one does not count. ValueError: lengths that differ, or no rung."""
    shares, attainments = list(shares), list(attainments)
    if not shares or len(shares) != len(attainments):
        raise ValueError(f"crossing needs one attainment per share, got {len(attainments)} for {len(shares)}")
    for i, (share, a) in enumerate(zip(shares, attainments)):
        if a < GOOD:
            if i == 0:
                return 0.0
            s0, a0 = shares[i - 1], attainments[i - 1]
            return s0 + (a0 - GOOD) / (a0 - a) * (share - s0)
    return math.inf


def goodputs(sitting, sample=None) -> dict:
    """{layout: its goodput as a share of the geometric mean} (:func:`crossing` of its mean attainment over the
    seeds; ``sample``: over these seeds, by index, repeats allowed). ValueError: those of :func:`check_sitting`, a
    sample that is not indices of its seeds."""
    n = check_sitting(sitting)
    pick = list(range(n)) if sample is None else list(sample)
    if not pick or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n for i in pick):
        raise ValueError(f"sample must be indices of the sitting's {n} seeds, got {sample!r:.100}")
    return _goodputs(sitting, pick)


def _goodputs(sitting, pick: list) -> dict:
    return {name: crossing(sitting["shares"], [sum(rows[i][j] for i in pick) / len(pick)
                                               for j in range(len(sitting["shares"]))])
            for name, rows in sitting["measured"].items()}


def rung_bounds(sitting) -> dict:
    """{layout: (lo, hi)}: the rungs (shares) its goodput lies between on the mean over the seeds, read on the rungs
    alone (no line between them): the rung below the first one missed (0.0: the lowest missed) and that one (inf:
    none missed). ValueError: those of :func:`check_sitting`."""
    n, shares, out = check_sitting(sitting), sitting["shares"], {}
    for name, rows in sitting["measured"].items():
        mean = [sum(r[j] for r in rows) / n for j in range(len(shares))]
        miss = next((j for j, a in enumerate(mean) if a < GOOD), None)
        out[name] = ((0.0, shares[0]) if miss == 0 else (shares[-1], math.inf) if miss is None else
                     (shares[miss - 1], shares[miss]))
    return out


def ratio(g: dict) -> float:
    """The second layout's goodput over the first's (the map's runner-up over its winner) of ``g``
    (:func:`goodputs`'): nan where either lies off the grid (0.0 or inf: only a bound, :func:`ratio_range`)."""
    a, b = g.values()
    return b / a if 0 < a < math.inf and 0 < b < math.inf else math.nan


def ratio_range(g: dict, shares) -> tuple:
    """(lowest, highest) the ratio (:func:`ratio`) of ``g`` can be: itself twice where both goodputs lie on the grid
    ``shares``; where one lies off it, below its lowest rung (0.0) or above its highest (inf), whatever that allows
    (a goodput in (0, lowest] or [highest, inf))."""
    lo_s, hi_s = min(shares), max(shares)
    bounds = [(v, v) if 0 < v < math.inf else (0.0, lo_s) if v == 0 else (hi_s, math.inf) for v in g.values()]
    (a_lo, a_hi), (b_lo, b_hi) = bounds
    return (b_lo / a_hi if a_hi < math.inf else 0.0), (b_hi / a_lo if a_lo > 0 else math.inf)


def _read(r: tuple, tolerance: float) -> str:
    """A ratio's range ``r`` against the tie's band [1 - tolerance, 1 / (1 - tolerance)]: within it, a tie; clear of
    it, no tie; across its edge (a goodput off the grid), undecided."""
    band = (1 - tolerance, 1 / (1 - tolerance))
    if band[0] <= r[0] and r[1] <= band[1]:
        return "matches: a tie"
    return "does not match" if r[1] < band[0] or r[0] > band[1] else "undecided"


def _resampled(sitting, resamples: int) -> list:
    """The goodputs (:func:`_goodputs`) of ``resamples`` bootstrap resamples of the sitting's seeds."""
    n, rng = check_sitting(sitting), random.Random(0)
    return [_goodputs(sitting, [rng.randrange(n) for _ in range(n)]) for _ in range(resamples)]


def support(sitting, tolerance: float = TOLERANCE, resamples: int = RESAMPLES) -> dict:
    """{reading: share of resamples}: the ratio's range (:func:`ratio_range`) read against ``tolerance`` on
    ``resamples`` bootstrap resamples of the seeds (with replacement, from a fixed random seed: repeatable):
    "matches: a tie" where the runner-up's goodput lies within 1 - tolerance .. 1 / (1 - tolerance) of the winner's,
    "does not match" where it lies clear of that, "undecided" where a goodput off the grid leaves it across an edge.
    ValueError: tolerance not in [0, 1), resamples not a whole number >= 1; those of :func:`check_sitting`."""
    from .map_steady_place import _whole
    tolerance, resamples = _tolerance(tolerance), _whole("resamples", resamples, 1)
    said = [_read(ratio_range(g, sitting["shares"]), tolerance) for g in _resampled(sitting, resamples)]
    return {k: said.count(k) / resamples for k in _READINGS}


def interval(sitting, resamples: int = RESAMPLES) -> dict:
    """{"lo", "hi": the 2.5th and 97.5th percentiles of the ratio (:func:`ratio`) over the ``resamples`` bootstrap
    resamples of the seeds with both goodputs on the grid (nan where none), "off_grid": the share of resamples left
    out}. ValueError: those of :func:`support`."""
    from .map_steady_place import _whole
    resamples = _whole("resamples", resamples, 1)
    every = [ratio(g) for g in _resampled(sitting, resamples)]
    got = sorted(r for r in every if not math.isnan(r))
    lo, hi = (got[int(0.025 * (len(got) - 1))], got[math.ceil(0.975 * (len(got) - 1))]) if got else (math.nan,) * 2
    return dict(lo=lo, hi=hi, off_grid=1 - len(got) / resamples)


def sitting_outcome(sitting, tolerance: float = TOLERANCE) -> str:
    """The ratio of the goodputs on all seeds read against ``tolerance`` (:func:`support`'s readings), kept where at
    least :data:`~.map_steady_tie_read.CONFIDENCE` of the resamples read the same (the ladder's rule,
    :func:`~.map_steady_tie_read.verdict`) and the sitting served every seed it planned (:func:`complete`), else
    "undecided". ValueError: those of :func:`support`."""
    said = _read(ratio_range(goodputs(sitting), sitting["shares"]), _tolerance(tolerance))
    return verdict(said, support(sitting, tolerance)) if complete(sitting) else "undecided"


def cell_sitting(c) -> dict | None:
    """The tie ``c``'s sitting (its ``extra["sitting"]``), or None where it has none. ValueError naming the cell: a
    sitting on a cell not a tie, of other layouts than its winner and rival (in that order), not of
    :func:`check_sitting`'s shape, or at another geometric mean than its goodputs'."""
    sitting = c.extra.get("sitting") if isinstance(getattr(c, "extra", None), dict) else None
    if sitting is None:
        return None
    where = f"the {getattr(c, 'region', c)!r} cell's extra['sitting']"
    try:
        check_sitting(sitting)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    if c.region != "tie" or list(sitting["measured"]) != [c.winner, c.rival]:
        raise ValueError(f"{where} must be a tie's, of its winner and rival ({c.winner!r}, {c.rival!r}) in that "
                         f"order, got a {c.region!r} cell and {list(sitting['measured'])}")
    from .map_steady_place import _positive
    from .map_steady_tie import _geomean
    for n in (c.winner, c.rival):
        _positive(f"{where}: the cell's goodput_now[{n!r}]", c.goodput_now.get(n) if isinstance(
            c.goodput_now, dict) else None)
    if not math.isclose(sitting["geomean_per_worker"], _geomean(c), rel_tol=1e-9):
        raise ValueError(f"{where} was served at a geometric mean of {sitting['geomean_per_worker']!r}/s per worker, "
                         f"the cell's goodputs give {_geomean(c)!r}/s: a sitting of another cell")
    return sitting
