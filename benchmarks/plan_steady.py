"""Are plan's and map's answers at steady state? Their two-stage searches against the same search on runs 20x longer.

    python benchmarks/plan_steady.py [--cases builtin,toy] [--seeds 0,1,2]
                                     [--reference-file benchmarks/results/goodput_steady_refs_2026-12-03.jsonl]
    python benchmarks/plan_steady.py --time [--repeats 3]     # plan --max-workers 8 and chapter-sized maps
    python benchmarks/plan_steady.py --quick

``plan`` and ``map`` search in two stages (:mod:`splitlab.planning.refine`): a plain search (runs that never go on)
of every layout, then the layouts within 10% of the best searched again from their bracket on runs that go on while
unsettled. This runs both on the rows of ``benchmarks/goodput_steady.py`` (5 layouts of 4 workers on the built-in
cost model's ``chat`` workload at the SLOs ``plan`` chooses, and on DistServe's toy, over seeds) and compares each
answer with the reference of that row: the same search on runs 20x longer (``goodput_steady.py
--references-only``; the references of 2026-12-03 are stored as JSON lines beside its result file).

- plan: :func:`splitlab.planning.planner.plan` with ``max_workers=4`` and the rows' one chunk size (its 3-worker
  and 2-worker splits are searched too, without a reference); each 4-worker row's answer against its reference.
- map: a map cell's search (:func:`splitlab.planning.map_cell.search_cell`: the map's tolerance, 5%, and its run
  sizing, 20 lifetimes of at least 1,000 requests) over the 5 layouts of each row, started at 1 request/s per
  worker.

``--time``: CPU and wall seconds of ``python -m splitlab plan --max-workers 8`` (built-in cost model, its own
process, ``--repeats`` times: medians), and of maps of chapter 6's and 7's axes on the built-in cost model (the
chapters' calibrated model stands in), with the load average. Every CPU time is this process's or its child's.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from goodput_steady import cases  # noqa: E402

from splitlab.planning import map_cell, split_map  # noqa: E402
from splitlab.planning.planner import plan  # noqa: E402
from splitlab.serving import CostModelExecutor  # noqa: E402

REFS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "goodput_steady_refs_2026-12-03.jsonl")


def plan_rows(name, case, seed, refs, max_workers=4):
    """Rows of one plan against the references of its 4-worker layouts, and its CPU seconds."""
    ex, workload, ttft, tpot, layouts, options = case
    kw = dict(max_batch=64, chunk_tokens=(512,)) if name == "toy" else dict(chunk_tokens=(256,))
    t0 = time.process_time()
    p = plan(ex.cost, workload, ttft, tpot, max_workers=max_workers, seed=seed, progress=False, **kw, **options)
    cpu = time.process_time() - t0
    rows = []
    for c in p.candidates:
        short = "4 colocated (chunked)" if c.policy == "chunked" else c.name
        ref = refs.get((name, short, seed))
        if ref is not None:
            plain = c.plain_rps_per_worker if c.refined else c.goodput_rps_per_worker
            rows.append(dict(search="plan", case=name, seed=seed, layout=short, plain=plain,
                             answer=c.goodput_rps_per_worker, refined=c.refined,
                             longer=ref["goodput_longer"]))
    return rows, cpu


def map_rows(name, case, seed, refs):
    """Rows of a map cell's search over the case's 5 layouts, and its CPU seconds."""
    ex, workload, ttft, tpot, layouts, options = case
    t0 = time.process_time()
    found = map_cell.search_cell(workload, [(cfg.name, cfg, 1.0) for cfg in layouts], ex, ttft_slo_s=ttft,
                                 tpot_slo_s=tpot, tolerance=0.05, seed=seed, max_requests=split_map.MAP_MAX_REQUESTS,
                                 min_requests=map_cell.MAP_MIN_REQUESTS, extend=split_map.MAP_EXTEND,
                                 scale=options.get("scale"))
    cpu = time.process_time() - t0
    rows = []
    for cfg in layouts:
        ref = refs.get((name, cfg.name, seed))
        rows.append(dict(search="map", case=name, seed=seed, layout=cfg.name, plain=found["plain"][cfg.name],
                         answer=found["goodput"][cfg.name], refined=cfg.name in found["refined"],
                         longer=ref["goodput_longer"] if ref else float("nan")))
    return rows, cpu


def summary(rows, label):
    out = []
    for key in ("plain", "answer"):
        ratios = [r[key] / r["longer"] for r in rows if r["longer"] == r["longer"]]
        if ratios:
            out.append(f"{label}, {'plain stage' if key == 'plain' else 'two-stage answer'}: {len(ratios)} rows, "
                       f"ratio to 20x median {statistics.median(ratios):.3f}, {min(ratios):.3f}-{max(ratios):.3f}, "
                       f"{sum(abs(x - 1) <= 0.05 for x in ratios)} within 5%")
    near = [r for r in rows if r["refined"] and r["longer"] == r["longer"]]
    if near:
        ratios = [r["answer"] / r["longer"] for r in near]
        out.append(f"{label}, the refined contenders: {len(near)} rows, {min(ratios):.3f}-{max(ratios):.3f}, "
                   f"{sum(abs(x - 1) <= 0.05 for x in ratios)} within 5%")
    groups = {(r["case"], r["seed"]) for r in rows}
    same = 0
    for g in sorted(groups):
        mine = [r for r in rows if (r["case"], r["seed"]) == g and r["longer"] == r["longer"]]
        best_ref = max(mine, key=lambda r: r["longer"])
        best = max(mine, key=lambda r: r["answer"])
        same += best["layout"] == best_ref["layout"] or best["longer"] >= 0.95 * best_ref["longer"]
        out.append(f"  {g[0]} seed {g[1]}: {label}'s best {best['layout']} ({best['answer']:.4g}), at 20x "
                   f"{best_ref['layout']} ({best_ref['longer']:.4g})")
    out.append(f"{label}: the best is the 20x best, or within 5% of it at 20x, in {same} of {len(groups)}")
    return out


def timed_plan(repeats):
    lines, cpu, wall = [], [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        subprocess.run([sys.executable, "-m", "splitlab", "plan", "--max-workers", "8"], check=True,
                       capture_output=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall.append(time.time() - t0)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        lines.append(f"  plan --max-workers 8: CPU {cpu[-1]:.1f} s, wall {wall[-1]:.1f} s, load average "
                     f"{os.getloadavg()[0]:.1f}")
        print(lines[-1], flush=True)
    lines.append(f"plan --max-workers 8: median CPU {statistics.median(cpu):.1f} s, wall "
                 f"{statistics.median(wall):.1f} s over {repeats}")
    return lines


def timed_maps(quick=False):
    cost = CostModelExecutor(None).cost
    axis = split_map.prompt_axis(cost, 16, 1024, 2 if quick else 4)
    settings = [("chapter 6 axes", dict(tpot_steps=(2.5,) if quick else (1.5, 2.5, 10.0)))]
    if not quick:
        settings.append(("chapter 7 axes", dict(tpot_steps=(1.5, 2.5, 5.0))))
    lines = []
    for label, kw in settings:
        t0, w0 = time.process_time(), time.time()
        small = dict(min_requests=100, max_requests=400) if quick else {}
        m = split_map.split_map(None, 2 if quick else 4, axis, progress=False, **small, **kw)
        lines.append(f"map, {label} ({len(m.cells)} cells, built-in cost model): CPU {time.process_time() - t0:.1f} s, "
                     f"wall {time.time() - w0:.1f} s, {m.searches} searches ({m.refined} refined), load average "
                     f"{os.getloadavg()[0]:.1f}; winners {m.counts()}")
        print(lines[-1], flush=True)
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="builtin,toy")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--reference-file", default=REFS)
    ap.add_argument("--time", action="store_true", help="time plan --max-workers 8 and chapter-sized maps")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("plan", "map"), default=None, help="only plan's or only the map's rows")
    ap.add_argument("--quick", action="store_true", help="one seed, plan of 2 workers, a map of 2 cells")
    args = ap.parse_args(argv)
    if args.quick:
        p = plan(None, "chat", 0.5, 0.05, max_workers=2, chunk_tokens=(256,), max_requests=200, progress=False)
        print(p.search_line)
        timed_maps(quick=True)
        return
    if args.time:
        print(timed_plan(args.repeats)[-1])
        timed_maps()
        return
    refs = {}
    for line in open(args.reference_file):
        r = json.loads(line)
        refs[r["case"], r["layout"], r["seed"]] = r
    rows = {"plan": [], "map": []}
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name, case in cases(args.cases.split(",")).items():
            if args.only in (None, "plan"):
                got, cpu = plan_rows(name, case, seed, refs)
                rows["plan"] += got
                print(json.dumps(dict(plan_cpu_s=cpu, case=name, seed=seed, rows=got)), file=sys.stderr, flush=True)
            if args.only in (None, "map"):
                got, cpu = map_rows(name, case, seed, refs)
                rows["map"] += got
                print(json.dumps(dict(map_cpu_s=cpu, case=name, seed=seed, rows=got)), file=sys.stderr, flush=True)
    for label, mine in rows.items():
        if not mine:
            continue
        print(f"\n{label}: {'layout':<28} {'seed':>4} {'plain':>7} {'answer':>7} {'refined':>7} {'20x':>7} "
              f"{'plain/20x':>9} {'answer/20x':>10}")
        for r in mine:
            print(f"{r['case']:<7} {r['layout']:<28} {r['seed']:>4} {r['plain']:>7.4g} {r['answer']:>7.4g} "
                  f"{'yes' if r['refined'] else '':>7} {r['longer']:>7.4g} {r['plain'] / r['longer']:>9.3f} "
                  f"{r['answer'] / r['longer']:>10.3f}")
        print("\n".join(summary(mine, label)))


if __name__ == "__main__":
    main()
