"""The runs of a cell of chapter 7's steady-state check (:mod:`.map_steady`) simulated again on the cost model its
probe placed it on, rescaled by each layout's own live steps (:func:`in_run`), and those steps against the model
(:func:`ratios_of`); what every run of a recorded cell shares (:func:`cell_runs`, the tie's ladder's too)."""
from __future__ import annotations

from .pools_live import layout_config
from .pools_live_probe import rescaled, step_ratios

__all__ = ["in_run", "ratios_of", "cell_runs", "kept"]


def in_run(c) -> dict:
    """{layout: [% within both SLOs, per seed]}: ``c``'s runs simulated again on the cost model its probe placed it
    on (``c.extra["cost"]``) rescaled by each layout's own live steps (``c.extra["steps"]``: decode steps by their
    ratio, prefills and fused hybrid steps by the hybrid steps' where the layout ran them, else the prefills'). What
    is left between this and the live attainment is the scheduler's model, not the probe's aim (the validation of
    chapter 7 fits again on a run's own steps for the same reason). ValueError: a cell without those records."""
    from ...costmodel import CostModel
    from ...serving import CostModelExecutor, attainment_curve
    kept(c, ("steps", "cost", "output_tokens", "min_requests", "max_requests"))
    now = CostModel(**c.extra["cost"])
    spec, configs, runs = cell_runs(c)
    out = {}
    for n in (c.winner, c.rival):
        r = c.extra["steps"].get(n, {})
        ex = CostModelExecutor(rescaled(now, r.get("hybrid", r.get("prefill", 1.0)), r.get("decode", 1.0)))
        out[n] = [100 * float(attainment_curve(spec, configs[n], ex, rates_per_worker=[c.rate_per_worker], seed=s,
                                               **runs).attainment.iloc[0]) for s in c.seeds]
    return out


def cell_runs(c) -> tuple:
    """(spec, {layout: ServingConfig}, runs): what every run of the recorded cell ``c`` shares, for
    :func:`splitlab.serving.attainment_curve` beside a rate and a seed: its prompts and answers (``spec``), its two
    layouts on its workers and link, and its SLOs and request limits (``runs``, keyword arguments). KeyError: a cell
    whose ``extra`` lacks output_tokens, min_requests or max_requests (its callers check first)."""
    from ...serving.workload import Fixed, WorkloadSpec
    link = {} if c.link_gbps is None else dict(link_bytes_per_s=c.link_gbps * 1e9, link_latency_s=0.0)
    spec = WorkloadSpec(f"{c.prompt_tokens}-token prompts", Fixed(c.prompt_tokens), Fixed(c.extra["output_tokens"]))
    configs = {n: layout_config(n, c.workers, [], trace=False, **link) for n in (c.winner, c.rival)}
    return spec, configs, dict(ttft_slo_s=c.ttft_slo_s, tpot_slo_s=c.tpot_slo_s, scale=1.0,
                               min_requests=c.extra["min_requests"], max_requests=c.extra["max_requests"])


def ratios_of(cost, log: list) -> dict:
    """{step kind: measured / predicted (median over the steps)} of a live run's ``log`` on ``cost``."""
    return {k: round(float(v), 3) for k, v in step_ratios(cost, log)["measured / predicted"].items()} if log else {}


def kept(c, keys) -> dict:
    """The cell ``c``'s ``extra`` once it holds every one of ``keys`` (what its runs' record kept), else ValueError
    naming those missing: a cell served before the record kept them."""
    extra = c.extra if isinstance(getattr(c, "extra", None), dict) else {}
    missing = [k for k in ((keys,) if isinstance(keys, str) else keys) if k not in extra]
    if missing:
        raise ValueError(f"the cell has no {missing} in its extra: served before the record kept them")
    return extra
