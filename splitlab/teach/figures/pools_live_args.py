"""What chapter 7's live check of the map (:mod:`.pools_live`, :mod:`.pools_live_words`) accepts, checked before
its first run: each check raises a ValueError (a TypeError for a value of the wrong kind) naming the argument and
what it got, where a reader's slip was a silent default, a traceback from inside pandas or a run on other requests.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd

__all__ = ["REGIONS", "whole", "seeds_of", "requests_of", "check_cell", "check_rates", "check_prompt_cap",
           "check_map", "ordered_maps", "cost_of", "check_options", "check_runs", "check_scores", "check_lives"]

#: the map's regions: the kinds a cell's winner may be (a "tie": the split and the best colocated layout within the
#: map's tie tolerance), in the order the page serves them
REGIONS = ("split", "prefill-first", "chunked", "tie")


def whole(v) -> bool:
    """Whether ``v`` is a whole number (an int or a numpy integer; not a bool)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def seeds_of(seeds) -> tuple:
    """``seeds`` as a tuple of at least 2 distinct whole numbers >= 0, read once (a generator was consumed by its
    first check and then refused as 'got []'). A live check's verdict is a 95% interval over its seeds: one seed has
    none (unbounded, it 'holds zero', and a tie served on one seed 'matched', its interval printed as -inf to +inf
    points). ValueError otherwise."""
    given = list(seeds) if hasattr(seeds, "__iter__") and not isinstance(seeds, (str, bytes, dict)) else [seeds]
    bad = [s for s in given if not whole(s) or s < 0]
    if len(given) < 2 or not bad and len(set(given)) != len(given):
        shown = given if hasattr(seeds, "__next__") else seeds  # a generator's repr names no seed
        raise ValueError(f"seeds must be at least 2 distinct seeds (a 95% interval over the seeds needs a spread), "
                         f"got {shown!r}")
    if bad:
        raise ValueError(f"seeds must be whole numbers >= 0, got {bad!r} in {given!r}")
    return tuple(int(s) for s in given)


def _for_region(value, name: str, kind: str, default):
    """``value`` for the region ``kind``: one value for all, or {region: value} (a region not in it: ``default``; a
    key that is no region is refused, naming the argument ``name``)."""
    if not isinstance(value, dict):
        return value
    unknown = [k for k in value if k not in REGIONS]
    if unknown:
        raise ValueError(f"{name} names no region {unknown}: its keys must be of {list(REGIONS)}")
    return value.get(kind, default)


def requests_of(n_requests, kind: str) -> int:
    """``n_requests`` for the region ``kind``: one number for all, or {region: number} (a region not in it: 24; a
    key that is no region is refused, where it was a silent 24)."""
    n = _for_region(n_requests, "n_requests", kind, 24)
    if not whole(n) or n < 1:
        raise ValueError(f"n_requests must be a whole number >= 1 (or a dict of them per region), got {n!r}")
    return int(n)


def check_cell(cell) -> None:
    """``cell`` a map's cell one layout wins or a tie, its prefill and TPOT steps finite and > 0, its goodputs
    finite and >= 0."""
    if not hasattr(cell, "winner") or not hasattr(cell, "goodput"):
        raise TypeError(f"cell must be a cell of a split map (its .cells), got {type(cell).__name__}")
    if cell.winner not in REGIONS:
        raise ValueError(f"a live check needs a cell one layout wins or a tie, got winner {cell.winner!r}")
    bad = {k: v for k, v in (("prefill_steps", cell.prefill_steps), ("tpot_steps", cell.tpot_steps),
                             *((f"goodput[{g!r}]", v) for g, v in cell.goodput.items()))
           if not _number(v) or not (0 <= v < math.inf) or v == 0 and not k.startswith("goodput")}
    if bad:
        raise ValueError(f"the cell's steps must be finite and > 0 and its goodputs finite and >= 0 (a map's are), "
                         f"got {bad}")  # an infinite goodput was 'rate_per_s must be a finite rate' from a workload


def _number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def check_rates(rates) -> None:
    """``rates`` (how many rates to try on the simulator) a whole number >= 2; a numpy integer too (np.int64(3)
    was refused as 'must be an integer >= 2, got np.int64(3)')."""
    if not whole(rates) or rates < 2:
        raise ValueError(f"rates must be an integer >= 2 (rates tried on the simulator), got {rates!r}")


def prompt_cap_of(max_prompt_tokens, kind: str) -> int | None:
    """``max_prompt_tokens`` for the region ``kind``: None (no cap) or a whole number >= 1, one for all or
    {region: cap} (a region not in it: no cap; a key that is no region is refused). A string was a TypeError from a
    comparison; NaN or -1 left every region out in silence."""
    cap = _for_region(max_prompt_tokens, "max_prompt_tokens", kind, None)
    if cap is not None and (not whole(cap) or cap < 1):
        raise ValueError(f"max_prompt_tokens must be None or a whole number of tokens >= 1 (or a dict of them per "
                         f"region), got {cap!r}")
    return None if cap is None else int(cap)


def check_prompt_cap(max_prompt_tokens) -> None:
    """``max_prompt_tokens`` valid for every region (:func:`prompt_cap_of`)."""
    for kind in REGIONS:
        prompt_cap_of(max_prompt_tokens, kind)


def _is_map(m) -> bool:
    return all(hasattr(m, a) for a in ("cells", "workers", "link_bytes_per_s", "tie_tolerance"))


def check_map(m) -> None:
    """``m`` one split map (a dict of them was "'dict' object has no attribute 'cells'"). TypeError otherwise."""
    if not _is_map(m):
        hint = ": a dict of maps? give one, e.g. maps[None]" if isinstance(m, dict) else ""
        raise TypeError(f"m must be a split map (split_map's, or a value of split_map_grid's), got "
                        f"{type(m).__name__}{hint}")


def ordered_maps(maps: dict) -> list:
    """The maps :func:`~.pools_live.live_regions` tries, by their links, whatever the dict's order: the map on the
    cost model's own link (``link_bytes_per_s`` None; else the fastest) and, if another, the slowest link's.
    :func:`~splitlab.teach.widgets.split_map_grid` keeps the order it is given, so {0.01: m, None: own} had the
    0.01 GB/s map served as the own link's and the own link's as the slider's slowest.

    Raises:
        ValueError: ``maps`` not a dict of maps (split_map_grids' {workers: {link: map}} told to pick a size; the
            message names the types, where it was the whole maps' repr), no map, maps of different cluster sizes
            (the page's per-worker rates are one map's)."""
    if not isinstance(maps, dict) or not all(_is_map(m) for m in maps.values()):
        got = type(maps).__name__ if not isinstance(maps, dict) else \
            f"a dict of {sorted({type(m).__name__ for m in maps.values()})}"
        hint = (": split_map_grids' {workers: {link: map}}? pick one cluster size, e.g. grids[4]"
                if isinstance(maps, dict) and maps and all(isinstance(m, dict) for m in maps.values()) else "")
        raise ValueError(f"maps must be a dict {{link GB/s or None: map}} (split_map_grid's), got {got}{hint}")
    if not maps:
        raise ValueError("maps must be a dict {link GB/s or None: map} with at least one map, got {}")
    sizes = sorted({m.workers for m in maps.values()})
    if len(sizes) > 1:
        raise ValueError(f"maps must be of one cluster size, got maps of {sizes} workers: give one size's maps")
    ms = sorted(maps.values(), key=lambda m: -math.inf if m.link_bytes_per_s is None else -m.link_bytes_per_s)
    return ms[:1] + ms[-1:] if len(ms) > 1 else ms


def cost_of(cost):
    """``cost``, or the built-in cost model for None (as the simulator reads it), checked: a CostModel with
    coefficients a simulator can run on. TypeError/ValueError otherwise (None was "'NoneType' object has no
    attribute 'prefill_s'" from inside the probe)."""
    from ...costmodel import CostModel
    from ...serving.simulated import check_cost
    return check_cost(CostModel() if cost is None else cost)


def check_options(who: str, options: dict) -> None:
    """``options`` the :class:`~splitlab.serving.ServingConfig` fields a live check passes both layouts, by name
    (:func:`~splitlab.planning.options.layout_options`), less ``max_batch`` and ``trace``, which the map sets (they
    were "got multiple values for keyword argument 'max_batch'" at the first cell, and a misspelt option passed in
    silence where a map had no cell). TypeError otherwise."""
    from ...planning.options import layout_options
    layout_options(who, options)
    taken = [k for k in options if k in ("max_batch", "trace")]
    if taken:
        raise TypeError(f"{who}() got {taken}: the map's own max_batch and trace={False} are its layouts', not "
                        f"options")


def _shape(runs) -> str:
    """What ``runs`` holds, in a few words (a PairedRuns' repr spans lines)."""
    if not isinstance(runs, dict):
        return type(runs).__name__
    cols = [list(r.attainment.columns) if hasattr(getattr(r, "attainment", None), "columns") else type(r).__name__
            for r in runs.values()]
    return f"a dict of {len(runs)}: {cols}"


def check_scores(scores) -> None:
    """``scores`` (:func:`~.pools_live_words.pick_rate`'s) a pandas Series of numbers (NaN: no score; not +inf)
    indexed by rates, finite and > 0 requests/s: a dict was "'dict' object has no attribute 'max'", a NaN, 0 or
    negative rate came back as the one to serve. TypeError/ValueError otherwise."""
    if not isinstance(scores, pd.Series):
        raise TypeError(f"scores must be a pandas Series of scores indexed by rate (requests/s), got "
                        f"{type(scores).__name__}")
    rates, values = np.asarray(scores.index, dtype=object), np.asarray(scores, dtype=object)
    bad = [r for r in rates if isinstance(r, bool) or not isinstance(r, (int, float, np.number))
           or not 0 < float(r) < math.inf]
    if bad:
        raise ValueError(f"scores' index must be rates, finite numbers > 0 of requests/s, got {bad}")
    bad = [v for v in values
           if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or float(v) == math.inf]
    if bad:
        raise ValueError(f"scores must be numbers (points; a tie's: %), NaN for none, not +inf; got {bad}")


def check_runs(runs) -> None:
    """``runs`` (:func:`~.pools_live_words.rate_score`'s) a non-empty dict {drift: PairedRuns} whose attainment
    has the two layouts' columns: {} was 'min() arg is an empty sequence'. ValueError otherwise."""
    if not isinstance(runs, dict) or not runs or not all(
            isinstance(getattr(r, "attainment", None), pd.DataFrame) and r.attainment.shape[1] >= 2
            for r in runs.values()):
        raise ValueError(f"runs must be a non-empty dict {{drift: PairedRuns}} whose attainment has the winner's and "
                         f"the runner-up's columns, got {_shape(runs)}")


def _is_live(lc) -> bool:
    return all(hasattr(lc, a) for a in ("cell", "winner", "rival", "probe", "runs", "rate_per_s", "predicted"))


def check_lives(lives, m=None) -> None:
    """``lives`` a dict {region: :class:`~.pools_live.LiveCell`} (:func:`~.pools_live.live_regions`'), each key a
    region (:data:`REGIONS`) whose cell that region won; a served one (``runs`` not None) with its rate among those
    it predicted (a NaN rate was a KeyError: nan) and its step table; ``m`` (when given) a map of the cluster size
    they were served on. A list or a misspelt key was a paragraph of 'no cell' for every region.

    Raises:
        TypeError: not such a dict, ``m`` not a map. ValueError: a key no region, a cell another region's, a served
        cell without its rate or steps, a map of another cluster size."""
    if not isinstance(lives, dict) or not all(_is_live(lc) for lc in lives.values()):
        got = type(lives).__name__ if not isinstance(lives, dict) else \
            f"a dict of {sorted({type(v).__name__ for v in lives.values()})}"
        raise TypeError(f"lives must be a dict {{region: LiveCell}} (live_regions'), got {got}")
    if m is not None:
        check_map(m)
    for kind, lc in lives.items():
        if kind not in REGIONS:
            raise ValueError(f"lives names no region {kind!r}: its keys must be of {list(REGIONS)}")
        if lc.cell.winner != kind:
            raise ValueError(f"lives[{kind!r}] is a cell {lc.cell.winner!r} won, not one of region {kind!r}")
        served = getattr(lc, "workers", None)
        if m is not None and served is not None and served != m.workers:
            raise ValueError(f"lives[{kind!r}] was served on a map of {served} workers, m has {m.workers}: give "
                             f"the map of that cluster size")
        if not (isinstance(lc.cell.prefill_steps, numbers.Real) and 0 < lc.cell.prefill_steps < math.inf
                and isinstance(lc.prefill_steps, numbers.Real) and 0 < lc.prefill_steps < math.inf):
            raise ValueError(f"lives[{kind!r}]: prefill steps must be finite and > 0, got {lc.prefill_steps!r} "
                             f"(the cell's {lc.cell.prefill_steps!r})")
        if not isinstance(lc.probe, dict) or not {"prefill", "decode"} <= set(lc.probe):
            raise ValueError(f"lives[{kind!r}]'s probe must be step_probe's dict (its 'prefill' and 'decode' ratios), "
                             f"got {lc.probe!r:.120}")
        if lc.runs is None:
            continue
        if lc.rate_per_s not in getattr(lc.predicted, "index", ()):
            raise ValueError(f"lives[{kind!r}] was served at {lc.rate_per_s!r} requests/s, not a rate of its "
                             f"predicted scores {list(getattr(lc.predicted, 'index', []))}")
        if lc.steps is None or "measured / predicted" not in getattr(lc.steps, "columns", ()):
            raise ValueError(f"lives[{kind!r}] was served but has no step table (step_ratios of its live runs)")
