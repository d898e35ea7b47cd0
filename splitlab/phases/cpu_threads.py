"""How many CPU threads torch runs a model on: the user's count when they set one, else splitlab's choice
(:func:`splitlab.common.threads.choose_threads`: one thread for a model whose weights fit in the last-level cache,
else the idle CPUs). :func:`splitlab.load_model` calls :func:`settle_threads` once per model and records the
outcome on the model (``lm.threads``, ``lm.threads_note``); nothing is set per call.

A count is the user's when ``threads=`` is given, when ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` holds a count, or when
torch runs a count that is neither its own default (the physical cores or the CPUs) nor the one splitlab set last
(``torch.set_num_threads(3)`` before loading), or when it was set with :func:`pin_threads` (what the chapters'
``notebook.setup``, the worker processes and ``transfer --threads`` call). A ``torch.set_num_threads`` call that
happens to equal torch's default cannot be told from the default: pass ``threads=`` or call :func:`pin_threads`.
"""
from __future__ import annotations

import logging
import os

import torch

from ..common.threads import check_threads, choose_threads, max_threads, physical_cores

__all__ = ["settle_threads", "pin_threads", "THREAD_ENV"]

#: environment variables that set OpenMP's thread count before torch starts
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
_LAST = {"set": None, "pinned": None}  # the count splitlab chose last (not the user's); the one pinned
log = logging.getLogger("splitlab")


def _plural(n: int) -> str:
    return f"{n} CPU thread{'' if n == 1 else 's'}"


def pin_threads(threads: int) -> int:
    """``torch.set_num_threads(threads)`` as the caller's own choice, which :func:`settle_threads` then keeps (even
    when it equals torch's default). Returns ``threads``.

    Raises:
        ValueError: ``threads`` is not an integer in 1 .. this machine's CPU count.
    """
    n = check_threads(threads)
    torch.set_num_threads(n)
    _LAST["pinned"] = n
    return n


def _counts(value: str) -> bool:
    """Whether ``value`` of an environment variable of :data:`THREAD_ENV` is a thread count OpenMP takes: positive
    integers, comma-separated for nested levels ("4" or "4,2"). libgomp ignores anything else ("abc", "0", "-1",
    "1.5") with a warning, and torch runs its default."""
    parts = [p.strip() for p in value.split(",")]
    return bool(value.strip()) and all(p.isdigit() and int(p) > 0 for p in parts)


def _ignored() -> str:
    """"; OMP_NUM_THREADS=abc is not a thread count (OpenMP ignored it)" for each such variable set, else ""."""
    bad = [f"{name}={os.environ[name].strip()}" for name in THREAD_ENV
           if os.environ.get(name, "").strip() and not _counts(os.environ[name])]
    return f"; {' and '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a thread count (OpenMP ignored it)" \
        if bad else ""


def _users(current: int) -> str | None:
    """Where the user set torch's current count, or None when it is torch's default or splitlab's own."""
    if current == _LAST["pinned"]:
        return f"set to {current} before loading"
    for name in THREAD_ENV:
        if _counts(os.environ.get(name, "")):
            return f"{name}={os.environ[name].strip()} is set"
    defaults = {max_threads(), physical_cores()}
    if hasattr(os, "sched_getaffinity"):
        defaults.add(len(os.sched_getaffinity(0)))
    if current != _LAST["set"] and current not in defaults:
        return f"torch.set_num_threads({current}) was called"
    return None


def settle_threads(device: torch.device, weight_bytes: int, threads: int | None = None,
                   cache_bytes: int | None = None) -> tuple[int, str]:
    """Set torch's CPU threads for a model of ``weight_bytes`` on ``device`` unless the user set them; return
    ``(threads torch now runs, one line saying why)``.

    Args:
        device: where the model runs; on a GPU the CPU threads are left as they are (unless ``threads`` is given).
        weight_bytes: the model's weights in bytes.
        threads: the user's count (``threads=`` / ``--threads``): set as given.
        cache_bytes: the CPU's last-level cache (default: :func:`splitlab.phases.hardware.last_level_cache`).

    Raises:
        ValueError: ``threads`` is not an integer in 1 .. this machine's CPU count.
    """
    if threads is not None:
        return pin_threads(threads), f"{_plural(threads)}, as asked"
    current = torch.get_num_threads()
    if torch.device(device).type != "cpu":
        return current, f"{_plural(current)} (left as they are: the model runs on {torch.device(device).type})"
    users = _users(current)
    if users:
        return current, f"{_plural(current)}: yours ({users}), kept"
    if cache_bytes is None:
        from .hardware import last_level_cache
        cache_bytes = last_level_cache("cpu")[0]
    n, why = choose_threads(weight_bytes, cache_bytes)
    torch.set_num_threads(n)
    _LAST["set"] = n
    note = f"{_plural(n)}, chosen by splitlab: {why}{_ignored()} (threads=N or --threads N to change)"
    log.info(note)
    return n, note
