"""``python -m splitlab calibrate``: measure this device with a model (prefill, decode, KV copies) and write the
calibration JSON that ``simulate --cost FILE`` and ``plan --cost FILE`` read (:func:`splitlab.profiling.calibrate`;
the file records device, model, dtype, torch version and date)."""
from __future__ import annotations

from .args import device_name, positive_int, seed_int, thread_count
from .registry import arg, command

__all__ = ["calibrate"]


@command("calibrate", "measure prefill, decode and KV copies on this device and fit the simulator's cost model",
         arg("--model", default="tiny", help="preset, Hugging Face name or local path (default: tiny)"),
         arg("--out", required=True, metavar="FILE", help="where to write the calibration JSON"),
         arg("--device", type=device_name, default=None, help="cpu, cuda, cuda:N or mps (default: best available)"),
         arg("--repeats", type=positive_int, default=3, help="runs per point, median kept (default 3)"),
         arg("--threads", type=thread_count, default=None, help="CPU threads for torch (default: torch's)"),
         arg("--seed", type=seed_int, default=0, help="seeds the random weights and the prompts (default 0)"))
def calibrate(args):
    import os
    from pathlib import Path
    out = Path(args.out)
    if not out.parent.is_dir():
        raise ValueError(f"cannot write {args.out}: directory {str(out.parent)!r} does not exist")
    if out.is_dir():  # found before measuring, not after (a whole calibration, then "[Errno 21] Is a directory")
        raise ValueError(f"cannot write {args.out}: it is a directory; give a file name, e.g. {out / 'tiny.json'}")
    if not os.access(out if out.exists() else out.parent, os.W_OK):
        raise ValueError(f"cannot write {args.out}: permission denied")
    from .demo import check_loadable, quiet_hub
    check_loadable(args.model)
    quiet_hub()
    import torch

    from .. import costmodel
    from ..phases.calibrate import calibrate as measure
    from ..phases.models import load_model
    if args.threads:
        torch.set_num_threads(args.threads)
    lm = load_model(args.model, device=args.device, seed=args.seed)
    cal = measure(lm, repeats=args.repeats, seed=args.seed)
    costmodel.save(cal, out)
    data = dict(path=str(out), **{k: v for k, v in cal.to_json().items() if k != "fits"},
                fits={name: f.summary() for name, f in cal.fits.items()})
    text = [f"splitlab calibrate: {lm.name} ({cal.meta['dtype']}) on {cal.meta['device']} -> {out}"]
    for name, f in cal.fits.items():
        text.append(f"  {f!r}")
    return data, text
