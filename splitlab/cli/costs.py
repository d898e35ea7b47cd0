"""The cost-model options that ``simulate`` and ``plan`` share: ``--cost FILE`` (a calibration JSON), ``--gpu NAME
--model-config NAME`` (the analytic roofline model), or neither (the built-in cost model of ``serve --backend
simulated``). torch-free."""
from __future__ import annotations

from ..sizing import GPUS, LINKS
from .args import positive_float
from .registry import CLIError, arg

__all__ = ["COST_OPTIONS", "cost_model"]

COST_OPTIONS = (
    arg("--cost", metavar="FILE", default=None, help="a calibration JSON (python -m splitlab calibrate --out FILE)"),
    arg("--gpu", choices=sorted(GPUS), default=None, help="analytic cost model: a datasheet GPU (with --model-config)"),
    arg("--model-config", metavar="NAME", default=None,
        help="analytic cost model: a published model (e.g. Llama-3-8B) or a config.json with n_params"),
    arg("--dtype", default=None, help="analytic cost model: weight and KV dtype (default bf16)"),
    arg("--link", choices=sorted(LINKS), default=None,
        help="the link KV caches cross, for any cost model (default: the analytic model's 400 Gb/s network; a "
             "calibration's same-device copy; the built-in model's 2 GB/s)"),
    arg("--compute-efficiency", type=positive_float, default=None,
        help="analytic cost model: share of peak FLOP/s reached, 0.01 to 1 (default 0.6)"),
    arg("--memory-efficiency", type=positive_float, default=None,
        help="analytic cost model: share of memory bandwidth reached, 0.01 to 1 (default 0.8)"),
)


def cost_model(args, model: str | None = None):
    """The CostModel the options name, or None (the built-in one); ``model``: the model the caller simulates,
    checked against a calibration file's.

    Raises:
        CLIError: both --cost and --gpu, only one of --gpu and --model-config, ``model`` without --cost, or an
            option of the analytic model (--dtype, --compute-efficiency, --memory-efficiency) without --gpu: each
            would be ignored without a word. (--link sets the link of any of them: ``CostModel.over_link``.)
        CalibrationError, ValueError: from :func:`splitlab.costmodel.load` and ``roofline_cost_model``.
    """
    from .. import costmodel
    if args.cost and (args.gpu or args.model_config):
        raise CLIError("give either --cost FILE or --gpu NAME --model-config NAME, not both")
    if bool(args.gpu) != bool(args.model_config):
        raise CLIError("the analytic cost model needs both --gpu NAME and --model-config NAME")
    if model is not None and not args.cost:  # it would be ignored without a word
        raise CLIError("--model checks a calibration file's model: give it with --cost FILE (or leave it out)")
    analytic = [f"--{k.replace('_', '-')}" for k in ANALYTIC_ONLY if getattr(args, k) is not None]
    if analytic and not args.gpu:  # they would be ignored without a word
        raise CLIError(f"{', '.join(analytic)} set{'s' if len(analytic) == 1 else ''} the analytic cost model: give "
                       "--gpu NAME --model-config NAME too (or leave it out)")
    if args.gpu:
        kw = {k: getattr(args, k) for k in ("compute_efficiency", "memory_efficiency") if getattr(args, k)}
        return costmodel.roofline_cost_model(args.model_config, args.gpu, args.dtype or "bf16",
                                             link=args.link or "400 Gb/s network", **kw)
    cost = costmodel.load(args.cost, model=model).cost if args.cost else None
    if args.link:  # a calibration's transfer fit times a copy on its one device, no link between two
        return (cost or costmodel.CostModel()).over_link(args.link)
    return cost


#: options that only the analytic cost model reads
ANALYTIC_ONLY = ("dtype", "compute_efficiency", "memory_efficiency")
