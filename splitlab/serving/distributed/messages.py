"""The control plane of the distributed back end: typed messages between the router (rank 0) and the worker
processes, sent as JSON through :class:`~splitlab.transfer.mailbox.Mailbox`.

Router -> worker: :class:`Begin` (a run starts: names, fault hook), :class:`RunStep` (decode these requests, then
prefill those tokens), :class:`SendKV` / :class:`RecvKV` (the two ends of a hand-off, posted together),
:class:`Release` (drop a request's cache), :class:`Stop`.
Worker -> router: :class:`Hello` (ready, with what admission needs), :class:`StepDone`, :class:`Sent`,
:class:`Arrived`, :class:`Failed`.

The messages are :class:`splitlab.transfer.control.Message` dataclasses: :func:`decode` turns a received dict back
into its message and raises :class:`ProtocolError` for a type it does not know or fields that do not match,
naming them: an unknown message is an error, never dropped.
"""
from __future__ import annotations

import base64
import pickle
from dataclasses import dataclass, field

from ...transfer.control import Message, ProtocolError, decode

__all__ = ["ProtocolError", "Message", "Begin", "RunStep", "SendKV", "RecvKV", "Release", "Stop", "Hello",
           "StepDone", "Sent", "Arrived", "Failed", "decode", "pack_object", "unpack_object"]


@dataclass
class Begin(Message):
    """A run starts: ``names`` of the workers by rank (index 0 is rank 1), the KV transfer ``mode`` ("whole" or
    "layerwise") and the fault hook (pickled, or "")."""

    names: list[str]
    mode: str = "whole"
    faults: str = ""


@dataclass
class PrefillItem:
    """One slot of a step's prefill: its next ``n_tokens``. The first time a worker sees ``rid`` the request comes
    along: ``prompt``, ``max_new_tokens``, ``sampling`` (a dict, or None for greedy) and ``output`` (tokens it
    already emitted: a request served again replays them)."""

    rid: int
    n_tokens: int
    prompt: list[int] | None = None
    max_new_tokens: int = 0
    sampling: dict | None = None
    output: list[int] = field(default_factory=list)


@dataclass
class RunStep(Message):
    """Step ``step`` of a worker: one decode step of ``decode`` (request ids, in batch order), then ``prefill``."""

    step: int
    decode: list[int]
    prefill: list[dict]


@dataclass
class SendKV(Message):
    """Hand-off ``tid``: send the cache of ``rid`` (with its latest token) to rank ``to_rank``, ``mode`` "whole" or
    "layerwise"."""

    rid: int
    tid: int
    to_rank: int
    mode: str


@dataclass
class RecvKV(Message):
    """Hand-off ``tid``: receive the cache of ``rid`` from rank ``from_rank``; ``plan``: its sizes
    (:func:`~splitlab.transfer.wire.plan_of`); the request's ``prompt_len``, ``max_new_tokens``, ``sampling``,
    ``output`` so far and ``replay``."""

    rid: int
    tid: int
    from_rank: int
    plan: dict
    prompt_len: int
    max_new_tokens: int
    sampling: dict | None
    output: list[int]
    replay: int = 0


@dataclass
class Release(Message):
    """The worker may drop whatever it holds of ``rid`` (its cache was delivered, or the request moved)."""

    rid: int


@dataclass
class Stop(Message):
    """Leave the loop and exit."""


@dataclass
class Hello(Message):
    """A worker is ready: its model's identity and the numbers admission needs (``kv_layers``: per layer
    ``[bytes per position, cap]`` of a model with sliding-window layers, cap 0 for a full layer; empty when every
    layer is full and bytes grow linearly)."""

    rank: int
    pid: int
    model_id: str
    max_context: int
    vocab_size: int
    kv_bytes_per_token: int
    memory_bytes: int
    weight_bytes: int
    kv_layers: list = field(default_factory=list)


@dataclass
class StepDone(Message):
    """Step ``step`` of worker rank ``rank`` ended: forward seconds, the decode tokens (in batch order), the
    prefills' next tokens (None where a chunk left the prompt unfinished), the plans of the caches it completed
    (``{rid: plan}``), and its wall-clock ``start``/``end`` (``time.time()``)."""

    rank: int
    step: int
    decode_s: float
    prefill_s: float
    tokens: list[int]
    first_tokens: list[int | None]
    plans: dict
    start: float
    end: float


@dataclass
class Sent(Message):
    """Rank ``rank`` sent the cache of ``rid`` (hand-off ``tid``): ``nbytes`` in ``seconds``."""

    rank: int
    rid: int
    tid: int
    nbytes: int
    seconds: float


@dataclass
class Arrived(Message):
    """Rank ``rank`` received the cache of ``rid`` (hand-off ``tid``, checked against its model): ``nbytes`` in
    ``seconds``, between its wall-clock ``start`` and ``end``."""

    rank: int
    rid: int
    tid: int
    nbytes: int
    seconds: float
    start: float
    end: float


@dataclass
class Failed(Message):
    """Rank ``rank`` could not do what it was asked: ``what`` is "step", "send" or "receive", ``ref`` the step
    number or request id, ``tid`` the hand-off (-1 for a step), ``reason`` one line."""

    rank: int
    what: str
    ref: int
    reason: str
    tid: int = -1


def pack_object(obj) -> str:
    """An object (a fault hook) as text for a JSON message; "" for None."""
    return "" if obj is None else base64.b64encode(pickle.dumps(obj)).decode()


def unpack_object(text: str):
    return None if not text else pickle.loads(base64.b64decode(text))
