"""Does chapter 7's map change when its goodput runs are steady-state long?

Each map of the chapter (the CPU map on this machine's calibration of the ``tiny`` model, its own link only; the
H100 map of Llama-3-8B on the roofline) made again at three run lengths:

- ``400``: ``max_requests=400`` (runs of 100 .. 400 requests, plain: what the chapter's CPU map runs);
- ``2000``: ``max_requests=2000`` (runs of 100 .. 2,000: the chapter's GPU map);
- ``steady``: goodput's own run sizing (20 request lifetimes, at least 2,000 and at most 4,000 requests) going on
  up to 8 x while unsettled (``min_requests=None, max_requests=4000, extend=8``: goodput's defaults);
- ``planner``: the planner's runs (at least 2,000, at most 3,000 requests, 20 lifetimes, plain: ``extend=1``);
- ``2000s``: runs of exactly 2,000 requests (``min_requests=None, max_requests=2000``), plain.

Per cell: each setting's winner, margin and goodputs; then the winner changes against ``steady`` and each
layout's goodput ratio to it (the bias of short runs), and each map's CPU seconds (this process's), searches and
runs. ``--extra name=JSON`` adds a setting of further split_map keywords.

    python benchmarks/map_run_length.py [--maps cpu,h100] [--settings 400,2000,steady] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import splitlab as sl
from splitlab.planning import split_map as SM
from splitlab.serving import goodput_runs

SETTINGS = {"400": dict(max_requests=400), "2000": dict(max_requests=2000),
            "steady": dict(max_requests=4000, min_requests=None, extend=8),
            "planner": dict(max_requests=3000, min_requests=None, extend=1),
            "2000s": dict(max_requests=2000, min_requests=None, extend=1)}
KINDS = SM.KINDS
SHORT = {"split": "split", "prefill-first": "pf", "chunked": "chunk", "tie": "tie", "none": "none"}


class Count:
    """Runs and requests served by every goodput run made while it is on (Runs.__call__ wrapped)."""

    def __init__(self):
        self.runs = self.requests = 0
        self.orig = goodput_runs.Runs.__call__

    def __enter__(self):
        count = self

        def call(runs, rate, early=True):
            point = count.orig(runs, rate, early)
            count.runs += 1
            count.requests += point["requests"]
            return point
        goodput_runs.Runs.__call__ = call
        return self

    def __exit__(self, *exc):
        goodput_runs.Runs.__call__ = self.orig


def cpu_cost():
    """Chapter 7's CPU cost model: ``tiny`` calibrated (or reused within the hour), its own link."""
    import tempfile

    from splitlab.phases.cpu_threads import pin_threads
    pin_threads(1)  # notebook.setup()'s one CPU thread
    lm = sl.load_model("tiny")
    if lm.device.type == "cpu":
        sl.phases.device.set_cpu_clock("thread")
    cal = sl.profiling.calibrate_or_reuse(lm)
    print(cal.meta["shared"], flush=True)
    path = sl.costmodel.save(cal, os.path.join(tempfile.mkdtemp(), "cal.json"))
    cost = sl.costmodel.load(path, model="tiny").cost
    return cost.over_link("25 Gb/s network"), dict(prompt_tokens=SM.prompt_axis(cost, 16, 1024, 4),
                                                   tpot_steps=(1.5, 2.5, 5.0, 10.0))


def h100_cost():
    """Chapter 7's GPU map: Llama-3-8B on 4 H100s, bf16, the roofline."""
    cost = sl.costmodel.roofline_cost_model("Llama-3-8B", "H100", "bf16")
    return cost, dict(prompt_tokens=SM.prompt_axis(cost, 64, 8000, 4), tpot_steps=(1.5, 2.5, 5.0))


def make(cost, axes, setting: dict) -> dict:
    with Count() as count:
        t0 = time.process_time()
        m = SM.split_map(cost, 4, progress=False, **axes, **setting)
        cpu_s = time.process_time() - t0
    cells = [dict(prompt=c.prompt_tokens, tpot_steps=c.tpot_steps, winner=c.winner, leader=c.leader,
                  margin=c.margin, goodput=dict(c.goodput), names=dict(c.names)) for c in m.cells]
    return dict(cpu_s=cpu_s, searches=m.searches, runs=count.runs, requests=count.requests, cells=cells)


def grid(cost, axes, setting: dict) -> str:
    """Chapter 7's whole CPU grid (``split_map_grid`` over its three links) at ``setting``: CPU seconds, runs."""
    from splitlab.teach.widgets.split_map import split_map_grid
    with Count() as count:
        t0 = time.process_time()
        maps = split_map_grid(cost, links_gbps=(None, 0.1, 0.01), workers=4, progress=False, **axes, **setting)
        cpu_s = time.process_time() - t0
    counts = "; ".join(f"{g}: {m.counts()}" for g, m in maps.items())
    return f"grid of 3 links {setting}: {cpu_s:.1f} CPU s, {count.runs} runs, {count.requests:,} requests ({counts})"


def report(name: str, res: dict, ref: str = "steady") -> list[str]:
    out = [f"== {name} map: " + ", ".join(f"{k}: {v['cpu_s']:.1f} CPU s, {v['searches']} searches, {v['runs']} runs "
                                          f"({v['runs'] / max(v['searches'], 1):.1f}/search), "
                                          f"{v['requests']:,} requests" for k, v in res.items())]
    keys = list(res)
    head = f"{'prompt':>6} {'tpot':>4} " + " ".join(f"{k + ' winner':>13} {'margin':>6} {'split':>7} {'pf':>7} "
                                                   f"{'chunk':>7}" for k in keys)
    out.append(head)
    for i, c0 in enumerate(res[keys[0]]["cells"]):
        row = f"{c0['prompt']:>6} {c0['tpot_steps']:>4g} "
        for k in keys:
            c = res[k]["cells"][i]
            g = c["goodput"]
            row += (f"{SHORT[c['winner']] + '/' + SHORT[c['leader']]:>13} {c['margin']:>6.1%} "
                    f"{g['split']:>7.4g} {g['prefill-first']:>7.4g} {g['chunked']:>7.4g} ")
        out.append(row.rstrip())
    if ref in res:
        for k in keys:
            if k == ref:
                continue
            pairs = list(zip(res[k]["cells"], res[ref]["cells"]))
            flips = [f"{a['prompt']}/{a['tpot_steps']:g}: {a['winner']} -> {b['winner']}" for a, b in pairs
                     if a["winner"] != b["winner"]]
            lead = sum(a["leader"] != b["leader"] for a, b in pairs)
            out.append(f"{k} against {ref}: {len(flips)} of {len(pairs)} winners differ"
                       + (f" ({'; '.join(flips)})" if flips else "") + f"; leader differs in {lead}")
            dm = [a["margin"] - b["margin"] for a, b in pairs]
            out.append(f"  margin {k} - {ref}: median {statistics.median(dm):+.1%}, range {min(dm):+.1%} .. "
                       f"{max(dm):+.1%}")
            for kind in KINDS:
                r = [a["goodput"][kind] / b["goodput"][kind] - 1 for a, b in pairs if b["goodput"][kind] > 0]
                if r:
                    out.append(f"  {kind:>13} goodput {k} / {ref} - 1: median {statistics.median(r):+.1%}, range "
                               f"{min(r):+.1%} .. {max(r):+.1%} ({len(r)} cells)")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maps", default="cpu,h100")
    ap.add_argument("--settings", default="400,2000,steady")
    ap.add_argument("--extra", default="", help="name=JSON of split_map keywords, e.g. short={\"max_requests\": 200}")
    ap.add_argument("--json", help="write every cell here")
    ap.add_argument("--grid", action="store_true", help="time chapter 7's grid of three links at each setting "
                                                        "(the CPU map) instead")
    ap.add_argument("--load", help="a --json file of an earlier run: its settings are taken, not made again")
    ap.add_argument("--tag", default="", help="appended to the names of the settings made in this run (beside the "
                                              "same settings loaded from an earlier run of other code)")
    ap.add_argument("--quick", action="store_true", help="CI: the H100 map's first cell at runs of at most 100 and "
                                                         "200 requests (the second the reference), seconds")
    a = ap.parse_args(argv)
    settings = {k + a.tag: SETTINGS[k] for k in a.settings.split(",") if k}
    if a.quick:
        a.maps, a.grid, a.load = "h100", False, None
        settings = {"100": dict(max_requests=100), "steady": dict(max_requests=200)}
    if a.extra:
        name, kw = a.extra.split("=", 1)
        settings[name] = {**SETTINGS["steady"], **json.loads(kw)}
    print(f"{' '.join(sys.argv)}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    every = {}
    if a.load:
        with open(a.load) as f:
            every = json.load(f)
    for name in a.maps.split(","):
        cost, axes = {"cpu": cpu_cost, "h100": h100_cost}[name]()
        if a.quick:
            axes = {k: list(v)[:1] for k, v in axes.items()}
        print(f"{name}: {cost.source}; prompts {axes['prompt_tokens']}, TPOT steps {list(axes['tpot_steps'])}",
              flush=True)
        if a.grid:
            for k, s in settings.items():
                print(f"  {k}: {grid(cost, axes, s)}", flush=True)
            continue
        res = every.get(name, {})
        for k, s in settings.items():
            if k in res:
                print(f"  {k}: loaded from {a.load}")
                continue
            res[k] = make(cost, axes, s)
            print(f"  {k} {s}: {res[k]['cpu_s']:.1f} CPU s", flush=True)
        print("\n".join(report(name, res)), flush=True)
        every[name] = res
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(every, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
