"""Fault injection, for tests and teaching: a hook that every back end calls at the same points, so that a fault
is a hook and not a branch in the serving loops.

A hook is called as ``hook(event, worker, request_ids)`` with ``event`` one of ``"step"`` (before a worker runs
a step), ``"send"`` (before a prefill worker sends a cache) and ``"receive"`` (when a decode worker has received
one). It returns nothing, or raises :class:`WorkerFault` to make that worker fail there: in the emulated and
simulated back ends the worker is lost at once (or, for a hang, after ``timeout_s`` of its clock); in the
distributed back end the worker process exits (or stops answering) and the router finds out as it would in
production.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["WorkerFault", "KillWorker", "EVENTS"]

EVENTS = ("step", "send", "receive")


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
        ValueError: an unknown event, or ``after`` < 1.
    """

    worker: str
    event: str = "step"
    after: int = 1
    request: int | None = None
    hang: bool = False
    seen: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if self.event not in EVENTS:
            raise ValueError(f"event must be one of {EVENTS}, got {self.event!r}")
        if self.after < 1:
            raise ValueError(f"after must be >= 1, got {self.after}")

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
