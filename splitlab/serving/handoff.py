"""The KV hand-off in the cluster: which decode worker takes a prefilled cache (the router's choice, with room),
the cache on its way (charged by the clock: :mod:`.nic`), its arrival, and when its first token leaves.

**The first token** (``first_token_on="decode"``, the default) leaves when the decode worker admits the request
into its batch, as vLLM's disaggregated proxy streams every token from the decode instance: the wait for a batch
slot is in TTFT. A request whose only output token is its first is done when its cache arrives.
"""
from __future__ import annotations

from ..common.faults import WorkerFault
from . import fast, recovery, splice
from .request import State

__all__ = ["hand_off", "arrived", "admitted"]


def hand_off(cluster, p, t: float) -> bool:
    """Send ``p``'s oldest prefilled request to the least-loaded decode worker with room; False if none."""
    c, slot = cluster, p.outbox[0]
    r = slot.request
    total = r.max_total_tokens
    d = c.router.decode(total, t)
    if d is None:
        if any(x.alive for x in c.decoders):
            return False
        p.outbox.popleft()
        p.memory.release(r.id)
        r.fail("no decode worker left: all of them were lost", t)
        return True
    if c.hooked:
        try:
            c.faults("send", p.name, [r.id])
        except WorkerFault as fault:
            recovery.fault(c, t, p, fault)
            return False
    arrive_s, spliced, owed = None, False, r.max_new_tokens - len(r.output)  # before a splice emits a token
    if d.ahead is not None and c.splicing:  # in a decode stretch (.fast): join it at once (.splice) if it can
        arrive_s = c.clock.transfer(p, d, slot, t, arrive=False)
        spliced = splice.join(c, p, d, slot, t, arrive_s)
    if d.ahead is not None and not spliced:  # in a decode stretch (.fast): cut it unless sealed
        fast.reached(c, d, t, inclusive=True)
    p.sending.take(p.outbox)
    if not spliced:
        d.incoming.append(slot)
    d.memory.reserve(r.id, total)
    d.output_owed += owed
    r.transfer_start_s = t
    if not spliced:
        slot.transfer_id = next(c.transfer_ids)
        if arrive_s is None:
            c.clock.transfer(p, d, slot, t)
        else:  # charged already
            c.clock.push(arrive_s, "arrived", p, d, slot, slot.transfer_id)
    if c.trace:  # a memory sample: with a trace only (the call alone costs)
        c.record(d, t=t)
    c.router.changed(d)
    return True


def arrived(cluster, t: float, src, dst, slot, transfer_id: int) -> None:
    """``slot``'s cache reached ``dst`` at ``t``: the prefill side lets go of it, and the request waits for a place
    in ``dst``'s batch (its first token leaves then: :func:`admitted`), or is done."""
    c = cluster
    if slot.transfer_id != transfer_id:
        return  # cancelled: one of the two ends was lost meanwhile
    slot.transfer_id = None
    r = slot.request
    src.sending.remove(slot)
    dst.incoming.remove(slot)
    src.memory.release(r.id)
    c.clock.release(src, slot)
    c.handoff_pending = True
    if c.hooked:
        try:
            c.faults("receive", dst.name, [r.id])
        except WorkerFault as fault:
            recovery.fault(c, t, dst, fault)
    r.transfer_end_s, r.decode_worker = t, dst.name
    if c.cfg.first_token_on == "decode" and not slot.resumed and len(r.output) + 1 >= r.max_new_tokens:
        r.emit(slot.last_token, t)  # its only token: nothing to decode, no batch place to wait for
        dst.output_owed -= 1
    if r.done:
        dst.memory.release(r.id)
    else:
        r.state = State.DECODING
        dst.joining.append(slot)
    c.dirty.update((src, dst))
    if c.trace:  # a memory sample: with a trace only (the call alone costs)
        c.record(src, dst, t=t)
    c.router.changed(dst)


def admitted(cluster, w, slots, t: float) -> None:
    """``slots`` joined decode worker ``w``'s batch at ``t``: with ``first_token_on="decode"`` each fresh request's
    first token (computed by its prefill) leaves now."""
    if cluster.cfg.first_token_on != "decode":
        return
    for s in slots:
        r = s.request
        if not s.resumed and not r.output:
            r.emit(s.last_token, t)
            w.output_owed -= 1
