"""Real processes joined with torch.distributed: the plumbing under :class:`~splitlab.transfer.peer.Peer` (two
processes moving KV) and the distributed serving back end (:mod:`splitlab.serving.distributed`).

Two planes, as in production disaggregated servers:

- **control plane**: small JSON messages through the rendezvous ``TCPStore`` (:class:`Mailbox`), one queue per
  rank: "serve request 7", "KV of request 7 is coming", "token 42 of request 7", "stop".
- **data plane**: the KV cache itself, with torch.distributed ``send``/``recv`` (gloo on CPU, NCCL between GPUs)
  in the format of :mod:`splitlab.transfer.wire`.

Rank 0 is this process (the router: it owns the store and the client-facing clock); ranks 1.. are workers
started with ``torch.multiprocessing`` (spawn) by :func:`~splitlab.transfer.spawn.spawn_group`, or by
``torchrun`` on any number of machines (:func:`join_from_env` reads ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``). Worker functions live in the package, so a notebook can start them (a function defined in a
notebook cell cannot be spawned).

Failures never hang: every join, send and receive has a timeout. Two windows: ``join_timeout_s`` bounds the
group's formation (a worker starting, importing torch, checking in at the store, and the backend's mesh forming:
``init_process_group``, gloo's connectFullMesh), ``timeout_s`` every send and receive after that (a loaded 2-core
machine took more than 3 s to start the last of three workers, and the first ones' mesh used to give up after
``timeout_s``). A peer that never joins raises :class:`PeerJoinTimeout` within ``join_timeout_s``; a child process
that exits is seen by :meth:`Group.dead`; :meth:`Group.close` stops the children (asking, then killing after a
grace period). Timeouts are checked up front (:func:`splitlab.common.timeouts.check_timeout`: at most a week).

Runs on one machine are independent: the rendezvous store binds port 0 (the OS picks a free port as it binds; a
port named by the caller that is in use is replaced), its keys live under a prefix of their own, and no file or
lock is shared. What concurrent runs do share is the CPU: each process they start imports torch (~6 CPU-seconds),
so on 2 busy cores a start takes tens of seconds, over a minute at load 20; the join window
(:data:`DEFAULT_JOIN_TIMEOUT_S`, 5 minutes) allows for it.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..common.timeouts import check_timeout
from .mailbox import Mailbox

__all__ = ["DistributedError", "PeerJoinTimeout", "WorkerDied", "free_port", "make_store", "pick_backend",
           "Mailbox", "Group", "join_from_env", "Timed", "DEFAULT_TIMEOUT_S", "DEFAULT_JOIN_TIMEOUT_S"]

DEFAULT_TIMEOUT_S = 30.0
#: the least time workers get to start and join (a healthy start goes on as soon as they joined): at load 17-21
#: on 2 cores, workers importing torch missed a window of 60 s (12 of 20 distributed tests failed so)
DEFAULT_JOIN_TIMEOUT_S = 300.0


class DistributedError(RuntimeError):
    """Something went wrong between processes (a peer missing, dead or silent); the message says which."""


class PeerJoinTimeout(DistributedError):
    """Not every rank joined the process group within the join timeout."""


class WorkerDied(DistributedError):
    """A worker process exited (crashed, was killed, or raised) while it was needed."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago: bind port 0 and let the OS choose (it may be taken again before
    use: :func:`make_store` binds port 0 itself)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def make_store(host: str = "127.0.0.1", port: int | None = None, world_size: int = 1,
               timeout_s: float = DEFAULT_TIMEOUT_S) -> dist.TCPStore:
    """Host the rendezvous ``TCPStore`` on ``port`` (None: port 0, which the OS turns into a free port as it
    binds, so two runs starting at once never pick the same one). A ``port`` already in use is replaced by such
    a free port; the store's ``.port`` says which one was used.

    Raises:
        ValueError: a timeout that is not a time in (0 s, a week]. DistributedError: no port could be bound.
    """
    timeout = timedelta(seconds=check_timeout(timeout_s))
    last, tried = None, [port or 0] + ([0] if port else [])
    for p in tried:
        try:
            return dist.TCPStore(host, p, world_size, is_master=True, timeout=timeout, wait_for_workers=False)
        except (dist.DistNetworkError, RuntimeError) as err:
            last = err
            if "in use" not in str(err).lower():
                break
    raise DistributedError(f"could not host the rendezvous on {host} (port {p}): {str(last).splitlines()[0]}")


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


class Timed:
    """A send or receive (a backend ``Work``) whose ``wait()`` gives up after ``timeout_s`` of the group. gloo's
    own waits keep the timeout its mesh was formed with, the join window (minutes), not the short timeout
    of a send or receive: :mod:`.wire` wraps every one it starts."""

    __slots__ = ("work",)

    def __init__(self, work):
        self.work = work

    def wait(self):
        timeout = _OP_TIMEOUT[0]
        return self.work.wait() if timeout is None else self.work.wait(timeout)


_OP_TIMEOUT: list = [None]  # timedelta of every send/recv of this process's group (None: the backend's own)


def _init(store, rank: int, world_size: int, backend: str, timeout_s: float, join_timeout_s: float) -> None:
    """Join the default process group: its formation (the store waits, gloo's connectFullMesh) may take
    ``join_timeout_s``; every send and receive after that ``timeout_s``."""
    _fresh_group_names()
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=join_timeout_s))
    _set_op_timeout(timeout_s)


def _set_op_timeout(timeout_s: float) -> None:
    """The group formed within the join window; from now on every send, receive and collective has ``timeout_s``."""
    dist.distributed_c10d._set_pg_timeout(timedelta(seconds=timeout_s))
    _OP_TIMEOUT[0] = timedelta(seconds=timeout_s)


def join_from_env(backend: str = "gloo", timeout_s: float = DEFAULT_TIMEOUT_S, prefix: str = "splitlab/torchrun",
                  join_timeout_s: float | None = None) -> Group:
    """Join as ``torchrun`` (or any launcher setting RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) started us.
    ``join_timeout_s`` (default ``timeout_s``, at least :data:`DEFAULT_JOIN_TIMEOUT_S`) bounds the group's
    formation, ``timeout_s`` every send and receive after it.

    Raises:
        ValueError: a timeout out of (0 s, a week]. DistributedError: a variable is missing. PeerJoinTimeout: the
            others did not join within ``join_timeout_s``.
    """
    timeout_s = check_timeout(timeout_s)
    join_timeout_s = max(DEFAULT_JOIN_TIMEOUT_S, timeout_s) if join_timeout_s is None else \
        check_timeout(join_timeout_s, "join_timeout_s")
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    except KeyError as err:
        raise DistributedError(f"{err.args[0]} is not set: start this with torchrun") from None
    _fresh_group_names()
    try:
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                                timeout=timedelta(seconds=join_timeout_s))
    except Exception as err:  # noqa: BLE001
        raise PeerJoinTimeout(f"rank {rank}: the group of {world} did not form within {join_timeout_s:g} s (the "
                              f"join window): {str(err).splitlines()[0]}") from None
    _set_op_timeout(timeout_s)
    # torchrun's agent (or rank 0) serves a store at MASTER_ADDR:MASTER_PORT: a client of it carries control messages
    store = dist.TCPStore(host, port, world, is_master=False, timeout=timedelta(seconds=timeout_s))
    return Group(rank, world, backend, timeout_s, store, Mailbox(store, rank, prefix), None, None,
                 dict(host=host, port=port, prefix=prefix))
