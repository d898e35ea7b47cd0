"""Device and dtype choice, synchronisation and timers.

On a GPU, kernels run asynchronously: a Python clock around a forward pass measures only the launch.
:class:`Timer` therefore records CUDA events on CUDA devices and reads them after a synchronise; on CPU and
MPS it uses ``time.perf_counter`` after a synchronise, or, after ``set_cpu_clock("thread")``, the CPU time of
the calling thread (other programs on a shared CPU then cannot stretch a measurement).
"""
from __future__ import annotations

import numbers
import statistics
import time

import torch

from ..common import dtypes

__all__ = ["pick_device", "pick_dtype", "synchronize", "Timer", "describe_device", "set_cpu_clock",
           "runnable", "STATISTICS", "check_measurement"]

#: how the measurements summarise their repeats: the median (noise on both sides) or the fastest ("min": other
#: programs on a shared machine only ever add time)
STATISTICS = {"median": statistics.median, "min": min}


def check_measurement(statistic: str, **counts) -> None:
    """Refuse, before anything is measured, a statistic not in :data:`STATISTICS` or a count (name=value) that is
    not an integer >= 1 (a count < 1 measured nothing and ended in 'no median for empty data').

    Raises:
        ValueError: naming the statistic or the count.
    """
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {sorted(STATISTICS)}, got {statistic!r}")
    for name, n in counts.items():
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {n!r}")

_CPU_CLOCK = {"clock": "wall"}


def set_cpu_clock(clock: str) -> str:
    """Choose what :class:`Timer` measures on a CPU: "wall" (``time.perf_counter``, the default) or "thread"
    (``time.thread_time``: the CPU time of the calling thread, which other processes on a shared machine do not
    stretch; a burst of other work then slows the wall clock but not the measurement). Returns the previous
    setting. CUDA timings (events) are not affected.

    Raises:
        ValueError: an unknown clock, or "thread" while torch runs more than one CPU thread (the other threads'
            work would not be counted): call ``torch.set_num_threads(1)`` first.
    """
    if clock not in ("wall", "thread"):
        raise ValueError(f"clock must be 'wall' or 'thread', got {clock!r}")
    if clock == "thread" and torch.get_num_threads() != 1:
        raise ValueError(f"the thread clock counts only the calling thread, but torch runs {torch.get_num_threads()}"
                         f" CPU threads: call torch.set_num_threads(1) first")
    previous, _CPU_CLOCK["clock"] = _CPU_CLOCK["clock"], clock
    return previous


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """Return ``device`` as a :class:`torch.device`, or the best available one (cuda > mps > cpu) when None.

    Raises:
        ValueError: ``device`` is not a device name, is one splitlab does not run models on (e.g. "meta"), or
            names a backend this machine does not have (e.g. "cuda" without a GPU).
    """
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if not isinstance(device, (str, torch.device)):  # never the repr of what came instead (a whole tokenizer)
        raise ValueError(f"device must be a name such as 'cpu' or a torch.device, got a {type(device).__name__}")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {device!r:.60}: use cpu, cuda, cuda:N or mps") from None
    runnable(dev)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} asked for, but torch sees no CUDA GPU here; use 'cpu'")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {str(device)!r} asked for, but MPS is not available here; use 'cpu'")
    return dev


def runnable(device: torch.device) -> torch.device:
    """``device`` if splitlab runs models there (cpu, cuda, mps); else a ValueError naming it ("meta" tensors have
    no data, so nothing could be computed or timed)."""
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device {str(device)!r} is not one splitlab runs models on: use cpu, cuda, cuda:N or mps")
    return device


def pick_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """Return ``dtype`` as a :class:`torch.dtype`; when None, float32 on CPU and bfloat16 on GPUs.

    Raises:
        ValueError: an unknown dtype name, or a torch dtype that is not floating point (weights need one).
    """
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise ValueError(f"dtype {dtype} is not a floating-point type; choose one of "
                             f"{sorted(a for a, c in dtypes.ALIASES.items() if c in dtypes.WEIGHT_DTYPES)}")
        return dtype
    if dtype is None:
        return torch.float32 if device.type == "cpu" else torch.bfloat16
    return dtypes.torch_dtype(dtype, dtypes.WEIGHT_DTYPES)


def synchronize(device: torch.device | str) -> None:
    """Wait until all queued work on ``device`` has finished (no-op on CPU)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


def describe_device(device: torch.device | str) -> str:
    """A human-readable name of ``device``: the GPU model, or 'CPU (N threads)'."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    if dev.type == "mps":
        return "Apple MPS"
    n = torch.get_num_threads()
    return f"CPU ({n} thread{'' if n == 1 else 's'})"


class Timer:
    """Context manager measuring the wall time of GPU or CPU work in seconds.

    ``with Timer(device) as t: ...`` then ``t.seconds``. On CUDA it records events on the current stream and
    synchronises on exit, so queued kernels are counted; elsewhere it synchronises and uses perf_counter (or the
    thread's CPU time, see :func:`set_cpu_clock`).
    """

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self.seconds = float("nan")

    def __enter__(self) -> "Timer":
        if self.device.type == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            synchronize(self.device)
            self._clock = time.thread_time if _CPU_CLOCK["clock"] == "thread" else time.perf_counter
            self._t0 = self._clock()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            self._end.record()
            self._end.synchronize()
            self.seconds = self._start.elapsed_time(self._end) / 1e3
        else:
            synchronize(self.device)
            self.seconds = self._clock() - self._t0
