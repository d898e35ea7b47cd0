"""Where a cell of chapter 7's steady-state check is served (:mod:`.map_steady`'s first steps): placed on this machine
by a probe, then again by a pilot of real serving.

A shared CPU runs the same step slower or faster from one minute to the next, so a cell is put back at its map
coordinates (prefill cost and TPOT SLO in lone decode steps) on the cost model rescaled to the machine's speed now,
and both layouts' goodputs are searched again there (:func:`place`). The first speed is the probe's
(:func:`~.pools_live_probe.step_probe`: six requests on one idle worker). Its batches are not a loaded cluster's: in
the record of 2026-12-05 every layout's live decode steps ran 1.11-1.26x the model the probe placed, so every cell
was served nearer its winner's goodput, or past it, than the middle it aimed at. So a **pilot** (:func:`pilot`)
then serves the cell on both layouts for :data:`PILOT_LIFETIMES` request lifetimes at the rate the probe's placement
found, on the real model, in the runs' own kind; the model is rescaled by the steps those runs measured, pooled over
both layouts (one factor for prefills, one for decode steps: :func:`pooled_factors`), and the cell is placed again.
"""
from __future__ import annotations

import inspect
import math
import numbers

import numpy as np

from .pools_live_args import check_map, whole
from .pools_live_probe import cell_now, step_ratios

__all__ = ["PILOT_LIFETIMES", "settings_of", "place", "pilot_requests", "pilot", "pooled_factors"]

#: a pilot's arrivals span this many request lifetimes (a run of the check spans 20): long enough for each layout's
#: batches to reach their steady size, a fifth of a run's cost
PILOT_LIFETIMES = 4

#: the settings :func:`settings_of` reads and :func:`place` needs
SETTINGS = ("max_requests", "min_requests", "tolerance", "extend")


def _positive(name: str, v) -> float:
    """``v`` as a float when a finite number > 0 (numpy's too; not a bool), else ValueError naming ``name``."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or not 0 < float(v) < math.inf:
        raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    return float(v)


def _whole(name: str, v, low: int) -> int:
    """``v`` as an int when a whole number >= ``low`` (numpy's too; not a bool), else ValueError naming ``name``."""
    if not whole(v) or v < low:
        raise ValueError(f"{name} must be a whole number >= {low}, got {v!r}")
    return int(v)


def _check_configs(configs) -> None:
    """ValueError unless ``configs`` is a non-empty dict {layout name: ServingConfig} (none gave a rate of 1)."""
    if not isinstance(configs, dict) or not configs:
        raise ValueError(f"configs must be a non-empty dict {{layout name: ServingConfig}}, got {configs!r:.80}")


def search_defaults() -> dict:
    """:func:`~splitlab.planning.split_map.split_map`'s search settings by default ({setting: value} of
    :data:`SETTINGS`): what a map that records none, and a cell placed with them, were searched with."""
    from ...planning.split_map import split_map
    defaults = inspect.signature(split_map).parameters
    return {k: defaults[k].default for k in SETTINGS}


def settings_of(m) -> dict:
    """The map's search settings (``max_requests``, ``min_requests``, ``tolerance``, ``extend``): its own record,
    else :func:`~splitlab.planning.split_map.split_map`'s defaults (a map built by hand records none). TypeError:
    ``m`` not a split map, its ``search`` not a dict (an AttributeError was all it said)."""
    if not all(hasattr(m, a) for a in ("cells", "workers", "search")):
        check_map(m)  # a dict of maps, say: its TypeError names what was given
        raise TypeError(f"m must be a split map with its search settings, got {type(m).__name__} without 'search'")
    defaults = search_defaults()
    search = m.search or {}
    if not isinstance(search, dict):
        raise TypeError(f"m.search must be a dict of the map's search settings, got {type(search).__name__}")
    return {k: search.get(k, defaults[k]) for k in SETTINGS}


def place(m, cell, configs: dict, cost_now, settings: dict, tie_rate: float) -> dict:
    """``cell`` of the map ``m`` put back at its coordinates on ``cost_now`` (:func:`~.pools_live_probe.cell_now`)
    and both layouts' (``configs``: {name: ServingConfig}) goodputs per worker searched again there with the map's
    own search settings (``settings``: :func:`settings_of`) and seed. Returns {"prompt": tokens, "ttft_s", "tpot_s",
    "spec": the cell's WorkloadSpec, "goodput": {name: requests/s per worker}, "rate_per_worker": their geometric
    mean (times ``tie_rate`` for a tie), "lifetime_s": TTFT SLO + (answer tokens - 1) x TPOT SLO, the unit of a
    goodput run's length}. ValueError, before any search: ``configs`` not a non-empty dict (none gave a rate of 1
    in silence), ``settings`` missing a setting, ``tie_rate`` not a finite number > 0."""
    from ...serving import CostModelExecutor, goodput
    _check_configs(configs)
    if not isinstance(settings, dict) or any(k not in settings for k in SETTINGS):
        raise ValueError(f"settings must be a dict of {SETTINGS} (settings_of's), got {settings!r:.120}")
    tie_rate = _positive("tie_rate", tie_rate)
    from ...serving.workload import Fixed, WorkloadSpec
    prompt, ttft, tpot = cell_now(m, cell, cost_now)
    spec = WorkloadSpec(f"{prompt}-token prompts", Fixed(prompt), Fixed(m.output_tokens))
    sim = CostModelExecutor(cost_now)
    good = {n: goodput(spec, c, sim, ttft_slo_s=ttft, tpot_slo_s=tpot, max_requests=settings["max_requests"],
                       min_requests=settings["min_requests"], tolerance=settings["tolerance"],
                       extend=settings["extend"], seed=m.seed).goodput_rps_per_worker for n, c in configs.items()}
    rate = float(np.sqrt(np.prod([max(g, 1e-9) for g in good.values()]))) * (tie_rate if cell.winner == "tie" else 1)
    return dict(prompt=int(prompt), ttft_s=float(ttft), tpot_s=float(tpot), spec=spec, goodput=good,
                rate_per_worker=rate, lifetime_s=float(ttft + (m.output_tokens - 1) * tpot))


def pilot_requests(rate_per_worker: float, workers: int, lifetime_s: float, cap: int) -> int:
    """Requests of a pilot: arrivals spanning :data:`PILOT_LIFETIMES` lifetimes of ``lifetime_s`` at the cluster's
    rate (``rate_per_worker`` x ``workers``), at least 8 and at most ``cap`` (the runs' own cap). ValueError naming
    the argument: ``rate_per_worker`` or ``lifetime_s`` not a finite number > 0 (NaN was "cannot convert float NaN
    to integer", a negative rate 8 requests in silence), ``workers`` not a whole number >= 1, ``cap`` not >= 2."""
    rate_per_worker, lifetime_s = _positive("rate_per_worker", rate_per_worker), _positive("lifetime_s", lifetime_s)
    workers, cap = _whole("workers", workers, 1), _whole("cap", cap, 2)
    n = math.ceil(PILOT_LIFETIMES * lifetime_s * rate_per_worker * workers) + 1
    return int(min(cap, max(8, n)))


def pooled_factors(cost, logs) -> tuple[float, float]:
    """(prefill, decode): the medians of the measured / predicted ratios of the steps of all ``logs`` (executors'
    ``step_log``, pooled) on ``cost``: the prefill factor from lone prefills (fused hybrid steps where no run had a
    lone prefill), the decode factor from decode steps. A kind no run made keeps its factor 1. ValueError: ``logs``
    not a list of step logs (one log alone was "string indices must be integers"), those of :func:`step_ratios`
    (a step of an unknown kind, a step ``cost`` predicts at 0 s), a factor not finite and > 0 (steps timed at 0 s
    or NaN: a factor :func:`~.pools_live_probe.rescaled` refuses, after the pilot's minutes)."""
    given = list(logs) if hasattr(logs, "__iter__") and not isinstance(logs, (str, dict)) else None
    if given is None or not all(isinstance(log, (list, tuple)) for log in given):
        raise ValueError(f"logs must be a list of step logs (each a list of step dicts), got {logs!r:.80}")
    steps = [s for log in given for s in log]
    table = step_ratios(cost, steps) if steps else None

    def factor(*kinds) -> float:
        for k in kinds:
            if table is not None and k in table.index:
                got = float(table.loc[k, "measured / predicted"])
                if not 0 < got < math.inf:
                    raise ValueError(f"logs: the {k} steps ran {got!r} x the model's time: no factor to rescale by")
                return got
        return 1.0
    return factor("prefill", "hybrid"), factor("decode")


def pilot(placed: dict, configs: dict, lm, cost_now, workers: int, runs: dict, seed: int) -> dict:
    """Serve ``placed`` (:func:`place`'s) on every layout of ``configs`` for :data:`PILOT_LIFETIMES` lifetimes at its
    rate on the real model (``lm``, emulated; ``runs``: the check's run settings, ``max_requests`` its cap), seed
    ``seed``, and time every step against ``cost_now``. Returns {"rate_per_worker", "requests", "seed", "attainment":
    {name: %}, "steps": {name: {step kind: measured / predicted}}, "prefill", "decode": the pooled factors
    (:func:`pooled_factors`)}. ValueError before any run: ``runs`` not a dict with ``max_requests``, ``configs``
    not a non-empty dict, those of :func:`pilot_requests`."""
    from ...serving import ModelExecutor, attainment_curve
    from .map_steady_in_run import ratios_of
    if not isinstance(runs, dict) or "max_requests" not in runs:
        raise ValueError(f"runs must be a dict of the check's run settings with max_requests, got {runs!r:.80}")
    _check_configs(configs)
    n = pilot_requests(placed["rate_per_worker"], workers, placed["lifetime_s"], runs["max_requests"])
    logs, held = {}, {}
    for name, cfg in configs.items():
        ex = ModelExecutor(lm)
        ex.step_log = []
        row = attainment_curve(placed["spec"], cfg, ex, seed=seed, **{**runs, "min_requests": n, "max_requests": n,
                                                                      "rates_per_worker": [placed["rate_per_worker"]]})
        held[name], logs[name] = 100 * float(row.attainment.iloc[0]), ex.step_log
    prefill, decode = pooled_factors(cost_now, logs.values())
    return dict(rate_per_worker=placed["rate_per_worker"], requests=n, seed=seed, attainment=held,
                steps={k: ratios_of(cost_now, v) for k, v in logs.items()}, prefill=prefill, decode=decode)

