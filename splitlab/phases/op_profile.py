"""Where a forward pass's time goes, operator by operator (``torch.profiler``), and what the profiler itself
costs: the same call timed with and without it.

The profiler records every operator it sees, and the recording takes time of its own, which lands in the
operators' times; on a shared machine another program can also stretch a profiled run. So each profiled run is
timed as a whole beside the same call without the profiler, and of several profiled runs the fastest is kept
(other programs only ever add time)."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Callable

import pandas as pd
import torch

from .device import synchronize

__all__ = ["op_shares"]


@contextlib.contextmanager
def _quiet_native_stderr():
    """Send the process's file descriptor 2 to /dev/null for a moment (the profiler's C++ side prints
    start/stop lines there); Python-level errors still show."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _wall_s(fn: Callable[[], object], device) -> float:
    """Wall-clock seconds of ``fn()``, the device synchronised before and after (the profiler's clock too)."""
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


def op_shares(fn: Callable[[], object], device: torch.device | str, repeats: int = 3, top: int = 5) -> pd.DataFrame:
    """Where the time of ``fn()`` goes: run it once to warm up, then ``repeats`` times alone and ``repeats`` times
    each under its own ``torch.profiler`` session; the profiled run whose operators took least in all is kept.

    ATen operators are ranked by self time (time of the GPU kernels they launch on CUDA devices, CPU time
    elsewhere). Returns the ``top`` operators with columns ``operator`` (aten name), ``ms_per_call`` (self time
    in the kept run, milliseconds) and ``share`` (fraction of all operators' self time in it). ``attrs`` holds
    ``step_s`` (the fastest ``fn()`` without the profiler), ``profiled_step_s`` (the kept profiled ``fn()``) and
    ``ops_s`` (all its operators' self time), in wall-clock seconds, so the profiler's own cost can be read off.

    Raises:
        ValueError: ``repeats`` or ``top`` < 1.
    """
    from torch.profiler import ProfilerActivity, profile

    if repeats < 1 or top < 1:
        raise ValueError(f"repeats and top must be >= 1, got repeats={repeats}, top={top}")
    on_gpu = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    fn()
    alone = min(_wall_s(fn, device) for _ in range(repeats))
    best = None
    for _ in range(repeats):
        with _quiet_native_stderr(), profile(activities=activities) as prof:
            seconds = _wall_s(fn, device)
        # aten operators only (on CUDA the kernels they launch appear as rows of their own); times in microseconds
        ops = [(e.key, e.self_device_time_total if on_gpu else e.self_cpu_time_total) for e in prof.key_averages()
               if e.key.startswith("aten::")]
        total = sum(t for _, t in ops)
        if best is None or total < best[0]:
            best = (total, seconds, ops)
    total, seconds, ops = best
    ops.sort(key=lambda op: -op[1])
    out = pd.DataFrame([dict(operator=name, ms_per_call=t / 1e3, share=t / (total or 1.0)) for name, t in ops[:top]])
    out.attrs.update(step_s=alone, profiled_step_s=seconds, ops_s=total / 1e6)
    return out
