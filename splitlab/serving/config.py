"""One dataclass describes a serving run: the layout and its pools, the batching policy, the KV budget, the link
between the pools, and how faults are handled. Every back end (emulated, simulated, distributed) reads the same
:class:`ServingConfig`."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

from ..common.timeouts import check_timeout

__all__ = ["ServingConfig", "LAYOUTS", "POLICIES", "TRANSFER_MODES", "ROUTINGS"]

LAYOUTS = ("colocated", "disaggregated")
POLICIES = ("prefill-first", "decode-first", "chunked")
TRANSFER_MODES = ("whole", "layerwise")
#: how the router picks a new request's worker (:mod:`.router`, :mod:`.prefix_router`)
ROUTINGS = ("least-loaded", "prefix-aware")
#: most workers of one run (both pools): a run builds every worker up front, ~80 us each on the simulator, so
#: 1e5 take ~8 s and 1e7 ran for a quarter of an hour before serving a request
MAX_WORKERS = 100_000
#: slowest link a run accepts (bytes/s): 1 kB/s, seven orders of magnitude below the slowest link the book discusses
#: (100 Gb/s = 12.5 GB/s); at 1e-291 bytes/s (``--link-gbps 1e-300``) a TPOT printed as 300 digits of ms
MIN_LINK_BYTES_PER_S = 1e3
#: longest link latency a run accepts (s): an hour, far past any network (us to ms); beyond it a run's clock
#: drifts toward values at which float64 no longer resolves a step (see request.MAX_ARRIVAL_S)
MAX_LINK_LATENCY_S = 3600.0


def _positive(x) -> bool:
    """A finite real number > 0 (not a bool, not a string, not NaN)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _count(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


@dataclass(frozen=True)
class ServingConfig:
    """How a cluster serves.

    Attributes:
        layout: "colocated" (``workers`` workers that each prefill and decode) or "disaggregated"
            (``prefill_workers`` prefill workers + ``decode_workers`` decode workers).
        policy: the colocated batching policy, one of :data:`POLICIES` (see :mod:`.scheduler`); prefill workers
            always run whole prompts prefill-first and decode workers decode every step.
        max_batch: a cap on the requests resident on a worker at once (decoding, or admitted and prefilling), or
            None (the default): no cap, the KV budget bounds the batch, as in a paged server whose batch is what
            its KV blocks hold (``KVMemory`` reserves each request's largest cache, prompt + output, on admission;
            a decode worker reserves it when the cache is handed over, and a received cache that the cap keeps out
            of the batch waits in ``joining``, its memory held). Under ``chunked``, None caps the batch at
            ``chunk_tokens - 1`` so that prompts always progress (vLLM likewise needs ``max_num_seqs <=
            max_num_batched_tokens``). :attr:`batch_cap` is the cap in force.
        max_prefill_tokens: most prompt tokens in one prefill forward (at least one prompt always goes).
        chunk_tokens: ``chunked`` only: token budget per step (decode tokens + prompt-chunk tokens); must exceed
            ``max_batch`` so that prompts always progress.
        kv_budget_bytes: KV bytes each worker may hold; "auto" = ``memory_utilization`` x the back end's device
            memory - the weights - the activations of the largest forward (:attr:`forward_tokens` tokens), as
            vLLM sizes its cache (:func:`splitlab.sizing.kv_budget_bytes`; a cost model without a memory size:
            the stated :data:`splitlab.sizing.CPU_MEMORY_BYTES`, 16 GiB); None = unlimited.
        memory_utilization: the share of a device's memory a worker uses for weights, activations and KV cache
            (vLLM's ``gpu_memory_utilization``, default 0.9), in (0, 1]; read by the "auto" budget only.
        first_token_on: disaggregated: which side emits the first token: "decode" (the default: once the cache
            has arrived and the decode worker has admitted the request into its batch, so TTFT includes the KV
            transfer and the wait for a batch slot, as vLLM's disaggregated proxy streams every token from the
            decode instance) or "prefill" (DistServe's convention: when the prefill ends; its simulator ends TTFT
            there and counts the wait for the decode side in TPOT).
        transfer_mode: "whole" (the cache in one go once the prefill ends) or "layerwise" (layer by layer as the
            prefill computes them, overlapping it: :mod:`.nic`).
        link_bytes_per_s, link_latency_s: model the link between the pools as latency + bytes / bandwidth instead
            of charging the measured copy (virtual-clock back ends only; :func:`.nic.link_fields` gives them for a
            named link; each worker's one NIC carries one transfer at a time). None = charge what was measured (or,
            on the simulated back end, the cost model's transfer, which may be a free link). Finite, at least
            :data:`MIN_LINK_BYTES_PER_S` bytes/s, and a latency of at most :data:`MAX_LINK_LATENCY_S`.
        max_retries: how often a request whose worker died is served again elsewhere (its cache re-sent when the
            prefill side still holds it, else its prefill recomputed) before it fails.
        timeout_s: distributed back end: limit of every exchange with a worker process (a worker that holds work
            and answers nothing for this long is declared lost). Virtual clocks: how long a hung worker goes
            unnoticed. A finite time > 0 s, at most a week.
        trace: keep the per-step timeline and the memory log (off for large simulated searches: metrics only).
        local_prefill_tokens, local_prefill_queue: conditional disaggregation (disaggregated only; None = off):
            the router sends a request to a decode worker, which prefills it itself (no KV transfer), when its
            prompt has at most ``local_prefill_tokens`` tokens (an integer >= 0 or ``math.inf``) or when the prefill
            worker it would join has at least ``local_prefill_queue`` requests waiting; the others go through the
            prefill pool. Dynamo's disaggregated router made this decision with ``max_local_prefill_length`` and
            ``max_prefill_queue_size`` (:mod:`.conditional`). 0 tokens is the plain split, ``math.inf`` makes the
            decode workers do every prefill.
        prefix_cache_tokens: prefix caching on the workers that prefill (colocated, or the prefill pool): each keeps
            the prompts it prefilled, in whole blocks of ``prefix_block_tokens`` tokens, up to this many tokens
            (an integer >= ``prefix_block_tokens``, or ``math.inf``), least recently used evicted first; a prompt's
            longest cached prefix is not prefilled again (:mod:`.prefix_router`). None (the default): off. Cost-model
            back ends only. The cache is held apart from the KV budget (a stated simplification).
        routing: "least-loaded" (the default, :mod:`.router`) or "prefix-aware" (needs ``prefix_cache_tokens``: a
            request goes to the worker holding its longest cached prefix among those owing at most
            ``prefix_balance_tokens`` tokens more than the least-loaded one, :class:`~.prefix_router.PrefixRouter`).
        prefix_block_tokens, prefix_balance_tokens: the cache's block (tokens, >= 1) and the prefix-aware router's
            bound on the load imbalance (tokens owed, >= 0 or ``math.inf``; default 2048: one prefill forward).

    Raises:
        ValueError: an unknown layout, policy, first_token_on or transfer_mode; a pool without workers or more than
            :data:`MAX_WORKERS` workers in all; a count that is not an integer (``max_batch``: or None); a budget,
            memory utilization or timeout out of range; a link bandwidth that is not finite or below
            :data:`MIN_LINK_BYTES_PER_S` (1 kB/s); a link latency that is negative, not finite or above
            :data:`MAX_LINK_LATENCY_S` (an hour).
    """

    layout: str = "colocated"
    workers: int = 1
    prefill_workers: int = 1
    decode_workers: int = 1
    policy: str = "prefill-first"
    max_batch: int | None = None
    max_prefill_tokens: int = 2048
    chunk_tokens: int = 256
    kv_budget_bytes: int | str | None = "auto"
    memory_utilization: float = 0.9
    first_token_on: str = "decode"
    transfer_mode: str = "whole"
    link_bytes_per_s: float | None = None
    link_latency_s: float = 0.0
    max_retries: int = 2
    timeout_s: float = 30.0
    trace: bool = True
    local_prefill_tokens: int | float | None = None
    local_prefill_queue: int | None = None
    prefix_cache_tokens: int | float | None = None
    routing: str = "least-loaded"
    prefix_block_tokens: int = 16
    prefix_balance_tokens: int | float = 2048

    def __post_init__(self) -> None:
        for name, allowed in (("layout", LAYOUTS), ("policy", POLICIES), ("transfer_mode", TRANSFER_MODES),
                              ("first_token_on", ("prefill", "decode"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("workers", "prefill_workers", "decode_workers", "max_batch", "max_prefill_tokens",
                     "chunk_tokens", "max_retries"):
            if name == "max_batch" and self.max_batch is None:
                continue
            if not _count(getattr(self, name)):
                raise ValueError(f"{name} must be an integer, got {getattr(self, name)!r}")
        if min(self.workers, self.prefill_workers, self.decode_workers) < 1:
            raise ValueError("every pool needs at least one worker")
        if max(self.workers, self.prefill_workers, self.decode_workers, self.n_workers) > MAX_WORKERS:
            raise ValueError(f"a run has at most {MAX_WORKERS:,} workers (each is built before the first request), "
                             f"got {self.name}")
        for name in ("max_batch", "max_prefill_tokens", "chunk_tokens"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if not isinstance(self.trace, bool):
            raise ValueError(f"trace must be True or False, got {self.trace!r}")
        if self.policy == "chunked" and self.chunk_tokens < 2:
            raise ValueError(f"chunk_tokens must be >= 2 under chunked (a decode token and a prompt token per step), "
                             f"got {self.chunk_tokens}")
        if self.policy == "chunked" and self.max_batch is not None and self.chunk_tokens <= self.max_batch:
            raise ValueError(f"chunk_tokens ({self.chunk_tokens}) must exceed max_batch ({self.max_batch}): "
                             f"a full decode batch would leave no budget for prompts")
        budget = self.kv_budget_bytes
        if budget is not None and budget != "auto" and not _positive(budget):
            raise ValueError(f"kv_budget_bytes must be a number of bytes > 0, 'auto' or None (unlimited), got "
                             f"{budget!r}")
        util = self.memory_utilization
        if not _positive(util) or util > 1:
            raise ValueError(f"memory_utilization must be in (0, 1] (the share of a device's memory a worker uses, "
                             f"like vLLM's gpu_memory_utilization), got {util!r}")
        bandwidth = self.link_bytes_per_s
        if bandwidth is not None and not _positive(bandwidth):
            raise ValueError(f"link_bytes_per_s must be > 0 and finite, in bytes/s (or None to charge the measured "
                             f"time), got {bandwidth!r}")
        if bandwidth is not None and bandwidth < MIN_LINK_BYTES_PER_S:
            raise ValueError(f"link_bytes_per_s must be >= {MIN_LINK_BYTES_PER_S:g} bytes/s (1 kB/s, 7 orders of "
                             f"magnitude below the slowest link the book discusses), got {bandwidth:.3g} bytes/s "
                             f"({bandwidth / 1e9:.3g} GB/s)")
        latency = self.link_latency_s
        if isinstance(latency, bool) or not isinstance(latency, numbers.Real) or not math.isfinite(latency):
            raise ValueError(f"link_latency_s must be a finite time >= 0 s, got {latency!r}")
        if latency < 0:
            raise ValueError(f"link_latency_s must be >= 0 s, got {latency!r}")
        if latency > MAX_LINK_LATENCY_S:
            raise ValueError(f"link_latency_s must be <= {MAX_LINK_LATENCY_S:g} s (an hour; real links take us to "
                             f"ms), got {latency:.3g} s")
        check_timeout(self.timeout_s)  # 1e308 s ran: a hung worker's TTFT of 5e307 s and numpy overflow warnings
        self._check_conditional()
        self._check_prefix()

    def _check_conditional(self) -> None:
        tokens, queue = self.local_prefill_tokens, self.local_prefill_queue
        if tokens is not None and not ((_count(tokens) and tokens >= 0) or tokens == math.inf):
            raise ValueError(f"local_prefill_tokens must be a number of prompt tokens >= 0, math.inf (every prefill "
                             f"on a decode worker) or None (off), got {tokens!r}")
        if queue is not None and not (_count(queue) and queue >= 0):
            raise ValueError(f"local_prefill_queue must be a number of waiting requests >= 0 or None (off), got "
                             f"{queue!r}")
        if self.conditional and self.layout != "disaggregated":
            raise ValueError("local_prefill_tokens and local_prefill_queue need layout='disaggregated' (a colocated "
                             "worker prefills every request itself)")

    def _check_prefix(self) -> None:
        block, cache, balance = self.prefix_block_tokens, self.prefix_cache_tokens, self.prefix_balance_tokens
        if self.routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, got {self.routing!r}")
        if not (_count(block) and block >= 1):
            raise ValueError(f"prefix_block_tokens must be an integer >= 1, got {block!r}")
        if cache is not None and not ((_count(cache) and cache >= block) or cache == math.inf):
            raise ValueError(f"prefix_cache_tokens must be a number of tokens >= prefix_block_tokens ({block}), "
                             f"math.inf (no eviction) or None (no prefix caching), got {cache!r}")
        if not ((_count(balance) and balance >= 0) or balance == math.inf):
            raise ValueError(f"prefix_balance_tokens must be a number of tokens >= 0 or math.inf, got {balance!r}")
        if self.routing == "prefix-aware" and cache is None:
            raise ValueError("routing='prefix-aware' needs prefix_cache_tokens (the workers' prefix caches it routes "
                             "by): give their capacity in tokens, or math.inf")
        if cache is not None and self.conditional:
            raise ValueError("prefix_cache_tokens with local_prefill_tokens or local_prefill_queue: a conditional "
                             "split's decode workers keep no prefix cache in splitlab; use one or the other")

    # --- shapes ------------------------------------------------------------------------------------------------
    @classmethod
    def colocated(cls, workers: int = 1, **options) -> "ServingConfig":
        """``workers`` colocated workers; ``options`` are the other fields."""
        return cls(layout="colocated", workers=workers, **options)

    @classmethod
    def disaggregated(cls, prefill_workers: int = 1, decode_workers: int = 1, **options) -> "ServingConfig":
        """A split into ``prefill_workers`` prefill and ``decode_workers`` decode workers (xPyD); with
        ``local_prefill_tokens=`` or ``local_prefill_queue=``, a conditional split (short prompts prefilled on the
        decode workers)."""
        return cls(layout="disaggregated", prefill_workers=prefill_workers, decode_workers=decode_workers, **options)

    def with_(self, **changes) -> "ServingConfig":
        """A copy with some fields changed (checked again)."""
        return replace(self, **changes)

    @property
    def batch_cap(self) -> int | float:
        """The cap on a worker's resident requests in force: ``max_batch``; with None, ``chunk_tokens - 1`` under
        ``chunked`` and otherwise ``math.inf`` (the KV budget alone bounds the batch)."""
        if self.max_batch is not None:
            return self.max_batch
        return self.chunk_tokens - 1 if self.policy == "chunked" else math.inf

    @property
    def forward_tokens(self) -> int:
        """Tokens of the largest forward the policy schedules, whose activations the "auto" KV budget sets aside
        (vLLM's profiling run of ``max_num_batched_tokens``): ``chunk_tokens`` under ``chunked``, else
        ``max_prefill_tokens`` (a prompt longer than that runs alone and may exceed it)."""
        return self.chunk_tokens if self.policy == "chunked" else self.max_prefill_tokens

    @property
    def conditional(self) -> bool:
        """Whether some prefills may run on decode workers (``local_prefill_tokens`` or ``local_prefill_queue``)."""
        return self.local_prefill_tokens is not None or self.local_prefill_queue is not None

    @property
    def n_workers(self) -> int:
        """Workers of every pool (a 1P+1D split is 2 workers, like 2 colocated workers)."""
        return self.workers if self.layout == "colocated" else self.prefill_workers + self.decode_workers

    @property
    def name(self) -> str:
        """A short label: "2 colocated (chunked)", "1P+3D", "2 colocated (prefill-first, prefix-aware)"."""
        if self.layout == "colocated":
            routing = f", {self.routing}" if self.routing != "least-loaded" else ""
            return f"{self.workers} colocated ({self.policy}{routing})"
        local = [f"prompt <= {self.local_prefill_tokens:g}"] if self.local_prefill_tokens is not None else []
        local += [f"queue >= {self.local_prefill_queue}"] if self.local_prefill_queue is not None else []
        split = f"{self.prefill_workers}P+{self.decode_workers}D"
        if self.routing != "least-loaded":
            split += f" ({self.routing})"
        return split + (f" (local if {' or '.join(local)})" if local else "")
