"""Starting worker processes on this machine (spawn) and joining them as rank 0 of a group: :func:`spawn_group`,
under :class:`~splitlab.transfer.peer.Peer` and the distributed serving back end (:mod:`.group` holds the group).

Every worker checks in at the rendezvous store first, so that a missing one is named; the group then forms
within the join window (``join_timeout_s``) and every send and receive after that has ``timeout_s``. Children
hold SIGINT blocked from the moment they exist, then ignore it (a Ctrl-C in a terminal reaches every process of
the group; each child used to print a ``KeyboardInterrupt`` traceback from the middle of importing torch): the
parent stops them, on any failure or interrupt while they start and in :meth:`~.group.Group.close`. A script without an
``if __name__ == "__main__":`` guard (each spawned process imports it again) is named in one line, not a traceback
wall followed by a join timeout.
"""
from __future__ import annotations

import numbers
import os
import signal
import sys
import threading
import time
import uuid
from datetime import timedelta
from multiprocessing import resource_tracker
from typing import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ..common.faults import obey
from ..common.threads import check_threads
from ..phases.cpu_threads import pin_threads
from ..common.timeouts import check_timeout
from .group import (DEFAULT_JOIN_TIMEOUT_S, DEFAULT_TIMEOUT_S, DistributedError, Group, PeerJoinTimeout, _init,
                    make_store)
from .mailbox import Mailbox

__all__ = ["spawn_group", "max_workers", "check_workers", "GUARD_HINT"]

UNGUARDED_EXIT = 3  #: exit code of a spawned process that ran the user's script top level again (no main guard)
GUARD_HINT = ("put the code that starts processes under `if __name__ == \"__main__\":` (each spawned process "
              "imports the main script again, and must not start processes of its own)")


def max_workers() -> int:
    """The most worker processes one group may start: 4 per CPU (each imports torch: ~6 CPU-seconds and a few
    hundred MB), at most 64."""
    return min(64, 4 * (os.cpu_count() or 1))


def check_workers(n_workers) -> int:
    """``n_workers`` as an int if it is an integer in 1 .. :func:`max_workers`.

    Raises:
        ValueError: not an integer, < 1, or more processes than this machine can start sensibly.
    """
    limit = max_workers()
    if isinstance(n_workers, bool) or not isinstance(n_workers, numbers.Integral) or not 1 <= n_workers <= limit:
        raise ValueError(f"a group starts 1 .. {limit} worker processes on this machine (4 per CPU, at most 64), "
                         f"got {n_workers!r}")
    return int(n_workers)


def _child(index: int, worker: Callable, host: str, port: int, world_size: int, backend: str, timeout_s: float,
           join_timeout_s: float, prefix: str, threads: int, fault, args: tuple) -> None:
    """Entry point of a spawned worker (rank ``index + 1``): join, run ``worker(group, *args)``, leave.
    A failure prints one line naming the rank and exits with status 1 (no hang, no traceback wall). SIGINT is
    ignored (blocked since the process started: :func:`_start`): the parent stops its children."""
    rank = index + 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # then lift the block inherited from _start: a held Ctrl-C is
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # dropped (the parent got it too)
    pin_threads(threads)  # the parent's threads= for this process: load_model keeps it
    obey(fault, "join", f"rank{rank}")  # a fault hook may keep this worker from ever joining
    group = None
    try:
        store = dist.TCPStore(host, port, world_size, is_master=False, timeout=timedelta(seconds=join_timeout_s))
        store.set(f"{prefix}/joined/{rank}", str(os.getpid()))  # checked in: rank 0 now starts the group
        _init(store, rank, world_size, backend, timeout_s, join_timeout_s)
        group = Group(rank, world_size, backend, timeout_s, store, Mailbox(store, rank, prefix), fault)
        worker(group, *args)
    except Exception as err:  # noqa: BLE001
        print(f"splitlab worker rank {rank}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
              file=sys.stderr, flush=True)
        os._exit(1)  # skip interpreter teardown: gloo threads may still wait on a dead peer
    if group is not None:
        group.mailbox.close()
        if dist.is_initialized():
            dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # interpreter teardown of torch and gloo costs seconds on a busy machine and does nothing useful


def _check_spawnable() -> None:
    """Refuse, before anything starts, what a spawned process could only fail on with a traceback wall: being
    itself a spawned process that runs the user's script again (no ``if __name__ == "__main__":`` guard: this one
    leaves quietly with :data:`UNGUARDED_EXIT` and the parent names the guard), or a main script with no file to
    import again (one read from stdin)."""
    if getattr(mp.current_process(), "_inheriting", False):
        print(f"splitlab: a spawned worker process ran the main script again and reached code that starts "
              f"processes: {GUARD_HINT}", file=sys.stderr, flush=True)
        raise SystemExit(UNGUARDED_EXIT)
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if getattr(main, "__spec__", None) is None and path and not os.path.isfile(path):
        raise DistributedError(f"worker processes start by importing the main script again, and {path!r} is no file "
                               f"they can import (a script read from stdin?): save it to a file and run that")


def _start(n_workers: int, args: tuple):
    """``torch.multiprocessing.start_processes`` with SIGINT blocked in this thread while the children are created:
    they are born with it blocked (the mask survives fork and exec) and ignore it before they lift the block
    (:func:`_child`), so a Ctrl-C while they import torch stops nobody half-way with a traceback. Meanwhile this
    process holds a Ctrl-C (a handler that notes it, whichever thread the kernel hands it to) and, once the children
    exist, passes it to the caller's handler (KeyboardInterrupt: the children are stopped first).

    SIGINT is not ignored here meanwhile: a signal sent to the process goes to a thread that does not block it (the
    rendezvous store's threads do not), and an ignored one is dropped; and the resource tracker of
    :mod:`multiprocessing`, when it starts (at the first child of a process), lifts this thread's block of SIGINT
    (bpo-33613), so it is started first. Either way the Ctrl-C was lost (the run went on to the end, exit 0) when it
    came while children were created: seconds on a busy machine. Daemonic: a parent that exits without closing its
    group (an interrupt at any point) terminates its children instead of waiting for them, which would wait for work.
    """
    start = lambda: mp.start_processes(_child, args=args, nprocs=n_workers, join=False, daemon=True,  # noqa: E731
                                       start_method="spawn")
    old = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or old is None:  # no handler we could put back
        return start()
    resource_tracker.ensure_running()  # started later, it would unblock SIGINT in this thread half-way
    held = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        ctx = start()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # one pending here is held now
        signal.signal(signal.SIGINT, old)
    if held and old != signal.SIG_IGN:
        try:
            if old == signal.SIG_DFL:  # the process dies of it: leave no child behind
                _stop(ctx)
            signal.raise_signal(signal.SIGINT)  # the caller's handler: Python's raises KeyboardInterrupt here
        except BaseException:
            _stop(ctx)
            raise
    return ctx


def _stop(ctx) -> None:
    for p in ctx.processes:
        if p.is_alive():
            p.kill()
        p.join(timeout=2.0)


def spawn_group(worker: Callable, n_workers: int, args: tuple = (), *, backend: str = "gloo",
                timeout_s: float = DEFAULT_TIMEOUT_S, join_timeout_s: float | None = None, host: str = "127.0.0.1",
                port: int | None = None, threads: int = 1, fault=None) -> Group:
    """Start ``n_workers`` processes running ``worker(group, *args)`` (ranks 1..n) and join them as rank 0.

    Args:
        worker: an importable function (defined in a module, not a notebook cell).
        n_workers: 1 .. :func:`max_workers` (4 per CPU, at most 64).
        backend: "gloo", "nccl" or "cpu:gloo,cuda:nccl" (:func:`~.group.pick_backend`).
        timeout_s: timeout of every send/recv of the group, in seconds. join_timeout_s: how long every worker may
            take to start and check in, and then the group to form (default: ``timeout_s``, at least
            :data:`DEFAULT_JOIN_TIMEOUT_S`). Both at most a week. port: rendezvous port (None: a free one; a taken
            port is replaced).
        threads: torch threads per worker. fault: a fault hook (:mod:`splitlab.common.faults`) that each
            worker calls with "join" before it joins (worker "rank<N>"), and may call again later.

    Raises:
        ValueError: a timeout, ``threads`` (an integer in 1 .. this machine's CPU count) or ``n_workers`` out of
            range (checked before any process starts).
        PeerJoinTimeout: a worker did not join in time, exited while starting (the message names the main guard
            when that was why), or the group did not form; every worker is stopped first.
        DistributedError: this process already is in a process group (one :class:`Peer` or Cluster at a time),
            or the main script cannot be imported again by the workers.
        KeyboardInterrupt: passed on, after stopping every worker.
    """
    check_threads(threads)
    check_workers(n_workers)
    timeout_s = check_timeout(timeout_s)
    join_timeout_s = max(DEFAULT_JOIN_TIMEOUT_S, timeout_s) if join_timeout_s is None else \
        check_timeout(join_timeout_s, "join_timeout_s")
    _check_spawnable()
    if dist.is_initialized():
        raise DistributedError("this process already is rank 0 of a process group (another Peer or Cluster is "
                               "running): close that one first; torch allows one default group per process")
    world = n_workers + 1
    store = make_store(host, port, world, join_timeout_s)
    prefix = f"splitlab/{uuid.uuid4().hex[:12]}"
    ctx = _start(n_workers, (worker, host, store.port, world, backend, timeout_s, join_timeout_s, prefix, threads,
                             fault, args))
    try:
        _check_in(ctx, store, prefix, n_workers, join_timeout_s)
        try:
            _init(store, 0, world, backend, timeout_s, join_timeout_s)
        except Exception as err:  # noqa: BLE001 - everyone checked in, but the backend could not connect
            raise PeerJoinTimeout(f"the {backend} group of {world} did not form within {join_timeout_s:g} s (the "
                                  f"join window): {str(err).splitlines()[0]}") from None
    except BaseException:  # a failed start or a Ctrl-C: no child is left behind (nor waited for at exit)
        _stop(ctx)
        raise
    return Group(0, world, backend, timeout_s, store, Mailbox(store, 0, prefix), None, ctx,
                 dict(host=host, port=store.port, prefix=prefix))


def _check_in(ctx, store, prefix: str, n_workers: int, join_timeout_s: float) -> None:
    """Wait for every worker to check in at the store, so that a missing one is named (and found early)."""
    t0, missing = time.time(), list(range(1, n_workers + 1))
    while missing:
        missing = [r for r in missing if not store.check([f"{prefix}/joined/{r}"])]
        exited = {i + 1: p.exitcode for i, p in enumerate(ctx.processes) if p.exitcode is not None}
        late = time.time() - t0 > join_timeout_s
        if missing and (late or any(r in exited for r in missing)):
            what = (f"did not join within {join_timeout_s:g} s (the join window)" if late else
                    f"exited while starting (exit codes {exited})")
            hint = f": {GUARD_HINT}" if UNGUARDED_EXIT in exited.values() else ""
            raise PeerJoinTimeout(f"worker rank(s) {missing} of {n_workers} {what}; every worker was stopped "
                                  f"after {time.time() - t0:.1f} s{hint}")
        if missing:
            time.sleep(0.05)
