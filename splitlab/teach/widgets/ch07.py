"""Chapter 7's explorers."""
from __future__ import annotations

import ipywidgets as widgets

from .base import explorer

__all__ = ['pools_explorer']


def pools_explorer(cost, workload="research", ttft_slo_s: float = 0.5, tpot_slo_s: float = 0.02,
                   scale: float = 1.0, max_workers: int = 4, price_per_hour: float = 1.0,
                   chunk_tokens=(256,), max_requests: int = 1500) -> widgets.VBox:
    """Ch. 7: the planner (:func:`splitlab.planner.plan`, simulated on ``cost``) for chosen SLOs, prompt and
    output lengths (``scale`` x the workload's) and a number of workers; draws every candidate's goodput per
    worker, the winner and each one's binding SLO. A redraw takes a few seconds."""
    from ...planning.planner import plan as run_plan
    from ..figures import pools

    cost = getattr(cost, "cost", cost)

    def draw(ttft_slo_s: float, tpot_slo_s: float, scale: float, max_workers: int) -> None:
        p = run_plan(cost, workload, ttft_slo_s, tpot_slo_s, max_workers, price_per_hour, chunk_tokens=chunk_tokens,
                     scale=scale, max_requests=max_requests, progress=False)
        pools.candidates(p, title=f"TTFT <= {ttft_slo_s * 1e3:.0f} ms, TPOT <= {tpot_slo_s * 1e3:.1f} ms, "
                                  f"lengths x{scale:g}")

    return explorer(draw,
                    ttft_slo_s=widgets.FloatLogSlider(value=ttft_slo_s, base=10, min=-2, max=1, step=0.1,
                                                      description="TTFT SLO s", readout_format=".3g"),
                    tpot_slo_s=widgets.FloatLogSlider(value=tpot_slo_s, base=10, min=-3, max=0, step=0.1,
                                                      description="TPOT SLO s", readout_format=".3g"),
                    scale=widgets.FloatSlider(value=scale, min=0.25, max=2.0, step=0.25, description="lengths x"),
                    max_workers=widgets.IntSlider(max_workers, 2, 6, 1, description="max workers"))
