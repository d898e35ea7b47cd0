"""A tie's ladder of rates read (:mod:`.map_steady_tie` serves it): each layout's goodput bracketed between
rungs (:func:`brackets`), the brackets against the map's tie tolerance (:func:`ladder_outcome`) and how far that
reading rests on which seeds were run (:func:`support`, a bootstrap of the seeds); :func:`cell_ladder` checks a
record's ladder against its cell."""
from __future__ import annotations

import math
import random
from typing import Sequence

from .pools_live_args import whole

__all__ = ["TOLERANCE", "CONFIDENCE", "RESAMPLES", "GOOD", "seeds_in", "brackets", "support", "verdict",
           "ladder_outcome", "ladder_seeds", "cell_ladder", "seed_sets"]

#: the map's tie tolerance (:func:`splitlab.planning.split_map.split_map`'s default, chapter 7's maps')
TOLERANCE = 0.1

#: the share of the seeds' bootstrap resamples whose brackets must agree for a verdict (else "undecided")
CONFIDENCE = 0.95

#: bootstrap resamples of the seeds (drawn with replacement, from a fixed seed: the verdict is repeatable)
RESAMPLES = 2000

GOOD = 90.0  # % within both SLOs: the goodput's attainment


def seeds_in(ladder: dict) -> int:
    """The number of seeds of ``ladder`` (each rung holds one attainment per seed), once its shape is checked:
    ValueError unless it is :func:`~.map_steady_tie.tie_ladder`'s (two layouts, each a list of rungs at distinct
    finite shares > 0 with one attainment in 0..100 per seed, as many seeds on every rung)."""
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
        ValueError: a ladder not of :func:`~.map_steady_tie.tie_ladder`'s shape (two layouts, each a list of rungs
            with a finite share > 0 and one attainment in 0..100 per seed, as many seeds on every rung); ``sample``
            empty or with an index that is not one of its seeds'."""
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
    resamples = _whole("resamples", resamples, 1)
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
    verdicts = ("matches: a tie", "does not match", "undecided")
    if said not in verdicts or not isinstance(backed, dict) or not all(_finite(backed.get(k)) for k in verdicts):
        raise ValueError(f"verdict: said must be one of {verdicts} and backed support()'s shares of each, got "
                         f"{said!r} and {backed!r:.200}")
    return said if said != "undecided" and backed[said] >= CONFIDENCE else "undecided"


def ladder_seeds(c, ladder: dict) -> list:
    """The seeds the ``ladder`` of the tie ``c`` was served on, in the order of each rung's attainments: its own
    ``"seeds"`` (the cell's, then any added, :func:`~.map_steady_tie.tie_ladder`'s ``more_seeds``), else the cell's
    (a ladder that names none). ValueError: ``ladder`` not a dict, its ``"seeds"`` not a list."""
    if not isinstance(ladder, dict):
        raise ValueError(f"a ladder must be a dict (tie_ladder's), got {type(ladder).__name__}")
    seeds = ladder.get("seeds", list(c.seeds))
    if not isinstance(seeds, list):
        raise ValueError(f"a ladder's seeds must be a list, got {seeds!r}")
    return list(seeds)


def cell_ladder(c) -> dict | None:
    """The cell ``c``'s ladder (its ``extra["ladder"]``), or None where it has none. ValueError naming the cell: a
    ladder on a cell not a tie, of other layouts than its winner and rival, on seeds (:func:`ladder_seeds`) not
    distinct whole numbers beginning with the cell's or not as many as each rung's attainments, a step or
    geometric mean not a finite number > 0; those of :func:`brackets`."""
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
    try:
        seeds = ladder_seeds(c, ladder)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    if any(not whole(s) or s < 0 for s in seeds) or len(set(seeds)) != len(seeds) \
            or seeds[:len(c.seeds)] != list(c.seeds):
        raise ValueError(f"{where}: its seeds must be distinct whole numbers >= 0, the cell's {list(c.seeds)} first, "
                         f"got {ladder['seeds']!r}")
    if set(ladder["served"]) != {c.winner, c.rival} or n != len(seeds):
        raise ValueError(f"{where} must be of a tie's two layouts ({c.winner!r}, {c.rival!r}) on its {len(seeds)} "
                         f"seeds, got {sorted(ladder['served'])} on {n} seeds")
    bad = [k for k in ("step", "geomean_per_worker") if not _finite(ladder.get(k)) or ladder[k] <= 0]
    if bad:
        raise ValueError(f"{where}: {bad} must be finite numbers > 0, got {[ladder.get(k) for k in bad]}")
    return ladder


def seed_sets(c) -> dict:
    """The tie ``c``'s ladder split by when its seeds were served: {"the cell's N": a ladder of the cell's seeds on
    the rungs served before any seed was added, "the added M": a ladder of each group of seeds added later
    (:func:`~.map_steady_tie.tie_ladder`'s ``more_seeds``) on every rung}; {} where no seed was added (or no
    ladder). Each is a ladder of :func:`brackets`' shape. ValueError: its ``"added"`` not
    [{"seeds": the ladder's seeds after the cell's, "rungs_before": {layout: a count of its rungs}}, ...]."""
    ladder = cell_ladder(c)
    added = [] if ladder is None else ladder.get("added", [])
    if not added:
        return {}
    seeds, n0 = ladder_seeds(c, ladder), len(c.seeds)
    ok = isinstance(added, list) and all(isinstance(a, dict) and isinstance(a.get("seeds"), list) and isinstance(
        a.get("rungs_before"), dict) and set(a["rungs_before"]) == set(ladder["served"]) and all(
        whole(k) and 1 <= k <= len(ladder["served"][n]) for n, k in a["rungs_before"].items()) for a in added)
    if not ok or [s for a in added for s in a["seeds"]] != seeds[n0:]:
        raise ValueError(f"the tie's ladder's 'added' must list the seeds added after the cell's {list(c.seeds)} "
                         f"(its seeds {seeds}) with the rungs each layout had before them, got {added!r:.200}")

    def part(pick: list, rungs_of) -> dict:
        return dict(ladder, seeds=[seeds[i] for i in pick], served={n: [
            dict(r, measured=[r["measured"][i] for i in pick]) for r in rungs_of(n)] for n in ladder["served"]})
    out = {f"the cell's {n0}": part(list(range(n0)), lambda n: ladder["served"][n][:added[0]["rungs_before"][n]])}
    at = n0
    for a in added:
        out[f"the added {len(a['seeds'])}"] = part(list(range(at, at + len(a["seeds"]))),
                                                     lambda n: ladder["served"][n])
        at += len(a["seeds"])
    return out
