"""The cluster: workers and pools driven by events, the same decisions for every back end.

Events are arrivals, step completions, KV hand-off arrivals and lost workers. When a worker is idle and has work,
it starts a step (:func:`~.scheduler.plan_step`); new requests and prefilled caches go where the router says
(:mod:`.router`); KV memory is reserved and released by :class:`~.memory.KVMemory`. Only the clock differs:

- **virtual clock** (:mod:`.virtual`; emulated and simulated back ends, an :class:`~.executor.Executor`): the
  executor runs or predicts the step right away and its seconds decide when it ends, so each worker's clock moves
  on by exactly the measured or predicted duration; a transfer holds its two workers' NICs (:mod:`.nic`).
- **wall clock** (:mod:`.wall`; the distributed back end, ``backend.wall_clock``): steps and transfers run in
  worker processes; the cluster sends them out and their completions come back as events stamped with the time
  they reached it.

Faults (:mod:`.recovery`): a lost worker gives up its requests, which are served again elsewhere, and the run
goes on with the workers left. Every submitted request ends FINISHED, REJECTED or FAILED, each with its reason.
"""
from __future__ import annotations

import itertools
import time
from operator import attrgetter

from . import fast, handoff, recovery, splice
from ..common.faults import WorkerFault
from .inputs import arrival_refusal, check_backend, check_config, check_faults
from .memory import KVMemory, cap_note
from .request import Request, State, check_unique_ids
from .result import ServingResult
from .conditional import make_router
from .prefix_router import attach_prefix_caches, check_prefix_backend
from .scheduler import StepPlan, Worker, plan_step

__all__ = ["Cluster"]


def _no_faults(event: str, worker: str, request_ids) -> None:
    return None


class Cluster:
    """Serves requests with ``backend`` (an executor for a virtual clock, or a wall-clock back end) laid out as
    ``config`` says; ``faults`` is a fault hook (:mod:`splitlab.common.faults`). Call :meth:`run` once per Cluster."""

    def __init__(self, backend, config=None, faults=None):
        check_backend(backend)
        self.backend, self.cfg = backend, check_config(config)
        check_prefix_backend(self.cfg, backend)  # before a wall-clock back end starts its processes
        wall = getattr(backend, "wall_clock", False)
        faults = check_faults(faults, self._names(), wall)
        if wall:  # worker processes: started (or kept) for this many workers, before their sizes are read
            backend.prepare(self.cfg.n_workers)
        # the router calls the hook itself on a virtual clock; worker processes call it on a wall clock
        self.faults, self.fault_hook = (_no_faults, faults) if wall else (faults or _no_faults, None)
        self.hooked = self.faults is not _no_faults
        self.trace = self.cfg.trace
        budget = self.cfg.kv_budget_bytes  # "auto": a share of the device's memory less weights and activations
        self.kv_budget_bytes = budget = (backend.auto_kv_budget(self.cfg.memory_utilization, self.cfg.forward_tokens)
                                         if budget == "auto" else budget)
        kv = getattr(backend, "kv_bytes_fn", None)

        def memory() -> KVMemory:
            return KVMemory(budget, backend.kv_bytes_per_token, kv, trace=self.cfg.trace)

        names = self._names()
        if self.cfg.layout == "colocated":
            self.pool = [Worker(name, "colocated", memory(), i) for i, name in enumerate(names)]
            self.decoders: list[Worker] = []
        else:
            n = self.cfg.prefill_workers
            self.pool = [Worker(name, "prefill", memory(), i) for i, name in enumerate(names[:n])]
            self.decoders = [Worker(name, "decode", memory(), i) for i, name in enumerate(names[n:])]
        self.workers = self.pool + self.decoders
        # a request holding at most this many positions fits every worker's empty budget (no need to ask each)
        self.sure_tokens = min(w.memory.sure_tokens() for w in (self.pool[0], *self.decoders[:1]))
        attach_prefix_caches(self.cfg, self.pool)
        self.timeline: list[tuple] = []
        self.transfers, self.notes, self.admissions = [], [], []  # dicts, strings, request ids
        self.dirty: set[Worker] = set(self.workers)
        self.handoff_pending, self.transfer_ids, self.measured_s = False, itertools.count(), 0.0
        # a cost model without faults takes the fast path of .fast (the same decisions): lazy records, stretches
        self.fast = not wall and faults is None and kv is None and hasattr(backend, "decode_seconds")
        self.router = make_router(self.cfg, self.pool, self.decoders, indexed=self.fast)  # fast: loads in a heap
        self.senders: set[Worker] = set()  # prefill workers whose outbox is not empty
        if wall:
            from .wall import WallClock as Clock
        else:
            from .virtual import VirtualClock as Clock
        self.clock = Clock(self)
        if not wall:  # push_done(t, w, plan, out): schedule the end of w's current step at t
            self.push_done = self.clock.push_done

    def _names(self) -> list[str]:
        c = self.cfg
        if c.layout == "colocated":
            return [f"W{i}" for i in range(c.workers)]
        return [f"P{i}" for i in range(c.prefill_workers)] + [f"D{i}" for i in range(c.decode_workers)]

    # --- running ---------------------------------------------------------------------------------------------
    def run(self, requests: list[Request], progress: bool = False, stop=None) -> ServingResult:
        """Serve ``requests`` (mutated in place) and return the result (``progress``, ``stop``: :mod:`.virtual`).

        Raises:
            ValueError: two requests share an id.
        """
        check_unique_ids(requests)
        self.requests = list(requests)
        wall0, over0 = time.perf_counter(), self.backend.overhead_s
        self.progress, self.stop = progress, stop
        # hand-offs join decode stretches at once (.splice) where nothing reads a state before its time
        self.splicing = self.fast and not self.trace and stop is None and not self.cfg.conditional
        end = self.clock.run()
        for p in self.pool if self.splicing else ():
            splice.settle(p, end)
        for w in self.workers:
            for s in w.batch.slots if self.fast else ():
                fast.materialize(w, s)
        for r in self.requests:
            if not r.done:
                r.fail("unfinished when the run ran out of events (a splitlab bug; please report it)", end)
        self.notes += cap_note(self.cfg, capped := {w.name: w.capped for w in self.workers if w.capped})
        return ServingResult(self.requests, self.cfg, [w.name for w in self.workers], self.timeline,
                             self.transfers, {w.name: w.memory for w in self.workers},
                             wall_s=time.perf_counter() - wall0, measured_s=self.measured_s,
                             overhead_s=self.backend.overhead_s - over0, notes=self.notes,
                             admissions=self.admissions, backend=getattr(self.backend, "name", "executor"),
                             kv_budget_bytes=self.kv_budget_bytes, batch_capped=capped)

    def record(self, *workers: Worker, t: float) -> None:
        if self.trace:
            for w in workers:
                w.memory.record(t, w.used_bytes())

    # --- what happens ----------------------------------------------------------------------------------------
    def on_arrive(self, t: float, r: Request) -> None:
        reason = arrival_refusal(r, self.backend)
        if reason is None and r.max_total_tokens > self.sure_tokens:  # memory asked only where it may not fit
            first = self.pool[0]
            reason = first.memory.never_fits(first.memory_need(r))
            if reason is None and self.decoders:
                reason = self.decoders[0].memory.never_fits(r.max_total_tokens)
        if reason:
            r.reject(reason, t)
        else:
            self.route(t, r)

    def route(self, t: float, r: Request, front: bool = False) -> None:
        """Queue ``r`` on the least-loaded live worker of the first pool (``front``: ahead of the others)."""
        w = self.router.first(t, r)
        if w is None:
            r.fail(f"no {self.pool[0].role} worker left: all of them were lost", t)
            return
        if w.ahead is not None:  # in a decode stretch (.fast): cut it unless sealed
            fast.reached(self, w, t, inclusive=False)
        r.state = State.WAITING
        w.enqueue(r, front)
        self.dirty.add(w)
        self.router.changed(w)

    def on_done(self, t: float, w: Worker, step: int, plan: StepPlan, out) -> None:
        if not w.alive or step != w.step:
            return  # the step of a worker lost meanwhile (or the end of a decode stretch that was cut)
        w.busy, self.measured_s = False, self.measured_s + out.seconds
        self.dirty.add(w)
        if plan.decode and self.fast:
            fast.end_stretch(self, w, t)
            fast.decoded(self, w, t)
        elif plan.decode:
            finished = State.FINISHED
            for slot, tok in zip(plan.decode, out.tokens):
                r = slot.request  # decoding, so not done, and t only grows: Request.emit's checks hold here
                slot.last_token = tok
                r.output.append(tok)
                r.token_times_s.append(t)
                if len(r.output) >= r.max_new_tokens:
                    r.state, r.finish_s = finished, t
                    w.batch.slots.remove(slot)
                    w.memory.release(r.id)
                    self.handoff_pending = True
            w.output_owed -= len(plan.decode)
        if plan.prefill:
            for slot, n, tok in zip(plan.prefill, plan.prefill_tokens, out.first_tokens):
                w.prompt_owed -= n
                if tok is not None:
                    self._prefilled(t, w, slot, tok)
        if self.trace:  # a memory sample: with a trace only (the call alone costs)
            self.record(w, t=t)
        self.router.changed(w)

    def _prefilled(self, t: float, w: Worker, slot, tok: int) -> None:
        """``slot``'s prefill on ``w`` ended at ``t``; ``tok`` is its next token."""
        r = slot.request
        w.prefilling.remove(slot)
        r.prefill_end_s = t
        if w.prefix_cache is not None:  # its prompt's blocks are now cached here (.prefix_router)
            w.prefix_cache.insert(r.prompt)
        if not slot.resumed:
            slot.last_token = tok
            if w.role != "prefill" or self.cfg.first_token_on == "prefill":
                r.emit(tok, t)
                w.output_owed -= w.role != "prefill"
        if r.done:
            w.memory.release(r.id)
            self.clock.release(w, slot)
        elif w.role != "prefill":  # colocated, or a decode worker's local prefill (.conditional)
            r.state, r.decode_worker = State.DECODING, w.name
            w.batch.slots.append(slot)
        else:
            r.state = State.TRANSFERRING
            w.outbox.append(slot)
            self.senders.add(w)
            self.handoff_pending = True

    def on_arrived(self, t: float, src: Worker, dst: Worker, slot, transfer_id: int) -> None:
        handoff.arrived(self, t, src, dst, slot, transfer_id)

    def on_wake(self, t: float, w: Worker) -> None:
        """A spliced cache (:mod:`.splice`) arrives from idle ``w`` at ``t``: its memory is free, ``w`` plans."""
        splice.settle(w, t)
        self.dirty.add(w)

    def on_lost(self, t: float, w: Worker, reason: str) -> None:
        recovery.lost(self, t, w, reason)

    # --- decisions -------------------------------------------------------------------------------------------
    def dispatch(self, t: float) -> None:
        if self.handoff_pending:
            self.handoff_pending = False
            for p in sorted(self.senders, key=attrgetter("index")) if len(self.senders) > 1 else list(self.senders):
                while p.outbox and p.alive and handoff.hand_off(self, p, t):
                    pass
                if not p.outbox:
                    self.senders.discard(p)
        if self.dirty:
            dirty, self.dirty = self.dirty, set()
            for w in sorted(dirty, key=attrgetter("order")) if len(dirty) > 1 else dirty:
                if w.alive and not w.busy:
                    if w.released and w.released[0][0] <= t:  # caches spliced away (.splice) arrived: memory
                        splice.settle(w, t)
                    plan = plan_step(w, self.cfg)
                    if plan.decode or plan.prefill:  # not an empty plan
                        self._start(w, plan, t)
                    elif w.released and (wake := splice.wake_at(w)) is not None:
                        self.clock.push(wake, "wake", w)

    def _start(self, w: Worker, plan: StepPlan, t: float) -> None:
        if plan.admitted:
            self.admissions.extend([s.request.id for s in plan.admitted])
            if w.prefix_cache is not None:  # cached prefixes lowered what it owes (the fast path's heap must hear)
                self.router.changed(w)
        if plan.joined:
            handoff.admitted(self, w, plan.joined, t)  # their first tokens leave (first_token_on="decode")
        for s in plan.prefill:
            s.request.prefill_worker = w.name
            if s.request.prefill_start_s is None:
                s.request.prefill_start_s = t
        if self.trace:  # a memory sample: with a trace only (the call alone costs)
            self.record(w, t=t)  # admissions changed the reservations
        w.busy, w.step = True, w.step + 1
        if self.hooked:
            try:
                self.faults("step", w.name, [s.request.id for s in (*plan.decode, *plan.prefill)])
            except WorkerFault as fault:
                recovery.fault(self, t, w, fault)
                return
        self.clock.step(w, plan, t)
        if w.ahead is not None:  # a decode stretch began: its step ends lower the load
            self.router.changed(w)

    def log(self, worker: str, kind: str, start: float, end: float, request_ids, batch: int, tokens: int) -> None:
        """One busy interval of the timeline (a step, or a transfer on a link)."""
        if self.trace:
            self.timeline.append((worker, kind, start, end, list(request_ids), batch, tokens))
