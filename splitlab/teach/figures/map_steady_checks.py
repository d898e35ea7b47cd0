"""What chapter 7's steady-state records (:mod:`.map_steady`) must hold, checked where a record is read or written
and before a cell's runs are read: a record file that parses (:func:`read_record_json`), a cell's fields
(:func:`check_cell_fields`), a cell's runs of one length per seed over distinct seeds (:func:`check_runs`) and a
dict of cells (:func:`check_cells`); a tie's cell to serve on a ladder (:func:`check_tie`); and a record's runs as
lines (:func:`run_lines`). Each raises a ValueError (a TypeError for a value of the wrong kind) naming the file or
cell, the field and what it got, where a reader's slip was a TypeError from the dataclass, an AttributeError or a
pandas "Length of values (2) does not match length of index (3)".
"""
from __future__ import annotations

import json
from pathlib import Path

from .pools_live_args import seeds_of

__all__ = ["read_record_json", "check_cell_fields", "check_runs", "check_cells", "record_text", "run_lines",
           "check_tie"]


def _no_constant(name: str):
    raise ValueError(f"holds {name}, which a record never does (save_record refuses it)")


def read_record_json(path) -> dict:
    """The JSON object of the record file at ``path``. FileNotFoundError (naming the path) for a missing file;
    ValueError naming the file for text that is not JSON, JSON holding NaN or Infinity, or JSON that is not an
    object with a ``cells`` object (a record of the map's steady-state check)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no record at {str(path)!r} (not a file)")
    try:
        with open(path) as f:
            d = json.load(f, parse_constant=_no_constant)
    except ValueError as err:  # json.JSONDecodeError is one
        raise ValueError(f"{path} is not a record of the map's steady-state check: {err}") from None
    if not isinstance(d, dict) or not isinstance(d.get("cells"), dict):
        raise ValueError(f"{path} is not a record of the map's steady-state check (no 'cells'), got "
                         f"{type(d).__name__}")
    return d


def check_cell_fields(d, fields: dict, where: str) -> None:
    """``d`` (a cell as :meth:`~.map_steady.SteadyCell.to_json` wrote it) a dict with every required field of
    ``fields`` ({name: required}) and no other. ValueError naming ``where`` and the fields otherwise."""
    if not isinstance(d, dict):
        raise ValueError(f"{where} must be an object of a cell's fields, got {type(d).__name__}")
    missing = [k for k, required in fields.items() if required and k not in d]
    unknown = sorted(set(d) - set(fields))
    if missing or unknown:
        raise ValueError(f"{where} is not a cell of the map's steady-state check: "
                         + "; ".join(x for x in (f"missing field(s) {missing}" if missing else "",
                                                  f"unknown field(s) {unknown}" if unknown else "") if x))


def check_runs(c) -> None:
    """A cell's runs readable: at least 2 distinct seeds, and ``requests``, ``counted`` and the winner's and
    runner-up's ``measured`` and ``predicted`` one value per seed. ValueError naming the cell and the field."""
    where = f"the {c.region!r} cell"
    try:
        seeds_of(c.seeds)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    n = len(c.seeds)
    for name in ("measured", "predicted"):
        runs = getattr(c, name)
        if not isinstance(runs, dict) or any(k not in runs for k in (c.winner, c.rival)):
            raise ValueError(f"{where}: {name} must hold the winner's and runner-up's runs ({c.winner!r}, "
                             f"{c.rival!r}), got {sorted(runs) if isinstance(runs, dict) else type(runs).__name__}")
    lists = {"requests": c.requests, "counted": c.counted, **{f"{name}[{k!r}]": getattr(c, name)[k]
                                                              for name in ("measured", "predicted")
                                                              for k in (c.winner, c.rival)}}
    bad = {k: len(v) if hasattr(v, "__len__") else type(v).__name__ for k, v in lists.items()
           if not hasattr(v, "__len__") or len(v) != n}
    if bad:
        raise ValueError(f"{where}: one value per seed expected ({n} seeds), got {bad}")


def check_cells(cells, where: str, name: str = "cells") -> None:
    """``cells`` a dict {region: SteadyCell} (of :func:`~.map_steady.load_record` or :func:`~.map_steady.steady_cell`).
    TypeError naming ``where`` and the argument (``name``) otherwise."""
    if not isinstance(cells, dict) or not all(all(hasattr(c, a) for a in ("region", "seeds", "measured", "to_json"))
                                              for c in cells.values()):
        got = type(cells).__name__ if not isinstance(cells, dict) else \
            f"a dict of {sorted({type(c).__name__ for c in cells.values()})}"
        raise TypeError(f"{where}: {name} must be a dict {{region: SteadyCell}} (load_record's second value), got "
                        f"{got}")


def record_text(cells: dict, meta: dict) -> str:
    """The record of ``cells`` and ``meta`` as the JSON text :func:`~.map_steady.save_record` writes, made whole
    before the file is opened (a value JSON cannot hold, NaN, failed half-way and left a truncated record).
    TypeError/ValueError naming what cannot be written."""
    check_cells(cells, "save_record")
    try:
        return json.dumps(dict(meta, cells={r: c.to_json() for r, c in cells.items()}), indent=1,
                          allow_nan=False) + "\n"
    except (TypeError, ValueError) as err:
        raise type(err)(f"save_record: the record cannot be written as JSON ({err}); nothing was written") from None


def run_lines(meta: dict) -> list:
    """One line per run of a record (``meta``: :func:`~.map_steady.load_record`'s; a record of one run written before
    runs were listed has its keys at the top): when, the command, the regions it served and the calibration.
    TypeError: ``meta`` not a dict; ValueError: ``runs`` not a list of dicts, a run naming neither its date nor its
    command (``{}``: no record's meta), ``regions`` not a list."""
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict (load_record's first value), got {type(meta).__name__}")
    runs = meta.get("runs") or [meta]
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise ValueError(f"meta['runs'] must be a list of dicts (one per run), got {runs!r:.80}")
    for r in runs:
        if "date" not in r and "command" not in r or not isinstance(r.get("regions", []), list):
            raise ValueError(f"a run of meta must name its date or command, and its regions as a list, got {r!r:.80}")
    out = []
    for r in runs:
        when = str(r.get("date", "?"))[:16].replace("T", " ")
        regions = f" (served {', '.join(r['regions'])})" if r.get("regions") else ""
        load = (f"; load average {', '.join(f'{x:.1f}' for x in r['load_average'])} at its end"
                if isinstance(r.get("load_average"), list) else "")
        out.append(f"{when} UTC{regions}: {r.get('command', '?')}; {r.get('calibration', '')}".rstrip("; ") + load)
    return out


def check_tie(c) -> None:
    """ValueError naming the field unless ``c`` can be served on a ladder of rates
    (:func:`~.map_steady_tie.tie_ladder`): a tie's cell of two layouts of its workers, goodputs finite > 0, at least
    2 distinct seeds, a link of None or finite GB/s > 0, and the records of its runs (``extra``'s output_tokens >= 1,
    2 <= min_requests <= max_requests). Checked before the model is loaded (benchmarks/map_live.py --ladder)."""
    from .map_steady_place import _positive, _whole
    from .map_steady_in_run import kept
    from .pools_live import layout_config
    if getattr(c, "region", None) != "tie":
        raise ValueError(f"tie_ladder serves a tie's cell, got region {getattr(c, 'region', c)!r}")
    extra = kept(c, ("output_tokens", "min_requests", "max_requests"))
    _whole("the cell's output_tokens", extra["output_tokens"], 1)
    low = _whole("the cell's min_requests", extra["min_requests"], 2)
    _whole("the cell's max_requests", extra["max_requests"], low)
    if c.winner == c.rival:
        raise ValueError(f"a tie's winner and rival must be two layouts, got {c.winner!r} twice")
    for n in (c.winner, c.rival):
        layout_config(n, c.workers, [])
        _positive(f"the cell's goodput_now[{n!r}]", c.goodput_now.get(n) if isinstance(c.goodput_now, dict) else None)
    seeds_of(c.seeds)
    if c.link_gbps is not None:
        _positive("the cell's link_gbps", c.link_gbps)

