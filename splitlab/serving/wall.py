"""The wall clock of the distributed back end: the cluster's decisions, executed by worker processes.

The loop admits arrivals when their time comes, lets the cluster dispatch, sends each step and each hand-off to
the workers (:class:`~.distributed.messages.RunStep`, :class:`SendKV` + :class:`RecvKV`), and turns their replies
into the same events the virtual clock produces (a step done, a cache arrived), stamped with the time they reached
the router. A reply that answers nothing outstanding is a :class:`~.distributed.messages.ProtocolError`.

Health: a worker whose process exited, or that holds a step and answers nothing for ``timeout_s``, is lost
(:mod:`.recovery`); a hand-off that fails, or that takes longer than ``timeout_s``, is cancelled and sent again
(``max_retries`` bounds it). Waiting in a queue is never a stall: only work a worker holds is timed.
"""
from __future__ import annotations

import time
from dataclasses import asdict

from .distributed import messages as M
from .executor import StepOutcome

__all__ = ["WallClock"]


class WallClock:
    def __init__(self, cluster):
        self.c, self.b = cluster, cluster.backend
        self.rank = {w.name: i + 1 for i, w in enumerate(cluster.workers)}
        self.worker = {i + 1: w for i, w in enumerate(cluster.workers)}
        self.steps: dict[str, tuple] = {}       # worker name -> (step, plan, sent at)
        self.moving: dict[int, list] = {}       # request id -> [src, dst, slot, transfer id, start, sent stats]
        self.cancelled: set[tuple] = set()      # (request id, hand-off id) called off: late replies are expected
        self.delivered: set[tuple] = set()      # (request id, hand-off id) arrived: the sender's Sent may come later
        self.t0 = 0.0

    def now(self) -> float:
        return time.time() - self.t0

    # --- the loop --------------------------------------------------------------------------------------------
    def run(self) -> float:
        c, b = self.c, self.b
        names = [w.name for w in c.workers]
        hook = c.fault_hook
        for rank in self.worker:
            b.send(rank, M.Begin(names, c.cfg.transfer_mode, M.pack_object(hook)))
        pending = sorted(c.requests, key=lambda r: (r.arrival_s, r.id))
        i, n = 0, len(pending)
        self.t0 = time.time()
        c.record(*c.workers, t=0.0)
        while any(not r.done for r in c.requests):
            t = self.now()
            while i < n and pending[i].arrival_s <= t:
                c.on_arrive(t, pending[i])
                i += 1
            c.dispatch(t)
            wait = 0.05 if i >= n else min(0.05, max(0.0, pending[i].arrival_s - self.now()))
            for msg in b.poll(wait):
                self.handle(self.now(), msg)
            self.check(self.now())
            c.dispatch(self.now())
            if i >= n and not self.steps and not self.moving and not any(w.busy for w in c.workers):
                self.stuck(self.now())
        return self.now()

    def stuck(self, t: float) -> None:
        """Nothing runs, nothing moves and nothing is due: whatever is unfinished can never finish (a bug)."""
        for r in self.c.requests:
            if not r.done:
                r.fail("no worker could take this request any further (a splitlab bug; please report it)", t)

    # --- what the cluster asks -----------------------------------------------------------------------------------
    def step(self, w, plan, t: float) -> None:
        items = []
        for s, n in zip(plan.prefill, plan.prefill_tokens):
            r = s.request
            first = s.prefilled == 0
            items.append(asdict(M.PrefillItem(r.id, n, r.prompt if first else None, r.max_new_tokens,
                                              _sampling(r.sampling), list(r.output) if first else [])))
        self.b.send(self.rank[w.name], M.RunStep(w.step, [s.request.id for s in plan.decode], items))
        self.steps[w.name] = (w.step, plan, t)

    def transfer(self, p, d, slot, t: float) -> None:
        c, r = self.c, slot.request
        tokens = list(r.output)
        if c.cfg.first_token_on == "decode" and not slot.resumed:
            tokens.append(slot.last_token)  # the decode worker's first input; it leaves when the worker admits it
        tid = slot.transfer_id
        self.b.send(self.rank[d.name], M.RecvKV(r.id, tid, self.rank[p.name], slot.cache, r.prompt_len,
                                                r.max_new_tokens, _sampling(r.sampling), tokens, slot.replay))
        self.b.send(self.rank[p.name], M.SendKV(r.id, tid, self.rank[d.name], c.cfg.transfer_mode))
        self.moving[r.id] = [p, d, slot, tid, t, None]
        r.transfer_bytes = slot.cache["nbytes"]

    def release(self, w, slot) -> None:
        if w.alive:
            self.b.send(self.rank[w.name], M.Release(slot.request.id))

    def forget(self, w) -> None:
        self.b.kill(self.rank[w.name])
        for rid, (p, d, slot, *_) in list(self.moving.items()):
            if w in (p, d):  # the cluster sends it again or serves it again
                self.cancelled.add((rid, self.moving.pop(rid)[3]))
                other = d if w is p else p
                if w is p and other.alive:
                    self.b.send(self.rank[other.name], M.Release(rid))
        self.steps.pop(w.name, None)

    # --- what the workers say ------------------------------------------------------------------------------------
    def handle(self, t: float, msg: M.Message) -> None:
        w = self.worker.get(getattr(msg, "rank", 0))
        if w is None:
            raise M.ProtocolError(f"{type(msg).__name__} from rank {getattr(msg, 'rank', '?')}, which is no worker")
        if not w.alive:
            return  # a lost worker's last words
        if isinstance(msg, M.StepDone):
            self.step_done(t, w, msg)
        elif isinstance(msg, (M.Sent, M.Arrived)):
            self.transfer_news(t, w, msg)
        elif isinstance(msg, M.Failed):
            self.failed(t, w, msg)
        else:
            raise M.ProtocolError(f"the router does not expect {type(msg).__name__} (from {w.name})")

    def step_done(self, t: float, w, msg: M.StepDone) -> None:
        step, plan, sent = self.steps.get(w.name, (None, None, None))
        if step != msg.step:
            raise M.ProtocolError(f"unmatched StepDone from {w.name}: step {msg.step}, outstanding {step}")
        del self.steps[w.name]
        c = self.c
        for s, n in zip(plan.prefill, plan.prefill_tokens):
            s.prefilled += n
            s.cache = msg.plans.get(str(s.request.id), s.cache)  # the plan of its cache, for the hand-off
        start = msg.start - self.t0
        if plan.decode:
            c.log(w.name, "decode", start, start + msg.decode_s, (s.request.id for s in plan.decode),
                  len(plan.decode), len(plan.decode))
        if plan.prefill:
            c.log(w.name, "prefill", start + msg.decode_s, start + msg.decode_s + msg.prefill_s,
                  (s.request.id for s in plan.prefill), len(plan.prefill), sum(plan.prefill_tokens))
        c.on_done(t, w, step, plan, StepOutcome(msg.decode_s, msg.prefill_s, msg.tokens, msg.first_tokens))

    def transfer_news(self, t: float, w, msg) -> None:
        entry = self.moving.get(msg.rid)
        if entry is None or entry[3] != msg.tid:
            if isinstance(msg, M.Sent) and (msg.rid, msg.tid) in self.delivered:
                return  # the receiver's word came first (two processes, two mailboxes)
            if (msg.rid, msg.tid) in self.cancelled:
                if isinstance(msg, M.Arrived):
                    self.b.send(self.rank[w.name], M.Release(msg.rid))  # nobody waits for it any more
                return
            raise M.ProtocolError(f"unmatched {type(msg).__name__} for request {msg.rid} (hand-off {msg.tid}) from "
                                  f"{w.name}")
        p, d, slot, tid, start, _ = entry
        if isinstance(msg, M.Sent):
            entry[5] = msg
            return
        del self.moving[msg.rid]
        if entry[5] is None:
            self.delivered.add((msg.rid, msg.tid))
        c = self.c
        if c.cfg.trace:
            c.transfers.append(dict(request_id=msg.rid, src=p.name, dst=d.name, start_s=start, end_s=t,
                                    nbytes=msg.nbytes, measured_s=msg.seconds, charged_s=t - start,
                                    method=f"{self.b.backend}-{c.cfg.transfer_mode}"))
        c.log(f"{p.name}->{d.name}", "transfer", start, t, [msg.rid], 1, slot.context)
        c.measured_s += msg.seconds
        c.on_arrived(t, p, d, slot, tid)

    def failed(self, t: float, w, msg: M.Failed) -> None:
        if msg.what == "step":
            self.c.on_lost(t, w, f"its step {msg.ref} failed: {msg.reason}")
            return
        entry = self.moving.get(msg.ref)
        if entry is None or entry[3] != msg.tid:
            if (msg.ref, msg.tid) in self.cancelled:
                return
            raise M.ProtocolError(f"unmatched Failed {msg.what} for request {msg.ref} (hand-off {msg.tid}) from "
                                  f"{w.name}")
        final = msg.reason.startswith("CacheMismatchError")
        if not final and self._exited(t, entry[1] if w is entry[0] else entry[0]):
            return  # the other side's process went away: its loss (on_lost) re-routes or fails the request
        self.call_off(t, msg.ref, f"{w.name} could not {msg.what} its cache: {msg.reason}", final=final)

    def _exited(self, t: float, w, wait_s: float = 0.5) -> bool:
        """Whether ``w``'s process has exited, waiting up to ``wait_s`` for it to be seen (a send fails with
        "connection reset" the moment the receiver dies, a moment before its exit code is known); a worker found
        dead is lost (:meth:`check`). Without this the cache was sent again to the dead worker until the request
        ran out of retries, and failed as a send error instead of "no decode worker left"."""
        rank, deadline = self.rank[w.name], time.perf_counter() + wait_s
        while rank not in self.b.dead():
            if time.perf_counter() >= deadline:
                return False
            time.sleep(0.01)
        self.check(t)
        return True

    def call_off(self, t: float, rid: int, reason: str, final: bool = False) -> None:
        """Cancel the hand-off of ``rid``: its cache goes again from the prefill worker, or, ``final`` (it can
        never be received), the request fails."""
        p, d, slot, tid, *_ = self.moving.pop(rid)
        self.cancelled.add((rid, tid))
        r = slot.request
        p.sending.remove(slot)
        d.incoming.remove(slot)
        d.memory.release(rid)
        d.output_owed -= r.max_new_tokens - len(r.output)
        slot.transfer_id = None
        self.b.send(self.rank[d.name], M.Release(rid))
        self.c.notes.append(f"request {rid}: {reason}")
        r.retries += 1
        if final or r.retries > self.c.cfg.max_retries:
            p.memory.release(rid)
            self.release(p, slot)
            r.fail(reason if final else f"{reason}; tried {r.retries} times", t)
        else:
            p.outbox.appendleft(slot)
            self.c.senders.add(p)
            self.c.handoff_pending = True
        self.c.dirty.update((p, d))

    def check(self, t: float) -> None:
        """Lose workers whose process exited or that sat on a step past the timeout; call off stalled hand-offs."""
        c, timeout = self.c, self.b.timeout_s
        for rank, code in self.b.dead().items():
            w = self.worker[rank]
            if w.alive:
                c.on_lost(t, w, f"its process (rank {rank}) exited with code {code}")
        for name, (step, plan, sent) in list(self.steps.items()):
            if t - sent > timeout:
                w = next(x for x in c.workers if x.name == name)
                c.on_lost(t, w, f"no answer for {timeout:g} s while running step {step}")
        for rid, (p, d, slot, tid, start, sent) in list(self.moving.items()):
            if t - start > timeout:
                self.call_off(t, rid, f"the hand-off {p.name}->{d.name} took more than {timeout:g} s")


def _sampling(params) -> dict | None:
    return None if params is None else asdict(params)
