"""SLOs and a rate for ``serve``, ``compare``, ``simulate`` and ``plan`` where the command line gives none: chosen
from this device's costs by chapter 6's rule (:mod:`splitlab.planning.defaults`), and said.

The cost model is the one the run uses: a simulated run's (``--cost``, ``--gpu``, the built-in one); for the real
model (emulated and distributed back ends) a quick measurement of it on this device, :func:`probe`: a few prefills
and decode steps, fitted as ``calibrate`` fits them (measured for the tiny model on one thread of this 2-core
machine: 4-6 s at a load average of 5, 18 s at 13)."""
from __future__ import annotations

import time
import warnings

from .args import progress

__all__ = ["fill", "probe", "chosen_lines", "in_flags", "FLAGS", "OPTIONS_HELP"]

#: the command line's flag for each value :func:`fill` may choose
FLAGS = {"ttft_slo_s": "--ttft-slo", "tpot_slo_s": "--tpot-slo", "rate_per_s": "--rate"}
OPTIONS_HELP = "default: from this device's costs (chapter 6: 5 mean prefills, 2.5 decode steps; a rate below capacity)"


def probe(lm, progress: bool = False):
    """A small calibration of ``lm`` on its device (4 prompt lengths up to half its context, at most 1024 tokens;
    decode batches 1, 4 and 16 at 2 contexts; 2 repeats; no chunks), its cost model returned. A noisy fit is not
    said here: the run that follows shows its own times."""
    from ..phases.calibrate import NoisyCalibrationWarning, calibrate
    top = max(32, min(1024, lm.max_context // 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoisyCalibrationWarning)
        cal = calibrate(lm, prompt_tokens=[max(2, top >> k) for k in (6, 4, 2, 0)], prefill_batch=1,
                        decode_batches=(1, 4, 16), contexts=[max(2, top // 16), max(3, top // 4)],
                        transfer_tokens=[16, top], repeats=2, chunk_tokens=(), progress=progress)
    return cal.cost


def fill(args, configs: dict, cost=None, lm=None) -> None:
    """Set ``args.ttft_slo``, ``args.tpot_slo`` and ``args.rate`` (where the parser has them) that are None, on
    ``cost`` (None: the built-in one) or, given ``lm``, on :func:`probe` of it; ``args.chosen``: what was chosen and
    why (:meth:`~splitlab.planning.defaults.Chosen.to_json`; None if the command line gave everything)."""
    need_rate = hasattr(args, "rate") and args.rate is None
    args.chosen = None
    if args.ttft_slo is not None and args.tpot_slo is not None and not need_rate:
        return
    from ..planning.defaults import NoDefault, choose_defaults
    start = time.perf_counter()
    if lm is not None:
        if not args.json:  # seconds on the tiny model, a minute or more on a larger one: say so before
            from .registry import stage_printer
            stage_printer(getattr(args, "command", "splitlab"))(
                f"choosing the SLOs and rate you left out: measuring a few prefills and decode steps of {lm.name} "
                f"on this device (give {', '.join(f for k, f in FLAGS.items() if _missing(args, k))} to skip this)")
        cost = probe(lm, progress=progress(args))
    try:
        chosen = choose_defaults(cost, args.workload, configs, ttft_slo_s=args.ttft_slo, tpot_slo_s=args.tpot_slo,
                                 rate=need_rate, seed=args.seed, scale=args.scale)
    except NoDefault as err:
        raise in_flags(err) from None
    args.ttft_slo, args.tpot_slo = chosen.ttft_slo_s, chosen.tpot_slo_s
    if need_rate:
        args.rate = chosen.rate_per_s
    source = "the built-in cost model" if cost is None else (
        f"a quick measurement of {lm.name} on this device" if lm is not None else cost.source)
    chosen.why.append(f"from {source}, in {time.perf_counter() - start:.1f} s")
    args.chosen = chosen.to_json()


def _missing(args, key: str) -> bool:
    """Whether the command line left out the value :data:`FLAGS` names by ``key``."""
    return getattr(args, {"ttft_slo_s": "ttft_slo", "tpot_slo_s": "tpot_slo", "rate_per_s": "rate"}[key], 0) is None


def chosen_lines(chosen: dict | None) -> list[str]:
    """What was chosen and why (``args.chosen`` of :func:`fill`, ``Plan.chosen``), one line each; nothing for
    None (the command line gave everything)."""
    if chosen is None:
        return []
    return [f"chosen: {line}" for line in chosen["why"]] + [
        f"chosen: set them with {', '.join(FLAGS[name] for name in chosen['derived'])}"]


def in_flags(err: Exception):
    """A :class:`~.registry.CLIError` of ``err``'s message with the API's names of :data:`FLAGS` as flags (a
    :class:`~splitlab.planning.defaults.NoDefault`: give --tpot-slo, not tpot_slo_s)."""
    from .registry import CLIError
    text = str(err)
    for name, flag in FLAGS.items():
        text = text.replace(name, flag)
    return CLIError(text)
