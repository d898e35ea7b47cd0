"""A tie served in one sitting (:mod:`.map_steady_tie_sitting`) as chapter 7 prints it: a table of its rungs
(:func:`sitting_table`), its reading in sentences (:func:`sitting_words`), what the ladder before it taught
(:func:`pilot_words`) and its goodputs against the simulated ones (:func:`sitting_goodput_words`)."""
from __future__ import annotations

import math

import pandas as pd

from .map_steady_place import search_defaults
from .map_steady_tie_read import CONFIDENCE, RESAMPLES, TOLERANCE, brackets, cell_ladder, seed_sets
from .map_steady_tie_sitting_read import (cell_sitting, complete, crossing, goodputs, interval, ratio, ratio_range,
                                          rung_bounds, sitting_outcome, support)
from .pools_live import short_name as _short

__all__ = ["sitting_table", "sitting_words", "reading_words", "pilot_words", "sitting_goodput_words", "sitting_label",
           "narrow"]

#: how close to the verdict's bar (:data:`~.map_steady_tie_read.CONFIDENCE`) a share of resamples reads "narrowly"
NARROW = 0.025


def _sitting_of(c) -> dict:
    sitting = cell_sitting(c)
    if sitting is None:
        raise ValueError("the cell has no sitting (its extra['sitting']: serve_sitting's)")
    return sitting


def sitting_table(c) -> pd.DataFrame:
    """The rungs of the tie ``c``'s sitting: one row per rate (a multiple of the goodputs' geometric mean, named in
    the index, per worker), per layout its mean attainment over the seeds and their range (%), and a last row, each
    layout's goodput (the same multiple) read off the means (:func:`~.map_steady_tie_sitting.crossing`). Narrow
    enough for a 412 px phone.
    ValueError: a cell without a sitting; those of :func:`~.map_steady_tie_sitting.cell_sitting`."""
    sitting = _sitting_of(c)
    g, rows = goodputs(sitting), {}
    for name, per_seed in sitting["measured"].items():
        for j, share in enumerate(sitting["shares"]):
            m = [row[j] for row in per_seed]
            rows.setdefault(f"{share:g}x", {})[_short(name)] = f"{sum(m) / len(m):.0f}% ({min(m):.0f}-{max(m):.0f})"
        rows.setdefault("goodput", {})[_short(name)] = _share(g[name], sitting["shares"], 2)
    out = pd.DataFrame.from_dict(rows, orient="index")
    return out.rename_axis(f"x {sitting['geomean_per_worker']:.3g} req/s/worker")


def _share(x: float, shares, places: int = 3) -> str:
    return (f"below {min(shares):g}x" if x == 0 else f"above {max(shares):g}x" if x == math.inf else
            f"{x:.{places}f}x")


def _pct(x: float) -> str:
    """A share of resamples in percent, never rounded across the verdict's bar nor to 0% or 100% when it is not."""
    text = f"{x:.0%}"
    if (x < CONFIDENCE <= round(x, 2)) or (0 < x and text == "0%") or (x < 1 and text == "100%"):
        text = f"{x:.1%}" if f"{x:.1%}" not in ("0.0%", "100.0%") else ("<0.1%" if x < 0.5 else ">99.9%")
    return text


def narrow(sitting: dict) -> bool:
    """Whether the sitting's verdict (:func:`~.map_steady_tie_sitting_read.sitting_outcome`) is kept by fewer than
    :data:`~.map_steady_tie_read.CONFIDENCE` + :data:`NARROW` of its resamples (False where it is undecided).
    ValueError: those of :func:`~.map_steady_tie_sitting_read.support`."""
    return _narrow(sitting_outcome(sitting), support(sitting))


def _narrow(said: str, backed: dict) -> bool:
    """:func:`narrow` on a verdict ``said`` and its resamples' readings ``backed`` computed already."""
    return said != "undecided" and backed[said] < CONFIDENCE + NARROW


def sitting_label(c) -> str:
    """The tie ``c``'s verdict as a table's cell says it: its sitting's, ", narrowly" where :func:`narrow`, and
    " (sitting)". ValueError: a cell without a sitting; those of :func:`~.map_steady_tie_sitting.cell_sitting`."""
    sitting = _sitting_of(c)
    return sitting_outcome(sitting) + (", narrowly" if narrow(sitting) else "") + " (sitting)"


def _when(sitting: dict) -> str:
    start, end = sitting["started_utc"], sitting["ended_utc"]
    return f"{start} to {end[11:] if end[:10] == start[:10] else end}"


def sitting_words(c) -> str:
    """The tie ``c``'s sitting in sentences: when and how it was served, each layout's goodput read off the means,
    their ratio (its range where a goodput lies off the grid) against the map's tolerance with its 95% bootstrap
    interval, the resamples' support and the verdict (:func:`~.map_steady_tie_sitting.sitting_outcome`).
    ValueError: a cell without a sitting; those of :func:`~.map_steady_tie_sitting.cell_sitting`."""
    sitting = _sitting_of(c)
    g, shares, n = goodputs(sitting), sitting["shares"], len(sitting["seeds"])
    load, ladder = sitting["load_average"], cell_ladder(c)  # "geometric mean": of the goodputs simulated at the pilot's
    new = "" if ladder is None or set(sitting["seeds"]) & set(ladder.get("seeds", c.seeds)) else " new to the ladder"
    text = (f"So the tie was served again in one sitting ({_when(sitting)}, {2 * n * len(shares)} runs, "
            f"{sitting['cpu_s'] / 60:.0f} min of CPU, a load average of {min(load):g} to {max(load):g} as its seeds "
            f"ended): on {n} seeds{new}, at {', '.join(f'{x:g}x' for x in shares)} (rates and goodputs here are "
            f"multiples of {sitting['geomean_per_worker']:.3g} requests/s per worker, the geometric mean of the two "
            f"goodputs simulated at the pilot's speed) for one seed, both layouts in turn, then the next seed (the "
            f"sitting's table), so that a machine's drift falls mostly between seeds, where the resamples see it: "
            f"within a seed the rungs rise in rate, but both layouts' runs at a rung are back to back, so a slowdown "
            f"common to both largely cancels in their ratio"
            + ("" if complete(sitting) else f"; it stopped after {n} of the {len(sitting['plan'])} seeds it "
               f"planned, so it gives no verdict") +
            ". Read where the mean over the seeds first falls below 90%, linearly between rungs, the goodputs are "
            + " and ".join(f"{_short(k)}'s {_share(v, shares)}" for k, v in g.items()))
    r, said = ratio(g), sitting_outcome(sitting)
    backed, i = support(sitting), interval(sitting)
    winner, rival = (_short(k) for k in g)
    band = f"the map's tie of {1 - TOLERANCE:.1%} to {1 / (1 - TOLERANCE):.1%}"
    if math.isnan(r):
        lo, hi = ratio_range(g, shares)
        text += (f": off the grid a goodput is only a bound, so {rival}'s lies between {lo:.0%} and "
                 + ("any multiple" if hi == math.inf else f"{hi:.0%}") + f" of {winner}'s, against {band}.")
    else:
        inside = 1 - TOLERANCE <= r <= 1 / (1 - TOLERANCE)
        text += (f": {rival}'s at {r:.1%} of {winner}'s (the map's nominal leader), "
                 f"{'inside' if inside else 'outside'} {band} (95% bootstrap interval {i['lo']:.1%} to {i['hi']:.1%}"
                 + (f", leaving out the {_pct(i['off_grid'])} of resamples with a goodput off the grid"
                    if i["off_grid"] else "") + ").")
    text += (f" Of {RESAMPLES:,} bootstrap resamples of the seeds, {_pct(backed['matches: a tie'])} read a tie and "
             f"{_pct(backed['does not match'])} no tie"
             + (f" ({_pct(backed['undecided'])} leave it open)" if backed["undecided"] else "") + ", so ")
    near = (f", narrowly: {_pct(backed[said])} of the resamples against the {CONFIDENCE:.0%} it asks"
            if _narrow(said, backed) else "")
    return text + {"matches: a tie": f"by the rule fixed before it was served the sitting shows the tie the map "
                                     f"draws{near}.{_nominal(backed[said], n)}",
                   "does not match": f"by the rule fixed before it was served the sitting parts the two where the "
                                     f"map has a tie{near}.{_nominal(backed[said], n)}",
                   "undecided": f"the sitting is undecided (a verdict needs {CONFIDENCE:.0%} of the resamples"
                                f"{' and every planned seed' if not complete(sitting) else ''})."}[said]


def _nominal(share: float, seeds: int) -> str:
    """What a share of resamples and a percentile bootstrap of few seeds can claim: the share's own Monte Carlo error
    (95%, normal approximation, over :data:`~.map_steady_tie_read.RESAMPLES`) and that with few seeds the interval
    tends to be too narrow, so its 95% is nominal."""
    mc = 1.96 * math.sqrt(share * (1 - share) / RESAMPLES)
    return (f" Both numbers are looser than they look: {_pct(share)} of {RESAMPLES:,} resamples is itself known to "
            f"about ±{100 * mc:.1f} points, and a percentile bootstrap of {seeds} seeds tends to draw its interval "
            f"too narrow, so its 95% is nominal.") if mc > 0 else ""


def reading_words(c) -> str:
    """How far the sitting's verdict rests on reading a goodput by a straight line between rungs (their spacing is
    the tolerance's own size): the ratio the rungs alone allow (:func:`~.map_steady_tie_sitting_read.rung_bounds`),
    and, where the tie has a ladder of finer rungs, how far reading only its rungs on the sitting's grid moves its
    ratio against reading every rung (per seed set), beside how far the sitting's interval lies inside the band;
    "" where a goodput lies off the grid. ValueError: a cell without a sitting; those of
    :func:`~.map_steady_tie_sitting.cell_sitting`."""
    sitting = _sitting_of(c)
    if math.isnan(ratio(goodputs(sitting))):
        return ""
    (lw, hw), (lr, hr) = rung_bounds(sitting).values()
    winner, rival = (_short(k) for k in sitting["measured"])
    same = (lw, hw) == (lr, hr)
    where = (f"both goodputs between {lw:g}x and {hw:g}x" if same else
             f"{winner}'s goodput between {lw:g}x and {hw:g}x and {rival}'s between {lr:g}x and {hr:g}x")
    inside = 1 - TOLERANCE <= lr / hw and hr / lw <= 1 / (1 - TOLERANCE)
    text = (f" That reading draws a straight line between rungs {_step(sitting['shares'])} apart, about the "
            f"tolerance's own size. On the means the rungs alone put {where}, which allows {rival}'s anywhere from "
            f"{lr / hw:.0%} to {hr / lw:.0%} of {winner}'s: " + (
                "inside the band without any line." if inside else
                "across the band's edge, so there the line decides the reading."))
    ladder, shifts = cell_ladder(c), []
    if ladder is not None:
        for label, sub in (seed_sets(c) or {f"its {len(ladder.get('seeds', c.seeds))}": ladder}).items():
            fine, coarse = _ladder_ratio(sub, None), _ladder_ratio(sub, sitting["shares"])
            if not (math.isnan(fine) or math.isnan(coarse)):
                shifts.append((label, fine, coarse))
    if not shifts:
        return text
    i, band = interval(sitting), (1 - TOLERANCE, 1 / (1 - TOLERANCE))
    low = i["lo"] - band[0] <= band[1] - i["hi"]  # the interval's end nearer the band's edge: its lower one
    moves = [co - f for _, f, co in shifts]  # the coarse grid's reading less the fine one's, as shares
    worst = max(moves) if low else min(moves)  # the move that, taken back, brings that end nearest the edge
    end = (i["lo"] if low else i["hi"]) - worst
    near = f"{lw:g}x to {hw:g}x" if same else f"{min(lw, lr):g}x to {max(hw, hr):g}x"
    holds = band[0] <= end <= band[1]
    return text + (
        f" A resample can put the two on different rungs, and there the line reads between them. The ladder's finer "
        f"rungs show how far that line can move a ratio (the second layout's over the first's): read only on its "
        f"rungs the sitting also has ({_step(sitting['shares'])} apart) instead of all of them "
        f"({ladder['step']:.2f}x apart), it moved by "
        + " and ".join(f"{100 * m:+.1f} points ({label} seeds)" for m, (label, _, _) in zip(moves, shifts))
        + f". The sitting's interval ends {100 * abs((i['lo'] - band[0]) if low else (band[1] - i['hi'])):.1f} "
        f"points inside the band's {'lower' if low else 'upper'} edge; had the line read the ratio "
        f"{100 * abs(worst):.1f} points too {'high' if worst > 0 else 'low'}, as "
        f"{'the larger' if len(moves) > 1 else 'that'} move did, it would end at {end:.1%}, "
        + ("still inside: the line between rungs does not decide the verdict." if holds else
           f"outside: the verdict on the resamples rests on the straight line between rungs, and a finer grid at "
           f"{near} would settle it."))


def _step(shares) -> str:
    steps = {round(b - a, 6) for a, b in zip(shares, shares[1:])}
    return f"{steps.pop():g}x" if len(steps) == 1 else f"{min(steps):g}x to {max(steps):g}x"


def _ladder_ratio(ladder: dict, grid) -> float:
    """The ratio (runner-up over winner, in the ladder's layout order) of the goodputs read as the sitting reads
    them (:func:`~.map_steady_tie_sitting.crossing` of the mean over the seeds) on the ladder's rungs, on those of
    ``grid`` alone where given (nan where a layout has fewer than two of them or a goodput lies off them)."""
    g = []
    for rungs in ladder["served"].values():
        rs = sorted((r["share"], sum(r["measured"]) / len(r["measured"])) for r in rungs
                    if grid is None or any(math.isclose(r["share"], x, abs_tol=1e-6) for x in grid))
        g.append(crossing([s for s, _ in rs], [a for _, a in rs]) if len(rs) >= 2 else math.nan)
    return ratio(dict(enumerate(g)))


def pilot_words(c) -> str:
    """What the tie ``c``'s ladder (:mod:`.map_steady_tie`), served before its sitting, taught: its seed sets'
    brackets (:func:`~.map_steady_tie_read.seed_sets`: the cell's on their own rungs, those added hours later) and
    why a rung-wide bracket cannot call two equal goodputs a tie; "" for a cell without a ladder."""
    ladder = cell_ladder(c)
    if ladder is None:
        return ""
    sets = seed_sets(c) or {f"its {len(ladder.get('seeds', c.seeds))}": ladder}
    def put(b: dict) -> str:
        at = {k: (f"at {lo:.2f}x to {hi:.2f}x" if 0 < lo and hi < math.inf else
                  f"{'above' if hi == math.inf else 'below'} {lo if hi == math.inf else hi:.2f}x")
              for k, (lo, hi) in b.items()}
        return (f"both goodputs {next(iter(at.values()))}" if len(set(at.values())) == 1 else
                " and ".join(f"{_short(k)}'s goodput {v}" for k, v in at.items()))
    read = [f"{label} seeds put {put(brackets(sub))}" for label, sub in sets.items()]
    step = ladder["step"]
    edge = step * (2 - TOLERANCE) / TOLERANCE  # (x - step) >= (1 - tol) (x + step): brackets a rung apart, a tie
    return (f"The sitting's grid, seeds and rule were fixed from a ladder of rates served before it "
            f"(`map_steady_tie`, rungs {step:.2f}x apart, {len(ladder.get('seeds', c.seeds))} seeds in sittings "
            f"hours apart): " + "; ".join(read) + f". That ladder was undecided: a machine's drift between sittings "
            f"moved both goodputs, and its brackets a rung wide could call two equal goodputs below {edge:.2f}x a "
            f"tie only where both landed in one bracket (all its seeds together put {put(brackets(ladder))}).")


def sitting_goodput_words(c) -> str:
    """The tie ``c``'s goodputs measured live in its sitting against the simulated ones (requests/s per worker:
    searched on the cost model rescaled by the pilot's steps), and the runner-up's over the winner's live (with its
    95% bootstrap interval) against simulated; "" for a cell without a sitting."""
    sitting = cell_sitting(c)
    if sitting is None:
        return ""
    g, gm, i, shares = goodputs(sitting), sitting["geomean_per_worker"], interval(sitting), sitting["shares"]
    said = " and ".join(f"{_short(k)} " + (f"{v * gm:.3g}/s" if 0 < v < math.inf else f"below {min(shares) * gm:.3g}/s"
                                           if v == 0 else f"above {max(shares) * gm:.3g}/s")
                        + f" against its simulated {c.goodput_now[k]:.3g}/s" for k, v in g.items())
    r = ratio(g)
    lo, hi = ratio_range(g, sitting["shares"])
    off = f", leaving out the {_pct(i['off_grid'])} of resamples with a goodput off the grid" if i["off_grid"] else ""
    bound = f"at most {hi:.1%}" if hi < math.inf and lo == 0 else f"at least {lo:.1%}" if hi == math.inf else \
        f"between {lo:.1%} and {hi:.1%}"
    live = (f"{bound} (a goodput off the grid is only a bound)" if math.isnan(r) else
            f"{r:.1%} (95% bootstrap interval {i['lo']:.1%} to {i['hi']:.1%}{off})")
    simulated = c.goodput_now[c.rival] / c.goodput_now[c.winner]
    search = search_defaults()["tolerance"]  # each simulated goodput's search (map_live's map: the defaults)
    sets = seed_sets(c) if cell_ladder(c) is not None else {}
    mids = [sum(sum(b) / 2 for b in brackets(sub).values()) / 2 for sub in sets.values()]
    apart = (f" (one of the ladder's sittings found them {1 - min(mids) / max(mids):.0%} lower than the other)"
             if len(mids) > 1 and all(0 < m < math.inf for m in mids) else "")
    return (f" Only the tie's sitting measured goodputs live: {said} per worker (simulated: searched on the cost "
            f"model rescaled by the pilot's steps). Rates in requests/s follow the machine's speed on the day"
            f"{apart}, so only their ratio is a test: {_short(c.rival)}'s over {_short(c.winner)}'s is {live} live, "
            f"{simulated:.0%} simulated (each simulated goodput a search's, up to {search:.0%} below where "
            f"attainment falls below 90%).")
