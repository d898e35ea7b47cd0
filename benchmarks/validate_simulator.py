"""Is the simulator right? Calibrate the cost model on this device, then serve the same requests emulated (the
real model times every step) and simulated (the calibrated cost model predicts them), for 3 workloads x 3
contenders (colocated prefill-first, colocated chunked, split), and compare TTFT and TPOT P50 / P90.

    python benchmarks/validate_simulator.py [--model tiny] [--requests 64] [--workers 2] [--scale 0.5]
                                            [--clock thread] [--repeats 3] [--no-bracket] [--link NAME]
                                            [--json] [--quick]

The contenders run the serving model of issue 20: a chunked step is one fused forward of the decode rows and the
prompt chunk (the emulated back end runs ``phases.fused.hybrid_forward``, the cost model charges ``hybrid_s``; a
model family that cannot fuse falls back to two passes, printed), every worker's batch is bounded by its KV
budget (``max_batch=None``; chunked keeps its ``chunk_tokens - 1`` rows), and the split's KV caches cross a named
link (``--link``, default the 25 Gb/s network of chapters 6-7; ``--link copy``: the measured same-device copy)
through one NIC per worker, charged the same ``latency + bytes / bandwidth`` in both runs.

Goal: every |simulated / emulated - 1| <= 15%. A shared machine's speed drifts (the same decode step of the
tiny model runs 1.5-1.75x slower in some seconds than in others on this 2-core VM), so by default each contender
is emulated ``--repeats`` times, interleaved, and compared by its median (64 requests and 3 runs by default: with
32 and 2, a P90 is the 29th of 32 values and a median of two is their mean, and real runs of the same requests
disagreed at P90 by up to 32% on a quiet machine); the spread of those real runs is
printed beside the error, as the check's noise floor; and each workload is simulated on the calibration before
its emulated runs and the one after, fitted as one (``--no-bracket``: only the one before). Rates: each workload
at a rate that keeps the colocated workers about half busy by the calibrated cost model (``splitlab.serving.validation.default_rates``). On a CPU, one torch
thread, and by default every step (of the calibration and of the emulated runs alike) is timed by that thread's
CPU time (``--clock thread``), so other programs on a shared machine do not stretch the steps; ``--clock wall``
times them by the wall clock.

Each workload is also simulated on the cost model fitted again to the steps its emulated runs measured
(``validate(..., in_run=True)``): the device's speed during the runs, drift included, so the "in-run" error is
the simulator's own (scheduling, queueing, the cost formula), the part a better device would not remove.

``--quick``: a small calibration, one workload of 6 short requests, one emulated run (a smoke test for CI; its
numbers mean nothing).
"""
from __future__ import annotations

import argparse
import json
import os

import pandas as pd
import torch

import splitlab as sl
from splitlab.planning.batch import batch_bound
from splitlab.phases.locate import ModelNotFound
from splitlab.serving import ModelExecutor, link_fields, make_workload
from splitlab.serving import validation as V
from splitlab.sizing import LINKS

#: the link the split's caches cross by default (chapters 6-7's)
LINK = "25 Gb/s network"
#: most workers a validation emulates (each an emulated worker on the one thread timing every step)
MAX_WORKERS = 16
#: the workloads it serves
WORKLOADS = ("research", "chat", "code")


def describe(contenders, executor, workloads, n_requests: int, scale) -> list[str]:
    """One line per contender: how its hybrid steps run, what its KV crosses, and the requests a worker holds
    (its batch bound for each workload's requests, and what binds it)."""
    lines = []
    for label, cfg in contenders.items():
        parts = [f"hybrid steps {executor.hybrid_path}"] if cfg.policy == "chunked" else []
        if cfg.layout != "colocated":
            parts.append(f"KV over {cfg.link_bytes_per_s / 1e9:.3g} GB/s, one NIC per worker"
                         if cfg.link_bytes_per_s else "KV by the measured copy")
        bounds = []
        for name in workloads:
            reqs = make_workload(name, n_requests, 1.0, model=executor.lm, scale=scale)
            b = batch_bound(executor, cfg, [r.prompt_len for r in reqs], [r.max_new_tokens for r in reqs])
            bounds.append(f"{name} {b.batch:,.0f} ({b.binds})")
        parts.append(f"max_batch {cfg.max_batch}, requests a worker holds: {', '.join(bounds)}")
        lines.append(f"  {label}: {'; '.join(parts)}")
    return lines


def _check(ap: argparse.ArgumentParser, args) -> None:
    """Refuse bad arguments before the calibration (half a minute) and the runs: exit 2 naming the option."""
    if args.requests < V.IN_RUN_MIN_REQUESTS:
        ap.error(f"--requests must be at least {V.IN_RUN_MIN_REQUESTS} (the in-run fit needs that many forwards of "
                 f"each kind), got {args.requests}")
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    if not 2 <= args.workers <= MAX_WORKERS:
        ap.error(f"--workers must be 2 to {MAX_WORKERS} (the split needs a prefill and a decode worker; each worker "
                 f"is emulated on this one CPU thread), got {args.workers}")
    if args.seed < 0:
        ap.error(f"--seed must be an integer >= 0, got {args.seed}")
    if args.scale is not None and not 0 < args.scale < float("inf"):
        ap.error(f"--scale must be a finite positive number (workload lengths), got {args.scale}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--requests", type=int, default=64, help="requests per workload (P90: the 58th of 64)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--scale", type=float, default=None, help="workload lengths (default: the model's)")
    ap.add_argument("--clock", choices=("thread", "wall"), default="thread")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="emulated runs of each contender (median compared)")
    ap.add_argument("--no-bracket", action="store_true", help="simulate on the calibration before the runs only")
    ap.add_argument("--link", default=LINK, choices=[*LINKS, "copy"],
                    help=f"the link the split's KV caches cross (default {LINK!r}; 'copy': the measured copy)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, seconds (CI)")
    args = ap.parse_args(argv)
    _check(ap, args)
    small = dict(prompt_tokens=[16, 48, 128], decode_batches=[1, 2, 4], contexts=[16, 48], transfer_tokens=[64, 256],
                 repeats=1, rounds=1) if args.quick else {}
    if args.quick:
        args.requests, args.repeats, args.scale = 6, 1, args.scale or 0.3
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    try:
        lm = sl.load_model(args.model, threads=1)
    except ModelNotFound as e:
        ap.error(f"--model {args.model!r}: {e}")
    for name in WORKLOADS:  # a scale the model's context cannot hold, refused before the calibration
        try:
            make_workload(name, args.requests, 1.0, model=lm, scale=args.scale)
        except ValueError as e:
            ap.error(f"--scale {args.scale}: {e}")
    if lm.device.type == "cpu":
        sl.phases.device.set_cpu_clock(args.clock)
    cal = sl.profiling.calibrate(lm, **small)
    rates = V.default_rates(cal.cost, lm, n_workers=args.workers, names=WORKLOADS, scale=args.scale)
    rates = dict(list(rates.items())[:1]) if args.quick else rates
    contenders = V.validation_contenders(args.workers, **({} if args.link == "copy" else link_fields(args.link)))
    emu = ModelExecutor(lm)
    header = describe(contenders, emu, rates, args.requests, args.scale)
    options = dict(contenders=contenders, executor=emu, n_requests=args.requests, seed=args.seed, scale=args.scale,
                   repeats=args.repeats, in_run=True)
    if args.no_bracket:  # calibrate again right before each workload
        parts = [V.validate(lm, cal if not i else sl.profiling.calibrate(lm, **small), workloads={name: rate},
                            **options)
                 for i, (name, rate) in enumerate(rates.items())]
        table = pd.concat(parts, ignore_index=True)
    else:  # calibrations before and after each workload, fitted as one; the one after is the next one's before
        table = V.validate(lm, cal, workloads=rates, recalibrate=lambda: sl.profiling.calibrate(lm, **small),
                           **options)
    verdict = V.verdict(table)
    if args.json:
        print(json.dumps(dict(model=lm.name, device=cal.meta["device"], load_average=load, clock=cal.meta["clock"],
                              repeats=args.repeats, bracket=not args.no_bracket,
                              link=args.link, contenders=header,
                              fits={k: f.summary() for k, f in cal.fits.items()}, verdict=verdict,
                              rows=table.to_dict("records"), max_abs_error=verdict["largest"])))
        return
    print(f"{lm.name} on {cal.meta['device']}, steps timed by {cal.meta['clock']} clock, load average {load:.2f} "
          f"before the runs; {args.workers} workers, {args.requests} requests per workload, {args.repeats} emulated "
          f"run(s) per contender, "
          f"{'calibrations before and after each workload' if not args.no_bracket else 'calibrated before each'}")
    print("contenders:")
    print("\n".join(header))
    for f in cal.fits.values():
        print(f"  first calibration {f!r}")
    with pd.option_context("display.width", 160, "display.float_format", "{:+.1%}".format):
        for values, title in (("error", "simulated / emulated - 1:"),
                              ("emulated_spread", "emulated runs of the same requests, max / min - 1:"),
                              ("in_run_error", "simulated on the runs' own step times (in-run fit) / emulated - 1:")):
            if table[values].notna().any():
                print(title)
                print(table.pivot_table(index=["workload", "contender"], columns="metric", values=values, sort=False))
    v = verdict
    print(f"largest error {v['largest']:.1%} ({v['where']}); {v['within']} of the {v['values']} values within "
          f"{v['tolerance']:.0%}")
    print(f"in-run fit: largest error {v['in_run_largest']:.1%} ({v['in_run_where']}); {v['in_run_within']} of the "
          f"{v['values']} values within {v['tolerance']:.0%}")
    if args.repeats > 1:
        print(f"real runs of the same requests disagreed by {v['spread_median']:.1%} (median) and up to "
              f"{v['spread_max']:.1%}; {v['within_spread']} of the {v['values']} errors are within that spread")

if __name__ == "__main__":
    main()
