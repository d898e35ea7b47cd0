"""Chapter 7's map checked on the real model in steady state: a cell of each region served live.

Makes the chapter's four-worker map of this device (the ``tiny`` model calibrated here, the chapter's axes and run
lengths; on the cost model's own KV link and, for a region that link gives no cell, the slider's slowest, 0.01
GB/s), picks a cell of each region (:func:`splitlab.teach.figures.map_steady.pick_cells`: the cheapest to serve
among those won by 20% or more), places it on this machine (a probe, then a pilot of real serving:
:mod:`splitlab.teach.figures.map_steady_place`) and serves it on the real model (emulated, one CPU thread) in the
map's own kind of run at a rate between the two layouts' goodputs
(:func:`~splitlab.teach.figures.map_steady.steady_cell`), with three seeds. The record (every seed's attainment,
measured and simulated, and where the cell sat) is written as JSON; chapter 7 prints the one shipped in
``splitlab/data/map_live.json``. With six seeds it took an hour of one core.

    python benchmarks/map_live.py [--out FILE [--merge]] [--seeds 0,1,2] [--regions split,tie,...] [--workers 4]
                                  [--max-requests N]
    python benchmarks/map_live.py --resimulate FILE --calibration CALIBRATION
    python benchmarks/map_live.py --ladder FILE [--more-seeds 6,7,8]
    python benchmarks/map_live.py --sitting FILE

A tie's cell is then served on a ladder of rates until both layouts' goodputs are bracketed
(:func:`splitlab.teach.figures.map_steady_tie.tie_ladder`: one run at one rate cannot test a tie); ``--ladder``
serves the ladder of the tie in a record served before (going on from the rungs of a ladder it holds) and writes it
back; with ``--more-seeds`` it first serves those seeds on every rung the ladder holds, then goes on over all its
seeds. The 2026-12-05 record's took 49 min. ``--sitting`` serves the tie of a record served before in one sitting
(:func:`splitlab.teach.figures.map_steady_tie_sitting.serve_sitting`: a grid of rates and seeds fixed in advance,
seed by seed, so that the machine's drift falls mostly between seeds) and writes it back after each seed.

``--quick``: a map of 2 x 2 cells and runs of a dozen requests, two seeds, one region (a smoke test for CI;
nothing it prints is a result).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import sys
import time

import torch

import splitlab as sl
from splitlab.planning import split_map as SM
from splitlab.teach.figures import (map_steady, map_steady_checks, map_steady_text, map_steady_tie,
                                   map_steady_tie_sitting)

LINK = "25 Gb/s network"  # chapter 7's
AXES = dict(tpot_steps=(1.5, 2.5, 5.0, 10.0))


def _meta(args, argv, lm, cal, maps, t0, cpu0, served) -> dict:
    """What the record says of its run: what, where, the maps' counts, and the run itself (``runs``: when it started
    and ended, the command, the regions ``served``, the calibration, the load and its time)."""
    run = dict(_run(argv, t0, cpu0, list(served), cal.meta.get("shared", "")),
               counts={str(k): m.counts() for k, m in maps.items()})
    return dict(what="chapter 7's map checked on the real model in steady state (benchmarks/map_live.py)",
                machine=f"{platform.machine()}, {os.cpu_count()} cores ({platform.processor() or platform.system()})",
                device=sl.describe_device(lm.device), torch=torch.__version__, workers=args.workers,
                counts={str(k): m.counts() for k, m in maps.items()}, quick=bool(args.quick), runs=[run])


def _run(argv, t0: float, cpu0: float, regions: list, calibration: str) -> dict:
    """A run of this script as a record lists it: when it started (``t0``, epoch s) and ended, the command, the
    ``regions`` it served, the ``calibration``, the load at its end and its wall and CPU time (from ``cpu0``)."""
    return dict(started=datetime.datetime.fromtimestamp(t0, datetime.timezone.utc).isoformat(timespec="seconds"),
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                command="python benchmarks/map_live.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                regions=regions, calibration=calibration, load_average=[round(x, 2) for x in os.getloadavg()],
                wall_s=round(time.time() - t0), cpu_s=round(time.process_time() - cpu0))


def _save(args, cells: dict, meta: dict, base: tuple | None) -> str:
    """Write the record (over ``base``, the record --merge read before this run: its cells and runs)."""
    if base is not None:
        cells, meta = _merged(base, cells, meta)
    return map_steady.save_record(cells, args.out, **meta)


def _merged(base: tuple, cells: dict, meta: dict) -> tuple[dict, dict]:
    """``cells`` and ``meta`` over ``base`` (the record's (meta, cells) before this run, --merge): its other regions'
    cells kept, its runs listed before this one, each with the counts of the maps it drew its cells from (a run that
    calibrated again may draw other maps; each cell keeps its own map's coordinates and goodputs). ``main`` refuses a
    record of another cluster size before it serves anything."""
    old_meta, old = base
    earlier = old_meta.get("runs") or [dict({k: old_meta[k] for k in ("date", "command", "calibration", "load_average",
                                                                      "wall_s", "cpu_s") if k in old_meta},
                                            regions=list(old), counts=old_meta.get("counts"))]
    return {**old, **cells}, dict(meta, runs=earlier + meta["runs"])


def _resimulate(path: str, calibration: str | None, ap) -> int:
    """Fill in what :func:`map_steady.in_run` needs on each cell of the record at ``path`` (the rescaled model from
    the run's calibration and the cell's probe, the map's answers and run limits: 64 tokens, 100 to 2,000 requests)
    and add its simulation; the record is written back. A record or calibration that cannot be read: ap.error."""
    from splitlab.costmodel import load
    if not calibration:
        ap.error("--resimulate needs --calibration (the calibration file the record's run used)")
    meta, cells = _record(path, "--resimulate", ap)
    try:
        cost = load(calibration, model="tiny").cost.over_link(LINK)
    except (OSError, ValueError) as err:  # CalibrationError is a ValueError
        ap.error(f"--calibration: {err}")
    for region, c in cells.items():
        now = map_steady.rescaled(cost, c.probe["prefill"], c.probe["decode"])
        c.extra.update(cost=dataclasses.asdict(now), output_tokens=64, min_requests=100, max_requests=2000)
        c.extra["in_run"] = map_steady.in_run(c)
        print(region, "live", c.measured, "in-run simulated", c.extra["in_run"], flush=True)
    map_steady.save_record(cells, path, **dict(meta, resimulated=f"in_run added from {os.path.basename(calibration)}"))
    return 0


def _ladder(path: str, argv, ap, more: list | None = None) -> int:
    """Serve the ladder of the tie in the record at ``path`` (:func:`map_steady_tie.tie_ladder`; where the tie has
    one, go on from its rungs, first serving the seeds ``more`` on each) and write it into the cell's
    ``extra["ladder"]``, this run listed after the record's. A record without a tie, whose ladder is not its tie's,
    or seeds to add to no ladder or served already: ap.error."""
    meta, cells = _record(path, "--ladder", ap, write=True)
    if "tie" not in cells:
        ap.error(f"--ladder: the record at {path} holds no tie (regions {sorted(cells)})")
    try:  # before the model: a record served before it kept the runs' limits was refused after the load
        map_steady_checks.check_tie(cells["tie"])
        resume = map_steady_tie.cell_ladder(cells["tie"])
        left = None if resume is None else map_steady_tie.left_to_serve(cells["tie"], resume)
        if more is not None and resume is None:
            ap.error(f"--more-seeds: the tie in the record at {path} has no ladder yet to add seeds to: serve it "
                     f"with --ladder alone first")
        if more is not None:
            map_steady_tie.check_more_seeds(map_steady_tie.ladder_seeds(cells["tie"], resume), more, resume)
            left = None
    except ValueError as err:
        ap.error(f"--ladder: the tie in the record at {path} cannot be served again: {err}")
    if left == []:  # a ladder served to its end: a run that serves nothing is not written
        print(f"--ladder: the tie's ladder in {path} is served to its end (every layout's goodput bracketed on every "
              f"resample, or {map_steady_tie.LADDER_RUNGS} rungs): nothing to serve, the record is left as it is")
        return 0
    t0, cpu0 = time.time(), time.process_time()
    lm = sl.load_model("tiny")
    sl.phases.device.set_cpu_clock("thread")
    c = cells["tie"]
    c.extra["ladder"] = _laddered(c, lm, resume=c.extra.get("ladder"), more=more)
    run = _run(argv, t0, cpu0, ["tie"], "no calibration (a ladder serves the live model only)")
    print("wrote", map_steady.save_record(cells, path, **dict(meta, runs=meta.get("runs", []) + [run])))
    return 0


def _sitting(path: str, argv, ap) -> int:
    """Serve the tie in the record at ``path`` in one sitting (:func:`map_steady_tie_sitting.serve_sitting`, its
    grid and seeds fixed in advance) into the cell's ``extra["sitting"]``, the record written after each seed; where
    the tie holds a sitting stopped before its last seed, go on from it. A record without a tie, or whose tie was
    served in a sitting to its end (a sitting is one experiment): ap.error."""
    meta, cells = _record(path, "--sitting", ap, write=True)
    if "tie" not in cells:
        ap.error(f"--sitting: the record at {path} holds no tie (regions {sorted(cells)})")
    try:
        map_steady_checks.check_tie(cells["tie"])
        had = map_steady_tie_sitting.cell_sitting(cells["tie"])
    except ValueError as err:
        ap.error(f"--sitting: the tie in the record at {path} cannot be served: {err}")
    if had is not None and map_steady_tie_sitting.complete(had):
        ap.error(f"--sitting: the tie in the record at {path} was served in a sitting already ({had['started_utc']}, "
                 f"{len(had['seeds'])} seeds): a sitting is one experiment, its verdict is its own")
    t0, cpu0 = time.time(), time.process_time()
    lm = sl.load_model("tiny")
    sl.phases.device.set_cpu_clock("thread")
    c = cells["tie"]

    def keep(sitting: dict) -> None:  # printed first: a record that cannot be written keeps its seed on screen
        print("seed", sitting["seeds"][-1], {n: [round(a) for a in v[-1]] for n, v in sitting["measured"].items()},
              f"load {sitting['load_average'][-1]}", flush=True)
        c.extra["sitting"] = dict(sitting)
        map_steady.save_record(cells, path, **meta)
    if had is not None:
        print(f"--sitting: going on from the sitting of {had['started_utc']} after {len(had['seeds'])} of its "
              f"{len(had['plan'])} seeds", flush=True)
    sitting = map_steady_tie_sitting.serve_sitting(c, lm, on_seed=keep, resume=had)
    c.extra["sitting"] = sitting
    print("goodputs", map_steady_tie_sitting.goodputs(sitting), "ratio interval",
          map_steady_tie_sitting.interval(sitting), map_steady_tie_sitting.sitting_outcome(sitting),
          f"({sitting['cpu_s']:.0f} s CPU)", flush=True)
    run = _run(argv, t0, cpu0, ["tie"], "no calibration (a sitting serves the live model only)")
    print("wrote", map_steady.save_record(cells, path, **dict(meta, runs=meta.get("runs", []) + [run])))
    return 0


def _laddered(c, lm, resume=None, more=None) -> dict:
    """The tie ``c``'s ladder, served (going on from ``resume``, a ladder served before, with the seeds ``more``
    added) and printed."""
    ladder = map_steady_tie.tie_ladder(c, lm, resume=resume, more_seeds=more)
    for n, served in ladder["served"].items():
        print(n, [(r["share"], [round(a) for a in r["measured"]]) for r in served], flush=True)
    print("brackets", map_steady_tie.brackets(ladder), map_steady_tie.ladder_outcome(ladder),
          f"({ladder['cpu_s']:.0f} s CPU)", flush=True)
    return ladder


def _record(path: str, flag: str, ap, write: bool = False) -> tuple[dict, dict]:
    """:func:`map_steady.load_record` of ``path``, or ap.error naming ``flag`` (a missing file, not a record; with
    ``write``, one this run could not write back: found before any serving, not after the first seed)."""
    try:
        got = map_steady.load_record(path)
        if write:
            with open(path, "a"):  # opened for writing, nothing written: a read-only or immutable file fails here
                pass
        return got
    except (OSError, ValueError) as err:
        ap.error(f"{flag}: {err}")


def _type(check):
    """An argparse ``type`` of ``check`` (a function of the text that raises ValueError): its message on error."""
    def parse(text: str):
        try:
            return check(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    parse.__name__ = check.__name__
    return parse


def _int_in(lo: int, hi: int | None, what: str):
    """An argparse ``type``: a whole number in ``lo`` .. ``hi`` (None: no upper bound), its error naming ``what``."""
    def whole(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise ValueError(f"{what} must be a whole number, got {text!r}") from None
        if v < lo or hi is not None and v > hi:
            raise ValueError(f"{what} must be {f'in {lo} .. {hi}' if hi is not None else f'>= {lo}'}, got {v}")
        return v
    return _type(whole)


def _share(text: str) -> float:
    """A tie's rate share: a finite number > 0 (ValueError naming it otherwise)."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 < v < float("inf"):
        raise ValueError(f"the tie rate must be a finite number > 0, got {text!r}")
    return v


def _ints(text: str, example: str) -> list:
    """Whole numbers, comma-separated (ValueError naming the text otherwise, with an ``example``)."""
    try:
        return [int(s) for s in text.split(",")]
    except ValueError:
        raise ValueError(f"seeds must be whole numbers, comma-separated ({example}), got {text!r}") from None


def _seeds(text: str) -> list:
    return list(map_steady.seeds_of(_ints(text, "0,1,2")))


def _seed_list(text: str) -> list:
    """Seeds to add: distinct whole numbers >= 0, comma-separated, at least one (ValueError naming them otherwise)."""
    given = _ints(text, "6,7,8")
    if len(set(given)) != len(given) or min(given) < 0:
        raise ValueError(f"seeds must be distinct whole numbers >= 0, got {text!r}")
    return given


def _regions(text: str) -> list:
    regions = [r for r in text.split(",") if r]
    unknown = [r for r in regions if r not in map_steady.REGIONS]
    if unknown or not regions or len(set(regions)) != len(regions):
        raise ValueError(f"regions must be distinct names of {list(map_steady.REGIONS)}, comma-separated, got {text!r}")
    return regions


def main(argv=None) -> int:
    # no abbreviations: "--sitting a --sitt b" slipped past the check of a flag given twice, dropping a in silence
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--out", default=None, help="write the record here (JSON), after each cell; default: print only")
    ap.add_argument("--seeds", type=_type(_seeds), default="0,1,2",
                    help="seeds of the runs, comma-separated, at least 2 distinct (default 0,1,2)")
    ap.add_argument("--regions", type=_type(_regions), default=",".join(map_steady.REGIONS), help="regions to serve")
    ap.add_argument("--workers", type=_int_in(2, 16, "workers"), default=4,
                    help="the cluster, 2 .. 16 (the chapter's maps: 4 and 8)")
    ap.add_argument("--max-requests", type=_int_in(2, None, "max requests"), default=2000,
                    help="requests of a run at most, >= 2 (the map's: 2000)")
    ap.add_argument("--tie-rate", type=_type(_share), default=map_steady.TIE_RATE,
                    help=f"a tie's rate, a share of its goodputs' geometric mean (default {map_steady.TIE_RATE:g})")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, seconds (CI)")
    ap.add_argument("--merge", action="store_true", help="keep the other regions' cells of the record at --out "
                    "(one drawn from the same maps) and list this run after its runs")
    ap.add_argument("--resimulate", metavar="RECORD", help="add the in-run simulation (map_steady.in_run) to a record "
                    "served before it was kept, from --calibration (the calibration file the record's run used)")
    ap.add_argument("--ladder", metavar="RECORD", help="serve the ladder of rates of the tie in a record served "
                    "before (map_steady_tie.tie_ladder) and write it back; no other option beside it but --more-seeds")
    ap.add_argument("--more-seeds", type=_type(_seed_list), default=None, action="append", help="with --ladder: "
                    "seeds to add to the record's ladder, comma-separated, served on each of its rungs before it goes "
                    "on")
    ap.add_argument("--sitting", metavar="RECORD", help="serve the tie in a record served before in one sitting "
                    "(map_steady_tie_sitting.serve_sitting: a grid of rates fixed in advance, seed by seed) and write "
                    "it back after each seed; no other option beside it")
    ap.add_argument("--calibration", help="with --resimulate: that run's calibration (splitlab's cache keeps it)")
    args = ap.parse_args(argv)
    if args.more_seeds is not None:  # given once: a second --more-seeds was kept in place of the first
        if len(args.more_seeds) > 1:
            ap.error("--more-seeds given more than once: give its seeds once, comma-separated")
        args.more_seeds = args.more_seeds[0]
    said = [a.split("=")[0] for a in (sys.argv[1:] if argv is None else argv)]
    for flag, own in (("ladder", ("ladder", "more_seeds")), ("sitting", ("sitting",))):
        if said.count(f"--{flag}") > 1:  # argparse keeps the last: the first record was dropped in silence
            ap.error(f"--{flag} given more than once: give one record")
        if getattr(args, flag) is not None and not getattr(args, flag).strip():
            ap.error(f"--{flag} needs a record's path, got {getattr(args, flag)!r}")
        if getattr(args, flag) is not None:  # it serves the record's own tie and writes it back: --out... dropped
            default = vars(ap.parse_args([]))
            given = [k for k, v in vars(args).items() if k not in own and (
                v != default[k] or "--" + k.replace("_", "-") in said)]  # a default given is dropped too
            if given:
                ap.error(f"--{flag} serves the record's tie as it was served and writes it back: "
                         f"{', '.join('--' + k.replace('_', '-') for k in given)} not read with it")
    if args.resimulate:
        return _resimulate(args.resimulate, args.calibration, ap)
    if args.ladder:
        return _ladder(args.ladder, argv, ap, args.more_seeds)
    if args.sitting:
        return _sitting(args.sitting, argv, ap)
    if args.more_seeds is not None:
        ap.error("--more-seeds adds seeds to a record's ladder: give it with --ladder")
    if args.calibration:
        ap.error("--calibration is read only with --resimulate (a run calibrates here, or reuses this machine's)")
    if args.merge and not args.out:
        ap.error("--merge needs --out (the record whose other regions' cells are kept)")
    seeds, regions = args.seeds, args.regions
    base = _record(args.out, "--merge", ap) if args.merge and os.path.exists(args.out) else None
    if base is not None and base[0].get("workers", 4) != args.workers:
        ap.error(f"--merge: the record at {args.out} holds cells of {base[0].get('workers', 4)} workers, this run "
                 f"--workers {args.workers}: give another --out")
    t0, cpu0 = time.time(), time.process_time()
    lm = sl.load_model("tiny")
    sl.phases.device.set_cpu_clock("thread")
    small = dict(prompt_tokens=[16, 48, 128], decode_batches=[1, 2, 4], contexts=[16, 48], transfer_tokens=[64, 256],
                 repeats=1, rounds=1) if args.quick else {}
    cal = sl.profiling.calibrate_or_reuse(lm, **small)
    cost = cal.cost.over_link(LINK)
    if args.quick:
        axes, search, seeds, regions, cap = dict(prompt_tokens=[16, 64], tpot_steps=(1.5, 10.0)), \
            dict(max_requests=12, min_requests=8), seeds[:2], regions[:1], 12
    else:
        axes, search, cap = dict(prompt_tokens=SM.prompt_axis(cost, 16, 1024, 4), **AXES), \
            dict(max_requests=2000), args.max_requests
    maps = sl.widgets.split_map_grid(cost, (None, 0.01), args.workers, progress=False, **search, **axes)
    print(f"map of {args.workers} workers: {maps[None].counts()} on its own link, {maps[0.01].counts()} at 0.01 GB/s",
          flush=True)
    picked, cells = map_steady.pick_cells(maps), {}
    for region in [r for r in regions if r in picked]:
        c = cells[region] = map_steady.steady_cell(*picked[region], lm, cost, region=region, seeds=seeds,
                                                   max_requests=cap, tie_rate=args.tie_rate)
        print(f"{region}: {c.map_prompt_tokens} tokens, TPOT {c.tpot_steps:g} steps"
              f"{'' if c.link_gbps is None else f', {c.link_gbps:g} GB/s'}: {c.winner} vs {c.rival} at "
              f"{c.rate_per_worker:.3g}/s per worker; measured {c.measured}; predicted {c.predicted}; {c.outcome()}"
              f" ({c.cpu_s:.0f} s CPU; pilot of {c.extra['pilot']['requests']} requests: prefill "
              f"x{c.extra['pilot']['prefill']:.3g}, decode x{c.extra['pilot']['decode']:.3g} the probe's model; "
              f"steps against the placed model: {c.extra['steps']})", flush=True)
        if region == "tie" and not args.quick:
            c.extra["ladder"] = _laddered(c, lm)
        if args.out:  # after each cell: a run stopped later keeps what it served
            _save(args, cells, _meta(args, argv, lm, cal, maps, t0, cpu0, cells), base)
    print(map_steady_text.steady_table(cells).to_string())
    meta = _meta(args, argv, lm, cal, maps, t0, cpu0, cells)
    if args.out:
        print("wrote", _save(args, cells, meta, base))
    print(f"took {meta['runs'][-1]['wall_s']} s ({meta['runs'][-1]['cpu_s']} s CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
