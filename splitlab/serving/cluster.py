"""Workers and pools on one discrete-event timeline, one virtual clock per worker.

Events happen in time order: arrivals, step completions and transfer completions. When a worker is idle and has
work, it starts a step at the current time; the executor runs (or predicts) the step right away and its seconds
decide when the step ends, so that worker's clock moves on by exactly the measured duration. Workers never wait
for each other except through requests: in the emulated mode every batch really runs on the one device, one
after another in wall time, but each is charged only to its own worker's clock.

Layouts:
- ``colocated``: ``workers`` identical workers; the router sends each request to the least-loaded one, which
  prefills and decodes it under the scheduler's policy.
- ``disaggregated``: ``prefill_workers`` prefill and ``decode_workers`` decode workers. After prefill, the
  request's cache goes to the least-loaded decode worker with room, over the link between the two (one link
  per pair; transfers on a link queue). The transfer is really performed by the executor; the link is charged
  its measured seconds, or ``link_latency_s + bytes / link_bytes_per_s`` when a link bandwidth is set (to
  model a network slower than this machine). ``first_token_on="prefill"`` streams the first token when the
  prefill ends; ``"decode"`` only when the cache has arrived (TTFT then includes the transfer).

Every submitted request ends FINISHED or REJECTED with a reason: at arrival if it can never be served (context
length, a token id outside the vocabulary, KV budget), or at the end if the simulation somehow left it unfinished (a bug, reported as such).
"""
from __future__ import annotations

import heapq
import itertools
import math
import numbers
import time
from dataclasses import dataclass, field

from .executor import Executor
from .memory import KVMemory
from .request import Request, State, check_unique_ids
from .result import ServingResult
from .scheduler import SchedulerConfig, StepPlan, Worker, plan_step

__all__ = ["ClusterConfig", "Cluster", "LAYOUTS"]

LAYOUTS = ("colocated", "disaggregated")


def _positive(x) -> bool:
    """A finite real number > 0 (not a bool, not a string, not NaN)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x > 0


@dataclass(frozen=True)
class ClusterConfig:
    """Shape of the cluster. ``kv_budget_bytes`` applies to every worker (None = unlimited).

    Raises:
        ValueError: an unknown layout, first_token_on or transfer_mode; a pool without workers; a budget, link
            bandwidth or latency that is not a finite number in range.
    """

    layout: str = "colocated"
    workers: int = 1
    prefill_workers: int = 1
    decode_workers: int = 1
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    kv_budget_bytes: int | None = None
    first_token_on: str = "prefill"
    transfer_mode: str = "whole"
    link_bytes_per_s: float | None = None
    link_latency_s: float = 0.0

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if min(self.workers, self.prefill_workers, self.decode_workers) < 1:
            raise ValueError("every pool needs at least one worker")
        if self.first_token_on not in ("prefill", "decode"):
            raise ValueError(f"first_token_on must be 'prefill' or 'decode', got {self.first_token_on!r}")
        if self.transfer_mode not in ("whole", "layerwise"):
            raise ValueError(f"transfer_mode must be 'whole' or 'layerwise', got {self.transfer_mode!r}")
        if not all(isinstance(n, numbers.Integral) for n in (self.workers, self.prefill_workers,
                                                              self.decode_workers)):
            raise ValueError("worker counts must be integers")
        if self.kv_budget_bytes is not None and not _positive(self.kv_budget_bytes):
            raise ValueError(f"kv_budget_bytes must be a number of bytes > 0 (or None for unlimited), got "
                             f"{self.kv_budget_bytes!r}")
        if self.link_bytes_per_s is not None and not _positive(self.link_bytes_per_s):
            raise ValueError(f"link_bytes_per_s must be > 0 bytes/s (or None to charge the measured time), got "
                             f"{self.link_bytes_per_s!r}")
        if not (_positive(self.link_latency_s) or self.link_latency_s == 0):
            raise ValueError(f"link_latency_s must be >= 0 s, got {self.link_latency_s!r}")

    @property
    def n_workers(self) -> int:
        return self.workers if self.layout == "colocated" else self.prefill_workers + self.decode_workers


class Cluster:
    """Runs a list of requests through workers driven by ``executor``; see the module docstring."""

    def __init__(self, executor: Executor, config: ClusterConfig | None = None):
        self.ex, self.cfg = executor, config or ClusterConfig()
        mem = lambda: KVMemory(self.cfg.kv_budget_bytes, executor.kv_bytes_per_token)  # noqa: E731
        if self.cfg.layout == "colocated":
            self.pool = [Worker(f"W{i}", "colocated", mem()) for i in range(self.cfg.workers)]
            self.decoders = []
        else:
            self.pool = [Worker(f"P{i}", "prefill", mem()) for i in range(self.cfg.prefill_workers)]
            self.decoders = [Worker(f"D{i}", "decode", mem()) for i in range(self.cfg.decode_workers)]
        self.workers = self.pool + self.decoders
        self.links: dict[tuple[str, str], float] = {}
        self.timeline: list[dict] = []
        self.transfers: list[dict] = []
        self._events: list = []
        self._seq = itertools.count()
        self.measured_s = 0.0

    # --- events --------------------------------------------------------------------------------------------
    def _push(self, t: float, kind: str, *payload) -> None:
        heapq.heappush(self._events, (t, next(self._seq), kind, payload))

    def run(self, requests: list[Request]) -> ServingResult:
        """Serve ``requests`` (mutated in place) and return the result; call once per Cluster.

        Raises:
            ValueError: two requests share an id.
        """
        check_unique_ids(requests)
        wall0, over0 = time.perf_counter(), self.ex.overhead_s
        for r in requests:
            self._push(r.arrival_s, "arrive", r)
        for w in self.workers:
            self._record(w, 0.0)
        while self._events:
            t = self._events[0][0]
            while self._events and self._events[0][0] == t:
                _, _, kind, payload = heapq.heappop(self._events)
                getattr(self, f"_on_{kind}")(t, *payload)
            self._dispatch(t)
        end = max([w.busy_until or 0.0 for w in self.workers] + [r.finish_s or 0.0 for r in requests])
        for r in requests:
            if not r.done:
                r.reject("unfinished when the simulation ran out of events (a splitlab bug; please report it)", end)
        return ServingResult(requests, self.cfg, [w.name for w in self.workers], self.timeline, self.transfers,
                             {w.name: w.memory for w in self.workers}, wall_s=time.perf_counter() - wall0,
                             measured_s=self.measured_s, overhead_s=self.ex.overhead_s - over0)

    def _record(self, w: Worker, t: float) -> None:
        w.memory.record(t, w.used_tokens())

    def _on_arrive(self, t: float, r: Request) -> None:
        reason, vocab = None, self.ex.vocab_size
        if r.max_total_tokens > self.ex.max_context:
            reason = (f"prompt ({r.prompt_len}) + max_new_tokens ({r.max_new_tokens}) = {r.max_total_tokens} tokens "
                      f"exceed the model's context of {self.ex.max_context}")
        elif vocab is not None and not (min(r.prompt) >= 0 and max(r.prompt) < vocab):
            bad = next(t for t in r.prompt if not 0 <= t < vocab)
            reason = f"prompt token id {bad} is outside the model's vocabulary 0..{vocab - 1}"
        elif self.cfg.layout == "colocated":
            reason = self.pool[0].memory.never_fits(r.max_total_tokens)
        else:
            reason = self.pool[0].memory.never_fits(r.prompt_len) or self.decoders[0].memory.never_fits(
                r.max_total_tokens)
        if reason:
            r.reject(reason, t)
            return
        min(self.pool, key=Worker.load).queue.append(r)

    def _on_done(self, t: float, w: Worker, plan: StepPlan, tokens: list[int], firsts: list) -> None:
        w.busy_until = None
        for slot, tok in zip(plan.decode, tokens):
            slot.last_token = tok
            slot.request.emit(tok, t)
            if slot.request.done:
                w.batch.slots.remove(slot)
                w.memory.release(slot.request.id)
        for slot, tok in zip(plan.prefill, firsts):
            if tok is None:
                continue
            r = slot.request
            w.prefilling.remove(slot)
            r.prefill_end_s, slot.last_token = t, tok
            if w.role == "colocated" or self.cfg.first_token_on == "prefill":
                r.emit(tok, t)
            if r.done:
                w.memory.release(r.id)
            elif w.role == "colocated":
                r.state, r.decode_worker = State.DECODING, w.name
                w.batch.slots.append(slot)
            else:
                r.state = State.TRANSFERRING
                w.outbox.append(slot)
        self._record(w, t)

    def _on_arrived(self, t: float, src: Worker, dst: Worker, slot) -> None:
        r = slot.request
        src.sending.remove(slot)
        dst.incoming.remove(slot)
        src.memory.release(r.id)
        r.transfer_end_s, r.decode_worker = t, dst.name
        if self.cfg.first_token_on == "decode":
            r.emit(slot.last_token, t)
        if r.done:
            dst.memory.release(r.id)
        else:
            r.state = State.DECODING
            dst.joining.append(slot)
        self._record(src, t)
        self._record(dst, t)

    # --- decisions -----------------------------------------------------------------------------------------
    def _dispatch(self, t: float) -> None:
        for p in self.pool:
            while p.outbox and self._hand_off(p, t):
                pass
        for w in self.workers:
            if w.busy_until is None:
                self._start(w, plan_step(w, self.cfg.scheduler), t)

    def _hand_off(self, p: Worker, t: float) -> bool:
        """Send ``p``'s oldest prefilled request to the least-loaded decode worker with room; False if none."""
        slot = p.outbox[0]
        room = [d for d in self.decoders if d.memory.can_reserve(slot.request.max_total_tokens)]
        if not room:
            return False
        d = min(room, key=Worker.load)
        p.sending.append(p.outbox.popleft())
        d.incoming.append(slot)
        d.memory.reserve(slot.request.id, slot.request.max_total_tokens)
        res = self.ex.transfer(slot, self.cfg.transfer_mode)
        charged = res.seconds if self.cfg.link_bytes_per_s is None else (
            self.cfg.link_latency_s + res.nbytes / self.cfg.link_bytes_per_s)
        link = f"{p.name}->{d.name}"
        start = max(t, self.links.get(link, 0.0))
        self.links[link] = start + charged
        slot.request.transfer_start_s, slot.request.transfer_bytes = start, res.nbytes
        self.transfers.append(dict(request_id=slot.request.id, src=p.name, dst=d.name, start_s=start,
                                   end_s=start + charged, nbytes=res.nbytes, measured_s=res.seconds,
                                   charged_s=charged, method=res.method))
        self.timeline.append(dict(worker=link, kind="transfer", start_s=start, end_s=start + charged,
                                  request_ids=[slot.request.id], batch=1, tokens=slot.context))
        self.measured_s += res.seconds
        self._record(d, t)
        self._push(start + charged, "arrived", p, d, slot)
        return True

    def _start(self, w: Worker, plan: StepPlan, t: float) -> None:
        if plan.empty:
            return
        self._record(w, t)  # admissions changed the reservations
        tokens, firsts, now = [], [], t
        if plan.decode:
            res = self.ex.decode(w.batch)
            tokens = res.tokens
            self._log(w, "decode", now, res.seconds, plan.decode, len(plan.decode))
            now += res.seconds
        if plan.prefill:
            for s in plan.prefill:
                s.request.prefill_worker = w.name
                if s.request.prefill_start_s is None:
                    s.request.prefill_start_s = now
            res = self.ex.prefill(plan.prefill, plan.prefill_tokens)
            firsts = res.first_tokens
            self._log(w, "prefill", now, res.seconds, plan.prefill, sum(plan.prefill_tokens))
            now += res.seconds
        w.busy_until = now
        self._push(now, "done", w, plan, tokens, firsts)

    def _log(self, w: Worker, kind: str, start: float, seconds: float, slots, tokens: int) -> None:
        self.measured_s += seconds
        self.timeline.append(dict(worker=w.name, kind=kind, start_s=start, end_s=start + seconds,
                                  request_ids=[s.request.id for s in slots], batch=len(slots), tokens=tokens))
