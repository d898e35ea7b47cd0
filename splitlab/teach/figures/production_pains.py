"""Chapter 9: the experiments that diagnose what users of disaggregated serving report, each on the simulator with
the analytic cost model of a datasheet GPU (everything predicted).

- :func:`idle_prefill`: "the split is slower than colocated": 1P+1D against two colocated workers on the same
  requests, goodput per worker of each, and how busy each worker is when the split runs at its goodput.
- :func:`nic_queue`, :func:`nic_figure`: "transfer slows under concurrency": x prefill workers into one decode
  worker's NIC (:mod:`splitlab.serving.nic`), the link time of each hand-off as x grows.
- :func:`tp_mismatch`: "a TP mismatch at hand-off": for pairs of prefill and decode TP, the share of the cache
  re-sharded, the bytes that moves per request and the hand-off's time (:func:`splitlab.planning.pools.handoff`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...planning.pools import Pool, handoff, pool_cost_model
from ...serving import CostModelExecutor, Fixed, ServingConfig, WorkloadSpec, goodput, link_fields, run
from ...serving import metrics as M
from ...serving import workload_requests
from .pools import _ax, _styled
from .style import TRANSFER, fmt_table

__all__ = ["idle_prefill", "nic_queue", "nic_table", "nic_figure", "tp_mismatch", "tp_table"]


def idle_prefill(cost, workload="chat", ttft_slo_s: float | None = None, tpot_slo_s: float | None = None,
                 max_requests: int = 400, seed: int = 0) -> dict:
    """Goodput per worker of two colocated workers and of 1P+1D on ``cost`` (``workload``'s requests; SLOs left
    None are chosen by chapter 6's rule, :func:`splitlab.planning.defaults.choose_defaults`), then the split served at
    its own goodput: each worker's utilization (busy seconds / run length).

    Returns:
        dict: ``slos`` (ttft_slo_s, tpot_slo_s), ``goodput`` ({name: requests/s per worker}), ``binding`` ({name: SLO}),
        ``utilization`` ({worker: share of the run busy}) and ``rate`` (requests/s of the cluster the split ran at).
    """
    from ...planning.defaults import choose_defaults
    if ttft_slo_s is None or tpot_slo_s is None:
        chosen = choose_defaults(cost, workload, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, seed=seed, scale=1.0)
        ttft_slo_s, tpot_slo_s = chosen.ttft_slo_s, chosen.tpot_slo_s
    ex = CostModelExecutor(cost)
    layouts = {"2 colocated": ServingConfig.colocated(2), "1P+1D": ServingConfig.disaggregated(1, 1)}
    found = {k: goodput(workload, c, ex, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, max_requests=max_requests,
                        min_requests=min(200, max_requests), seed=seed, scale=1.0, tolerance=0.05)
             for k, c in layouts.items()}
    rate = 2 * found["1P+1D"].goodput_rps_per_worker
    res = run(workload_requests(workload, max_requests, rate, ex, seed, 1.0), layouts["1P+1D"], ex)
    util = res.worker_table()["utilization"]
    return dict(slos=(ttft_slo_s, tpot_slo_s), goodput={k: g.goodput_rps_per_worker for k, g in found.items()},
                binding={k: g.binding_slo for k, g in found.items()}, rate=rate,
                utilization={w: float(u) for w, u in util.items() if "->" not in w})


def nic_queue(cost, prompt_tokens: int = 7936, output_tokens: int = 256, rate_per_prefill: float = 2.5,
              link: str = "100 Gb/s network", prefill_workers=(1, 2, 3, 4), n_requests: int = 300,
              seed: int = 0) -> pd.DataFrame:
    """xP+1D for each x of ``prefill_workers``, every prefill worker offered ``rate_per_prefill`` requests/s of
    ``prompt_tokens``-token prompts, every cache crossing ``link`` into the one decode worker's NIC.

    Returns:
        one row per x: ``prefill_workers``, ``bare_ms`` (one cache's transfer alone), ``link_mean_ms``,
        ``link_p90_ms`` (hand-off times: NIC queue + transfer), ``nic_load`` (offered bytes/s over the link's).
    """
    ex = CostModelExecutor(cost)
    spec = WorkloadSpec(f"{prompt_tokens}-token prompts", Fixed(prompt_tokens), Fixed(output_tokens))
    fields = link_fields(link)
    bare_s = prompt_tokens * cost.kv_bytes_per_token / fields["link_bytes_per_s"]
    rows = []
    for x in prefill_workers:
        reqs = workload_requests(spec, n_requests, rate_per_prefill * x, ex, seed, 1.0)
        res = run(reqs, ServingConfig.disaggregated(x, 1, max_batch=None, trace=False, **fields), ex)
        link_s = np.array([M.link_s(r) for r in res.requests if r.state.value == "finished"])
        rows.append(dict(prefill_workers=x, bare_ms=bare_s * 1e3, link_mean_ms=link_s.mean() * 1e3,
                         link_p90_ms=np.quantile(link_s, 0.9) * 1e3, nic_load=rate_per_prefill * x * bare_s))
    return pd.DataFrame(rows).set_index("prefill_workers")


def nic_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`nic_queue`'s rows, phone-sized."""
    return fmt_table(table.reset_index(), {"prefill_workers": "prefill workers", "nic_load": ("NIC load (%)", 100),
                                           "bare_ms": "alone (ms)", "link_mean_ms": "mean (ms)",
                                           "link_p90_ms": "p90 (ms)"}, index="prefill workers")


@_styled
def nic_figure(table: pd.DataFrame, link: str = "100 Gb/s network", ax=None):
    """Mean and 90th-percentile hand-off time (ms) against the prefill workers sending into one decode NIC, the
    bare transfer as a dashed line. Returns the Axes."""
    ax = _ax(ax, 3.4)
    x = table.index.to_numpy()
    # hand-off times: the transfer phase's colour, as in chapters 1 to 5
    ax.plot(x, table["link_mean_ms"], "o-", color=TRANSFER, label="mean")
    ax.plot(x, table["link_p90_ms"], "s--", color=TRANSFER, alpha=0.6, label="90th percentile")
    ax.axhline(table["bare_ms"].iloc[0], color="0.4", ls=":", label="one cache alone")
    ax.set_xticks(x)
    ax.set_xlabel("prefill workers into one decode NIC")
    ax.set_ylabel("hand-off time (ms)")
    ax.set_title(f"xP+1D over a {link} (predicted)")
    ax.legend()
    return ax


def tp_mismatch(model: str = "Llama-3-8B", prompt_tokens: int = 7936, pairs=((1, 1), (2, 2), (1, 4), (4, 1), (2, 4)),
                gpu: str = "H100", link: str = "400 Gb/s network") -> pd.DataFrame:
    """For each (prefill TP, decode TP) of ``pairs``: device links used at once, the share of a
    ``prompt_tokens``-token cache re-sharded over the decode group's NVLink, its bytes, and the hand-off's time
    (transfer over ``lanes`` x ``link`` plus the re-shard; :func:`splitlab.planning.pools.handoff`).

    Raises:
        ValueError: a TP that does not divide ``model``'s heads or does not fit ``gpu`` (from the cost model).
    """
    rows = []
    for tp_p, tp_d in pairs:
        pp, dp = Pool(gpu, tp_p), Pool(gpu, tp_d)
        cost, info = handoff(model, pool_cost_model(model, pp, link=link), pp, dp, link)
        kv = prompt_tokens * cost.kv_bytes_per_token
        rows.append(dict(pair=f"TP{tp_p} -> TP{tp_d}", lanes=info["lanes"], moved_share=info["moved_share"],
                         moved_mb=kv * info["moved_share"] / 1e6, handoff_ms=kv * info["seconds_per_gb"] / 1e9 * 1e3))
    return pd.DataFrame(rows).set_index("pair")


def tp_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`tp_mismatch`'s rows, phone-sized."""
    return fmt_table(table.reset_index(), {"pair": "P -> D", "lanes": "lanes", "moved_share": ("re-sharded (%)", 100),
                                           "moved_mb": "moved (MB)", "handoff_ms": "hand-off (ms)"}, index="P -> D")

