"""A hand-off spliced into the decode stretch of the worker it goes to: no arrival event, no cut, no restart.

On the simulator's fast path (:mod:`.fast`) a decode worker that only decodes runs a *stretch*: the steps of an
unchanged batch up to its first finish, one event. A prefilled cache handed to such a worker used to cut the
stretch (the step in progress ended as an event of its own), its arrival was an event, and the step after it took
the cache into the batch and started a stretch again: three events, most of a split's cost beyond a colocated run's.

Everything those events decide is known at the hand-off. The cache arrives at ``t_a`` (the NICs are scheduled then,
:func:`.nic.schedule`); step by step the worker takes it into its batch at the end of its first step ending at or
after ``t_a``, ``J`` (an arrival and a step end at one instant both come before the instant's decisions), emits its
first token at ``J`` (``first_token_on="decode"``) and decodes the bigger batch from then on. So the stretch keeps
its steps up to ``J`` and goes on from ``J`` with the new batch until its first finish (:func:`join`), as one event;
a worker's tokens per silent step are a cumulative list (``Worker.ahead_cum``), and the first token, taken off the
load at once, is counted back while ``t <= J`` (``Worker.credits``: a hand-off decided at ``J`` itself sees the
step end, not yet the join). Step by step the arrival also frees the cache's memory on the prefill worker at
``t_a``: it is freed before that worker next plans a step at or after ``t_a`` (:func:`settle`), and a prefill worker
kept waiting for memory is woken at ``t_a`` (:func:`wake_at`), as the arrival's event woke it.

A splice needs the worker's batch to have room at ``J``, ``J`` before the stretch's last step, no trace (a trace
samples memory at the arrival), no ``stop`` (a goodput run reads states mid-run), no conditional router (nothing
may reach the decode worker's queue and cut the stretch before ``J``), no other cache on its way to the worker but
ones done on arrival (they join no batch), and a request that is not done on arrival.
Otherwise the hand-off goes the ordinary way; a stretch holding a splice is then never cut, which changes nothing:
a cache arriving after the stretch's last silent step, or finding the batch full, joins at a step end the stretch
already ends at. ``tests/test_simulator_splice.py`` compares runs with splices to step-by-step runs.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate

from .fast import WHOLE_BATCH, Decoded
from .request import State
from .scheduler import Worker

__all__ = ["join", "settle", "wake_at"]


def join(cluster, p: Worker, d: Worker, slot, t: float, arrive_s: float) -> bool:
    """Splice ``slot``, handed off at ``t`` from ``p`` to ``d`` (in a decode stretch) and arriving at ``arrive_s``,
    into ``d``'s stretch, or False (nothing changed) when it cannot be (module docstring)."""
    r = slot.request
    c = cluster
    if d.queue or d.prefilling or d.joining or len(d.batch.slots) >= c.cfg.batch_cap:
        return False
    if d.incoming and not all(_done_on_arrival(c, s) for s in d.incoming):
        return False  # a cache on its way may join before this one (one done on arrival joins nothing)
    decode_first = c.cfg.first_token_on == "decode" and not slot.resumed
    if decode_first and len(r.output) + 1 >= r.max_new_tokens:
        return False  # done on arrival (_done_on_arrival): nothing to join
    decode_first = decode_first and not r.output
    ahead = d.ahead
    j = bisect_left(ahead, arrive_s, bisect_right(ahead, t, d.ahead_done))  # the step ending at or after arrival
    if j >= len(ahead):
        return False  # it joins at the stretch's own end (or later): the ordinary way
    at = ahead[j]
    # the arrival (handoff.arrived), decided now: its cache leaves p's memory at arrive_s (settle)
    slot.transfer_id = None
    r.transfer_end_s, r.decode_worker, r.state = arrive_s, d.name, State.DECODING
    p.released.append((arrive_s, slot))
    # its admission at `at` (handoff.admitted): the first token leaves, counted in the load only after `at`
    if decode_first:  # Request.emit, whose checks hold: nothing emitted yet, more than one token to come
        r.output.append(int(slot.last_token))
        r.token_times_s.append(at)
        d.output_owed -= 1
        d.credits.append((at, 1))
    slots = d.batch.slots
    slots.append(slot)
    now = len(d.clock) - d.ahead_done + j + 1  # the index in d.clock of its first decode step
    slot.joined = slot.written = now
    d.context_base += slot.context - now
    d.finishing.setdefault(now + r.max_new_tokens - len(r.output), []).append(slot)
    d.registered, d.batch_ids = len(slots), None
    # the stretch from `at` on: the new batch's steps up to its first finish
    n = len(slots)
    seconds = c.backend.decode_run_seconds(n, d.context_base + n * now, min(d.finishing) - now)
    ends = accumulate(seconds, initial=at)  # sequential sums: the floats of step by step
    next(ends)
    steps = ahead[:j + 1]  # a new list: the router's index tells stretches apart by identity
    steps += ends
    end = steps.pop()
    cum = d.ahead_cum
    if cum is None:  # uniform so far
        base = d.ahead_n * (j + 1)
        cum = list(range(0, base + 1, d.ahead_n))
    else:
        base = cum[j + 1]
        cum = cum[:j + 2]
    cum += range(base + n, base + n * (len(steps) - j - 1) + 1, n)
    d.ahead, d.ahead_cum, d.ahead_n, d.ahead_end, d.spliced_s = steps, cum, n, end, at
    d.step += 1  # the stretch's old last event is ignored
    c.push_done(end, d, WHOLE_BATCH, Decoded(float(seconds[-1])))
    return True


def _done_on_arrival(c, slot) -> bool:
    """Whether ``slot``'s request is done when its cache arrives (its only token the first, sent on the decode
    side: :func:`.handoff.arrived`), so that it never joins a batch."""
    r = slot.request
    return c.cfg.first_token_on == "decode" and not slot.resumed and len(r.output) + 1 >= r.max_new_tokens


def settle(p: Worker, t: float) -> None:
    """Free on ``p`` the caches spliced away from it that have arrived by ``t`` (their arrival's release)."""
    released = p.released
    while released and released[0][0] <= t:
        slot = released.popleft()[1]
        p.sending.remove(slot)
        p.memory.release(slot.request.id)


def wake_at(p: Worker) -> float | None:
    """When ``p``, idle with requests waiting (for memory: a prefill worker admits at least one otherwise), must
    plan again because a spliced cache frees its memory; None when no wake is due (or one is already set)."""
    if not (p.queue and p.released) or p.wake_s == p.released[0][0]:
        return None
    p.wake_s = p.released[0][0]
    return p.wake_s
