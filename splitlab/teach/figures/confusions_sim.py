"""Chapter 8's section 1 against its simulator, in sentences computed from the page's runs (re-exported by
:mod:`.confusions`):

- :func:`simulator_note`: how far the simulator's TTFT and ITL P99 are from the live runs of the same requests, per
  layout, and how the live steps compared with the cost model's seconds for the same steps (the simulator's only
  input besides the scheduler).
- :func:`goodput_note`: why a printed goodput need not sit where its curve crosses 90%: the curve's points and the
  goodput search's runs are two different run sets (their sizes and what they count, from
  :mod:`splitlab.serving.goodput_runs`), with each layout's crossing and the search's own run at its goodput.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from ...serving.goodput_runs import COOLDOWN_LIFETIMES, LIFETIMES, MIN_REQUESTS, WARMUP_LIFETIMES
from ...serving.goodput_spread import INDIFFERENCE
from .split_tables import decode_steps
from .style import and_list, fmt2, fmt3

#: a simulated TTFT short of the live one by more than this share, every mean step within it, is said unexplained
TOLERANCE = 0.25

__all__ = ["simulator_note", "goodput_note", "step_ratios", "crossing"]


def step_ratios(res, cost) -> dict:
    """The live steps of ``res`` (a traced ServingResult) against ``cost``'s seconds for the same steps, as ratios of
    the means (measured / predicted): ``decode`` over every decode step at its batch and context
    (:func:`.split_tables.decode_steps`; not the decode rows of a hybrid step, which a chunk's row goes on from)
    and ``slowest decode``, the largest ratio of one such step; ``prefill`` over every step that prefilled one
    whole prompt alone (``cost.prefill_s(tokens)``; a chunk or a batch of prompts is left out). NaN where the run
    had no such step."""
    tl = res.timeline
    d = decode_steps(res, cost)  # one row per decode row of the timeline, in its order
    chunk_starts = set(zip(tl.worker[tl.kind == "prefill"], tl.start_s[tl.kind == "prefill"]))
    alone = [(w, e) not in chunk_starts for w, e in zip(tl.worker[tl.kind == "decode"], tl.end_s[tl.kind == "decode"])]
    d = d[np.array(alone, dtype=bool)]  # a decode row a chunk's row goes on from is part of a hybrid step: left out
    out = {"decode": float(d.measured_s.sum() / d.predicted_s.sum()) if len(d) else float("nan"),
           "slowest decode": float((d.measured_s / d.predicted_s).max()) if len(d) else float("nan")}
    prompts = {r.id: r.prompt_len for r in res.requests}
    whole = [(r.end_s - r.start_s, cost.prefill_s(int(r.tokens))) for r in tl[tl.kind == "prefill"].itertuples()
             if len(r.request_ids) == 1 and int(r.tokens) == prompts[list(r.request_ids)[0]]]
    out["prefill"] = float(sum(m for m, _ in whole) / sum(p for _, p in whole)) if whole else float("nan")
    return out


def simulator_note(runs: Mapping[str, object], simulated: Mapping[str, object], cost) -> str:
    """Markdown: per layout, the simulator's mean TTFT and ITL P99 against the live run's (``runs`` and
    ``simulated``: name -> ServingResult of the same requests), as "simulated / measured" ratios, then the reason
    the page can compute: the live prefills and decode steps against ``cost``'s seconds for the same steps
    (:func:`step_ratios`), which is all the simulator charges; where the simulated TTFT falls short by more than
    :data:`TOLERANCE` while every mean step is within it, that these means leave part of the gap unexplained."""
    off, why, tail = [], [], []
    for name, res in runs.items():
        m, s = res.metrics(), simulated[name].metrics()
        tt, itl = s["ttft_s"]["mean"] / m["ttft_s"]["mean"], s["itl_s"]["p99"] / m["itl_s"]["p99"]
        off.append(f"{name} TTFT {fmt3(s['ttft_s']['mean'] * 1e3)} ms simulated against "
                   f"{fmt3(m['ttft_s']['mean'] * 1e3)} measured ({fmt2(tt)}x), ITL P99 {fmt2(itl)}x")
        r = step_ratios(res, cost)
        live_t, sim_t = res.request_table().transfer_s.mean(), simulated[name].request_table().transfer_s.mean()
        r["transfer"] = live_t / sim_t if sim_t > 0 else float("nan")  # the same requests: the same bytes
        said = [f"{k} {fmt2(v)}x" for k, v in (("decode steps", r["decode"]), ("whole prefills", r["prefill"]),
                                                ("KV transfers", r["transfer"])) if np.isfinite(v)]
        if said and np.isfinite(r["slowest decode"]):
            said[0] += f" (the slowest {fmt2(r['slowest decode'])}x)"
        if said:
            why.append(f"{name} {and_list(said)}")
        means = [v for k, v in r.items() if k != "slowest decode" and np.isfinite(v)]
        if tt < 1 - TOLERANCE and means and max(means) <= 1 + TOLERANCE:  # live far slower, its steps hardly
            tail.append((name, 1 / tt, r["slowest decode"], res.config.layout == "disaggregated"))
    text = ("**How far the simulator is off on these requests.** " + "; ".join(off) + ". ")
    if why:
        text += ("The simulator charges each step the cost model's seconds, fitted to steps timed alone; inside the "
                 "live runs the steps took these multiples of those seconds for the same steps (a decode step at its "
                 "batch and context, a prompt prefilled whole and alone, a request's cache moved): "
                 + "; ".join(why) + ". A ratio above 1 makes the live run slower than its simulation, and a queue "
                 "turns a slower step into a longer wait.")
    for name, gap, slowest, split in tail:
        text += (f" For {name} the TTFT is {fmt2(gap)}x the simulator's while its steps were at most {TOLERANCE:.0%} "
                 f"slower on average (its slowest decode step {fmt2(slowest)}x): only a queue amplifying those slower "
                 "steps, or time outside the steps compared here" + (
                     " (a split request's first token leaves when its decode worker admits it, after the decode step "
                     "in progress)" if split else "") + ", can make up the rest; this page does not break it down "
                 "further.")
    return text


def crossing(curve: pd.DataFrame, target: float = 0.9) -> float | None:
    """Where a curve (columns ``rate_per_s``, ``slo_attainment``, any order) first falls below ``target``, by linear
    interpolation between the last point at or above it and the next one (requests/s); None when it never falls
    below it or starts below it."""
    c = curve.sort_values("rate_per_s")
    x, y = c.rate_per_s.to_numpy(float), c.slo_attainment.to_numpy(float)
    below = np.flatnonzero(y < target)
    if not len(below) or below[0] == 0:
        return None
    i = below[0]
    return float(x[i - 1] + (y[i - 1] - target) / (y[i - 1] - y[i]) * (x[i] - x[i - 1]))


def goodput_note(sweep: pd.DataFrame, searched: Mapping[str, object], n_requests: int, target: float = 0.9) -> str:
    """Markdown: what the printed goodput is against the curves of ``sweep`` (:func:`.confusions_runs.rate_sweep`,
    ``n_requests`` a point, total requests/s): each of ``searched`` (name -> :class:`splitlab.serving.goodput_search`
    GoodputResult) is the bisection's highest passing rate on runs of its own; per layout, where its curve falls
    below ``target`` (per worker) beside its goodput and the search's run at that rate."""
    parts = []
    for name, g in searched.items():
        cross = crossing(sweep[sweep.config == name], target)
        low = sweep[sweep.config == name].slo_attainment.min() >= target
        at = (f"its curve falls below {target:.0%} at {fmt3(cross)} requests/s on the axis, {fmt3(cross / g.workers)} "
              "per worker" if cross is not None else
              f"its curve {'never falls below' if low else 'starts below'} {target:.0%} (rates up to "
              f"{fmt3(sweep.rate_per_s.max() / g.workers)} per worker)")
        run = g.curve()
        run = run[run.passed & np.isclose(run.rate_per_worker, g.goodput_rps_per_worker)]
        there = (f"; the search's run there met both SLOs for {run.attainment.iloc[-1]:.0%} of "
                 f"{int(run.counted.iloc[-1]):,} counted requests" if len(run) else "")
        parts.append(f"{name}: goodput {fmt3(g.goodput_rps_per_worker)}, {at}{there}")
    return (f"**Why a goodput is not where its curve crosses {target:.0%}.** Each point of a curve is one run of "
            f"{n_requests} requests (one seeded set) from idle workers, every request counted, "
            f"and its axis is the rate of the whole cluster. Each printed goodput is per worker, the highest rate the "
            f"bisection passed on runs of its own: at least {MIN_REQUESTS:,} requests arriving over {LIFETIMES:g} "
            f"request lifetimes, the first {WARMUP_LIFETIMES:g} and the last {COOLDOWN_LIFETIMES:g} lifetimes' "
            f"arrivals not counted, a run going on while its own spread leaves its verdict open, and an attainment "
            f"within {INDIFFERENCE * 100:.0f} points of {target:.0%} may be judged on either side. A short run holds "
            f"one draw of bursts, so the two need not agree: " + "; ".join(parts) + ".")
