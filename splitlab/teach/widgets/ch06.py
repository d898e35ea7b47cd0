"""Chapter 6's explorers."""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from ...phases.models import LoadedModel
from .base import explorer

__all__ = ['split_explorer']


def split_explorer(lm: LoadedModel, workload="research", rate_per_s: float = 8.0, prefill_workers: int = 1,
                   decode_workers: int = 1, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None,
                   n_requests: int = 24, max_rate_per_s: float | None = None, seed: int = 0) -> widgets.VBox:
    """Ch. 6: the same requests served colocated on P + D workers and split into P prefill + D decode workers, for
    a chosen request rate and P:D ratio. Runs both for real (emulated workers) and draws the TTFT and TPOT CDFs
    side by side, with the SLOs and each layout's SLO attainment."""
    from ... import serving
    from ..figures import serving as serving_plots

    ex = serving.ModelExecutor(lm)  # warmed up once, shared by every redraw

    def draw(rate_per_s: float, prefill_workers: int, decode_workers: int) -> None:
        reqs = serving.make_workload(workload, n_requests, rate_per_s, seed=seed, model=lm)
        cmp = serving.compare(reqs, serving.contenders(prefill_workers=prefill_workers,
                                                       decode_workers=decode_workers), ex)
        n = prefill_workers + decode_workers
        runs = {f"colocated, {n} workers": cmp.colocated,
                f"split, {prefill_workers}P + {decode_workers}D": cmp.disaggregated}
        att = {k: r.metrics(ttft_slo_s, tpot_slo_s)["slo_attainment"] for k, r in runs.items()}
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
        serving_plots.ttft_cdf(runs, ax=a1, slo_s=ttft_slo_s, title="Time to first token")
        serving_plots.latency_cdf(runs, "tpot", ax=a2, slo_s=tpot_slo_s, title="Time per output token")
        name = workload if isinstance(workload, str) else getattr(workload, "name", "custom")
        fig.suptitle(f"{name} at {rate_per_s:.3g} requests/s. SLO attainment: "
                     + ", ".join(f"{k}: {v:.0%}" for k, v in att.items()), fontsize=10)
        fig.tight_layout()

    top = max_rate_per_s or 3 * rate_per_s
    return explorer(draw,
                    rate_per_s=widgets.FloatSlider(value=rate_per_s, min=top / 30, max=top, step=top / 30,
                                                   description="rate /s", readout_format=".3g"),
                    prefill_workers=widgets.IntSlider(prefill_workers, 1, 4, 1, description="prefill (P)"),
                    decode_workers=widgets.IntSlider(decode_workers, 1, 4, 1, description="decode (D)"))

