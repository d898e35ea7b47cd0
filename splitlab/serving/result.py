"""What a serving run produced: the requests with their token timestamps, and tables to plot.

Tables (pandas DataFrames, times in seconds on the virtual clock, sizes in bytes):
- ``timeline``: one row per busy interval: ``worker`` (``W0``, ``P0``, ``D1``, or a link ``P0->D1``), ``kind``
  (prefill / decode / transfer / idle), ``start_s``, ``end_s``, ``request_ids``, ``batch`` (requests in the
  step), ``tokens`` (prompt tokens for prefill, sequences for decode, cached tokens moved for a transfer).
  Idle rows fill every worker's gaps from 0 to the end of the run (links have no idle rows).
- ``kv_usage``: ``time_s``, ``worker``, ``used_bytes`` (KV positions held x bytes/token), ``reserved_bytes``,
  ``budget_bytes`` (NaN = unlimited), sampled whenever a worker's memory changes.
- ``transfers``: one row per KV hand-off: request_id, src, dst, start_s, end_s, nbytes, measured_s (the real
  copy), charged_s (what the link was charged), method.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from . import metrics as M
from .request import Request, State

__all__ = ["ServingResult"]


@dataclass
class ServingResult:
    """Result of :func:`splitlab.serving.run` (or ``Cluster.run``).

    Attributes:
        requests: the served requests (FINISHED, REJECTED or FAILED), in submission order.
        config: the :class:`~.config.ServingConfig` used.
        workers: worker names, prefill pool first.
        wall_s: real time the run took; measured_s: seconds the executor measured (forwards and copies);
        overhead_s: the part of the rest spent merging/selecting batch caches (charged to no worker).
        notes: one line per fault and what was done about it (a lost worker, a request served again); empty
            when all went well.
        admissions: request ids in the order workers admitted them (a request served again appears again).
        backend: "emulated", "simulated" or "distributed".
        hybrid_path: how the run's hybrid steps (chunked prefill: decode rows + prompt chunks) ran: "fused" (one
            forward each; in the timeline its decode and prefill rows abut, splitting its seconds by tokens) or
            "two-pass"; None where the back end does not say (distributed: each worker process decides).
        kv_budget_bytes: each worker's KV budget (None: unlimited), "auto" resolved.
        batch_capped: worker name -> steps at which ``config.batch_cap`` (``max_batch``), not KV memory, kept a
            request waiting (a cap that binds); empty when memory alone bounded every batch.
    """

    requests: list[Request]
    config: object
    workers: list[str]
    _timeline: list[tuple] = field(repr=False, default_factory=list)
    _transfers: list[dict] = field(repr=False, default_factory=list)
    _memory: dict = field(repr=False, default_factory=dict)
    wall_s: float = 0.0
    measured_s: float = 0.0
    overhead_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    admissions: list[int] = field(default_factory=list)
    backend: str = "executor"
    hybrid_path: str | None = None
    kv_budget_bytes: int | None = None
    batch_capped: dict = field(default_factory=dict)

    @property
    def completed(self) -> list[Request]:
        return [r for r in self.requests if r.state == State.FINISHED]

    @property
    def rejected(self) -> list[Request]:
        return [r for r in self.requests if r.state == State.REJECTED]

    @property
    def failed(self) -> list[Request]:
        return [r for r in self.requests if r.state == State.FAILED]

    @property
    def bookkeeping_s(self) -> float:
        """Real seconds of the run not spent in measured forwards and copies: the emulator's own cost (event
        loop, scheduling, batch cache merges, token picking)."""
        return max(0.0, self.wall_s - self.measured_s)

    @property
    def end_s(self) -> float:
        """Virtual time at which the last worker or link went idle."""
        ends = [row[3] for row in self._timeline] + [r.finish_s or 0.0 for r in self.requests]
        return max(ends, default=0.0)

    def tokens(self) -> dict[int, list[int]]:
        """Output token ids per request id."""
        return {r.id: list(r.output) for r in self.requests}

    def metrics(self, ttft_slo_s: float | None = M.DEFAULT_TTFT_SLO_S,
                tpot_slo_s: float | None = M.DEFAULT_TPOT_SLO_S) -> dict:
        """:func:`splitlab.serving.metrics.summarize` of this run, plus layout and bookkeeping share."""
        out = M.summarize(self.requests, len(self.workers), ttft_slo_s, tpot_slo_s)
        out.update(layout=self.config.layout, workers=list(self.workers), backend=self.backend,
                   bookkeeping_s=self.bookkeeping_s, notes=list(self.notes), kv_budget_bytes=self.kv_budget_bytes,
                   max_batch=self.config.max_batch, batch_capped=dict(self.batch_capped),
                   bookkeeping_share=self.bookkeeping_s / self.wall_s if self.wall_s > 0 else 0.0)
        return out

    def request_table(self) -> pd.DataFrame:
        """One row per request (see :func:`splitlab.serving.metrics.request_table`)."""
        return M.request_table(self.requests)

    def token_table(self) -> pd.DataFrame:
        """One row per output token: ``request_id``, ``index`` (0 = first token), ``time_s`` (available to the
        client), ``since_arrival_s`` and ``gap_s`` (the ITL before it; NaN for the first token, whose wait is
        the TTFT). ``gap_s.dropna()`` is every ITL of the run, for CDFs."""
        rows = [dict(request_id=r.id, index=i, time_s=t, since_arrival_s=t - r.arrival_s,
                     gap_s=float(gaps[i - 1]) if i else float("nan"))
                for r in self.requests for gaps in [M.itl_s(r)] for i, t in enumerate(r.token_times_s)]
        return pd.DataFrame(rows, columns=["request_id", "index", "time_s", "since_arrival_s", "gap_s"])

    @property
    def timeline(self) -> pd.DataFrame:
        busy = pd.DataFrame(self._timeline, columns=["worker", "kind", "start_s", "end_s", "request_ids", "batch",
                                                     "tokens"])  # rows are tuples in this column order
        idle, end = [], self.end_s
        for w in self.workers:
            t = 0.0
            for row in busy[busy.worker == w].sort_values("start_s").itertuples():
                if row.start_s > t:
                    idle.append(dict(worker=w, kind="idle", start_s=t, end_s=row.start_s, request_ids=[], batch=0,
                                     tokens=0))
                t = max(t, row.end_s)
            if end > t:
                idle.append(dict(worker=w, kind="idle", start_s=t, end_s=end, request_ids=[], batch=0, tokens=0))
        out = pd.concat([busy, pd.DataFrame(idle, columns=busy.columns)], ignore_index=True) if idle else busy
        return out.sort_values(["worker", "start_s"], kind="stable").reset_index(drop=True)

    @property
    def kv_usage(self) -> pd.DataFrame:
        rows = [dict(time_s=t, worker=name, used_bytes=used, reserved_bytes=res,
                     budget_bytes=float("nan") if mem.budget_bytes is None else mem.budget_bytes)
                for name, mem in self._memory.items() for t, used, res in mem.log]
        cols = ["time_s", "worker", "used_bytes", "reserved_bytes", "budget_bytes"]
        return pd.DataFrame(rows, columns=cols).sort_values(["worker", "time_s"], kind="stable").reset_index(drop=True)

    @property
    def transfers(self) -> pd.DataFrame:
        return pd.DataFrame(self._transfers, columns=["request_id", "src", "dst", "start_s", "end_s", "nbytes",
                                                      "measured_s", "charged_s", "method"])

    def worker_table(self) -> pd.DataFrame:
        """Per worker: seconds spent in prefill, decode and idle, utilization (busy / run length) and
        output tokens decoded there."""
        tl = self.timeline
        tl = tl.assign(seconds=tl.end_s - tl.start_s)
        table = tl.pivot_table(index="worker", columns="kind", values="seconds", aggfunc="sum", fill_value=0.0)
        table = table.reindex(columns=["prefill", "decode", "idle", "transfer"], fill_value=0.0)
        table = table.reindex(self.workers + [w for w in table.index if w not in self.workers], fill_value=0.0)
        busy = table["prefill"] + table["decode"]
        table["utilization"] = busy / self.end_s if self.end_s > 0 else 0.0
        return table.rename(columns=lambda c: f"{c}_s" if c != "utilization" else c)

    def __repr__(self) -> str:
        return (f"ServingResult({self.config.layout}, {self.backend}, workers={self.workers}, "
                f"submitted={len(self.requests)}, completed={len(self.completed)}, rejected={len(self.rejected)}, "
                f"failed={len(self.failed)}, end={self.end_s:.3f}s)")
