"""Disaggregated serving with real processes: P prefill workers and D decode workers, KV moved over
torch.distributed, real wall clocks. The emulated cluster of :mod:`splitlab.serving` models this on one device;
here every worker is its own process (own model copy, own CPU threads or GPU) and nothing is modeled.

    from splitlab import serving
    from splitlab.dist_serve import Cluster
    reqs = serving.make_workload("chat", 8, rate_per_s=4, model=lm)
    with Cluster("tiny", prefill_workers=1, decode_workers=1) as cluster:   # 3 processes: router + P0 + D0
        res = cluster.serve(reqs, mode="layerwise")      # a ServingResult: metrics(), timeline, token_table()
    res.metrics()["ttft_s"], res.transfers, res.failures

Rank 0 (this process) is the router and the client: it sends each request to a prefill worker at its arrival
time and stamps every token when the token reaches it, so TTFT/ITL/TPOT (:mod:`splitlab.serving.metrics`) are
client-side wall-clock times, including queueing, prefill, the KV hand-off and the control messages. Times of
worker-side events (prefill and decode steps, transfers) come from each worker's ``time.time()``: comparable
on one machine, only as good as clock synchronisation across machines.

The workers (:mod:`splitlab.dist_workers`): a prefill worker runs one request at a time and sends the cache to
the request's decode worker; a decode worker receives caches on a background thread and decodes its batch with
the same :class:`splitlab.serving.ModelExecutor` the emulated cluster uses (continuous batching, greedy).

Failures: a worker that dies fails every request it was serving (``State.FAILED``, with a reason naming the
worker), the run stops, every other request is reported failed too, and all processes exit; a request that
makes no progress for ``timeout_s`` fails the same way. Nothing hangs and nothing is lost.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ...transfer.group import DEFAULT_TIMEOUT_S, DistributedError, Group, join_from_env, pick_backend, spawn_group
from ..request import Request, State, check_unique_ids
from ..result import ServingResult
from .worker import _worker

__all__ = ["Cluster", "DistributedResult", "DistributedConfig", "serve", "main"]


@dataclass
class DistributedConfig:
    """What a distributed run used (``layout`` is "distributed" for :class:`ServingResult`)."""

    model: str
    prefill_workers: int
    decode_workers: int
    mode: str
    first_token_on: str
    backend: str
    max_batch: int
    layout: str = "distributed"


@dataclass
class DistributedResult(ServingResult):
    """A :class:`splitlab.serving.ServingResult` plus ``failures`` (one line per fault; empty when all went well)."""

    failures: list[str] = field(default_factory=list)


# --- router (rank 0) -----------------------------------------------------------------------------------------

class Cluster:
    """P prefill + D decode worker processes and this process as router; reusable for several runs.

    Args:
        model, dtype, seed: what every worker loads (presets: identical random weights from ``seed``).
        device: "cpu" or "cuda" (worker i uses GPU i mod count; backend then "cpu:gloo,cuda:nccl").
        timeout_s: limit of every send/recv, and the longest a request may go without progress.
        join_timeout_s: how long workers may take to start, join and load the model (default 2 x timeout_s).
        max_batch: decode batch size per decode worker. threads: torch threads per worker.
        group: an existing group in which this process is rank 0 (torchrun, see :func:`main`) instead of
            spawning workers here.
        fault: inject a failure, e.g. ``{"rank": 2, "kind": "exit", "request": 1, "stage": "decode"}`` (the worker
            of rank 2 dies while request 1 is decoding there) or ``{"rank": 1, "kind": "never-join"}``.

    Raises (``start``/``with``): :class:`splitlab.distributed.PeerJoinTimeout`, :class:`DistributedError`.
    """

    def __init__(self, model: str = "tiny", prefill_workers: int = 1, decode_workers: int = 1, *, dtype=None,
                 device: str = "cpu", seed: int = 0, backend: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 join_timeout_s: float | None = None, max_batch: int = 16, threads: int = 1,
                 fault: dict | None = None, port: int | None = None, group: Group | None = None):
        if prefill_workers < 1 or decode_workers < 1:
            raise ValueError("a disaggregated cluster needs at least one prefill and one decode worker")
        self.spec = dict(model=model, dtype=dtype, device=device, seed=seed, prefill_workers=prefill_workers,
                         max_batch=max_batch)
        self.names = [f"P{i}" for i in range(prefill_workers)] + [f"D{i}" for i in range(decode_workers)]
        self.backend = backend or pick_backend(device)
        self.options = dict(backend=self.backend, timeout_s=timeout_s, threads=threads, fault=fault, port=port,
                            join_timeout_s=join_timeout_s if join_timeout_s is not None else 2 * timeout_s)
        self.max_batch, self.timeout_s, self.group, self.hello = max_batch, timeout_s, group, {}

    def start(self) -> "Cluster":
        """Spawn the workers and wait until each has loaded its model (``join_timeout_s``)."""
        if self.hello:
            return self
        self.group = self.group or spawn_group(_worker, len(self.names), (self.spec,), **self.options)
        deadline = time.time() + self.options["join_timeout_s"]
        while len(self.hello) < len(self.names):
            msg = self.group.mailbox.get(timeout=0.1)
            if msg is not None and msg["kind"] == "hello":
                self.hello[msg["worker"]] = msg
            dead = self.group.dead()
            if dead or time.time() > deadline:
                ready, codes = sorted(self.hello), self.close()
                what = (f"worker(s) {[self.names[r - 1] for r in dead]} exited while loading the model" if dead
                        else f"workers did not get ready within {self.options['join_timeout_s']:g} s")
                raise DistributedError(f"{what} (ready: {ready}; exit codes: {codes}; see their one-line errors "
                                       "on stderr)")
        return self

    def close(self, grace_s: float = 5.0) -> dict:
        """Stop every worker (asked, then killed after ``grace_s``); returns ``{rank: exit code}`` (negative: killed
        by that signal)."""
        if self.group is None:
            return {}
        for rank in range(1, len(self.names) + 1):
            if rank not in self.group.dead():
                try:
                    self.group.mailbox.send(rank, kind="op", op="stop")
                except Exception:  # noqa: BLE001
                    pass
        group, self.group, self.hello = self.group, None, {}
        return group.close(grace_s)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def serve(self, requests, mode: str = "whole", first_token_on: str = "prefill") -> DistributedResult:
        """Serve fresh copies of ``requests`` (their ``arrival_s`` are seconds after the call) and return what the
        client saw. ``mode``: "whole" or "layerwise" KV transfer; ``first_token_on``: which side's message
        delivers the first token to the client ("prefill", or "decode": TTFT then includes the transfer).

        Raises:
            ValueError: bad mode, two requests with the same id, or a request with non-greedy sampling (workers
                decode greedily).
            DistributedError: the cluster is not started (or was stopped by an earlier failure).
        """
        if mode not in ("whole", "layerwise") or first_token_on not in ("prefill", "decode"):
            raise ValueError(f"mode must be whole/layerwise and first_token_on prefill/decode, got {mode!r}, "
                             f"{first_token_on!r}")
        requests = list(requests)
        check_unique_ids(requests)
        if any(r.sampling is not None and not r.sampling.greedy for r in requests):
            raise ValueError("distributed workers decode greedily: give requests without sampling settings")
        if self.group is None:
            raise DistributedError("the cluster is not running: use `with Cluster(...) as c:` or c.start()")
        run = _Run(self, [r.fresh() for r in requests], mode, first_token_on)
        try:
            return run.loop()
        except BaseException:
            self.close()
            raise


class _Run:
    """One serve() call: dispatch at arrival times, turn worker messages into the client's view."""

    def __init__(self, cluster: Cluster, requests: list[Request], mode: str, first_token_on: str):
        self.c, self.reqs, self.mode, self.first_on = cluster, {r.id: r for r in requests}, mode, first_token_on
        self.p = cluster.spec["prefill_workers"]
        self.rank = {n: i + 1 for i, n in enumerate(cluster.names)}
        self.load = {n: 0 for n in cluster.names}
        self.progress: dict[int, float] = {}
        self.early: dict[int, list] = {}  # decode tokens that overtook the prefill's first-token message
        self.timeline, self.transfers, self.failures = [], [], []
        self.t0 = time.time()

    def now(self) -> float:
        return time.time() - self.t0

    def loop(self) -> DistributedResult:
        box, context = self.c.group.mailbox, min(h["max_context"] for h in self.c.hello.values())
        pending = sorted(self.reqs.values(), key=lambda r: (r.arrival_s, r.id))
        while any(not r.done for r in self.reqs.values()):
            while pending and pending[0].arrival_s <= self.now():
                self.dispatch(pending.pop(0), context)
            wait = min(0.05, max(0.0, pending[0].arrival_s - self.now())) if pending else 0.05
            msg = box.get(timeout=wait)
            while msg is not None:
                self.handle(msg)
                msg = box.get(timeout=0)
            self.watch()
        c = self.c
        cfg = DistributedConfig(c.spec["model"], self.p, len(c.names) - self.p, self.mode, self.first_on, c.backend,
                                c.max_batch)
        wall = self.now()
        return DistributedResult(list(self.reqs.values()), cfg, list(c.names), self.timeline, self.transfers, {},
                                 wall, wall, 0.0, self.failures)

    def dispatch(self, r: Request, context: int) -> None:
        if r.max_total_tokens > context:
            r.reject(f"prompt {r.prompt_len} + {r.max_new_tokens} new tokens exceed the context of {context}",
                     self.now())
            return
        pick = lambda names: min(names, key=lambda n: (self.load[n], n))  # noqa: E731 - least loaded
        r.prefill_worker, r.decode_worker = pick(self.c.names[:self.p]), pick(self.c.names[self.p:])
        self.load[r.prefill_worker] += 1
        self.load[r.decode_worker] += 1
        r.state, self.progress[r.id] = State.PREFILLING, self.now()
        self.c.group.mailbox.send(self.rank[r.prefill_worker], kind="req", rid=r.id, prompt=r.prompt,
                                  max_new=r.max_new_tokens, dst=self.rank[r.decode_worker], mode=self.mode)

    def emit(self, r: Request, token: int) -> None:
        if not r.done:
            r.emit(token, self.now())
            if r.done:
                self.load[r.decode_worker] -= 1

    def handle(self, msg: dict) -> None:
        r = self.reqs.get(msg.get("rid"))
        kind, t = msg["kind"], self.now()
        if r is None and kind != "tokens" or r is not None and r.done:
            return  # a late message about a request that already ended
        if r is not None:
            self.progress[r.id] = t
        rel = lambda key: msg[key] - self.t0  # noqa: E731 - a worker's wall time on this run's clock
        if kind == "first":
            r.prefill_start_s, r.prefill_end_s, r.state = rel("start"), rel("end"), State.TRANSFERRING
            self.load[r.prefill_worker] -= 1
            self.timeline.append(dict(worker=msg["worker"], kind="prefill", start_s=rel("start"), end_s=rel("end"),
                                      request_ids=[r.id], batch=1, tokens=r.prompt_len))
            if self.first_on == "prefill":
                self.emit(r, msg["token"])
            for tok in self.early.pop(r.id, []):
                self.emit(r, tok)
        elif kind == "sent":
            r.transfer_start_s, r.transfer_bytes = rel("start"), msg["nbytes"]
        elif kind == "arrived":
            r.transfer_end_s, r.state = rel("end"), State.DECODING
            self.transfers.append(dict(request_id=r.id, src=r.prefill_worker, dst=msg["worker"],
                                       start_s=r.transfer_start_s if r.transfer_start_s is not None else rel("start"),
                                       end_s=rel("end"), nbytes=msg["nbytes"], measured_s=msg["seconds"],
                                       charged_s=msg["seconds"], method=f"{self.c.backend}-{self.mode}"))
            if self.first_on == "decode":
                self.emit(r, msg["token"])
        elif kind == "tokens":
            self.timeline.append(dict(worker=msg["worker"], kind="decode", start_s=rel("start"), end_s=rel("end"),
                                      request_ids=[i for i, _ in msg["items"]], batch=len(msg["items"]),
                                      tokens=len(msg["items"])))
            for rid, tok in msg["items"]:
                q = self.reqs[rid]
                self.progress[rid] = t
                if not q.output and self.first_on == "prefill":
                    self.early.setdefault(rid, []).append(tok)  # the first token's message is still on its way
                else:
                    self.emit(q, tok)
        elif kind == "failed":
            self.fail(r, msg["reason"])

    def fail(self, r: Request, reason: str) -> None:
        if not r.done:
            r.fail(reason, self.now())
            self.failures.append(f"request {r.id}: {reason}")

    def watch(self) -> None:
        """Dead workers and stalled requests end the run: fail what they held, then everything else."""
        dead = self.c.group.dead()
        stalled = [r for r in self.reqs.values() if not r.done and r.id in self.progress
                   and self.now() - self.progress[r.id] > self.c.timeout_s]
        if not dead and not stalled:
            return
        for rank, code in dead.items():
            name = self.c.names[rank - 1]
            for r in self.reqs.values():
                stage = r.state.value
                if not r.done and name in (r.prefill_worker, r.decode_worker) and r.state != State.WAITING:
                    self.fail(r, f"worker {name} (rank {rank}) died with exit code {code} while this request was "
                                 f"{stage} ({'prefill' if name == r.prefill_worker else 'decode'} side)")
        for r in stalled:
            self.fail(r, f"no progress for {self.c.timeout_s:g} s while {r.state.value} on {r.prefill_worker}/"
                         f"{r.decode_worker}")
        cause = (f"worker(s) {[self.c.names[k - 1] for k in dead]} died" if dead else "a request stalled")
        for r in self.reqs.values():
            if not r.done:
                self.fail(r, f"not completed: the run stopped because {cause}")
        codes = self.c.close(grace_s=2.0)  # a hung worker is not worth a long wait
        self.failures.append(f"run stopped because {cause}; worker exit codes {codes}")


def serve(requests, model: str = "tiny", prefill_workers: int = 1, decode_workers: int = 1, mode: str = "whole",
          first_token_on: str = "prefill", **cluster_options) -> DistributedResult:
    """Start a :class:`Cluster`, serve ``requests`` once, stop it. ``cluster_options`` go to :class:`Cluster`."""
    with Cluster(model, prefill_workers, decode_workers, **cluster_options) as cluster:
        return cluster.serve(requests, mode=mode, first_token_on=first_token_on)


def main(argv: list[str] | None = None) -> int:
    """Entry point under torchrun, on one machine or many (every rank runs the same command)::

        torchrun --nproc-per-node 3 -m splitlab.dist_serve --prefill-workers 1 --requests 8 --json

    Rank 0 routes (and prints the metrics, one JSON object with ``--json``), ranks 1..P prefill, the rest decode.
    """
    import argparse
    import json
    from ...cli.args import positive_float, positive_int, seed_int
    from ..workload import WORKLOADS, make_workload
    p = argparse.ArgumentParser(prog="splitlab.dist_serve", description=main.__doc__.split("\n\n")[0])
    p.add_argument("--prefill-workers", type=positive_int, default=1)
    p.add_argument("--model", default="tiny")
    p.add_argument("--device", default="cpu")
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="chat")
    p.add_argument("--requests", type=positive_int, default=8)
    p.add_argument("--rate", type=positive_float, default=4.0)
    p.add_argument("--scale", type=positive_float, default=None)
    p.add_argument("--mode", choices=("whole", "layerwise"), default="whole")
    p.add_argument("--first-token-on", choices=("prefill", "decode"), default="prefill")
    p.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S)
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)  # every rank checks its arguments before it joins the group
    try:
        group = join_from_env(pick_backend(args.device), args.timeout)
    except DistributedError as err:
        raise SystemExit(f"splitlab.dist_serve: error: {err}") from None
    decode_workers = group.world_size - 1 - args.prefill_workers
    if decode_workers < 1 or args.prefill_workers < 1:
        raise SystemExit(f"{group.world_size} processes cannot hold the router, {args.prefill_workers} prefill "
                         "worker(s) and at least one decode worker")
    cluster = Cluster(args.model, args.prefill_workers, decode_workers, device=args.device, seed=args.seed,
                      timeout_s=args.timeout, group=group)
    if group.rank:
        _worker(group, cluster.spec)
        group.close()
        return 0
    from ...phases.models import load_model
    lm = load_model(args.model, device="cpu", seed=args.seed)
    reqs = make_workload(args.workload, args.requests, args.rate, seed=args.seed, model=lm, scale=args.scale)
    try:
        res = cluster.start().serve(reqs, mode=args.mode, first_token_on=args.first_token_on)
    finally:
        cluster.close()
    m = res.metrics()
    if args.json:
        print(json.dumps(dict(m, failures=res.failures), default=float))
    else:
        print(f"{m['completed']}/{m['submitted']} completed on {res.workers}; TTFT p50 {m['ttft_s']['p50']:.4f} s, "
              f"TPOT p50 {m['tpot_s']['p50']:.4f} s; failures: {res.failures or 'none'}")
    return 0 if not res.failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
