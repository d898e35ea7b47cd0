"""Is the simulator right? Calibrate the cost model on this device, then serve the same requests emulated (the
real model times every step) and simulated (the calibrated cost model predicts them), for 3 workloads x 3
contenders (colocated prefill-first, colocated chunked, split), and compare TTFT and TPOT P50 / P90.

    python benchmarks/validate_simulator.py [--model tiny] [--requests 32] [--workers 2] [--scale 0.5]
                                            [--clock thread] [--json]

Goal: every |simulated / emulated - 1| <= 15%. The device is calibrated again before each workload (a shared
machine's speed drifts over minutes). Rates: each workload at a rate that keeps the colocated workers
about half busy by the calibrated cost model (``splitlab.serving.validation.default_rates``). On a CPU, one torch
thread, and by default every step (of the calibration and of the emulated runs alike) is timed by that thread's
CPU time (``--clock thread``), so other programs on a shared machine do not stretch the steps; ``--clock wall``
times them by the wall clock.
"""
from __future__ import annotations

import argparse
import json
import os

import pandas as pd
import torch

import splitlab as sl
from splitlab.serving import validation as V


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--scale", type=float, default=None, help="workload lengths (default: the model's)")
    ap.add_argument("--clock", choices=("thread", "wall"), default="thread")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    lm = sl.load_model(args.model)
    if lm.device.type == "cpu":
        sl.phases.device.set_cpu_clock(args.clock)
    cal = sl.profiling.calibrate(lm)
    rates = V.default_rates(cal.cost, lm, n_workers=args.workers, scale=args.scale)
    parts = []
    for name, rate in rates.items():  # calibrate again right before each workload: the machine's speed drifts
        cal = sl.profiling.calibrate(lm) if parts else cal
        parts.append(V.validate(lm, cal.cost, workloads={name: rate}, contenders=V.validation_contenders(args.workers),
                                n_requests=args.requests, seed=args.seed, scale=args.scale))
    table = pd.concat(parts, ignore_index=True)
    if args.json:
        print(json.dumps(dict(model=lm.name, device=cal.meta["device"], load_average=load, clock=cal.meta["clock"],
                              fits={k: f.summary() for k, f in cal.fits.items()},
                              rows=table.to_dict("records"), max_abs_error=float(table.abs_error.max()))))
        return
    print(f"{lm.name} on {cal.meta['device']}, steps timed by {cal.meta['clock']} clock, load average {load:.2f} "
          f"before the runs")
    for f in cal.fits.values():
        print(f"  {f!r}")
    wide = table.pivot_table(index=["workload", "contender"], columns="metric", values="error", sort=False)
    with pd.option_context("display.width", 160, "display.float_format", "{:+.1%}".format):
        print("simulated / emulated - 1:")
        print(wide)
    worst = table.loc[table.abs_error.idxmax()]
    print(f"largest error {worst.abs_error:.1%} ({worst.workload}, {worst.contender}, {worst.metric}); "
          f"{(table.abs_error <= 0.15).mean():.0%} of the {len(table)} values within 15%")


if __name__ == "__main__":
    main()
