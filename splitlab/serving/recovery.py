"""What the cluster does when a worker is lost: nothing it held is lost with it.

- Requests queued on it, not started: routed to another worker of its pool.
- A cache on its way to it (it was a decode worker): the prefill worker still holds the cache until it arrives,
  so it is sent again, to another decode worker.
- Anything else it held (prefilling, decoding, a cache leaving it, a prefilled cache waiting to leave): served
  again from its prompt and the tokens it already emitted, which a prefill rebuilds into the same cache
  (:meth:`~.executor.Slot.admit`). Tokens the client already has are not sent twice.

A request served again more than ``max_retries`` times fails with the reason; a pool with no live worker left
fails what waits for it. The run goes on with the workers left, and :attr:`ServingResult.notes` says what
happened.
"""
from __future__ import annotations

from ..common.faults import WorkerFault
from .scheduler import Worker

__all__ = ["lost", "fault", "retry"]


def fault(cluster, t: float, w: Worker, err: WorkerFault) -> None:
    """A fault hook fired for ``w`` (virtual clocks): it is lost now, or after ``timeout_s`` if it hangs (nobody
    notices a silent worker sooner). Nothing more is started on it meanwhile."""
    w.busy, w.step = True, w.step + 1
    timeout = cluster.cfg.timeout_s
    cluster.clock.lost(w, timeout if err.hang else 0.0, t,
                       err.reason + (f" (noticed after {timeout:g} s without an answer)" if err.hang else ""))


def retry(cluster, t: float, slot, reason: str) -> None:
    """Serve ``slot``'s request again from its prompt (and emitted tokens), or fail it past ``max_retries``."""
    r = slot.request
    if r.done:
        return
    r.retries += 1
    if r.retries > cluster.cfg.max_retries:
        r.fail(f"{reason}; served {r.retries} times, more than max_retries={cluster.cfg.max_retries}", t)
        return
    cluster.notes.append(f"request {r.id} served again (attempt {r.retries + 1}): {reason}")
    cluster.route(t, r, front=True)


def lost(cluster, t: float, w: Worker, reason: str) -> None:
    """``w`` is gone: re-route what it had not started, send again or serve again what it held."""
    if not w.alive:
        return
    w.alive, w.busy = False, False
    cluster.notes.append(f"{w.name} lost at {t:.3f} s: {reason}")
    while w.queue:
        cluster.route(t, w.queue.popleft())
    resent = 0
    for s in list(w.incoming):  # on its way here: the prefill worker still holds the cache
        src = next(p for p in cluster.pool if s in p.sending)
        src.sending.remove(s)
        s.transfer_id = None
        if src.alive:
            src.outbox.appendleft(s)
            cluster.senders.add(src)
            resent += 1
            cluster.handoff_pending = True
        else:
            retry(cluster, t, s, reason)
    for s in list(w.sending):  # leaving from here: what arrived may be incomplete
        dst = next(d for d in cluster.decoders if s in d.incoming)
        dst.incoming.remove(s)
        dst.memory.release(s.request.id)
        dst.output_owed -= s.request.max_new_tokens - len(s.request.output)
        s.transfer_id = None
        cluster.dirty.add(dst)
        retry(cluster, t, s, reason)
    for s in [*w.prefilling, *w.batch.slots, *w.joining, *w.outbox]:
        retry(cluster, t, s, reason)
    w.prefilling, w.batch.slots, w.incoming = [], [], []
    w.sending.clear()
    w.joining.clear()
    w.outbox.clear()
    w.memory.reserved.clear()
    w.memory.reserved_bytes = 0
    cluster.clock.forget(w)
    if resent:
        cluster.notes.append(f"{resent} cache(s) on their way to {w.name} sent again from the prefill side")
