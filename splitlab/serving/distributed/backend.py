"""The distributed back end: one process per worker, joined with torch.distributed, real wall clocks.

    from splitlab import serving
    with serving.DistributedBackend("tiny", timeout_s=30) as backend:          # processes start on first use
        res = serving.run(reqs, serving.ServingConfig.disaggregated(1, 1), backend)
        same = serving.run(reqs, serving.ServingConfig.colocated(2), backend)  # the same two processes

The router is this process (rank 0): it runs the very cluster, router, batching policy and KV admission of the
emulated and simulated back ends (:class:`~splitlab.serving.cluster.Cluster`), on a wall clock
(:mod:`splitlab.serving.wall`). Workers (:mod:`.worker`) run the steps and move the caches it asks for; every
token is stamped when it reaches the router, so TTFT, ITL and TPOT are what a client here would see, queueing,
prefill, the KV hand-off and the control messages included.

Workers are started with ``torch.multiprocessing`` (spawn), as many as the layout needs, and reused by the next
run of the same size; under ``torchrun`` they are the other ranks (:mod:`.launch`). ``timeout_s`` bounds every
exchange: a worker that holds work and answers nothing for that long, or whose process exits, is lost, and its
requests are served elsewhere (:mod:`splitlab.serving.recovery`).
"""
from __future__ import annotations

import numbers
import time

from ...common import dtypes
from ...common.threads import check_threads
from ...common.timeouts import MAX_TIMEOUT_S, check_timeout
from ...phases.locate import check_loadable
from ...sizing import RequestKVBytes, kv_budget_bytes
from ...transfer.group import DEFAULT_JOIN_TIMEOUT_S, DEFAULT_TIMEOUT_S, DistributedError, Group, pick_backend
from ...transfer.spawn import check_workers, spawn_group
from . import messages as M
from .worker import serve_worker

__all__ = ["DistributedBackend"]


class DistributedBackend:
    """Worker processes for :func:`splitlab.serving.run`; see the module docstring.

    Args:
        model, dtype, seed: what every worker loads (presets: identical random weights from ``seed``).
        device: "cpu" or "cuda" (worker i uses GPU i mod count; KV then goes over NCCL, control over gloo).
        timeout_s: limit of every exchange with a worker (and of its send/recv operations), in seconds.
        join_timeout_s: how long workers may take to start, join and load the model (default: 2 x timeout_s, at
            least 300 s: starting processes and loading models takes a minute or more on a busy machine). Both at
            most a week (:func:`splitlab.common.timeouts.check_timeout`).
        threads: torch threads per worker. group: an existing group in which this process is rank 0 (torchrun).
        say: None, or a function called with one line per stage of starting the workers (e.g. ``print``; the
            CLI prints them on stderr): starting them takes seconds, tens of seconds on a busy machine.

    Raises:
        ValueError: a bad model name type, device, dtype, threads, seed or timeout. ModelNotFound (a ModelLoadError):
            a model no worker could load here (not a preset, a local directory, nor a cached or reachable hub
            model). (Starting: splitlab.transfer.group.PeerJoinTimeout, DistributedError.)
    """

    name = "distributed"
    wall_clock = True
    overhead_s = 0.0

    def __init__(self, model: str = "tiny", *, dtype=None, device: str = "cpu", seed: int = 0,
                 backend: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, join_timeout_s: float | None = None,
                 threads: int = 1, port: int | None = None, group: Group | None = None, say=None):
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model must be a preset name, a hub name or a path, got {model!r}")
        if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
        if dtype is not None:
            dtypes.canonical(dtype, dtypes.WEIGHT_DTYPES)  # a bad name fails here, not in every worker
        check_threads(threads)  # 1 .. this machine's CPU count, in each worker process
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < -2 ** 63:
            raise ValueError(f"seed must be an integer >= {-2 ** 63}, got {seed!r}")
        if group is None:  # the workers start here: a name no worker could load fails now, not in every worker
            check_loadable(model)
        self.timeout_s = check_timeout(timeout_s)  # 1e15 s was an OverflowError when the workers started
        self.join_timeout_s = check_timeout(join_timeout_s, "join_timeout_s") if join_timeout_s is not None else \
            min(max(DEFAULT_JOIN_TIMEOUT_S, 2 * self.timeout_s), MAX_TIMEOUT_S)
        self.spec = dict(model=model, dtype=dtype, device=device, seed=seed)
        self.backend = backend or pick_backend(device)
        self.options = dict(backend=self.backend, timeout_s=self.timeout_s, threads=threads, port=port,
                            join_timeout_s=self.join_timeout_s)
        self.group, self.torchrun, self.hello, self.say = group, group is not None, {}, say

    # --- processes ---------------------------------------------------------------------------------------------
    @property
    def n_workers(self) -> int:
        return len(self.hello)

    def prepare(self, n_workers: int) -> None:
        """Have ``n_workers`` workers ready (start them, or restart with another number). ``self.say``, when set,
        is called with a line per stage (starting, ready), for runs that take seconds before the first request.

        Raises:
            ValueError: ``n_workers`` outside 1 .. :func:`~splitlab.transfer.spawn.max_workers` (4 per CPU, at most
                64), before any process starts. DistributedError: a worker did not start or get ready.
            KeyboardInterrupt: passed on after every worker was stopped.
        """
        if self.hello and self.n_workers == n_workers and self.group is not None and not self.group.dead():
            return
        t0 = time.time()
        if self.torchrun:
            if self.group.world_size - 1 != n_workers:
                raise ValueError(f"torchrun started {self.group.world_size - 1} workers; this layout needs {n_workers}")
        else:
            check_workers(n_workers)
            self.close()
            self._say(f"starting {n_workers} worker process{'es' if n_workers > 1 else ''} ({self.spec['model']}, "
                      f"{self.spec['device']}; importing torch takes seconds each)")
        try:
            if not self.torchrun:
                self.group = spawn_group(serve_worker, n_workers, (self.spec,), **self.options)
            self._wait_for_hello(n_workers)
        except BaseException:  # a failed start or a Ctrl-C: no worker is left behind
            if not self.torchrun:
                self.close(grace_s=0.5)
            raise
        self._say(f"{n_workers} worker{'s' if n_workers > 1 else ''} ready after {time.time() - t0:.1f} s")

    def _say(self, line: str) -> None:
        if self.say is not None:
            self.say(line)

    def _wait_for_hello(self, n_workers: int) -> None:
        self.hello = {}
        deadline = time.time() + self.join_timeout_s
        while len(self.hello) < n_workers:
            for msg in self.poll(0.1):
                if not isinstance(msg, M.Hello):
                    raise M.ProtocolError(f"expected Hello from the workers, got {type(msg).__name__}")
                self.hello[msg.rank] = msg
            dead = self.dead()
            if dead or time.time() > deadline:
                ready, codes = sorted(self.hello), self.close()
                what = (f"worker rank(s) {sorted(dead)} exited while loading the model" if dead
                        else f"workers did not get ready within {self.join_timeout_s:g} s")
                raise DistributedError(f"{what} (ready: {ready}; exit codes: {codes}; see their one-line errors "
                                       "on stderr)")
        ids = {h.model_id for h in self.hello.values()}
        if len(ids) > 1:
            raise DistributedError(f"the workers loaded different models: {sorted(ids)}")

    def _first(self) -> M.Hello:
        if not self.hello:
            raise DistributedError("the distributed back end has no workers (not started yet, or closed): give it to "
                                   "serving.run, which starts them")
        return self.hello[min(self.hello)]

    @property
    def kv_bytes_per_token(self) -> int:
        return self._first().kv_bytes_per_token

    @property
    def kv_bytes_fn(self):
        """Bytes of one request's cache by tokens, for a model with sliding-window layers (None: linear)."""
        layers = self._first().kv_layers
        return RequestKVBytes(tuple(tuple(pair) for pair in layers)) if layers else None

    @property
    def max_context(self) -> int:
        self._first()  # no workers (not started, or closed): say so
        return min(h.max_context for h in self.hello.values())

    @property
    def vocab_size(self) -> int:
        return self._first().vocab_size

    @property
    def model_id(self) -> str:
        return self._first().model_id

    def auto_kv_budget(self, utilization: float = 0.9, forward_tokens: int = 0) -> int:
        """``utilization`` x a worker's device memory - its weights (the smallest over the workers;
        :func:`splitlab.sizing.kv_budget_bytes`). The workers do not report their activations, so
        ``forward_tokens`` sets nothing aside here (it is the emulated back end's, read for the same signature).

        Raises:
            ValueError: no room for a KV cache on a worker's device.
        """
        self._first()
        try:
            return min(kv_budget_bytes(h.memory_bytes, h.weight_bytes, 0, utilization) for h in self.hello.values())
        except ValueError as err:
            raise ValueError(f"no room for a KV cache on the workers' devices ({err})") from None

    # --- control plane -------------------------------------------------------------------------------------------
    def send(self, rank: int, msg: M.Message) -> None:
        self.group.mailbox.send(rank, **msg.to_dict())

    def poll(self, timeout_s: float) -> list[M.Message]:
        """The messages that came in within ``timeout_s`` (at least one wait, then whatever else is there).

        Raises:
            DistributedError: the control plane is gone. ProtocolError: a message splitlab does not know.
        """
        out, msg = [], self.group.mailbox.get(timeout=timeout_s)
        while msg is not None:
            if msg.get("kind") == "_store_gone":
                raise DistributedError(f"the control plane is gone: {msg.get('error')}")
            out.append(M.decode(msg))
            msg = self.group.mailbox.get(timeout=0)
        return out

    def dead(self) -> dict[int, int]:
        """``{rank: exit code}`` of worker processes that have exited (empty under torchrun)."""
        return self.group.dead() if self.group is not None else {}

    def kill(self, rank: int) -> None:
        """Stop worker ``rank`` for good (a lost worker must not come back half-way); torchrun: ask it to stop."""
        if self.group is None:
            return
        if self.group.procs is not None:
            proc = self.group.procs.processes[rank - 1]
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=2.0)
        else:
            self.send(rank, M.Stop())

    def close(self, grace_s: float = 5.0) -> dict:
        """Stop every worker (asked, then killed after ``grace_s``); returns ``{rank: exit code}``."""
        if self.group is None:
            return {}
        for rank in range(1, self.group.world_size):
            if rank not in self.dead():
                try:
                    self.send(rank, M.Stop())
                except Exception:  # noqa: BLE001 - the control plane may be gone already
                    pass
        group, self.group, self.hello = self.group, None, {}
        return group.close(grace_s)

    def __enter__(self) -> "DistributedBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"{self.n_workers} workers" if self.hello else "not started"
        return f"DistributedBackend({self.spec['model']!r}, {self.spec['device']}, {self.backend}, {state})"
