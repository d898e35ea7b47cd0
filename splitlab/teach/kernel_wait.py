"""Executing a chapter with nbclient without waiting for ever on a reply that has arrived.

While a cell runs, nbclient waits for the kernel's ``execute_reply`` on the shell channel, with no timeout or with
the cell's whole timeout (the book's build: 600 s). Meanwhile its mimic of an ipywidgets ``Output`` widget (an
explorer's figure) sends comm messages on that same asyncio socket. ``jupyter/nbclient#312`` reports the result:
a cell holding a widget "will sometimes block"; its reporter traces it to nbclient receiving from and sending on the
shell channel at once, and the fix proposed there (``#311``) waits with a timeout. Seen here on 2026-12-05: a test's
nbclient run still waiting 14 minutes after an explorer cell, its kernel idle.

A wait with a timeout ends with a non-blocking poll of the socket (pyzmq's asyncio poller), which finds a reply a
missed wake-up left behind. So the guard waits in slices of at most :data:`SLICE_S`: a missed wake-up costs a slice,
not the cell's timeout or for ever, and the cell's own timeout is kept.

:class:`WakefulClient` is an nbclient ``NotebookClient`` with the guard (the tests and ``benchmarks/book_on_gpu.py``
execute with it); :func:`guard_nbclient` gives every ``NotebookClient`` of this process the guard (the book build's,
which myst-nb creates: called by :mod:`.book_assets`).
"""
from __future__ import annotations

import functools
import queue
import time

#: Longest single wait for a shell message (s): what a missed wake-up costs.
SLICE_S = 1.0


def sliced(get_msg, slice_s: float = SLICE_S):
    """``get_msg`` (an async ``get_msg(timeout=None)`` of a jupyter_client channel) waiting in slices.

    Returns a coroutine function with ``get_msg``'s signature: the first message, or ``queue.Empty`` once
    ``timeout`` seconds passed (never, for ``None``), as ``get_msg`` itself does.
    Raises ValueError for a slice that is not a positive number of seconds."""
    if not isinstance(slice_s, (int, float)) or isinstance(slice_s, bool) or not 0 < slice_s < float("inf"):
        raise ValueError(f"slice_s must be a positive number of seconds, got {slice_s!r}")

    @functools.wraps(get_msg)
    async def get_msg_sliced(timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = slice_s if deadline is None else min(slice_s, max(0.0, deadline - time.monotonic()))
            try:
                return await get_msg(timeout=left)
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
    get_msg_sliced.slice_s = slice_s
    return get_msg_sliced


async def _start_guarded(start, client):
    kc = await start(client)
    if getattr(kc.shell_channel.get_msg, "slice_s", None) is None:
        kc.shell_channel.get_msg = sliced(kc.shell_channel.get_msg)
    return kc


@functools.cache
def _client_class():
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient

    class WakefulClient(NotebookClient):
        """nbclient's ``NotebookClient`` whose shell channel waits in slices (see the module)."""

        async def async_start_new_kernel_client(self):
            return await _start_guarded(NotebookClient.async_start_new_kernel_client, self)

        start_new_kernel_client = run_sync(async_start_new_kernel_client)  # (``setup_kernel``'s)

    return WakefulClient


def __getattr__(name: str):
    if name == "WakefulClient":  # nbclient imported only when asked for (it comes with jupyter-book)
        return _client_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def guard_nbclient() -> None:
    """Give every nbclient ``NotebookClient`` created in this process the guard (idempotent)."""
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient

    start = NotebookClient.async_start_new_kernel_client
    if getattr(start, "guarded", False):
        return

    async def guarded(self):
        return await _start_guarded(start, self)
    guarded.guarded = True
    NotebookClient.async_start_new_kernel_client = guarded
    NotebookClient.start_new_kernel_client = run_sync(guarded)
