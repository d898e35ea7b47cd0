"""A worker process of the distributed back end (ranks 1..N; rank 0 is the router).

A worker has no policy of its own: it runs what the router's scheduler asks, with the same
:class:`~splitlab.serving.emulated.ModelExecutor` and :func:`~splitlab.serving.executor.run_step` that the emulated
back end uses, so a step here computes exactly what it computes there. It keeps the caches of the requests it
holds (``slots``), one shadow :class:`~splitlab.serving.request.Request` each (for the cache's length and the
sampling position).

KV hand-offs run beside the compute: one thread per destination sends (:func:`splitlab.transfer.link.send_cache`)
and one thread per source receives (:func:`splitlab.transfer.link.recv_cache`, posted before the bytes come, from
the plan the router forwards), so a decode worker keeps decoding while caches arrive and a prefill worker keeps
prefilling while its caches leave. A prefill worker keeps a cache until the router says it was delivered
(:class:`~.messages.Release`), so that it can send it again if the receiver is lost.

The fault hook (:mod:`splitlab.common.faults`) is called at the same points as in the emulated back end; a
:class:`~splitlab.common.faults.WorkerFault` makes this process exit with code 17 (or stop answering).
"""
from __future__ import annotations

import os
import queue
import threading
import time

from ...common.faults import obey
from ...transfer.group import Group
from . import messages as M

__all__: list[str] = []  # the entry point of spawned processes, not a public API

def _sampling(d):
    from ...phases.sampling_params import SamplingParams
    return None if d is None else SamplingParams(**d)


class _Links:
    """One thread per peer rank running ``fn(job)`` for the jobs of that peer in order (a link per pair)."""

    def __init__(self, fn):
        self.fn, self.queues = fn, {}

    def submit(self, peer: int, job) -> None:
        if peer not in self.queues:
            q = self.queues[peer] = queue.Queue()
            threading.Thread(target=self._loop, args=(q,), daemon=True, name=f"link-{peer}").start()
        self.queues[peer].put(job)

    def _loop(self, q) -> None:
        while (job := q.get()) is not None:
            self.fn(job)

    def close(self) -> None:
        for q in self.queues.values():
            q.put(None)


def serve_worker(group: Group, spec: dict) -> None:
    """Entry of every worker process: load the model, say hello, then do what the router asks until Stop."""
    import torch

    from ...phases.models import load_model
    from ...transfer import link
    from ..emulated import ModelExecutor
    from ..executor import DecodeBatch, Slot
    from ..request import Request

    device = spec["device"]
    if device.startswith("cuda") and torch.cuda.device_count():
        device = f"cuda:{(group.rank - 1) % torch.cuda.device_count()}"
        torch.cuda.set_device(device)  # NCCL binds each process to its current device
    lm = load_model(spec["model"], device=device, dtype=spec["dtype"], seed=spec["seed"])
    ex = ModelExecutor(lm, warm=True)
    box, rank = group.mailbox, group.rank
    layers = [list(pair) for pair in ex.kv_bytes_fn.layers] if ex.kv_bytes_fn is not None else []
    box.send(0, **M.Hello(rank, os.getpid(), lm.model_id, lm.max_context, lm.vocab_size, ex.kv_bytes_per_token,
                          ex.memory_bytes, ex.weight_bytes, layers).to_dict())
    slots: dict[int, Slot] = {}
    batch = DecodeBatch()
    state = dict(name=f"rank{rank}", hook=None, mode="whole")

    def hook(event: str, rids) -> None:  # a fault exits (or hangs: the router notices after its timeout)
        obey(state["hook"], event, state["name"], rids)

    def send(job) -> None:
        rid, tid, dst, mode, cache, token = job
        try:
            stats = link.send_cache(cache, dst, [token], [rid], mode=mode)
            box.send(0, **M.Sent(rank, rid, tid, stats.nbytes, stats.seconds).to_dict())
        except Exception as err:  # noqa: BLE001 - the receiver is gone or timed out: say so, keep serving
            box.send(0, **M.Failed(rank, "send", rid, f"{type(err).__name__}: {str(err).splitlines()[0]}",
                                   tid).to_dict())

    def receive(job: M.RecvKV) -> None:
        start = time.time()
        try:
            packet, stats = link.recv_cache(job.from_rank, lm, plan=job.plan)
            box.post_local({"type": "_received", "job": job, "packet": packet, "start": start, "end": time.time(),
                            "seconds": stats.seconds})
        except Exception as err:  # noqa: BLE001 - a header for another model, or the sender is gone
            box.send(0, **M.Failed(rank, "receive", job.rid, f"{type(err).__name__}: {str(err).splitlines()[0]}",
                                   job.tid).to_dict())

    senders, receivers = _Links(send), _Links(receive)
    try:
        while True:
            raw = box.get()
            if raw.get("kind") == "_store_gone":
                return
            if raw["type"] == "_received":
                job, packet = raw["job"], raw["packet"]
                r = Request(job.rid, 0.0, [0] * job.prompt_len, job.max_new_tokens, _sampling(job.sampling))
                r.output = list(job.output)
                slots[job.rid] = Slot(r, packet.cache, packet.header.lengths[0], job.output[-1] if job.output else
                                      packet.header.first_tokens[0], replay=job.replay, resumed=bool(job.replay))
                hook("receive", [job.rid])
                box.send(0, **M.Arrived(rank, job.rid, job.tid, packet.header.nbytes, raw["seconds"], raw["start"],
                                        raw["end"]).to_dict())
                continue
            msg = M.decode(raw)
            if isinstance(msg, M.Stop):
                return
            if isinstance(msg, M.Begin):
                state.update(name=msg.names[rank - 1], hook=M.unpack_object(msg.faults), mode=msg.mode)
                slots.clear()
                batch.slots, batch.state = [], None
            elif isinstance(msg, M.Release):
                slots.pop(msg.rid, None)
            elif isinstance(msg, M.SendKV):
                hook("send", [msg.rid])
                s = slots[msg.rid]
                senders.submit(msg.to_rank, (msg.rid, msg.tid, msg.to_rank, msg.mode, s.cache, s.last_token))
            elif isinstance(msg, M.RecvKV):
                receivers.submit(msg.from_rank, msg)
            elif isinstance(msg, M.RunStep):
                items = [M.PrefillItem(**d) for d in msg.prefill]
                hook("step", [*msg.decode, *(i.rid for i in items)])
                start = time.time()
                try:
                    done = _step(ex, batch, slots, msg, items, state["mode"])
                except Exception as err:  # noqa: BLE001 - a bug or bad input: fail this step, keep the worker
                    box.send(0, **M.Failed(rank, "step", msg.step,
                                           f"{type(err).__name__}: {str(err).splitlines()[0]}").to_dict())
                    continue
                out, plans = done
                box.send(0, **M.StepDone(rank, msg.step, out.decode_s, out.prefill_s, out.tokens,
                                         out.first_tokens, plans, start, time.time()).to_dict())
            else:
                raise M.ProtocolError(f"a worker does not expect {type(msg).__name__} messages")
    finally:
        senders.close()
        receivers.close()


def _step(ex, batch, slots, msg, items, mode: str):
    """Run one step the router planned: ``(StepOutcome, {rid: cache plan} of the prefills it completed)``."""
    from ...transfer import wire
    from ..executor import Slot, run_step
    from ..request import Request

    for item in items:
        if item.rid not in slots:  # first chunk: the request comes along
            r = Request(item.rid, 0.0, item.prompt, item.max_new_tokens, _sampling(item.sampling))
            r.output = list(item.output)
            slots[item.rid] = Slot.admit(r)
    decode = [slots[rid] for rid in msg.decode]
    prefill = [slots[i.rid] for i in items]
    batch.slots = decode
    out = run_step(ex, batch, decode, prefill, [i.n_tokens for i in items])
    for s, tok in zip(decode, out.tokens):
        s.last_token = tok
        s.request.output.append(tok)
        if len(s.request.output) >= s.request.max_new_tokens:
            slots.pop(s.request.id, None)
    plans = {}
    for s, tok in zip(prefill, out.first_tokens):
        if tok is None:
            continue
        if not s.resumed:
            s.last_token = tok
            s.request.output.append(tok)
        # kept even when that was the last token: the router releases a finished request's cache (Release), and
        # with the first token on the decode side (the default) a one-token request's cache still crosses
        plans[str(s.request.id)] = wire.cache_plan(s.cache, mode)
    return out, plans
