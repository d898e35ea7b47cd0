"""The virtual clock of the emulated and simulated back ends: a discrete-event loop in which every worker's
clock moves on by exactly the seconds its executor measured (emulated: the real model ran the step on this one
device) or predicted (simulated: a cost model).

In the emulated back end every batch really runs on the one device, one after another in wall time, but each is
charged only to its own worker's clock: the concurrency between workers is the one thing modeled. A KV hand-off
is really performed by the executor; the link is charged its measured seconds, or ``link_latency_s + bytes /
link_bytes_per_s`` when a link bandwidth is set, and a transfer holds the NICs of both its workers (:mod:`.nic`:
transfers through one NIC queue behind each other; a layer-wise one overlaps its prefill).
"""
from __future__ import annotations

import gc
import heapq
import itertools
import math
from bisect import bisect_left
from operator import attrgetter

from ..common.progress import progress_bar as common_bar
from . import fast
from .executor import StepOutcome, run_step
from .nic import DEFAULT_KV_LAYERS, schedule
from .scheduler import steps_ended

__all__ = ["VirtualClock", "progress_bar"]

#: seconds a run goes before its progress bar shows (shorter runs print nothing)
PROGRESS_DELAY_S = 2.0


def progress_bar(total: int | None, desc: str, progress: bool, unit: str = "req"):
    """A tqdm bar on stderr that appears only once the work has run :data:`PROGRESS_DELAY_S` and is erased when
    it ends, or None when ``progress`` is false (the API's default; the CLI turns it on, but not with --json)."""
    return common_bar(total, desc, True, unit, delay=PROGRESS_DELAY_S) if progress else None


class VirtualClock:
    """Events on a heap, in time order; ties in the order they were scheduled."""

    def __init__(self, cluster):
        self.c = cluster
        self.events: list = []
        self.seq = itertools.count()

    def push(self, t: float, kind: str, *payload) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, payload))

    def push_done(self, t: float, w, plan, out) -> None:
        """Schedule the end of ``w``'s current step (``plan``, its outcome ``out``) at ``t``."""
        heapq.heappush(self.events, (t, next(self.seq), "done", (w, w.step, plan, out)))

    def next_time(self) -> float:
        return self.events[0][0] if self.events else float("inf")

    def run(self) -> float:
        """Process every event in time order; at one time, arrivals (in submission order) come first, then the
        other events in the order they were scheduled, then the cluster's decisions. Arrivals wait in a sorted
        list rather than on the heap, so the heap holds only the events in flight. With the cluster's ``progress``,
        a bar of the arrivals served (:func:`progress_bar`). With the cluster's ``stop`` (a goodput run:
        :mod:`.goodput_verdict`), called with the time once each instant's events are done: True ends the run there,
        the requests not done failing with ``stop.reason``. Returns the time of the last event.

        On the simulator's fast path (:mod:`.fast`) a stop with a ``next`` attribute (the time before which it says
        False: :class:`~.goodput_verdict.Verdict`, :class:`~.goodput_spread.Settle`) is called at the step-by-step
        run's instants, silent steps' ends included (:meth:`_hidden_stop`), so the run stops where that run does
        (``tests/test_simulator_fast_path.py``); one without it is called only at the fast path's own instants
        (events and arrivals), so it may stop at a later one. Either way, mid-run a request still decoding shows
        in ``output`` and ``token_times_s`` its tokens only up to its first (the rest are deferred until it
        finishes, :meth:`~.request.Request.defer_tokens`): a stop should read first tokens, states and finish
        times, as those two do, not a decoding request's token list."""
        c = self.c
        arrivals = sorted(c.requests, key=attrgetter("arrival_s"))  # stable: ties keep submission order
        bar = progress_bar(len(arrivals), f"serving ({getattr(c.backend, 'name', 'executor')})",
                           getattr(c, "progress", False))
        c.record(*c.workers, t=0.0)
        collecting = gc.isenabled()  # the loop makes millions of small acyclic objects (events, rows, samples),
        gc.disable()                 # which the cyclic collector would walk again and again: a cost that grew
        try:                         # faster than the run (x1.3-1.6 on traced runs of 20,000 requests)
            return self._loop(arrivals, bar)
        finally:
            if collecting:
                gc.enable()
            if bar is not None:
                bar.close()

    def _loop(self, arrivals: list, bar) -> float:
        c, events, pop, t = self.c, self.events, heapq.heappop, 0.0
        i, n, inf, arrive, dispatch = 0, len(arrivals), float("inf"), c.on_arrive, c.dispatch
        times = [r.arrival_s for r in arrivals] + [inf]  # ends with inf: no test of i < n on each event
        every = max(1, n // 100)
        mark = every if bar is not None else n + 1  # i never passes n: without a bar, never an update
        handlers, stop = {"done": c.on_done, "arrived": c.on_arrived, "lost": c.on_lost,
                          "wake": c.on_wake}, c.stop
        sifted = stop is not None and c.fast  # stop only at the step-by-step run's instants
        hidden = sifted and hasattr(stop, "next")  # see _hidden_stop
        while i < n or events:
            t = events[0][0] if events else inf
            real = not sifted  # else: an instant of the step-by-step run (not only a cut stretch's own end)?
            if times[i] <= t:
                t, real = times[i], True
                while times[i] == t:
                    arrive(t, arrivals[i])
                    i += 1
            while events and events[0][0] == t:
                _, _, kind, payload = pop(events)
                real = real or kind != "done" or payload[1] == payload[0].step
                handlers[kind](t, *payload)
            dispatch(t)
            if stop is not None:
                end = t if real and stop(t) else self._hidden_stop(stop, times[i]) if hidden else None
                if end is not None:  # the run's outcome is decided (a goodput run): end it here
                    self._stop(end, stop.reason)
                    return end
            if i >= mark:
                bar.update(i - bar.n)
                mark = i + every
        return t

    def _hidden_stop(self, stop, arrival: float) -> float | None:
        """On the fast path, the silent steps of decode stretches (:mod:`.fast`) end at instants the step-by-step
        run has and this one does not: call ``stop`` at those of them from ``stop.next`` (the time before which it
        says False, as :class:`~.goodput_verdict.Verdict` and :class:`~.goodput_spread.Settle` keep it) to the next
        event or ``arrival``, as step by step. The time at which it says True, or None."""
        events, after = self.events, stop.next
        upcoming = min(arrival, events[0][0]) if events else arrival
        if after >= upcoming:
            return None  # the usual case: no instant to call it at before the next event (no walk of the workers)
        if after != after:  # NaN: no time promised, so every instant (as step by step), not none
            after = -math.inf
        workers = [w for w in self.c.workers if w.ahead is not None]
        while after < upcoming and workers:
            ends = [w.ahead[j] for w in workers for j in (bisect_left(w.ahead, after),) if j < len(w.ahead)]
            t = min(ends, default=upcoming)
            if t >= upcoming:
                return None
            if stop(t):
                return t
            after = max(math.nextafter(t, math.inf), stop.next)  # a NaN next: the next instant
        return None

    def _stop(self, t: float, reason: str) -> None:
        """End the run early at ``t``: record the decode steps ended by then and fail the requests not done."""
        c = self.c
        for w in c.workers:
            if w.ahead is not None:
                fast.commit(c, w, steps_ended(w, t, True))
        for r in c.requests:
            if not r.done:
                r.fail(reason, t)

    def step(self, w, plan, t: float) -> None:
        """Run (or predict) ``w``'s step now; it ends after its seconds."""
        c = self.c
        if c.fast:
            if w.registered != len(w.batch.slots):
                fast.register(w)
            if plan.decode and not plan.prefill and (not (w.queue or w.prefilling or w.joining or w.incoming) or
                                                      (not c.trace and fast.sealed(w, c.cfg))):
                if fast.start_stretch(c, w, t, plan):
                    return
            if plan.decode and plan.prefill and c.backend.hybrid_path == "fused":  # one forward (fast's context)
                n = len(plan.decode)
                out = c.backend.hybrid_outcome(plan.prefill, plan.prefill_tokens, n, w.context_base + n * len(w.clock))
            elif plan.prefill:  # a decode pass (if any), then the prefill forwards
                decode_s = fast.decode_seconds(c, w) if plan.decode else 0.0
                res = c.backend.prefill(plan.prefill, plan.prefill_tokens)
                out = StepOutcome(decode_s, res.seconds, (), res.first_tokens)
            else:
                out = fast.Decoded(fast.decode_seconds(c, w))
        else:
            out = run_step(c.backend, w.batch, plan.decode, plan.prefill, plan.prefill_tokens)
        if plan.prefill:  # when its layers were computed: a layer-wise hand-off overlaps this forward (.nic)
            w.nic.forward_s = (t + out.decode_s, t + out.seconds)
        if c.trace and plan.decode:
            c.log(w.name, "decode", t, t + out.decode_s, fast.batch_ids(w) if c.fast else
                  (s.request.id for s in plan.decode), len(plan.decode), len(plan.decode))
        if c.trace and plan.prefill:
            c.log(w.name, "prefill", t + out.decode_s, t + out.seconds, (s.request.id for s in plan.prefill),
                  len(plan.prefill), sum(plan.prefill_tokens))
        c.push_done(t + out.seconds, w, plan, out)

    def transfer(self, p, d, slot, t: float, arrive: bool = True) -> float:
        """Move ``slot``'s cache from ``p`` to ``d`` (really, for a model) and charge the link between their NICs
        (:func:`.nic.schedule`); returns when it arrives, which is an event unless ``arrive`` is false (the
        caller's: a hand-off spliced into a decode stretch, :mod:`.splice`)."""
        c = self.c
        res = c.backend.transfer(slot, c.cfg.transfer_mode)
        r = slot.request
        layers = getattr(c.backend, "kv_layers", DEFAULT_KV_LAYERS)
        start, end = schedule(c.cfg, p, d, t, res.seconds, res.nbytes, layers, r.prefill_end_s)
        r.transfer_bytes = res.nbytes
        if c.cfg.trace:
            c.transfers.append(dict(request_id=r.id, src=p.name, dst=d.name, start_s=start, end_s=end,
                                    nbytes=res.nbytes, measured_s=res.seconds, charged_s=end - start,
                                    method=res.method, handoff_s=t))
        if c.trace:
            c.log(f"{p.name}->{d.name}", "transfer", start, end, [r.id], 1, slot.context)
        c.measured_s += res.seconds
        if arrive:
            self.push(end, "arrived", p, d, slot, slot.transfer_id)
        return end

    def lost(self, w, after_s: float, t: float, reason: str) -> None:
        """``w`` is lost ``after_s`` from ``t`` (a fault hook fired)."""
        self.push(t + after_s, "lost", w, reason)

    def release(self, w, slot) -> None:
        """The request no longer needs ``w``'s copy of its cache (here the slot simply moves on)."""

    def forget(self, w) -> None:
        """Drop what ``w`` held (here its slots' caches go with the slots)."""
