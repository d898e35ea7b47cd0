"""The one check of a thread count, and the one choice of how many threads a CPU run uses (torch-free).

``torch.set_num_threads`` takes any positive number: 10,000 OpenMP threads starved a 2-core machine for minutes
and 100,000 segfaulted it (or failed to map the next shared library), so a count is bounded by this machine's
CPU count.

:func:`choose_threads` is what ``splitlab.load_model`` (and through it the CLI) runs a CPU model on when the user
set no count (no ``threads=`` / ``--threads``, no ``OMP_NUM_THREADS``, no ``torch.set_num_threads``). OpenMP
threads wait for each other at the end of every operator; a decode step of a small model is hundreds of operators
of microseconds each, so a second thread buys little, and when another program holds a core each wait can cost a
scheduler slice. Measured on the 2-core development machine with other work running (load average 1.7, median
decode step of 16 tokens): ``tiny`` 9.1 ms on one thread vs 61 ms on two; ``stories42m`` 46 vs 129 ms;
``smollm2-135m`` 160 vs 354 ms. Hence one thread when the weights fit in the last-level cache (the work per
operator is too small to share), else as many threads as there are idle CPUs by the 1-minute load average (at
least 1, at most torch's own default).
"""
from __future__ import annotations

import glob
import math
import numbers
import os

__all__ = ["max_threads", "check_threads", "physical_cores", "choose_threads"]


def max_threads() -> int:
    """The most threads splitlab lets torch run: this machine's CPU count (``os.cpu_count()``)."""
    return os.cpu_count() or 1


def check_threads(value, name: str = "threads") -> int:
    """``value`` as an int if it is an integer in 1 .. :func:`max_threads`.

    Raises:
        ValueError: ``value`` is not an integer (a bool, a float, a string) or is outside 1 .. the CPU count;
            the message names ``name``, the value and the machine's CPU count.
    """
    limit = max_threads()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= limit:
        raise ValueError(f"{name} must be an integer in 1 .. {limit} (this machine has {limit} CPUs), got {value!r}")
    return int(value)


def physical_cores() -> int:
    """Physical cores (distinct package and core ids in Linux sysfs; torch's default thread count), else the CPU
    count."""
    cores = set()
    for topology in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology"):
        try:
            with open(f"{topology}/physical_package_id") as p, open(f"{topology}/core_id") as c:
                cores.add((p.read().strip(), c.read().strip()))
        except OSError:
            continue
    return len(cores) or max_threads()


def _mib(n: float) -> str:
    return f"{n / 2 ** 20:.0f} MiB" if n >= 2 ** 20 else f"{n / 2 ** 10:.0f} KiB"


def choose_threads(weight_bytes: int, cache_bytes: int, cap: int | None = None,
                   load: float | None = None) -> tuple[int, str]:
    """``(threads, why)`` for a model of ``weight_bytes`` on this CPU (see the module docstring for the numbers).

    Args:
        weight_bytes: the model's weights in bytes.
        cache_bytes: the CPU's last-level cache in bytes.
        cap: at most this many threads (default: :func:`physical_cores`).
        load: the 1-minute load average (default: ``os.getloadavg()``; 0 where the system has none).

    Returns:
        1 when the weights fit in the cache; else ``round(CPUs - load)`` clamped to 1 .. ``cap``; and one
        sentence saying why.

    Raises:
        ValueError: ``cap`` not None or an integer >= 1, ``load`` not None or a finite number >= 0 (nan and inf
            were "cannot convert float NaN to integer", -1e308 a sentence of 300 digits).
    """
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, numbers.Integral) or cap < 1):
        raise ValueError(f"cap must be an integer >= 1 (at most this many threads) or None, got {cap!r}")
    if load is not None and (isinstance(load, bool) or not isinstance(load, numbers.Real) or
                             not 0 <= load < math.inf):
        raise ValueError(f"load must be a 1-minute load average: a finite number >= 0, got {load!r}")
    cap = max(1, min(max_threads(), cap or physical_cores()))
    if weight_bytes <= cache_bytes:
        return 1, (f"its {_mib(weight_bytes)} of weights fit in the {_mib(cache_bytes)} last-level cache: each "
                   f"operator is too little work to share between threads")
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (OSError, AttributeError):
            load = 0.0
    idle = round(max_threads() - load)
    n = max(1, min(cap, idle))
    return n, (f"{_mib(weight_bytes)} of weights; {max(0, idle)} of {max_threads()} CPUs idle by the 1-minute load "
               f"average ({load:.1f})" + (f", at most {cap}" if idle > cap else ""))
