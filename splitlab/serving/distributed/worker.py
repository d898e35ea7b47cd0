"""The worker processes of :class:`splitlab.dist_serve.Cluster` (ranks 1..P+D; rank 0 is the router).

- **prefill worker** (``P0``, ``P1``...): one request at a time: :func:`splitlab.kv_wire.prefill_flat` (the
  prefill of ``splitlab.prefill``, its cache written into one send buffer) then
  :func:`splitlab.kv_wire.send_cache` (``mode="whole"``, one message), or :func:`splitlab.kv_wire.prefill_streaming`
  (``"layerwise"``: each layer leaves while the next computes). It tells the router the first token as soon as
  the forward ends, and announces each transfer to the decode worker with its plan (sizes), so the decode side
  posts its receive buffers before the bytes arrive.
- **decode worker** (``D0``...): a background thread receives announced caches (checking each header against its
  own model: a mismatch fails that request, nothing is decoded); the main loop admits them into its batch (up to
  ``max_batch``) and runs one :class:`splitlab.serving.ModelExecutor` decode step after another, reporting each
  step's tokens to the router.

Messages to the router (JSON, control plane): ``hello``, ``first``, ``sent``, ``arrived``, ``tokens``,
``failed``; workers stamp their events with ``time.time()``. A fault can be injected for tests and teaching:
``{"rank": r, "kind": "exit" | "hang", "request": id, "stage": "prefill" | "decode"}`` makes rank r exit (code
17), or stop answering, with that request in flight.
"""
from __future__ import annotations

import os
import queue
import threading
import time

from ...transfer import link as L
from ...transfer import wire as W
from ...transfer.group import Group
from ..request import Request

__all__: list[str] = []  # entry points for spawned processes, not a public API


def _worker(group: Group, spec: dict) -> None:
    """Entry of every worker process: load the model, say hello, then serve as prefill or decode worker."""
    import torch
    from ...phases.engine import generate
    from ...phases.models import load_model
    p = spec["prefill_workers"]
    role, index = ("prefill", group.rank - 1) if group.rank <= p else ("decode", group.rank - 1 - p)
    name = f"{role[0].upper()}{index}"
    device = spec["device"]
    if device.startswith("cuda") and torch.cuda.device_count():
        device = f"cuda:{(group.rank - 1) % torch.cuda.device_count()}"
        torch.cuda.set_device(device)  # NCCL binds each process to its current device
    lm = load_model(spec["model"], device=device, dtype=spec["dtype"], seed=spec["seed"])
    generate(lm, [list(range(1, 33))], max_new_tokens=4)  # warm-up: first calls pay one-off costs
    group.mailbox.send(0, kind="hello", worker=name, pid=os.getpid(), model_id=lm.model_id,
                       max_context=lm.max_context)
    if role == "prefill":
        _prefill_loop(group, lm, name)
    else:
        _decode_loop(group, lm, name, spec["max_batch"])


def _die_if(group: Group, rid: int, stage: str) -> None:
    """The injected fault, if it is for this request at this stage: "exit" (code 17) or "hang" (stop answering,
    as a deadlocked worker would; only the router's progress timeout notices)."""
    f = group.fault
    if f and f.get("request") == rid and f.get("stage", stage) == stage:
        if f.get("kind") == "exit":
            os._exit(17)
        if f.get("kind") == "hang":
            time.sleep(3600)


def _prefill_loop(group: Group, lm, name: str) -> None:
    box = group.mailbox
    while True:
        msg = box.get()
        if msg["kind"] == "_store_gone" or msg.get("op") == "stop":
            return
        rid, dst, mode = msg["rid"], msg["dst"], msg["mode"]
        _die_if(group, rid, "prefill")
        start = time.time()
        first_sent = {}

        def first(tokens, end=None):
            first_sent.update(token=tokens[0], end=end or time.time())
            box.send(0, kind="first", rid=rid, token=tokens[0], start=start, end=first_sent["end"], worker=name)

        try:
            if mode == "whole":
                out = L.prefill_flat(lm, [msg["prompt"]], [rid])  # = prefill(), its cache in one send buffer
                first(out.logits.argmax(-1).tolist())
                box.send(dst, kind="kv", rid=rid, max_new=msg["max_new"], plan=W.cache_plan(out.cache))
                stats = L.send_cache(out.cache, dst, [first_sent["token"]], [rid])
            else:
                plan = W.plan_of(W.stream_header(lm, [msg["prompt"]], [rid]), "layerwise")
                box.send(dst, kind="kv", rid=rid, max_new=msg["max_new"], plan=plan)
                _, _, stats = L.prefill_streaming(lm, [msg["prompt"]], dst, [rid], on_first=first)
            box.send(0, kind="sent", rid=rid, start=first_sent["end"] if mode == "whole" else start,
                     end=time.time(), nbytes=stats.nbytes, seconds=stats.seconds, worker=name)
        except (RuntimeError, ValueError) as err:  # the decode peer is gone, or a bad prompt
            box.send(0, kind="failed", rid=rid, reason=f"{name}: {type(err).__name__}: {str(err).splitlines()[0]}")


def _decode_loop(group: Group, lm, name: str, max_batch: int = 16) -> None:
    from ..emulated import ModelExecutor
    from ..executor import DecodeBatch, Slot
    box, ex, batch = group.mailbox, ModelExecutor(lm, warm=False), DecodeBatch()
    incoming: queue.Queue = queue.Queue()
    waiting: list[Slot] = []

    def receive() -> None:  # background: caches arrive while the batch keeps decoding
        while (ann := incoming.get()) is not None:
            start = time.time()
            try:
                packet, stats = L.recv_cache(ann["src"], lm, plan=ann["plan"])  # buffers posted first
                box.post_local(dict(kind="_received", ann=ann, packet=packet, start=start, end=time.time(),
                                    seconds=stats.seconds))
            except Exception as err:  # noqa: BLE001 - CacheMismatchError, or the prefill peer died
                box.post_local(dict(kind="_recv_failed", ann=ann, error=f"{type(err).__name__}: {err}"))

    thread = threading.Thread(target=receive, name=f"{name}-recv", daemon=True)
    thread.start()
    try:
        while True:
            msg = box.get(timeout=None if not (batch.slots or waiting) else 0)
            while msg is not None:
                kind = msg["kind"]
                if kind == "_store_gone" or msg.get("op") == "stop":
                    return
                if kind == "kv":
                    incoming.put(msg)
                elif kind == "_recv_failed":
                    box.send(0, kind="failed", rid=msg["ann"]["rid"], reason=f"{name}: {msg['error']}")
                elif kind == "_received":
                    ann, h = msg["ann"], msg["packet"].header
                    box.send(0, kind="arrived", rid=ann["rid"], token=h.first_tokens[0], start=msg["start"],
                             end=msg["end"], nbytes=h.nbytes, seconds=msg["seconds"], worker=name)
                    req = Request(ann["rid"], 0.0, [0] * h.lengths[0], ann["max_new"])
                    req.emit(h.first_tokens[0], 0.0)
                    if not req.done:
                        waiting.append(Slot(req, msg["packet"].cache, h.lengths[0], h.first_tokens[0]))
                msg = box.get(timeout=0)
            while waiting and len(batch.slots) < max_batch:
                batch.slots.append(waiting.pop(0))
            if batch.slots:
                start = time.time()
                tokens = ex.decode(batch).tokens
                end = time.time()
                for slot, tok in zip(batch.slots, tokens):
                    slot.request.emit(tok, end)
                    slot.last_token = tok
                box.send(0, kind="tokens", items=[[s.request.id, t] for s, t in zip(batch.slots, tokens)],
                         start=start, end=end, worker=name)
                for s in batch.slots:
                    _die_if(group, s.request.id, "decode")
                batch.slots = [s for s in batch.slots if not s.request.done]
    finally:
        incoming.put(None)
