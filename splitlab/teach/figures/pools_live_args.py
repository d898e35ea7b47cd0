"""What chapter 7's steady-state check of the map (:mod:`.map_steady`) accepts, checked before its first run: the
map's regions (:data:`REGIONS`), the seeds read once (:func:`seeds_of`), one map (:func:`check_map`), a dict of
maps ordered by their links and of one cluster size (:func:`ordered_maps`) and the cost model, None the built-in
(:func:`cost_of`). Each check raises a ValueError (a TypeError for a value of the wrong kind) naming the argument
and what it got, where a reader's slip was a silent default, a traceback from inside pandas or a run on other
requests.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["REGIONS", "whole", "seeds_of", "check_map", "ordered_maps", "cost_of"]

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


def _is_map(m) -> bool:
    return all(hasattr(m, a) for a in ("cells", "workers", "link_bytes_per_s", "tie_tolerance"))


def check_map(m) -> None:
    """``m`` one split map (a dict of them was "'dict' object has no attribute 'cells'"). TypeError otherwise."""
    if not _is_map(m):
        hint = ": a dict of maps? give one, e.g. maps[None]" if isinstance(m, dict) else ""
        raise TypeError(f"m must be a split map (split_map's, or a value of split_map_grid's), got "
                        f"{type(m).__name__}{hint}")


def ordered_maps(maps: dict) -> list:
    """The maps a check of the map tries (:func:`~.map_steady.pick_cells`), by their links, whatever the dict's
    order: the map on the cost model's own link (``link_bytes_per_s`` None; else the fastest) and, if another, the
    slowest link's. :func:`~splitlab.teach.widgets.split_map_grid` keeps the order it is given, so {0.01: m, None:
    own} had the 0.01 GB/s map served as the own link's and the own link's as the slider's slowest.

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
    attribute 'prefill_s'" from inside the probe; "tiny", a model's name, was "the simulated back end needs..."
    without naming ``cost``)."""
    from ...costmodel import CostModel
    from ...serving.simulated import check_cost
    if cost is not None and not isinstance(cost, CostModel):
        hint = ": a calibration? give its .cost" if hasattr(cost, "cost") else " (a calibration's .cost, or None)"
        raise TypeError(f"cost needs a splitlab.costmodel.CostModel, got {type(cost).__name__}{hint}")
    return check_cost(CostModel() if cost is None else cost)
