"""How the simulator stays fast without changing a decision: lazy token records and decode stretches.

Both apply to cost models only (an executor with ``decode_seconds`` and ``decode_run_seconds``) without a fault
hook. With a trace, a stretch writes each of its steps' timeline row and memory sample when it records the steps
(:func:`commit`), and work that reaches a worker cuts its stretch even when it is sealed (the memory samples
of a hand-off fall between its steps). The tests check that every result is identical, token
time for token time (with a trace, row for row of the timeline and the memory log), with them and step by step,
below capacity and in overload.

**Lazy token records.** A cost model's tokens are all 0 and every request of a decode batch gets its tokens at
the same moments, the ends of the worker's decode steps. So a worker appends each step's end to its own list
(``Worker.clock``: one entry per step) and a request keeps where its share of that list starts and ends, once,
when it finishes (:func:`materialize`), its tokens expanded from the clock only when they are read (metrics read a
request's first, second and last token times without expanding them); its finish is found from the step
index it finishes at (``Worker.finishing``), and the batch's cached tokens are a running sum, so a decode step
costs the same whatever the batch size. Slots parked on a worker keep their bytes as running sums too
(:class:`~.scheduler.Parked`), so nothing walks a queue on a step or an arrival.

**Decode stretches.** A worker that only decodes (nothing queued, prefilling, joining or on its way to it; or a
*sealed* worker, :func:`sealed`: a full batch, whose steps nothing that arrives can change) runs the same batch
step after step until a request finishes or new work reaches it. The end of every such step is
known in advance: the stretch is computed at once (``Worker.ahead``), one event is scheduled for its last step
(the one that finishes a request), and the steps before it are recorded when needed (:func:`commit`). A worker's
load at time ``t`` counts the steps ended by then (:meth:`~.scheduler.Worker.load`), so the router sees what it
would see step by step; when work reaches a worker in a stretch that is not sealed, the stretch is cut there
(:func:`cut`): the step in progress ends as an ordinary event and the worker goes on the ordinary way. Under
overload a stretch lasts from one finish to the next, so a run costs about one event per request, not per step.
"""
from __future__ import annotations

from itertools import accumulate

from .request import State
from .scheduler import StepPlan, Worker, steps_ended

__all__ = ["Decoded", "register", "batch_ids", "decode_seconds", "decoded", "materialize", "sealed", "start_stretch",
           "commit", "cut", "reached", "end_stretch"]


#: the plan an event ending a decode step of a worker's whole batch carries, on this path: ``Cluster.on_done`` reads
#: only that it decodes (the batch is the worker's), so one shared plan, not a copy of the batch per event
WHOLE_BATCH = StepPlan(decode=[None])


class Decoded:
    """What a decode step of a cost model did, as :class:`~.executor.StepOutcome` says it, without its lists: its
    seconds (no tokens to carry: the fast path's tokens are deferred). One is made per step event."""

    __slots__ = ("decode_s",)
    prefill_s, fused, tokens, first_tokens = 0.0, False, (), ()

    def __init__(self, decode_s: float):
        self.decode_s = decode_s

    @property
    def seconds(self) -> float:
        return self.decode_s


def register(w: Worker) -> None:
    """Take the slots that joined ``w``'s batch since its last step into the lazy records (call it when
    ``w.registered < len(w.batch.slots)``)."""
    slots = w.batch.slots
    now = len(w.clock)
    w.batch_ids = None
    for s in slots[w.registered:]:
        s.joined = now
        s.written = now
        w.context_base += s.context - now  # its cached tokens at step index i: context + (i - now)
        w.finishing.setdefault(now + s.request.max_new_tokens - len(s.request.output), []).append(s)
    w.registered = len(slots)


def batch_ids(w: Worker) -> tuple[int, ...]:
    """The request ids of ``w``'s batch (kept until the batch changes: a trace's decode rows cost O(1) to make)."""
    if w.batch_ids is None:
        w.batch_ids = tuple(s.request.id for s in w.batch.slots)
    return w.batch_ids


def decode_seconds(cluster, w: Worker) -> float:
    """Seconds of ``w``'s next decode step (its batch's cached tokens from the running sum)."""
    n = len(w.batch.slots)
    return cluster.backend.decode_seconds(n, w.context_base + n * len(w.clock))


def materialize(w: Worker, s) -> None:
    """Give ``s``'s request the tokens it got from ``w``'s decode steps since it last did: where they start and end
    in ``w.clock``, expanded when first read (:meth:`~.request.Request.defer_tokens`: a run copies no token time)."""
    end = len(w.clock)
    if end > s.written:
        s.request.defer_tokens(w.clock, s.written, end, 0)
        s.written = end
        s.last_token = 0


def decoded(cluster, w: Worker, t: float) -> None:
    """A decode step of ``w`` ended at ``t``: record it and finish the requests whose last token it was."""
    w.clock.append(t)
    n = len(w.batch.slots)
    w.output_owed -= n
    done = w.finishing.pop(len(w.clock), None)
    if done:
        for s in done:
            w.context_base -= s.context - s.written  # its term of register's sum (read before its tokens are deferred)
            materialize(w, s)
            r = s.request
            r.state, r.finish_s = State.FINISHED, t
            w.batch.slots.remove(s)
            w.memory.release(r.id)
        w.registered -= len(done)
        w.batch_ids = None
        cluster.handoff_pending = True


def sealed(w: Worker, cfg) -> bool:
    """Whether nothing that reaches ``w`` can change its steps before one of its requests finishes: nothing is
    prefilling and its batch is full (or, colocated decode-first, not empty), so each step decodes the same batch
    whatever waits. A stretch of a sealed worker goes on when work arrives (under overload, the usual case)."""
    if w.prefilling:
        return False
    n = len(w.batch.slots)
    return n >= cfg.batch_cap or (n > 0 and w.role == "colocated" and cfg.policy == "decode-first")


def start_stretch(cluster, w: Worker, t: float, plan: StepPlan) -> bool:
    """Plan ``w``'s decode stretch from ``t`` (``plan``: a decode of its whole batch) and schedule its last step;
    False (nothing planned) when no step before the first finish would be silent."""
    left = min(w.finishing) - len(w.clock) - 1
    if left < 1:
        return False
    n = len(w.batch.slots)
    seconds = cluster.backend.decode_run_seconds(n, w.context_base + n * len(w.clock), left + 1)
    ends = accumulate(seconds, initial=t)  # sequential sums: the floats of step by step
    next(ends)  # t itself (no list copies: a stretch's cost is these sums)
    w.ahead = list(ends)
    w.ahead_n, w.ahead_done, w.ahead_start, w.ahead_end = n, 0, t, w.ahead.pop()
    w.ahead_cum = None  # every step decodes n tokens (a splice makes a list: .splice)
    cluster.push_done(w.ahead_end, w, plan, Decoded(float(seconds[-1])))
    return True


def commit(cluster, w: Worker, upto: int) -> None:
    """Record ``w``'s silent steps up to (not including) step ``upto`` of its stretch."""
    k = upto - w.ahead_done
    if k > 0:
        ahead = w.ahead
        ends = ahead if k == len(ahead) else ahead[w.ahead_done:upto]  # the whole stretch: no copy
        previous = w.ahead[w.ahead_done - 1] if w.ahead_done else w.ahead_start
        if cluster.trace:  # each step's row and memory sample, as step by step (Cluster.log, KVMemory.record)
            begin, ids, n, name, rows = previous, batch_ids(w), w.ahead_n, w.name, cluster.timeline
            samples, used, reserved = w.memory.log, w.used_bytes(), w.memory.reserved_bytes
            grow = n * w.memory.bytes_per_token  # each step caches one more token per request (never 0 bytes)
            for end in ends:
                rows.append((name, "decode", begin, end, list(ids), n, n))
                used += grow
                samples.append((end, used, reserved))
                begin = end
        w.clock.extend(ends)
        w.output_owed -= w.decoded(w.ahead_done, upto)
        cluster.measured_s += ends[-1] - previous
        w.ahead_done = upto


def cut(cluster, w: Worker, t: float, inclusive: bool) -> None:
    """New work reaches ``w`` at ``t``: record the steps ended by then, let the step in progress end as an
    ordinary event (the stretch's own last event is then ignored), and end the stretch."""
    j = steps_ended(w, t, inclusive)
    commit(cluster, w, j)
    if j < len(w.ahead):
        begin = w.ahead[j - 1] if j else w.ahead_start
        end = w.ahead[j]
        w.step += 1
        cluster.push_done(end, w, WHOLE_BATCH, Decoded(end - begin))
    else:  # the step in progress is the stretch's last: its own event ends it
        begin, end = w.ahead[-1] if w.ahead else w.ahead_start, w.ahead_end
    if cluster.trace:
        cluster.log(w.name, "decode", begin, end, batch_ids(w), w.ahead_n, w.ahead_n)
    w.ahead = None
    if w.credits:
        w.credits.clear()


def end_stretch(cluster, w: Worker, t: float) -> None:
    """The last step of ``w``'s stretch (if it is in one) ended at ``t``: record the steps before it and its row."""
    if w.ahead is not None:
        commit(cluster, w, len(w.ahead))
        if cluster.trace:
            begin = w.ahead[-1] if w.ahead else w.ahead_start
            cluster.log(w.name, "decode", begin, t, batch_ids(w), w.ahead_n, w.ahead_n)
        w.ahead = None
        if w.credits:  # every join spliced into it came before its last step
            w.credits.clear()


def reached(cluster, w: Worker, t: float, inclusive: bool) -> None:
    """Work reaches ``w`` at ``t``: a stretch it is in ends there (:func:`cut`) unless it is sealed, or holds a join
    spliced at a later step (:mod:`.splice`: whatever reaches it joins at a step end the stretch ends at)."""
    if w.ahead is not None and (cluster.trace or not sealed(w, cluster.cfg)) and t >= w.spliced_s:
        cut(cluster, w, t, inclusive)
