"""Chapter 6's explorers."""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from .base import explorer

__all__ = ['split_explorer']


def split_explorer(cost, workload="research", rate_per_s: float = 8.0, prefill_workers: int = 1,
                   decode_workers: int = 1, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None,
                   n_requests: int = 300, scale: float | None = None, max_rate_per_s: float | None = None,
                   seed: int = 0) -> widgets.VBox:
    """Ch. 6: the same requests served by P + D colocated workers (prefill-first) and by the split into P
    prefill + D decode workers, at a chosen rate and P:D ratio, on the simulator with ``cost`` (a
    :class:`splitlab.costmodel.CostModel`, e.g. a calibration's ``.cost``: each redraw takes a fraction of a
    second). Draws the TTFT and TPOT CDFs with the SLOs and each layout's SLO attainment."""
    from ... import serving
    from ..figures import split as split_figures

    ex = serving.CostModelExecutor(getattr(cost, "cost", cost))

    def draw(rate_per_s: float, prefill_workers: int, decode_workers: int) -> None:
        reqs = serving.workload_requests(workload, n_requests, rate_per_s, ex, seed, scale)
        n = prefill_workers + decode_workers
        runs = {f"{n} colocated": serving.run(reqs, serving.ServingConfig.colocated(n, trace=False), ex),
                f"{prefill_workers}P+{decode_workers}D": serving.run(
                    reqs, serving.ServingConfig.disaggregated(prefill_workers, decode_workers, trace=False), ex)}
        att = {k: r.metrics(ttft_slo_s, tpot_slo_s)["slo_attainment"] for k, r in runs.items()}
        name = workload if isinstance(workload, str) else getattr(workload, "name", "custom")
        split_figures.latency_cdfs(runs, ttft_slo_s, tpot_slo_s,
                                   title=f"{name} at {rate_per_s:.3g}/s (simulated). Within both SLOs: "
                                         + ", ".join(f"{k} {v:.0%}" for k, v in att.items()))

    top = max_rate_per_s or 3 * rate_per_s
    return explorer(draw,
                    rate_per_s=widgets.FloatSlider(value=rate_per_s, min=top / 30, max=top, step=top / 30,
                                                   description="rate /s", readout_format=".3g"),
                    prefill_workers=widgets.IntSlider(prefill_workers, 1, 6, 1, description="prefill (P)"),
                    decode_workers=widgets.IntSlider(decode_workers, 1, 6, 1, description="decode (D)"))
