"""A tie's ladder of rates (:mod:`.map_steady_tie`) as chapter 7 prints it: in sentences (:func:`ladder_words`) and
as a table of its rungs (:func:`ladder_table`)."""
from __future__ import annotations

import math

import pandas as pd

from .map_steady_tie_read import (CONFIDENCE, GOOD, RESAMPLES, TOLERANCE, _read, brackets, cell_ladder, seed_sets,
                                   seeds_in, support, verdict)
from .pools_live import short_name as _short
from .style import and_list

__all__ = ["ladder_words", "ladder_table", "sets_words", "span"]


def ladder_table(c) -> pd.DataFrame:
    """The rungs of the tie ``c``'s ladder: one row per rate (a multiple of the goodputs' geometric mean, named in the
    index), per layout its mean attainment over the seeds and their range (%; "" where that layout was not served at
    that rate). Narrow enough for a 412 px phone. ValueError: a cell without a ladder; those of
    :func:`~.map_steady_tie.cell_ladder`."""
    ladder = cell_ladder(c)
    if ladder is None:
        raise ValueError("the cell has no ladder (its extra['ladder']: tie_ladder's)")
    rows: dict = {}
    for name, rungs in ladder["served"].items():
        for r in rungs:
            m = r["measured"]
            rows.setdefault(f"{r['share']:.2f}x", {})[f"{_short(name)} (%)"] = (f"{_mean(r):.0f} "
                                                                                f"({min(m):.0f}-{max(m):.0f})")
    out = pd.DataFrame.from_dict(rows, orient="index").fillna("").sort_index()
    return out.rename_axis(f"rate (x {ladder['geomean_per_worker']:.3g}/s per worker)")


def ladder_words(c) -> str:
    """The ladder of the tie ``c`` (its ``extra["ladder"]``) in sentences: the rungs (and any served to one layout
    alone), each layout's bracket (shares of the goodputs' geometric mean), how far apart that leaves the two
    goodputs against the map's tolerance, the bootstrap's support (:func:`support`) and the verdict. ValueError: a
    cell without a ladder; those of :func:`brackets`."""
    ladder = cell_ladder(c)
    if ladder is None:
        raise ValueError("the cell has no ladder (its extra['ladder']: tie_ladder's)")
    b, backed = brackets(ladder), support(ladder)
    said = _read(b, TOLERANCE)
    runs = sum(len(r["measured"]) for rungs in ladder["served"].values() for r in rungs)
    n = seeds_in(ladder)
    held = []
    for name, (lo, hi) in b.items():
        top = max(r["share"] for r in ladder["served"][name])
        low = min(r["share"] for r in ladder["served"][name])
        again = [f"{a:.0f}% at {r['share']:.2f}x" for r in ladder["served"][name]
                 if r["share"] > hi and (a := _mean(r)) >= GOOD]
        held.append(f"{_short(name)} " + (f"kept 90% on average at no rung down to {low:.2f}x" if lo == 0 else
                                          f"kept 90% on average at every rung up to {top:.2f}x" if hi == math.inf else
                                          f"kept 90% on average up to {lo:.2f}x and not at {hi:.2f}x")
                    + (f" (though it kept {and_list(again)} again: near a knee the mean over {n} seeds does not "
                       f"fall rung by rung)" if again else ""))
    shares = {name: {r["share"] for r in rungs} for name, rungs in ladder["served"].items()}
    alone = [f"{_short(name)} alone at {', '.join(f'{x:.2f}x' for x in sorted(v - w))}"
             for (name, v), w in zip(shares.items(), list(shares.values())[::-1]) if v - w]
    added = n - len(c.seeds)  # seeds served on every rung after the cell's, rung by rung
    notes = ([f"the cell's {len(c.seeds)} seeds in rate order, then {added} more on every rung" if added > 0 else ""]
             + [f"{'; '.join(alone)}: rates the other was not served at" if alone else ""])
    notes = "; ".join(x for x in notes if x)
    text = (f"One rate cannot test a tie, so both were served again on a ladder of rates {ladder['step']:.2f}x the "
            f"goodputs' geometric mean ({ladder['geomean_per_worker']:.3g} requests/s per worker) apart (the ladder's "
            f"table), {runs} runs over {'the same ' if added <= 0 else ''}{n} seeds"
            + ("" if added > 0 else ", in rate order")
            + (f" ({notes})" if notes else "") + ": " + "; ".join(held) + ". ")
    (lo_a, hi_a), (lo_b, hi_b) = b.values()
    if said == "matches: a tie":
        text += (f"On the means their goodputs lie within {1 - min(lo_a / hi_b, lo_b / hi_a):.0%} of each other, "
                 f"inside the map's {TOLERANCE:.0%} tie.")
    elif said == "does not match":
        first = hi_b < (1 - TOLERANCE) * lo_a
        ahead, other = (list(b) if first else list(b)[::-1])
        near = hi_b / lo_a if first else hi_a / lo_b
        text += (f"On the means {_short(other)}'s goodput is at most {near:.0%} of {_short(ahead)}'s, below the "
                 f"{1 - TOLERANCE:.0%} a tie needs.")
    else:
        apart = 1 - hi_a / lo_b if hi_a < lo_b else 1 - hi_b / lo_a if hi_b < lo_a else 0.0
        far = "any amount" if max(hi_a, hi_b) == math.inf or min(lo_a, lo_b) == 0 else \
            f"{1 - min(lo_a / hi_b, lo_b / hi_a):.0%}"
        text += (f"On the means those brackets leave the two goodputs anywhere from {apart:.0%} to {far} apart, "
                 f"across the map's {TOLERANCE:.0%} tie.")
    text += _highest_held(ladder, b, said)
    text += (f" Over {RESAMPLES:,} bootstrap resamples of the seeds the brackets show a tie in "
             f"{backed['matches: a tie']:.0%}, part the two in {backed['does not match']:.0%} and leave it undecided "
             f"in {backed['undecided']:.0%}, so ")
    doubt = (f" (the means say {'a tie' if said == 'matches: a tie' else 'no tie'}, but fewer than "
             f"{CONFIDENCE:.0%} of the resamples agree)" if said != "undecided" else "")
    return text + {"matches: a tie": "the ladder shows the tie the map draws.",
                   "does not match": "the live runs part the two where the map has a tie.",
                   "undecided": f"the ladder is undecided{doubt}."}[verdict(said, backed)] + sets_words(c)


def sets_words(c) -> str:
    """Where seeds were added to the tie ``c``'s ladder later (:func:`~.map_steady_tie_read.seed_sets`): how far the
    added seeds' attainments lie from the cell's on the rungs the cell's seeds were served on before (the mean of the
    per-rung gaps of the two sets' means, points, per layout) and on the rungs served to all seeds at once, then each
    set read apart (its brackets and bootstrap support) and what that leaves of the verdict; "" where none were
    added. Errors: those of :func:`~.map_steady_tie_read.seed_sets`."""
    sets = seed_sets(c)
    if not sets:
        return ""
    ladder = cell_ladder(c)
    cell, late = list(sets.values())[:2]  # the cell's seeds on their own rungs; the first seeds added, on every rung
    n0 = len(cell["seeds"])
    apart, together = {}, {}
    for name, rungs in ladder["served"].items():
        k = len(cell["served"][name])
        gaps = [_mean(a) - sum(r["measured"][:n0]) / n0 for a, r in zip(late["served"][name], rungs)]
        for out, part in ((apart, gaps[:k]), (together, gaps[k:])):
            if part:
                out[name] = sum(part) / len(part)

    def moved(gaps: dict) -> str:
        return and_list([f"as much for {_short(n)}" if round(abs(g)) == 0 else
                         f"{abs(g):.0f} {'point' if round(abs(g)) == 1 else 'points'} {'less' if g < 0 else 'more'} "
                         f"for {_short(n)}" for n, g in gaps.items()])
    shares = sorted({r["share"] for n, rungs in ladder["served"].items() for r in rungs[len(cell["served"][n]):]})
    text = (f" The {len(late['seeds'])} seeds added later kept {moved(apart)} than the cell's {n0} on the rungs "
            f"those were served on in earlier sittings")
    if together:
        fell = _fell(ladder, cell, n0)
        text += (f", and {moved(together)} on the rungs served to all {len(ladder['seeds'])} seeds in one sitting "
                 f"({', '.join(f'{x:.2f}x' for x in shares)})"
                 + (f", where {fell} of the cell's seeds (counted per layout) kept less than they had kept at a "
                    f"higher rate in their earlier sitting: that points to a machine serving at another speed "
                    f"rather than to harder seeds, on few seeds" if fell else ""))
    read, verdicts = [], []
    for label, sub in sets.items():
        b, backed = brackets(sub), support(sub)
        where = " and ".join(f"{_short(n)}'s {span(lo, hi)}" for n, (lo, hi) in b.items())
        read.append(f"{label} seeds bracket the goodputs ({where}) and show a tie in "
                    f"{backed['matches: a tie']:.0%} of resamples")
        verdicts.append(verdict(_read(b, TOLERANCE), backed))
    ends = ("each set shows the tie the map draws" if all(v == "matches: a tie" for v in verdicts) else
            f"{'neither' if len(verdicts) == 2 else 'no'} set reaches the {CONFIDENCE:.0%} a verdict needs"
            if all(v == "undecided" for v in verdicts) else "the sets read differently")
    return (text + ". Seeds served hours apart on a shared machine are not one sample, so read apart too: "
            + "; ".join(read) + f": {ends}. A ladder is best served in one sitting.")


def span(lo: float, hi: float, unit: str = "x") -> str:
    """A bracket (:func:`~.map_steady_tie_read.brackets`') in words: "at 1.05x to 1.10x", "above 1.10x" (none
    missed), "below 0.80x" (none held)."""
    return (f"above {lo:.2f}{unit}" if hi == math.inf else f"below {hi:.2f}{unit}" if lo == 0 else
            f"at {lo:.2f}{unit} to {hi:.2f}{unit}")


def _fell(ladder: dict, cell: dict, n0: int) -> int:
    """How many (layout, seed of the cell's) kept 5 points or more less on a rung served to all seeds at once than
    on a higher rung in their own earlier sitting: the sign of a slower machine, a seed's requests at a lower rate
    being no harder."""
    out = 0
    for name, rungs in ladder["served"].items():
        k = len(cell["served"][name])
        out += sum(any(r["share"] > late["share"] and r["measured"][i] >= late["measured"][i] + 5 for r in rungs[:k])
                   for i in range(n0) for late in rungs[k:]) if rungs[k:] else 0
    return out


def _highest_held(ladder: dict, b: dict, said: str) -> str:
    """Where a layout held 90% on average again above its bracket ``b`` (the highest rung held with every rung below
    held, :func:`brackets`): what the means would say read from its highest rung held instead, if that differs from
    ``said``; "" otherwise."""
    alt = {}
    for name, (lo, hi) in b.items():
        means = sorted((r["share"], _mean(r)) for r in ladder["served"][name])
        top = max([x for x, a in means if a >= GOOD], default=0.0)
        alt[name] = (lo, hi) if top <= lo else (top, min([x for x, a in means if x > top], default=math.inf))
    other = _read(alt, TOLERANCE)
    if alt == b or other == said:
        return ""
    moved = "; ".join(f"{_short(n)} {lo:.2f}x to {hi:.2f}x" for n, (lo, hi) in alt.items() if (lo, hi) != b[n])
    words = {"matches: a tie": "show a tie", "does not match": "part the two", "undecided": "leave it undecided"}
    return (f" Read from the highest rung held instead ({moved}), the means would {words[other]}: the bracket "
            f"takes the first rung missed, and the rung held above it stands on the same few seeds.")


def _mean(rung: dict) -> float:
    """A rung's mean attainment over the seeds (%): what it is held or missed on."""
    return sum(rung["measured"]) / len(rung["measured"])
