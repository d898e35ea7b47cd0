"""Two real processes and a KV cache between them: :class:`Peer` (this process is rank 0, a spawned child rank 1).

    import splitlab as sl
    from splitlab.transfer.peer import Peer
    lm = sl.load_model("tiny")
    pre = sl.prefill(lm, [ids])
    with Peer() as peer:                                     # spawns, joins (gloo on CPU), ~2-4 s
        r = peer.transfer(pre.cache)                         # header + payload, timed until the receiver acks
        back, _ = peer.echo(pre.cache)                       # round trip: bit-exact?  torch.equal(...)
        tokens = peer.decode(pre.cache, [first], 16, model="tiny")  # decoded over there, one list per row
        r = peer.stream(lm, ids)                             # layer-wise while prefill computes; overlap

The receiving side can be told which model it runs (``model=``, ``dtype=``): it then checks the header and a cache
from another model fails with :class:`splitlab.CacheMismatchError` here, with the receiver's message.
"""
from __future__ import annotations

import os
import time

import torch

from ..kvcache import CacheMismatchError, KVCache
from . import link as L
from . import wire as W
from .group import DEFAULT_TIMEOUT_S, DistributedError, Group, WorkerDied, spawn_group
from .header import Packet

__all__ = ["Peer"]


def _peer_worker(group: Group, device: str) -> None:
    """Rank 1 of a :class:`Peer`: obey ops from rank 0 until "stop" (or until rank 0 is gone)."""
    from ..phases.engine import decode_step
    from ..phases.models import load_model
    if device.startswith("cuda") and torch.cuda.device_count():
        device = device if ":" in device else f"cuda:{1 % torch.cuda.device_count()}"
        torch.cuda.set_device(device)  # NCCL binds each process to its current device
    models: dict = {}
    pool = torch.empty(0, dtype=torch.uint8)  # reused receive buffer, like a server's KV pool (no page faults)
    ops = 0
    while True:
        msg = group.mailbox.get()
        if msg.get("kind") == "_store_gone" or msg.get("op") == "stop":
            return
        ops += 1
        if group.fault and group.fault.get("kind") == "exit" and ops >= group.fault.get("after", 1):
            os._exit(17)  # the fault under test: die in the middle of an exchange
        op, reply = msg["op"], dict(kind="done", ok=True)
        need = msg.get("nbytes") or (msg.get("plan") or {}).get("nbytes", 0)
        if device == "cpu" and need > pool.numel():
            pool = torch.empty(need, dtype=torch.uint8)
            pool.zero_()  # touch every page once, outside any timed exchange
        if op == "raw":
            buf = pool[:msg["nbytes"]] if device == "cpu" else torch.empty(msg["nbytes"], dtype=torch.uint8)
            W.recv_raw(buf, 0, on_posted=lambda: group.mailbox.send(0, kind="ready"))
            W.send_ack(0)
        elif op == "recv":
            lm = None
            if msg.get("model"):
                key = (msg["model"], msg.get("dtype"))
                if key not in models:
                    models[key] = load_model(msg["model"], device=device, dtype=msg.get("dtype"))
                lm = models[key]
            try:
                packet, stats = L.recv_cache(0, lm, device=device, plan=msg.get("plan"),
                                             out=pool if device == "cpu" and need else None,
                                             on_posted=lambda: group.mailbox.send(0, kind="ready"))
            except CacheMismatchError as err:
                if msg.get("then", "ack") == "ack":
                    W.send_ack(0, ok=False)
                group.mailbox.send(0, kind="done", ok=False, error="CacheMismatchError", message=str(err))
                continue
            reply.update(stats=dict(seconds=stats.seconds, mode=stats.mode, segments=stats.segments,
                                    layer_s=stats.layer_s), first_tokens=list(packet.header.first_tokens))
            then = msg.get("then", "ack")
            if then == "ack":
                W.send_ack(0)
            elif then == "echo":
                L.send_cache(packet.cache, 0, packet.header.first_tokens, packet.header.request_ids)
            elif then == "decode":  # greedy, every row, until each has n tokens (the first included)
                cache, tokens = packet.cache, [[t] for t in packet.header.first_tokens]
                for _ in range(msg["n"] - 1):
                    out = decode_step(lm, cache, [row[-1] for row in tokens])
                    cache = out.cache
                    for row, t in zip(tokens, out.logits.argmax(-1).tolist()):
                        row.append(t)
                reply["tokens"] = tokens
        group.mailbox.send(0, **reply)
        packet = None  # drop the views of the pool before the next exchange reuses it


class Peer:
    """A child process joined to this one over torch.distributed, for KV transfers you can time and check.

    Args:
        backend: "gloo" (CPU) or "cpu:gloo,cuda:nccl"; device: where the child keeps received caches.
        timeout_s: limit of every send/recv and of every wait for the child's answer (never a hang).
        join_timeout_s: how long the child may take to start and join (default: timeout_s).
        fault: inject a failure in the child, e.g. ``{"rank": 1, "kind": "never-join"}`` or
            ``{"rank": 1, "kind": "exit", "after": 2}`` (exits during its 2nd operation).

    Raises (from ``start``/``with``): :class:`splitlab.transfer.group.PeerJoinTimeout`.
    """

    def __init__(self, backend: str = "gloo", device: str = "cpu", timeout_s: float = DEFAULT_TIMEOUT_S,
                 join_timeout_s: float | None = None, threads: int = 1, fault: dict | None = None,
                 port: int | None = None):
        self.options = dict(backend=backend, timeout_s=timeout_s, join_timeout_s=join_timeout_s, threads=threads,
                            fault=fault, port=port)
        self.device, self.timeout_s, self.group = device, timeout_s, None

    def start(self) -> "Peer":
        if self.group is None:
            self.group = spawn_group(_peer_worker, 1, (self.device,), **self.options)
        return self

    def close(self) -> dict:
        """Stop the child (asked, then killed after a grace period); returns ``{rank: exit code}``."""
        if self.group is None:
            return {}
        if not self.group.dead():
            try:
                self.group.mailbox.send(1, kind="op", op="stop")
            except Exception:  # noqa: BLE001
                pass
        group, self.group = self.group, None
        return group.close()

    def __enter__(self) -> "Peer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- rank 0 side ---------------------------------------------------------------------------------------
    def _wait(self, kind: str) -> dict:
        """The child's next message (must be ``kind``), watching that it is alive; never longer than timeout_s."""
        deadline = time.time() + self.timeout_s
        while time.time() < deadline:
            msg = self.group.mailbox.get(timeout=0.1)
            if msg is not None:
                if msg.get("error") == "CacheMismatchError":
                    raise CacheMismatchError(f"receiver (rank 1): {msg['message']}")
                if msg["kind"] != kind:
                    raise DistributedError(f"expected {kind!r} from rank 1, got {msg}")
                return msg
            if self.group.dead():
                raise WorkerDied(f"the peer process (rank 1) exited with code {self.group.dead()[1]} "
                                 f"while rank 0 waited for {kind!r}")
        raise DistributedError(f"the peer (rank 1) did not answer {kind!r} within {self.timeout_s:g} s")

    def _ask(self, **op) -> None:
        if self.group is None:
            raise DistributedError("the Peer is not started: use `with Peer() as peer:` or peer.start()")
        self.group.mailbox.send(1, kind="op", **op)
        self._wait("ready")

    def transfer(self, cache: KVCache, first_tokens=None, model: str | None = None, dtype: str | None = None,
                 mode: str = "whole", segments: str = "tensors") -> dict:
        """Send ``cache`` (``mode`` "whole" or "layerwise", see :func:`splitlab.transfer.link.send_cache`); time it until
        the receiver has a usable cache (its acknowledgement).

        Returns ``{"nbytes", "seconds", "gbps", "send": WireStats, "receiver": dict}``.
        Raises CacheMismatchError when ``model``/``dtype`` name a receiver the cache does not fit.
        """
        self._ask(op="recv", then="ack", model=model, dtype=dtype, plan=W.cache_plan(cache, mode, segments))
        t0 = time.perf_counter()
        stats = L.send_cache(cache, 1, first_tokens, mode=mode, segments=segments)
        W.recv_ack(1)
        seconds = time.perf_counter() - t0
        done = self._wait("done")  # raises CacheMismatchError if the receiver refused
        return dict(nbytes=stats.nbytes, seconds=seconds, gbps=stats.nbytes / seconds / 1e9, send=stats,
                    receiver=done["stats"])

    def echo(self, cache: KVCache, first_tokens=None, mode: str = "whole", segments: str = "tensors"
             ) -> tuple[Packet, dict]:
        """Send ``cache`` (``mode``/``segments`` as in :meth:`transfer`); the child sends back what it received
        (whole). Returns ``(Packet as it came back, the child's receive stats)``."""
        self._ask(op="recv", then="echo", plan=W.cache_plan(cache, mode, segments))
        L.send_cache(cache, 1, first_tokens, mode=mode, segments=segments)
        packet, _ = L.recv_cache(1)  # no plan: how the child lays out its copy is its business
        return packet, self._wait("done")["stats"]

    def decode(self, cache: KVCache, first_tokens, n_tokens: int, model: str, dtype: str | None = None
               ) -> list[list[int]]:
        """Send ``cache`` with each row's first token; the child (running ``model``, which checks the header)
        decodes greedily until every row has ``n_tokens`` tokens (the first included) and returns them."""
        self._ask(op="recv", then="decode", model=model, dtype=dtype, n=n_tokens, plan=W.cache_plan(cache))
        L.send_cache(cache, 1, list(first_tokens))
        return self._wait("done")["tokens"]

    def stream(self, lm, prompts, model: str | None = None, dtype: str | None = None, then: str = "ack",
               n_tokens: int = 1) -> dict:
        """Prefill ``prompts`` (one or a batch) here while streaming each layer's KV to the child
        (:func:`splitlab.transfer.link.prefill_streaming`).

        Returns ``{"prefill": PrefillOutput, "first_tokens", "stats": WireStats, "total_s" (call -> receiver
        acknowledged), "exposed_s" (forward ended -> receiver acknowledged: the transfer the streaming did not
        hide), "tokens" (then="decode")}``.
        """
        plan = W.plan_of(W.stream_header(lm, prompts), "layerwise")
        self._ask(op="recv", then=then, model=model, dtype=dtype, n=n_tokens, plan=plan)
        t0 = time.perf_counter()
        out, firsts, stats = L.prefill_streaming(lm, prompts, 1)
        if then == "ack":
            W.recv_ack(1)
        end = time.perf_counter()
        done = self._wait("done")
        return dict(prefill=out, first_tokens=firsts, stats=stats, total_s=end - t0, exposed_s=end - stats.compute_end,
                    tokens=done.get("tokens"), receiver=done["stats"])

    def raw(self, data: int | torch.Tensor) -> float:
        """Seconds to send one contiguous uint8 tensor until the child acknowledges (the baseline). ``data``: the
        tensor (e.g. the very buffer a flat cache lives in, so both read the same memory), or a byte count (a
        zeroed buffer of that size, kept between calls so that it is not freshly written, hence cache-hot)."""
        if isinstance(data, int):
            if getattr(self, "_raw_buf", None) is None or self._raw_buf.numel() != data:
                self._raw_buf = torch.zeros(data, dtype=torch.uint8)
            buf = self._raw_buf
        else:
            buf = data.reshape(-1).view(torch.uint8)  # needs a contiguous tensor
        self._ask(op="raw", nbytes=buf.numel())
        t0 = time.perf_counter()
        W.send_raw(buf, 1)
        W.recv_ack(1)
        seconds = time.perf_counter() - t0
        self._wait("done")
        return seconds
