"""This device's ceilings, measured: the practical compute peak (FLOP/s of large matmuls), the memory bandwidth
(bytes/s of copying or reading a buffer far larger than any cache) and the size of its last-level cache.

These are the two numbers of the roofline {Williams, Waterman and Patterson, CACM 2009} and the one number that
says whether a model's weights come from main memory at all. On a CPU every measurement runs on torch's current
threads (the chapters set one: ``torch.set_num_threads(1)``), so it is the bandwidth one core can draw.
"""
from __future__ import annotations

import glob
import os

import torch

from .device import STATISTICS, Timer, check_measurement

__all__ = ["device_memory_bytes", "measure_matmul_flops", "measure_peak_flops", "measure_memory_bandwidth",
           "last_level_cache", "FALLBACK_LLC_BYTES"]

#: Assumed when the machine does not say (32 MiB: the L3 of one CPU complex of a current server CPU).
FALLBACK_LLC_BYTES = 32 * 2 ** 20



def device_memory_bytes(device: torch.device | str) -> int:
    """The memory a worker on ``device`` owns, in bytes: a CUDA GPU's total memory, else this machine's RAM
    (``os.sysconf``). The emulated back end sizes each worker's KV budget from it, and a calibration records it."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _best_seconds(fn, repeats: int, statistic: str) -> float:
    check_measurement(statistic)
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    fn()  # warm-up: allocator, page faults, kernel selection
    return STATISTICS[statistic]([fn() for _ in range(repeats)])


def measure_matmul_flops(device: torch.device | str, dtype: torch.dtype = torch.float32, n: int = 1024,
                         repeats: int = 5, statistic: str = "median") -> float:
    """Achieved FLOP/s of an n x n x n matmul (2 n^3 FLOPs) on ``device``: this machine's practical compute peak.
    ``statistic="min"`` uses the fastest of ``repeats`` runs (the best rate) instead of the median."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)

    def once() -> float:
        with Timer(device) as t:
            a @ b
        return t.seconds

    return 2 * n ** 3 / _best_seconds(once, repeats, statistic)


def measure_peak_flops(device: torch.device | str, dtype: torch.dtype = torch.float32,
                       sizes: tuple[int, ...] | None = None, repeats: int = 10) -> tuple[float, int]:
    """This device's practical compute peak (FLOP/s): the best rate of square matmuls of a few ``sizes``, each
    the fastest of ``repeats`` runs. No single size is best everywhere (small ones fit in caches, big ones keep
    more cores busy), so several are tried: 512..2048 on CPUs, 2048..8192 on GPUs by default.

    Returns (FLOP/s, the size n that reached it).
    """
    if sizes is None:
        sizes = (512, 1024, 2048) if torch.device(device).type == "cpu" else (2048, 4096, 8192)
    rates = {n: measure_matmul_flops(device, dtype, n=n, repeats=repeats, statistic="min") for n in sizes}
    best = max(rates, key=rates.get)
    return rates[best], best


def measure_memory_bandwidth(device: torch.device | str, nbytes: int | None = None, repeats: int = 5,
                             statistic: str = "median", kind: str = "copy") -> float:
    """Achieved memory bandwidth (bytes/s) on ``device``, on torch's current threads.

    ``kind="copy"`` copies a float32 buffer of ``nbytes`` into another and counts the bytes read and written
    (2 x nbytes per copy), the STREAM "copy" convention; ``kind="read"`` sums the buffer and counts the bytes
    read (nbytes), which is what a decode step mostly does with its weights. ``nbytes`` defaults to 256 MiB or
    8x the last-level cache, whichever is larger, so the buffer comes from main memory. ``statistic="min"``
    uses the fastest of ``repeats`` runs (the best rate) instead of the median.

    Raises:
        ValueError: an unknown ``kind`` or ``statistic``, ``nbytes`` < 4 or ``repeats`` < 1.
    """
    if kind not in ("copy", "read"):
        raise ValueError(f"kind must be 'copy' or 'read', got {kind!r}")
    if nbytes is None:
        nbytes = max(256 * 2 ** 20, 8 * last_level_cache(device)[0])
    if nbytes < 4:
        raise ValueError(f"nbytes must be at least 4 (one float32), got {nbytes}")
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src) if kind == "copy" else None

    def once() -> float:
        with Timer(device) as t:
            if dst is not None:
                dst.copy_(src)
            else:
                src.sum()
        return t.seconds

    moved = 2 * src.numel() * 4 if kind == "copy" else src.numel() * 4
    return moved / _best_seconds(once, repeats, statistic)


def _size_bytes(text: str) -> int:
    """'32768K' -> 33554432 (sysfs cache sizes); plain numbers are bytes."""
    text = text.strip().upper()
    scale = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def last_level_cache(device: torch.device | str = "cpu") -> tuple[int, str]:
    """Size of the last-level cache in bytes, and where the number came from.

    CUDA: the GPU's L2 (``torch.cuda.get_device_properties``). CPU: the highest cache level of cpu0 in Linux
    sysfs (``/sys/devices/system/cpu/cpu0/cache/index*/``), else ``getconf LEVEL3_CACHE_SIZE`` / ``LEVEL2``
    (which some virtual machines report for the whole host), else :data:`FALLBACK_LLC_BYTES`. Never raises.
    """
    dev = torch.device(device)
    if dev.type == "cuda":
        size = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0)
        if size:
            return int(size), "torch.cuda.get_device_properties: L2_cache_size"
    elif dev.type == "cpu":
        levels = []
        for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
            try:
                with open(os.path.join(index, "level")) as f, open(os.path.join(index, "size")) as g, \
                        open(os.path.join(index, "type")) as h:
                    if h.read().strip() != "Instruction":
                        levels.append((int(f.read()), _size_bytes(g.read())))
            except (OSError, ValueError):
                continue
        if levels:
            level, size = max(levels)
            return size, f"sysfs: L{level} of cpu0"
        for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
            try:
                size = os.sysconf(name)
            except (ValueError, OSError):
                continue
            if size and size > 0:
                return int(size), f"getconf {name[3:]}"
    return FALLBACK_LLC_BYTES, "assumed (the machine does not report it)"
