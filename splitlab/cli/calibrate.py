"""``python -m splitlab calibrate``: measure this device with a model (prefill, decode, KV copies) and write the
calibration JSON that ``simulate --cost FILE`` and ``plan --cost FILE`` read (:func:`splitlab.profiling.calibrate`;
the file records device, model, dtype, torch version and date). A fit that misses one of its own measurements by
more than half (:data:`splitlab.phases.calibrate.NOISY_RESIDUAL`) is a warning on stderr (the machine was busy:
calibrate again idle, with one thread); ``--json`` lists them under ``warnings``."""
from __future__ import annotations

import sys
import warnings

from .args import THREADS, device_name, positive_int, progress, seed_int, threads_fields
from .registry import CLIError, arg, command

__all__ = ["calibrate", "check_writable"]


def check_writable(path: str):
    """``path`` as a Path if a calibration can be written there, found before measuring (not after a whole
    calibration, with a bare "[Errno 21] Is a directory"): the file is opened for appending and closed, and
    removed again if this made it.

    Raises:
        CLIError: ``path`` is empty.
        ValueError: "cannot write calibration to PATH: reason": its directory does not exist, it is a directory
            or not a regular file (a device such as /dev/full, a pipe), or the system refuses to create or open it
            (/proc/x.json, permission denied).
    """
    import os
    import stat
    from pathlib import Path
    if not path:
        raise CLIError("--out needs a file name, e.g. --out tiny.json")
    out = Path(path)

    def refuse(reason: str):
        return ValueError(f"cannot write calibration to {path}: {reason}")
    if out.parent.exists() and not out.parent.is_dir():
        raise refuse(f"{str(out.parent)!r} is a file, not a directory")
    if not out.parent.is_dir():
        raise refuse(f"directory {str(out.parent)!r} does not exist")
    if out.is_dir():
        raise refuse(f"it is a directory; give a file name, e.g. {out / 'tiny.json'}")
    if out.exists() and not stat.S_ISREG(out.stat().st_mode):  # /dev/full opens, then every write fails
        raise refuse("it is not a regular file (a device or a pipe); give a file name")
    existed = out.exists()
    try:
        with open(out, "a"):
            pass
    except OSError as err:
        raise refuse(err.strerror or str(err)) from None
    if not existed:
        os.unlink(out)  # no empty file left behind if the run fails
    return out


@command("calibrate", "measure prefill, decode and KV copies on this device and fit the simulator's cost model",
         arg("--model", default="tiny", help="preset, Hugging Face name or local path (default: tiny)"),
         arg("--out", required=True, metavar="FILE", help="where to write the calibration JSON"),
         arg("--device", type=device_name, default=None, help="cpu, cuda, cuda:N or mps (default: best available)"),
         arg("--repeats", type=positive_int, default=3, help="runs per point, median kept (default 3)"),
         THREADS,
         arg("--seed", type=seed_int, default=0, help="seeds the random weights and the prompts (default 0)"))
def calibrate(args):
    out = check_writable(args.out)
    from .demo import check_loadable, quiet_hub
    check_loadable(args.model)
    quiet_hub()
    from .. import costmodel
    from ..phases.calibrate import NoisyCalibrationWarning, fit_warnings
    from ..phases.calibrate import calibrate as measure
    from ..phases.models import load_model
    lm = load_model(args.model, device=args.device, seed=args.seed, threads=args.threads)
    with warnings.catch_warnings():  # said once below, on one line each, not as Python's two-line warning
        warnings.simplefilter("ignore", NoisyCalibrationWarning)
        cal = measure(lm, repeats=args.repeats, seed=args.seed, progress=progress(args))
    for message in fit_warnings(cal):  # on stderr, with --json too (which also lists them)
        print(f"splitlab calibrate: warning: {message}", file=sys.stderr)
    try:
        costmodel.save(cal, out)
    except OSError as err:  # the disk filled up while measuring
        raise ValueError(f"cannot write calibration to {args.out}: {err.strerror or err}") from None
    data = dict(path=str(out), **{k: v for k, v in cal.to_json().items() if k != "fits"},
                fits={name: f.summary() for name, f in cal.fits.items()}, warnings=fit_warnings(cal),
                **threads_fields(lm))
    text = [f"splitlab calibrate: {lm.name} ({cal.meta['dtype']}) on {cal.meta['device']} -> {out}",
            f"threads: {lm.threads_note}"]
    for name, f in cal.fits.items():
        text.append(f"  {f!r}")
    if cal.cost.hybrid_path == "two-pass":  # the simulator charges a chunked step as this engine runs it
        text.append(f"  hybrid steps (chunked prefill) charged as two passes: {cal.cost.two_pass_reason}")
    return data, text
