"""The child side of a :class:`~splitlab.transfer.peer.Peer` (rank 1), and the typed messages the two exchange."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..common.faults import obey
from ..kvcache import CacheMismatchError
from . import link as L
from . import wire as W
from .control import Message, ProtocolError, decode
from .group import Group

__all__ = ["PeerOp", "PeerStop", "PeerReady", "PeerDone"]


@dataclass
class PeerOp(Message):
    """Rank 0 asks its peer to receive: a cache (``op`` "recv", then "ack", "echo" it back or "decode" ``n`` tokens
    per row with ``model``) or a raw buffer of ``nbytes`` ("raw")."""

    op: str
    then: str = "ack"
    model: str | None = None
    dtype: str | None = None
    n: int = 1
    plan: dict | None = None
    nbytes: int = 0


@dataclass
class PeerStop(Message):
    """The peer's work is done: exit."""


@dataclass
class PeerReady(Message):
    """The peer has posted its receives: send."""


@dataclass
class PeerDone(Message):
    """The peer's answer: ``ok`` (False: ``error`` and ``message`` say why), its receive ``stats``, the first
    tokens the header carried and, for "decode", the ``tokens``."""

    ok: bool = True
    stats: dict | None = None
    first_tokens: list = field(default_factory=list)
    tokens: list | None = None
    error: str | None = None
    message: str | None = None


def _peer_worker(group: Group, device: str) -> None:
    """Rank 1 of a :class:`Peer`: carry out operations from rank 0 until told to stop (or until rank 0 is gone)."""
    from ..phases.engine import decode_step
    from ..phases.models import load_model
    if device.startswith("cuda") and torch.cuda.device_count():
        device = device if ":" in device else f"cuda:{1 % torch.cuda.device_count()}"
        torch.cuda.set_device(device)  # NCCL binds each process to its current device
    models: dict = {}
    pool = torch.empty(0, dtype=torch.uint8)  # reused receive buffer, like a server's KV pool (no page faults)
    box = group.mailbox
    ready = lambda: box.send(0, **PeerReady().to_dict())  # noqa: E731
    while True:
        raw_msg = box.get()
        if raw_msg.get("kind") == "_store_gone":
            return
        msg = decode(raw_msg)
        if isinstance(msg, PeerStop):
            return
        if not isinstance(msg, PeerOp):
            raise ProtocolError(f"a peer does not expect {type(msg).__name__} messages")
        obey(group.fault, "op", "peer")  # a fault hook may make the peer die in the middle of an exchange
        reply = PeerDone()
        need = msg.nbytes or (msg.plan or {}).get("nbytes", 0)
        if device == "cpu" and need > pool.numel():
            pool = torch.empty(need, dtype=torch.uint8)
            pool.zero_()  # touch every page once, outside any timed exchange
        if msg.op == "raw":
            buf = pool[:msg.nbytes] if device == "cpu" else torch.empty(msg.nbytes, dtype=torch.uint8)
            W.recv_raw(buf, 0, on_posted=ready)
            W.send_ack(0)
        else:
            lm = None
            if msg.model:
                key = (msg.model, msg.dtype)
                if key not in models:
                    models[key] = load_model(msg.model, device=device, dtype=msg.dtype)
                lm = models[key]
            try:
                packet, stats = L.recv_cache(0, lm, device=device, plan=msg.plan,
                                             out=pool if device == "cpu" and need else None, on_posted=ready)
            except CacheMismatchError as err:
                if msg.then == "ack":
                    W.send_ack(0, ok=False)
                box.send(0, **PeerDone(False, error="CacheMismatchError", message=str(err)).to_dict())
                continue
            reply.stats = dict(seconds=stats.seconds, mode=stats.mode, segments=stats.segments, layer_s=stats.layer_s)
            reply.first_tokens = list(packet.header.first_tokens)
            if msg.then == "ack":
                W.send_ack(0)
            elif msg.then == "echo":
                L.send_cache(packet.cache, 0, packet.header.first_tokens, packet.header.request_ids)
            elif msg.then == "decode":  # greedy, every row, until each has n tokens (the first included)
                cache, tokens = packet.cache, [[t] for t in packet.header.first_tokens]
                for _ in range(msg.n - 1):
                    out = decode_step(lm, cache, [row[-1] for row in tokens])
                    cache = out.cache
                    for row, t in zip(tokens, out.logits.argmax(-1).tolist()):
                        row.append(t)
                reply.tokens = tokens
        box.send(0, **reply.to_dict())
        packet = None  # drop the views of the pool before the next exchange reuses it
