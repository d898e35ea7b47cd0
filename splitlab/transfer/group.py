"""Real processes joined with torch.distributed: the plumbing under :class:`~splitlab.transfer.peer.Peer` (two
processes moving KV) and the distributed serving back end (:mod:`splitlab.serving.distributed`).

Two planes, as in production disaggregated servers:

- **control plane**: small JSON messages through the rendezvous ``TCPStore`` (:class:`Mailbox`), one queue per
  rank: "serve request 7", "KV of request 7 is coming", "token 42 of request 7", "stop".
- **data plane**: the KV cache itself, with torch.distributed ``send``/``recv`` (gloo on CPU, NCCL between GPUs)
  in the format of :mod:`splitlab.transfer.wire`.

Rank 0 is this process (the router: it owns the store and the client-facing clock); ranks 1.. are workers
started with ``torch.multiprocessing`` (spawn) by :func:`spawn_group`, or by ``torchrun`` on any number of machines
(:func:`join_from_env` reads ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``). Worker functions live in
the package, so a notebook can start them (a function defined in a notebook cell cannot be spawned).

Failures never hang: every join, send and receive has a timeout (``timeout=`` of ``init_process_group``); a peer
that never joins raises :class:`PeerJoinTimeout` within ``join_timeout_s``; a child process that exits is seen by
:meth:`Group.dead`; :meth:`Group.close` stops the children (asking, then killing after a grace period).
The rendezvous port is found by binding port 0; a port that turns out to be in use is replaced by another.
"""
from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ..common.faults import obey
from ..common.threads import check_threads
from ..phases.cpu_threads import pin_threads
from .mailbox import Mailbox

__all__ = ["DistributedError", "PeerJoinTimeout", "WorkerDied", "free_port", "make_store", "pick_backend",
           "Mailbox", "Group", "spawn_group", "join_from_env", "DEFAULT_TIMEOUT_S"]

DEFAULT_TIMEOUT_S = 30.0


class DistributedError(RuntimeError):
    """Something went wrong between processes (a peer missing, dead or silent); the message says which."""


class PeerJoinTimeout(DistributedError):
    """Not every rank joined the process group within the join timeout."""


class WorkerDied(DistributedError):
    """A worker process exited (crashed, was killed, or raised) while it was needed."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago: bind port 0 and let the OS choose (it may be taken again before
    use; :func:`make_store` retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def make_store(host: str = "127.0.0.1", port: int | None = None, world_size: int = 1,
               timeout_s: float = DEFAULT_TIMEOUT_S, attempts: int = 8) -> dist.TCPStore:
    """Host the rendezvous ``TCPStore`` on ``port`` (None: a free one). A port already in use is replaced by a
    fresh free port, up to ``attempts`` times; the store's ``.port`` says which one was used.

    Raises:
        DistributedError: no port could be bound.
    """
    last = None
    for attempt in range(attempts):
        p = port if (port is not None and attempt == 0) else free_port(host)
        try:
            return dist.TCPStore(host, p, world_size, is_master=True, timeout=timedelta(seconds=timeout_s),
                                 wait_for_workers=False)
        except (dist.DistNetworkError, RuntimeError) as err:
            last = err
            if "in use" not in str(err).lower():
                break
    raise DistributedError(f"could not host the rendezvous on {host} (last port tried: {p}): "
                           f"{str(last).splitlines()[0]}")


def pick_backend(device: str | torch.device = "cpu") -> str:
    """gloo for CPU; on CUDA "cpu:gloo,cuda:nccl" (KV over NCCL, control tensors and headers over gloo)."""
    return "cpu:gloo,cuda:nccl" if torch.device(device).type == "cuda" and dist.is_nccl_available() else "gloo"


@dataclass
class Group:
    """This process's membership of a process group (rank 0 also holds the spawned children, if any)."""

    rank: int
    world_size: int
    backend: str
    timeout_s: float
    store: Any
    mailbox: Mailbox
    fault: Any = None
    procs: Any = None  # torch.multiprocessing ProcessContext (rank 0 after spawn_group)
    info: dict = field(default_factory=dict)

    def dead(self) -> dict[int, int]:
        """``{rank: exit code}`` of spawned workers that have exited (empty under torchrun)."""
        if self.procs is None:
            return {}
        return {i + 1: p.exitcode for i, p in enumerate(self.procs.processes) if p.exitcode is not None}

    def close(self, grace_s: float = 5.0) -> dict[int, int | None]:
        """Leave the group; rank 0 waits ``grace_s`` for its children to exit, then kills the rest. Returns
        ``{rank: exit code}`` (negative: killed by that signal)."""
        self.mailbox.close()
        if dist.is_initialized():
            dist.destroy_process_group()
        codes: dict[int, int | None] = {}
        if self.procs is not None:
            deadline = time.time() + grace_s
            for i, p in enumerate(self.procs.processes):
                p.join(timeout=max(0.0, deadline - time.time()))
                if p.is_alive():
                    p.kill()
                    p.join(timeout=2.0)
                codes[i + 1] = p.exitcode
            self.procs = None
        return codes


def _fresh_group_names() -> None:
    """torch names the default group's store keys after a per-process counter that a failed
    ``init_process_group`` increments but does not reset (only ``destroy_process_group`` does). A process that
    saw a failed join would then look for keys its fresh peers never write: start counting from 0 again."""
    world = getattr(dist.distributed_c10d, "_world", None)
    if not dist.is_initialized() and world is not None and getattr(world, "group_count", 0):
        world.group_count = 0


def _init(store, rank: int, world_size: int, backend: str, timeout_s: float) -> None:
    _fresh_group_names()
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=timeout_s))


def _child(index: int, worker: Callable, host: str, port: int, world_size: int, backend: str, timeout_s: float,
           join_timeout_s: float, prefix: str, threads: int, fault, args: tuple) -> None:
    """Entry point of a spawned worker (rank ``index + 1``): join, run ``worker(group, *args)``, leave.
    A failure prints one line naming the rank and exits with status 1 (no hang, no traceback wall)."""
    rank = index + 1
    pin_threads(threads)  # the parent's threads= for this process: load_model keeps it
    obey(fault, "join", f"rank{rank}")  # a fault hook may keep this worker from ever joining
    group = None
    try:
        store = dist.TCPStore(host, port, world_size, is_master=False, timeout=timedelta(seconds=join_timeout_s))
        store.set(f"{prefix}/joined/{rank}", str(os.getpid()))  # checked in: rank 0 now starts the group
        _init(store, rank, world_size, backend, timeout_s)
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


def spawn_group(worker: Callable, n_workers: int, args: tuple = (), *, backend: str = "gloo",
                timeout_s: float = DEFAULT_TIMEOUT_S, join_timeout_s: float | None = None, host: str = "127.0.0.1",
                port: int | None = None, threads: int = 1, fault=None) -> Group:
    """Start ``n_workers`` processes running ``worker(group, *args)`` (ranks 1..n) and join them as rank 0.

    Args:
        worker: an importable function (defined in a module, not a notebook cell).
        backend: "gloo", "nccl" or "cpu:gloo,cuda:nccl" (:func:`pick_backend`).
        timeout_s: timeout of every send/recv of the group. join_timeout_s: how long to wait for every worker
            to join (default ``timeout_s``). port: rendezvous port (None: a free one; taken ports are replaced).
        threads: torch threads per worker. fault: a fault hook (:mod:`splitlab.common.faults`) that each
            worker calls with "join" before it joins (worker "rank<N>"), and may call again later.

    Raises:
        ValueError: ``threads`` is not an integer in 1 .. this machine's CPU count (checked before any process
            starts).
        PeerJoinTimeout: a worker did not join in time, or exited while starting (every worker is stopped first).
        DistributedError: this process already is in a process group (one :class:`Peer` or Cluster at a time).
    """
    check_threads(threads)
    if dist.is_initialized():
        raise DistributedError("this process already is rank 0 of a process group (another Peer or Cluster is "
                               "running): close that one first; torch allows one default group per process")
    join_timeout_s = timeout_s if join_timeout_s is None else join_timeout_s
    world = n_workers + 1
    store = make_store(host, port, world, join_timeout_s)
    prefix = f"splitlab/{uuid.uuid4().hex[:12]}"
    ctx = mp.start_processes(_child, args=(worker, host, store.port, world, backend, timeout_s, join_timeout_s, prefix,
                                           threads, fault, args), nprocs=n_workers, join=False, start_method="spawn")
    t0 = time.time()
    missing = list(range(1, world))
    while missing:  # wait for every worker to check in, so that a missing one is named (and found early)
        missing = [r for r in missing if not store.check([f"{prefix}/joined/{r}"])]
        exited = {i + 1: p.exitcode for i, p in enumerate(ctx.processes) if p.exitcode is not None}
        late = time.time() - t0 > join_timeout_s
        if missing and (late or any(r in exited for r in missing)):
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
                p.join(timeout=2.0)
            store = None
            what = (f"did not join within {join_timeout_s:g} s" if late else
                    f"exited while starting (exit codes {exited})")
            raise PeerJoinTimeout(f"worker rank(s) {missing} of {n_workers} {what}; every worker was stopped "
                                  f"after {time.time() - t0:.1f} s")
        if missing:
            time.sleep(0.05)
    try:
        _init(store, 0, world, backend, timeout_s)
    except Exception as err:  # noqa: BLE001 - everyone checked in, but the backend could not connect
        for p in ctx.processes:
            p.kill()
            p.join(timeout=2.0)
        raise PeerJoinTimeout(f"the {backend} group of {world} did not form within {timeout_s:g} s: "
                              f"{str(err).splitlines()[0]}") from None
    return Group(0, world, backend, timeout_s, store, Mailbox(store, 0, prefix), None, ctx,
                 dict(host=host, port=store.port, prefix=prefix))


def join_from_env(backend: str = "gloo", timeout_s: float = DEFAULT_TIMEOUT_S, prefix: str = "splitlab/torchrun"
                  ) -> Group:
    """Join as ``torchrun`` (or any launcher setting RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) started us.

    Raises:
        DistributedError: a variable is missing. PeerJoinTimeout: the others did not join within ``timeout_s``.
    """
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    except KeyError as err:
        raise DistributedError(f"{err.args[0]} is not set: start this with torchrun") from None
    _fresh_group_names()
    try:
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout_s))
    except Exception as err:  # noqa: BLE001
        raise PeerJoinTimeout(f"rank {rank}: the group of {world} did not form within {timeout_s:g} s: "
                              f"{str(err).splitlines()[0]}") from None
    # torchrun's agent (or rank 0) serves a store at MASTER_ADDR:MASTER_PORT: a client of it carries control messages
    store = dist.TCPStore(host, port, world, is_master=False, timeout=timedelta(seconds=timeout_s))
    return Group(rank, world, backend, timeout_s, store, Mailbox(store, rank, prefix), None, None,
                 dict(host=host, port=port, prefix=prefix))
