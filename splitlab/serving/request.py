"""A serving request: what the client asked for, and what happened to it, with a timestamp per output token.

All times are seconds on the simulation's virtual clock (``0.0`` = start of the run), the same clock as
``arrival_s``. A request moves through the states of :class:`State`; it ends ``FINISHED`` (all
``max_new_tokens`` emitted), ``REJECTED`` (refused, with ``reject_reason``) or ``FAILED`` (a worker died or went
silent while serving it, reason in ``reject_reason``): never silently dropped.
"""
from __future__ import annotations

import math
import numbers
import operator
from dataclasses import dataclass, field
from enum import Enum

from ..phases.sampling_params import SamplingParams

__all__ = ["Request", "State", "check_unique_ids", "MAX_ARRIVAL_S"]

NAN = float("nan")

#: latest arrival a run accepts (s, about 32 years): float64 resolves 1.2e-7 s there; at 1e12 s only 1.2e-4 s, and
#: at 1e300 s (a rate of 1e-300/s) every step rounded to 0 s, so TTFT and TPOT printed 0.0 ms
MAX_ARRIVAL_S = 1e9


class State(str, Enum):
    """Where a request is. ``WAITING``: queued for prefill (or for KV memory); ``PREFILLING``: some of its prompt
    is in a worker's cache; ``TRANSFERRING``: its cache is on the link to a decode worker; ``DECODING``: in a
    decode batch; ``FINISHED`` / ``REJECTED`` / ``FAILED`` (a fault, e.g. its worker died): terminal."""

    WAITING = "waiting"
    PREFILLING = "prefilling"
    TRANSFERRING = "transferring"
    DECODING = "decoding"
    FINISHED = "finished"
    REJECTED = "rejected"
    FAILED = "failed"


#: the terminal states (:attr:`Request.done`)
ENDED = (State.FINISHED, State.REJECTED, State.FAILED)


@dataclass
class Request:
    """One request of a workload.

    Attributes:
        id: unique within a workload.
        arrival_s: when the client sent it (s, virtual clock).
        prompt: prompt token ids.
        max_new_tokens: output tokens to generate (serving benchmarks fix output lengths; EOS is ignored).
        sampling: None = greedy, else seeded :class:`splitlab.SamplingParams` (each request samples with its
            own generator, so its tokens do not depend on who shares its batch).
        state: see :class:`State`.
        output: generated token ids.
        token_times_s: when each output token became available to the client (s); ``token_times_s[0]`` is the
            first token, so ``len(token_times_s) == len(output)``. (The simulator's fast path defers both
            lists until they are first read: :meth:`defer_tokens`.)
        finish_s: time of the last token (FINISHED) or of the rejection (REJECTED).
        reject_reason: why it was rejected or failed (None otherwise).
        prefill_worker, decode_worker: names of the workers that did each phase (same name when colocated).
        prefill_start_s, prefill_end_s: first and last prefill forward touching this prompt (s).
        transfer_start_s, transfer_end_s, transfer_bytes: the KV hand-off (disaggregated only).
        retries: how often it was served again after its worker was lost.
        cached_tokens: prompt tokens its prefill worker found in its prefix cache and did not compute again
            (``ServingConfig.prefix_cache_tokens``; 0 without one).

    Raises:
        TypeError: an id, prompt ids or max_new_tokens that are not integers; an arrival time that is not a number;
            sampling that is not a SamplingParams.
        ValueError: an empty prompt, max_new_tokens < 1, or an arrival time that is not finite, >= 0 and at most
            :data:`MAX_ARRIVAL_S` (1e9 s: later, the clock could not resolve a step). (Ids
            outside the model's vocabulary, negative ones included, are rejected when the request arrives.)
    """

    id: int
    arrival_s: float
    prompt: list[int]
    max_new_tokens: int
    sampling: SamplingParams | None = None
    state: State = State.WAITING
    output: list[int] = field(default_factory=list)
    token_times_s: list[float] = field(default_factory=list)
    finish_s: float | None = None
    reject_reason: str | None = None
    prefill_worker: str | None = None
    decode_worker: str | None = None
    prefill_start_s: float | None = None
    prefill_end_s: float | None = None
    transfer_start_s: float | None = None
    transfer_end_s: float | None = None
    transfer_bytes: int = 0
    retries: int = 0
    cached_tokens: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.id, bool) or not isinstance(self.id, numbers.Integral):
            raise TypeError(f"request id must be an integer, got {self.id!r}")
        self.id = int(self.id)
        try:  # plain ints (numpy ones too), so a float id is refused here rather than mid-run
            self.prompt = list(map(operator.index, self.prompt))
        except TypeError:
            raise TypeError(f"request {self.id}: prompt must be a sequence of integer token ids") from None
        if not self.prompt:
            raise ValueError(f"request {self.id}: empty prompt")
        self._id_range = (self.prompt, min(self.prompt), max(self.prompt))  # see prompt_id_range
        if self.sampling is not None and not isinstance(self.sampling, SamplingParams):
            raise TypeError(f"request {self.id}: sampling must be None (greedy) or a splitlab.SamplingParams, got "
                            f"{self.sampling!r}")
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, numbers.Integral):
            raise TypeError(f"request {self.id}: max_new_tokens must be an integer, got {self.max_new_tokens!r}")
        if self.max_new_tokens < 1:
            raise ValueError(f"request {self.id}: max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if isinstance(self.arrival_s, bool) or not isinstance(self.arrival_s, numbers.Real):
            raise TypeError(f"request {self.id}: arrival_s must be a time in seconds, got {self.arrival_s!r}")
        if not math.isfinite(self.arrival_s) or self.arrival_s < 0:
            raise ValueError(f"request {self.id}: arrival_s must be a finite time >= 0, got {self.arrival_s}")
        if self.arrival_s > MAX_ARRIVAL_S:
            raise ValueError(f"request {self.id}: arrival_s {self.arrival_s:.3g} s is past {MAX_ARRIVAL_S:g} s: a "
                             f"clock that late resolves only {math.ulp(self.arrival_s):.2g} s, so its step times "
                             f"would round away; raise the arrival rate")

    # --- sizes -----------------------------------------------------------------------------------------
    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def max_total_tokens(self) -> int:
        """Prompt + all output tokens: the most KV positions this request will ever hold."""
        return len(self.prompt) + self.max_new_tokens

    @property
    def prompt_id_range(self) -> tuple[int, int]:
        """``(smallest, largest)`` prompt token id, computed once per prompt list (when the request is made):
        the copies :meth:`fresh` makes share the list and the answer, so an arrival's vocabulary check costs O(1),
        not O(prompt), on every run of the same requests. A prompt replaced by another list is read again (one
        changed in place is not: a request's prompt is its input, not to be edited)."""
        cached = self.__dict__.get("_id_range")
        if cached is None or cached[0] is not self.prompt:
            cached = self.__dict__["_id_range"] = (self.prompt, min(self.prompt), max(self.prompt))
        return cached[1], cached[2]

    @property
    def done(self) -> bool:
        """True once FINISHED, REJECTED or FAILED."""
        return self.state in ENDED

    # --- what happened ---------------------------------------------------------------------------------
    @property
    def first_token_s(self) -> float | None:
        """Time the first output token reached the client (None before it did)."""
        return self.token_times_s[0] if self.token_times_s else None

    def emit(self, token: int, time_s: float) -> None:
        """Record one output token available at ``time_s``; finishes the request at its last token.

        Raises:
            RuntimeError: the request is already done, or time would run backwards.
        """
        if self.done:
            raise RuntimeError(f"request {self.id} is {self.state.value}; it cannot emit more tokens")
        if self.token_times_s and time_s < self.token_times_s[-1]:
            raise RuntimeError(f"request {self.id}: token at {time_s} s is earlier than the previous one")
        self.output.append(int(token))
        self.token_times_s.append(float(time_s))
        if len(self.output) >= self.max_new_tokens:
            self.state, self.finish_s = State.FINISHED, float(time_s)

    def reject(self, reason: str, time_s: float) -> None:
        """End the request without serving it, saying why."""
        if self.done:
            raise RuntimeError(f"request {self.id} is already {self.state.value}")
        self.state, self.reject_reason, self.finish_s = State.REJECTED, reason, float(time_s)

    def fail(self, reason: str, time_s: float) -> None:
        """End the request because of a fault while it was being served (its worker died or timed out)."""
        if self.done:
            raise RuntimeError(f"request {self.id} is already {self.state.value}")
        self.state, self.reject_reason, self.finish_s = State.FAILED, reason, float(time_s)

    # --- lazy token records (the simulator's fast path, :mod:`.fast`) ------------------------------------
    def defer_tokens(self, clock: list, start: int, end: int, token: int) -> None:
        """Record that this request got one ``token`` at each of ``clock[start:end]`` (a worker's decode step ends,
        one entry per step) without copying them: ``output`` and ``token_times_s`` are expanded from the worker's
        clock on their first read (:meth:`__getattr__`), so a run copies no token time; :meth:`token_summary`
        reads a request's metrics without expanding it."""
        d = self.__dict__
        if "_lazy" in d:  # deferred already: expand those first (their order is the tokens' order)
            self._expand()
        d["_lazy"] = (d.pop("output"), d.pop("token_times_s"), clock, start, end, token)

    def _expand(self) -> None:
        output, times, clock, start, end, token = self.__dict__.pop("_lazy")
        output.extend([token] * (end - start))
        times.extend(clock[start:end])
        self.__dict__.update(output=output, token_times_s=times)

    def __getattr__(self, name: str):
        """``output`` and ``token_times_s`` of a request whose tokens are deferred (:meth:`defer_tokens`)."""
        if name in ("output", "token_times_s") and "_lazy" in self.__dict__:
            self._expand()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getstate__(self) -> dict:
        if "_lazy" in self.__dict__:  # a copy or a pickle holds its own lists, not a worker's whole clock
            self._expand()
        return self.__dict__

    def token_summary(self) -> tuple[int, float, float, float]:
        """``(tokens, first, second, last)`` token times (s; NaN where there is none), without expanding deferred
        tokens (:meth:`defer_tokens`): what :mod:`.metric_arrays` reads of each request."""
        lazy = self.__dict__.get("_lazy")
        if lazy is None:
            tt = self.token_times_s
            n = len(tt)
            return n, tt[0] if n else NAN, tt[1] if n > 1 else NAN, tt[-1] if n else NAN
        head, clock, start, end = lazy[1], lazy[2], lazy[3], lazy[4]
        k = len(head)
        n = k + end - start
        first = head[0] if k else clock[start] if n else NAN
        second = head[1] if k > 1 else clock[start + 1 - k] if n > 1 else NAN
        return n, first, second, clock[end - 1] if end > start else head[-1] if k else NAN

    def fresh(self, own_prompt: bool = False) -> "Request":
        """A copy with the same inputs and nothing recorded, to run the same workload again (another layout).
        The inputs were checked when this request was made, so the copy skips the checks. It shares the prompt
        list (read-only, :attr:`prompt_id_range`) unless ``own_prompt``: then it gets a copy of its own, as a set
        kept for later callers hands out (one caller editing a prompt in place leaves the kept set as it was)."""
        copy = object.__new__(Request)
        prompt, cached = self.prompt, self.__dict__.get("_id_range")
        if own_prompt:
            prompt = list(prompt)
            cached = (prompt, *self.prompt_id_range)
        copy.__dict__.update(_FRESH, id=self.id, arrival_s=self.arrival_s, prompt=prompt,
                             max_new_tokens=self.max_new_tokens, sampling=self.sampling, output=[], token_times_s=[],
                             _id_range=cached)
        return copy

    def __repr__(self) -> str:
        extra = f", reason={self.reject_reason!r}" if self.reject_reason else ""
        return (f"Request(id={self.id}, arrival={self.arrival_s:.3f}s, prompt={self.prompt_len}, "
                f"max_new={self.max_new_tokens}, {self.state.value}, out={len(self.output)}{extra})")


#: what a request records while it is served, before anything happened (see :meth:`Request.fresh`)
_FRESH = dict(state=State.WAITING, finish_s=None, reject_reason=None, prefill_worker=None, decode_worker=None,
              prefill_start_s=None, prefill_end_s=None, transfer_start_s=None, transfer_end_s=None, transfer_bytes=0,
              retries=0, cached_tokens=0)


def check_unique_ids(requests) -> None:
    """Raise ValueError if two requests share an id: servers key caches, memory and results by request id, so a
    repeated id would mix two requests' caches or lose one of them."""
    seen: set[int] = set()
    for r in requests:
        if r.id in seen:
            raise ValueError(f"request id {r.id} appears more than once: every request of a run needs its own id")
        seen.add(r.id)
