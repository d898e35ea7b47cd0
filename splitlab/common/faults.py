"""Fault injection, for tests and teaching: a hook called at fixed points, so that a fault is a hook and not a
branch in the production loops.

A hook is called as ``hook(event, worker, request_ids)``. Events:

- ``"join"``: a spawned process is about to join its group (:mod:`splitlab.transfer.group`; worker "rank<N>");
- ``"op"``: the :class:`~splitlab.transfer.peer.Peer`'s child is about to carry out an operation (worker "peer");
- ``"step"``, ``"send"``, ``"receive"``: a serving worker is about to run a step, a prefill worker to send a
  cache, a decode worker has received one (every serving back end calls these at the same points).

It returns nothing, or raises :class:`WorkerFault` to make that worker fail there: in the emulated and simulated
back ends the worker is lost at once (or, for a hang, after ``timeout_s`` of its clock); a process exits with
code 17 (or stops answering) and the other side finds out as it would in production.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field

__all__ = ["WorkerFault", "KillWorker", "SlowWorker", "EVENTS", "EXIT_CODE", "obey"]

EVENTS = ("join", "op", "step", "send", "receive")
EXIT_CODE = 17  #: the exit code of a process a hook killed


class WorkerFault(Exception):
    """A fault hook's verdict: the worker dies here (``hang=False``: it exits; True: it stops answering)."""

    def __init__(self, worker: str, reason: str, hang: bool = False):
        super().__init__(f"{worker}: {reason}")
        self.worker, self.reason, self.hang = worker, reason, hang


@dataclass
class KillWorker:
    """Make ``worker`` (e.g. "D0") fail at its ``after``-th ``event`` (counting only events that involve
    ``request`` when it is given). ``hang=True``: it stops answering instead of exiting.

    Raises:
        ValueError: an unknown event, or ``after`` not an integer >= 1. TypeError: a worker that is not a name, a
            request that is not an id.
    """

    worker: str
    event: str = "step"
    after: int = 1
    request: int | None = None
    hang: bool = False
    seen: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.worker, str) or not self.worker:
            raise TypeError(f"worker must be a worker's name such as 'D0', 'W1' or 'rank1', got {self.worker!r}")
        if self.event not in EVENTS:
            raise ValueError(f"event must be one of {EVENTS}, got {self.event!r}")
        if isinstance(self.after, bool) or not isinstance(self.after, numbers.Integral) or self.after < 1:
            raise ValueError(f"after must be an integer >= 1 (the after-th event fails), got {self.after!r}")
        if self.request is not None and (isinstance(self.request, bool)
                                         or not isinstance(self.request, numbers.Integral)):
            raise TypeError(f"request must be a request id (an integer) or None, got {self.request!r}")

    def __call__(self, event: str, worker: str, request_ids) -> None:
        if worker != self.worker or event != self.event:
            return
        if self.request is not None and self.request not in request_ids:
            return
        self.seen += 1
        if self.seen == self.after:
            what = "stops answering" if self.hang else "dies"
            raise WorkerFault(worker, f"injected fault: {what} at its {event} #{self.after}"
                              + (f" (request {self.request})" if self.request is not None else ""), self.hang)


@dataclass
class SlowWorker:
    """Make ``worker`` pause ``seconds`` (wall clock) at every ``event``, then go on: a straggler, not a failure.
    ``SlowWorker("rank3", "join", 5)`` is a worker process that takes 5 s longer to start than the others (what a
    loaded machine does to the last of several processes importing torch).

    Raises:
        ValueError: an unknown event, or ``seconds`` not a finite number in 0 .. 3600. TypeError: a worker that is
            not a name.
    """

    worker: str
    event: str = "join"
    seconds: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.worker, str) or not self.worker:
            raise TypeError(f"worker must be a worker's name such as 'D0', 'W1' or 'rank1', got {self.worker!r}")
        if self.event not in EVENTS:
            raise ValueError(f"event must be one of {EVENTS}, got {self.event!r}")
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, numbers.Real) or \
                not 0 <= self.seconds <= 3600:
            raise ValueError(f"seconds must be a pause of 0 .. 3600 s, got {self.seconds!r}")

    def __call__(self, event: str, worker: str, request_ids) -> None:
        if worker == self.worker and event == self.event:
            import time
            time.sleep(self.seconds)


def obey(hook, event: str, worker: str, request_ids=()) -> None:
    """Call ``hook`` (None: nothing) in a process that must act on the verdict itself: a fault exits with
    :data:`EXIT_CODE` or, for a hang, sleeps until somebody stops the process."""
    import os
    import time

    if hook is None:
        return
    try:
        hook(event, worker, list(request_ids))
    except WorkerFault as fault:
        if fault.hang:
            time.sleep(3600)
        os._exit(EXIT_CODE)
