"""``python -m splitlab simulate``: ``serve`` on the simulated back end, with the cost model of a calibration
(``--cost FILE``), of a datasheet (``--gpu NAME --model-config NAME``: the roofline, predicted) or the built-in
one. No model is loaded and torch is not imported. The JSON holds the keys of ``serve`` plus ``wall_s`` (seconds
the simulation itself took) and ``cost_source`` (where the step times come from)."""
from __future__ import annotations

from .args import positive_int, progress
from .costs import COST_OPTIONS, cost_model
from .defaults import chosen_lines
from .pools import SIMULATE_POOL_OPTIONS, handoff_line, pool_executor
from .registry import arg, command
from .report import clean, failed_status, header, lines, metrics, title
from .serving import COMMON, POOLS, options, resolve, setup

__all__ = ["simulate"]

#: serve's options that name a real model or another back end have no meaning here
_UNUSED = {"--backend", "--model", "--device", "--threads", "--timeout", "--torchrun"}
SIMULATE_OPTIONS = tuple(a for a in COMMON if a[0][0] not in _UNUSED)


@command("simulate", "serve a workload on the simulated back end (a cost model, no model loaded)",
         arg("--layout", choices=("colocated", "disaggregated"), default="colocated", help="(default colocated)"),
         arg("--workers", type=positive_int, default=None, metavar="N", help="colocated workers (default 1)"),
         *POOLS, *SIMULATE_OPTIONS, *COST_OPTIONS, *SIMULATE_POOL_OPTIONS,
         arg("--model", default=None, help="with --cost: the model you mean to simulate (checked against the file)"))
def simulate(args):
    from .. import serving
    args.backend, args.device, args.threads, args.timeout, args.torchrun = "simulated", None, None, 30.0, False
    pools, handoff = pool_executor(args)  # two pools of their own GPU and TP (cli.pools), or (None, None)
    cost = pools or cost_model(args, args.model)  # --model here checks the calibration file's model
    args.model = None
    resolve(args, (args.layout,))
    cfg = serving.ServingConfig(layout=args.layout, workers=args.workers, prefill_workers=args.prefill_workers,
                                decode_workers=args.decode_workers, trace=False, **options(args))
    backend, reqs, _ = setup(args, {args.layout: cfg}, cost)
    res = serving.run(reqs, cfg, backend, progress=progress(args))
    m = metrics(res, args)
    data = dict(header(args), layout=args.layout, **{args.layout: m}, wall_s=res.wall_s,
                cost_source=backend.cost.source)
    if pools:
        data.update(decode_cost_source=pools.decode_cost.source, handoff=handoff)
    link = ([f"KV link: {args.link_gbps:g} GB/s (--link-gbps), in place of the cost model's"]
            if args.link_gbps and args.layout == "disaggregated" else [])
    text = [title("simulate", args), f"cost model: {backend.cost.source}", *link,
            *([f"decode pool: {pools.decode_cost.source}", handoff_line(handoff)] if pools else []),
            *chosen_lines(args.chosen),
            *lines(args.layout, m),
            f"simulated {len(reqs)} requests in {res.wall_s:.3f} s of wall time"]
    return clean(data), text, failed_status(m)
