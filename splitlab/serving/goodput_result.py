"""What a goodput search found, and why, in words: :class:`GoodputResult` and the sentences of its ``reason``.

A search ends in one of three ways (``outcome``), each an answer rather than an error:

- ``"found"``: a rate passed and one above it failed, within the search's tolerance: the goodput is the rate
  that passed, and the reason gives both rates and their attainment.
- ``"unmet"``: no rate meets the SLOs: goodput 0. Either the cost model says so before any run (the shortest
  prompt's prefill alone is longer than the TTFT SLO, or one decode step than the TPOT SLO), or a *trickle* run
  (requests so far apart that each is served alone) still fell short of the target; the reason names the SLO
  most requests missed and its P90 against the SLO.
- ``"unbounded"``: no rate breaks the SLOs: a *burst* (every request of a run arriving at once) met them. The
  goodput is then the highest rate the search stepped to, a lower bound, and the reason says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

__all__ = ["GoodputResult", "BINDING", "OUTCOMES", "binding_of", "found_reason", "unmet_reason",
           "unbounded_reason", "lone_request_reason"]

#: what ``binding_slo`` may be: the SLO most requests missed at the lowest failing rate ("transfer": TTFT or TTST,
#: most of whose misses the KV hand-off caused)
BINDING = ("ttft", "ttst", "tpot", "unfinished", "transfer", "none")
#: how a search may end (module docstring)
OUTCOMES = ("found", "unmet", "unbounded")


@dataclass
class GoodputResult:
    """What :func:`~splitlab.serving.goodput` found for one configuration.

    Attributes:
        name: the configuration's name; workers: its workers (both pools).
        goodput_rps_per_worker: the highest tested rate per worker that passed (0.0 if none did; with
            ``outcome == "unbounded"`` the highest rate stepped to, a lower bound).
        goodput_rps: the same for the whole cluster (x workers).
        binding_slo: at the lowest failing rate, the SLO most requests missed: "ttft", "ttst" (the second
            token later than TTFT SLO + TPOT SLO), "tpot" or "unfinished"; "transfer" where it is TTFT or TTST
            and most of those misses were the KV hand-off's (each would have met the bound without its time on
            the link: ``metrics.slo_misses``); "none" if no tested rate failed.
        points: every run of the search, in the order walked (see :meth:`curve`).
        target, tolerance, duration_s: the search's settings.
        outcome: "found", "unmet" (no rate meets the SLOs: goodput 0) or "unbounded" (no rate breaks them).
        reason: one sentence saying why the goodput is what it is (module docstring).
    """

    name: str
    workers: int
    goodput_rps_per_worker: float
    binding_slo: str
    points: list[dict] = field(default_factory=list)
    target: float = 0.9
    tolerance: float = 0.03
    duration_s: float = 0.0
    outcome: str = "found"
    reason: str = ""

    @property
    def goodput_rps(self) -> float:
        return self.goodput_rps_per_worker * self.workers

    def curve(self) -> pd.DataFrame:
        """The attainment curve the search walked, sorted by rate: rate_per_worker, rate_per_s, attainment,
        passed, the misses of each SLO and TTFT / TTST / TPOT P90 (s)."""
        return pd.DataFrame(self.points).sort_values("rate_per_worker").reset_index(drop=True)

    def __repr__(self) -> str:
        return (f"GoodputResult({self.name}: {self.goodput_rps_per_worker:.4g} requests/s per worker x "
                f"{self.workers} workers, {self.outcome}, binding {self.binding_slo}, {len(self.points)} runs: "
                f"{self.reason})")


def binding_of(point: dict) -> str:
    """The SLO most requests of a run (one point of the curve) missed; "transfer" when that is TTFT or TTST and
    the KV hand-off caused most of the TTFT and TTST misses (``point["transfer"]``)."""
    counts = {k: point[k] for k in ("ttft", "ttst", "tpot", "unfinished")}
    slo = max(counts, key=counts.get)
    if slo in ("ttft", "ttst") and 2 * point.get("transfer", 0) > point["ttft"] + point["ttst"]:
        return "transfer"
    return slo


def _share(point: dict) -> str:
    """A run's attainment in words: '85%', or a bound for a run stopped once its verdict was decided."""
    bound = {"fail": "at most ", "pass": "at least "}.get(point.get("stopped"), "")
    return f"{bound}{point['attainment']:.0%}"


def _missed(point: dict, ttft_slo_s: float, tpot_slo_s: float) -> str:
    """'85 of 100 counted requests missed TTFT (P90 0.31 s against 0.05 s)' for the SLO most requests of
    ``point`` missed (of a run stopped early: the misses counted when its verdict was decided, without a P90)."""
    slo = binding_of(point)
    n, of = point[slo], point.get("counted", point["requests"])
    if slo == "unfinished":
        return f"{n} of {of} counted requests did not finish (rejected or failed)"
    if slo == "transfer":
        p90 = point.get("ttft_p90_s")
        tail = f"; P90 TTFT {p90:.3g} s against {ttft_slo_s:.3g} s" if p90 is not None else ""
        return (f"{n} of {of} counted requests missed TTFT or TTST because of the KV transfer (each would have met "
                f"it without its time on the link{tail})")
    bound = dict(ttft=ttft_slo_s, ttst=ttft_slo_s + tpot_slo_s, tpot=tpot_slo_s)[slo]
    extra = " = TTFT SLO + TPOT SLO" if slo == "ttst" else ""
    if point.get("stopped") == "fail":
        return f"{n} of {of} counted requests had missed {slo.upper()} ({bound:.3g} s{extra}) when the run stopped"
    p90 = point[f"{slo}_p90_s"]
    return f"{n} of {of} counted requests missed {slo.upper()} (P90 {p90:.3g} s against {bound:.3g} s{extra})"


def found_reason(passed: dict, failed: dict, ttft_slo_s: float, tpot_slo_s: float) -> str:
    """Why a bracketed search's goodput is where it is: the rate that passed and the one that failed."""
    return (f"{_share(passed)} met the SLOs at {passed['rate_per_worker']:.4g} requests/s per worker, "
            f"{_share(failed)} at {failed['rate_per_worker']:.4g}: {_missed(failed, ttft_slo_s, tpot_slo_s)}")


def unmet_reason(trickle: dict, target: float, ttft_slo_s: float, tpot_slo_s: float) -> str:
    """Why no rate meets the SLOs, from a run at a trickle (each request served alone) that still failed."""
    return (f"no rate meets the SLOs: even at a trickle ({trickle['rate_per_worker']:.3g} requests/s per worker, "
            f"each request served alone) only {_share(trickle)} of requests met them (target "
            f"{target:.0%}); {_missed(trickle, ttft_slo_s, tpot_slo_s)}")


def unbounded_reason(highest: float, burst: dict) -> str:
    """Why the goodput is only a lower bound: a burst of a whole run met the SLOs."""
    return (f"no rate breaks the SLOs: every rate tried met them, even all {burst['requests']} requests of a run "
            f"arriving at once ({_share(burst)} met them); the goodput shown is the highest rate stepped "
            f"to, {highest:.4g} requests/s per worker, a lower bound: tighten the SLOs to find where they break")


def lone_request_reason(cost, requests, slos: tuple[float, float], target: float) -> tuple[str, str] | None:
    """Why no rate meets the SLOs on a cost model, before any run, or None (no cost model, or no such reason):
    the shortest prompt's prefill alone longer than the TTFT SLO, or one decode step of one request longer than
    the TPOT SLO while more than ``1 - target`` of the requests have a TPOT (more than one output token).
    Returns ``(binding SLO, reason)``."""
    if not hasattr(cost, "prefill_s") or not hasattr(cost, "decode_s"):
        return None
    (ttft, tpot), shortest = slos, min(r.prompt_len for r in requests)
    prefill, step = cost.prefill_s(shortest), cost.decode_s(1, shortest + 1)
    if prefill > ttft:
        return "ttft", (f"no rate meets a TTFT SLO of {ttft:g} s: one prefill of the workload's shortest prompt "
                        f"({shortest} tokens) takes {prefill:.3g} s on this cost model")
    if step > tpot and sum(r.max_new_tokens > 1 for r in requests) > (1 - target) * len(requests):
        return "tpot", (f"no rate meets a TPOT SLO of {tpot:g} s: one decode step of a single request after the "
                        f"workload's shortest prompt ({shortest} tokens) takes {step:.3g} s on this cost model")
    return None
