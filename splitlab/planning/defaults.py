"""SLOs and a request rate from the device's own costs, for a run whose user named none (chapter 6's rule).

Fixed SLOs mean different things on different machines: 1 s to the first token is generous for a GPU and out of
reach for a busy 2-core CPU, whose runs then show 0-2% attainment whatever the layout. Chapter 6 instead builds
its SLOs on the cost model of the device that runs them, and so does :func:`choose_defaults`:

- **TTFT SLO = 5 t_p**, ``t_p`` the mean predicted prefill of the workload's prompts (``cost.prefill_s``): the
  first token within five mean prefills, room for a short queue.
- **TPOT SLO = 2.5 t_d**, ``t_d`` one decode step of a lone stream at the mean prompt length (``cost.decode_s(1,
  mean prompt)``): a stream at most 2.5 times slower than undisturbed.
- **Rate, below capacity**: 70% of the lowest simulated goodput of the layouts within those SLOs
  (:func:`splitlab.serving.goodput`, on the same cost model), so that every layout should meet them and a
  comparison shows *how* (the split's TPOT, colocated TTFT). Chapter 6 serves its live comparison halfway between
  the goodputs instead, where one layout should hold and the other not; on a shared CPU whose speed drifts by a
  third within an hour, runs that close to a boundary land on either side of it (measured: the README's
  ``compare`` at that rate gave the layout predicted to hold 38% and the other 94%).

Neither SLO is derived from any layout's predicted latency, only from single steps.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..costmodel import CostModel
from ..serving import CostModelExecutor, ServingConfig, goodput, workload_requests

__all__ = ["choose_defaults", "Chosen", "NoDefault", "TTFT_PREFILLS", "TPOT_STEPS", "RATE_SHARE"]

TTFT_PREFILLS = 5     # the TTFT SLO in mean prefills (chapter 6)
TPOT_STEPS = 2.5      # the TPOT SLO in lone decode steps (chapter 6)
RATE_SHARE = 0.7      # the rate: this share of the lowest simulated goodput of the layouts served


class NoDefault(ValueError):
    """An SLO left out that cannot be chosen from the cost model (its phase takes 0 s): the caller must give it."""


def _sig(x: float) -> float:
    """``x`` to 3 significant digits (an SLO printed and used as the same number)."""
    return float(f"{x:.3g}")


def _ms(seconds: float) -> str:
    """``seconds`` in ms to 3 significant digits without an exponent: 1,730 rather than 1.73e+03."""
    return f"{_sig(seconds * 1e3):,.0f}" if seconds >= 0.1 else f"{seconds * 1e3:.3g}"


def _kinds(configs) -> str:
    """'a list' or 'a dict of str' (what a wrong ``configs`` is, without its whole repr)."""
    kind = f"a {type(configs).__name__}"
    if isinstance(configs, Mapping):
        kind += " of " + ", ".join(sorted({type(c).__name__ for c in configs.values()}))
    return kind


@dataclass
class Chosen:
    """What :func:`choose_defaults` set and why: ``ttft_slo_s``, ``tpot_slo_s``, ``rate_per_s`` (requests/s of the whole
    cluster; None if it was not asked for), ``t_p`` and ``t_d`` (s), ``derived`` (the names it chose, not given)
    and ``why`` (one sentence per chosen value)."""

    ttft_slo_s: float
    tpot_slo_s: float
    rate_per_s: float | None
    t_p: float
    t_d: float
    derived: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(ttft_slo_s=self.ttft_slo_s, tpot_slo_s=self.tpot_slo_s, rate_per_s=self.rate_per_s,
                    t_p_s=self.t_p, t_d_s=self.t_d, derived=self.derived, why=self.why)


def choose_defaults(cost: CostModel | None, workload, configs: Mapping[str, ServingConfig] | None = None, *,
           ttft_slo_s: float | None = None, tpot_slo_s: float | None = None, rate: bool = False,
           seed: int = 0, scale: float | None = None, max_requests: int = 400) -> Chosen:
    """The SLOs the caller left None, and with ``rate=True`` a request rate for ``configs`` (module docstring).

    Args:
        cost: the cost model of the device (a calibration's ``.cost``; None: the built-in one).
        workload: a workload name or :class:`~splitlab.serving.WorkloadSpec` (lengths sized to the cost model's
            context unless ``scale``); ``seed``: of its request set.
        configs: name -> layout; the rate is chosen for them: 70% of the lowest of their goodputs, in requests/s
            of the whole cluster.
        ttft_slo_s, tpot_slo_s: given SLOs (kept) or None (chosen).
        rate: choose a rate too. max_requests: per goodput run (small: the rate needs no 3% precision).

    Returns:
        a :class:`Chosen`.

    Raises:
        ValueError: ``rate`` without ``configs``, SLOs given that are not finite times > 0, ``max_requests`` not an
            integer >= 2; and those of :func:`~splitlab.serving.goodput`. NoDefault (a ValueError): an SLO left
            None whose phase takes 0 s on the cost model.
        TypeError: ``rate`` not a bool, ``configs`` not a mapping of names to ServingConfig.
    """
    if not isinstance(rate, bool):
        raise TypeError(f"rate must be True (choose a rate too) or False, got {rate!r}")
    if rate and not configs:
        raise ValueError("choosing a rate needs the layouts it is for (configs)")
    if configs is not None and not (isinstance(configs, Mapping) and
                                    all(isinstance(c, ServingConfig) for c in configs.values())):
        raise TypeError(f"configs must map names to ServingConfig layouts, got {_kinds(configs)}")
    for name, slo in (("ttft_slo_s", ttft_slo_s), ("tpot_slo_s", tpot_slo_s)):
        if slo is not None and not (isinstance(slo, numbers.Real) and not isinstance(slo, bool) and 0 < slo < math.inf):
            raise ValueError(f"{name} must be a finite time > 0 s (or None: chosen), got {slo!r}")
    if isinstance(max_requests, bool) or not isinstance(max_requests, numbers.Integral) or max_requests < 2:
        raise ValueError(f"max_requests must be an integer >= 2 (the requests the SLOs are averaged over, and a "
                         f"goodput run's most), got {max_requests!r}")
    ex = CostModelExecutor(cost)
    requests = workload_requests(workload, max_requests, 1.0, ex, seed, scale)
    prompts = np.array([r.prompt_len for r in requests])
    outputs = np.array([r.max_new_tokens for r in requests])
    t_p = float(np.mean([ex.cost.prefill_s(int(n)) for n in prompts]))
    t_d = float(ex.cost.decode_s(1, float(prompts.mean())))
    for name, given, t, what in (("ttft_slo_s", ttft_slo_s, t_p, "prefill"), ("tpot_slo_s", tpot_slo_s, t_d, "decode")):
        if given is None and not t > 0:  # 5 x 0 s was an SLO of 0 s, refused as if the caller had given it
            raise NoDefault(f"{name} cannot be chosen from this cost model ({ex.cost.source}): it predicts a {what} "
                             f"of 0 s, free at any rate; give {name}")
    derived, why = [], []
    if ttft_slo_s is None:
        ttft_slo_s = _sig(TTFT_PREFILLS * t_p)
        derived.append("ttft_slo_s")
        why.append(f"TTFT SLO {ttft_slo_s:g} s: {TTFT_PREFILLS} mean prefills (t_p = {_ms(t_p)} ms over prompts "
                   f"of {prompts.mean():.0f} tokens on average)")
    if tpot_slo_s is None:
        tpot_slo_s = _sig(TPOT_STEPS * t_d)
        derived.append("tpot_slo_s")
        why.append(f"TPOT SLO {tpot_slo_s:g} s: {TPOT_STEPS:g} decode steps of a lone stream (t_d = {_ms(t_d)} "
                   f"ms)")
    chosen = None
    if rate:
        found = {name: goodput(requests, cfg, ex, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s,
                               min_requests=min(100, max_requests), max_requests=max_requests, prefixes=True)
                 for name, cfg in configs.items()}
        total = {name: g.goodput_rps for name, g in found.items()}
        if max(total.values()) <= 0:  # no layout meets them: one request at a time per worker, half the time
            workers = max(cfg.n_workers for cfg in configs.values())
            chosen = _sig(0.5 * workers / (t_p + outputs.mean() * t_d))
            how = (f"no layout meets these SLOs at any rate on the cost model ({next(iter(found.values())).reason}); "
                   f"each worker busy half the time with one request")
        else:
            chosen = _sig(RATE_SHARE * min(g for g in total.values() if g > 0))
            how = (f"{RATE_SHARE:.0%} of the simulated goodput within these SLOs (" +
                   ", ".join(f"{name} {g:.3g}/s" + (", a lower bound: no rate breaks them" if
                             found[name].outcome == "unbounded" else "") for name, g in total.items()) +
                   (")" if len(total) == 1 else "; the lowest): every layout should meet them"))
        derived.append("rate_per_s")
        why.append(f"rate {chosen:g} requests/s: {how}")
    return Chosen(ttft_slo_s, tpot_slo_s, chosen, t_p, t_d, derived, why)
