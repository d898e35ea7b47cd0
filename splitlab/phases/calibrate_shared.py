"""One calibration of a model on this device, shared by the runs that follow within a stated age.

Chapters 6 and 7 each calibrate the same model on the same device with the same arguments; built one after the
other, the second measured again what the first had measured a few minutes earlier (about 10 s of CPU on the
2-core development machine, 2026-12-04). :func:`calibrate_or_reuse` saves a calibration under splitlab's cache
folder (``$SPLITLAB_CACHE``, :func:`splitlab.phases.trained.cache_root`) and hands it to any later call with the
same model, dtype, device, clock, torch threads, torch and splitlab versions and arguments while it is younger
than ``max_age_s``; an older one, or none, is measured again. A chapter opened alone calibrates as before.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import tempfile
import warnings
from pathlib import Path

import torch

from ..costmodel import Calibration, CalibrationError, load, save
from .calibrate import _version, calibrate
from .device import _CPU_CLOCK, describe_device
from .fit_quality import NoisyCalibrationWarning, fit_warnings
from .models import LoadedModel
from .trained import cache_root

__all__ = ["calibrate_or_reuse", "shared_path", "SHARED_NOTE"]

#: ``Calibration.meta`` key of the sentence saying whether :func:`calibrate_or_reuse` measured or reused.
SHARED_NOTE = "shared"


def shared_path(lm: LoadedModel, **kwargs) -> Path:
    """Where :func:`calibrate_or_reuse` keeps ``lm``'s calibration made with ``kwargs`` (those of
    :func:`~.calibrate.calibrate`): a file under ``<cache>/calibrations`` named after the model and a hash of what
    the measurements depend on (model, dtype, device, clock, torch threads, torch and splitlab versions, arguments).

    Raises:
        TypeError: ``lm`` is not a LoadedModel, or an argument's value is not JSON (numbers, strings, lists)."""
    if not isinstance(lm, LoadedModel):
        raise TypeError(f"calibrate_or_reuse needs a splitlab LoadedModel (from splitlab.load_model), got "
                        f"{type(lm).__name__}")
    clock = "cuda events" if lm.device.type == "cuda" else _CPU_CLOCK["clock"]
    try:
        key = json.dumps(dict(model=lm.name, dtype=str(lm.dtype), device=describe_device(lm.device), clock=clock,
                              threads=torch.get_num_threads(), torch=torch.__version__, splitlab=_version(),
                              kwargs=kwargs), sort_keys=True)
    except TypeError as err:
        raise TypeError(f"calibrate_or_reuse: the calibrate arguments must be numbers, strings or lists of them "
                        f"({err})") from None
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in lm.name)[:60]
    return cache_root() / "calibrations" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def calibrate_or_reuse(lm: LoadedModel, max_age_s: float = 3600.0, **kwargs) -> Calibration:
    """``lm``'s calibration on its device: the one saved by an earlier call with the same model, device, clock,
    threads, versions and ``kwargs`` if it is at most ``max_age_s`` seconds old, else
    :func:`~.calibrate.calibrate` ``(lm, **kwargs)`` now, saved for the calls that follow (atomically: a file is
    never read half-written). ``meta["shared"]`` says in a sentence which, and how old a reused one is; a cache
    folder that cannot be written leaves the fresh calibration unsaved, said there too.

    Args:
        lm: the model (from :func:`splitlab.load_model`).
        max_age_s: the oldest calibration (seconds, by its ``date``) to reuse; 0 always measures.
        kwargs: passed to :func:`~.calibrate.calibrate` (and part of the file's key).

    Warns:
        NoisyCalibrationWarning: as :func:`~.calibrate.calibrate` does, for a reused calibration too.

    Raises:
        ValueError: ``max_age_s`` is not a number >= 0 (nan, -1, "1h"); those of :func:`~.calibrate.calibrate`.
        TypeError: those of :func:`shared_path`.
    """
    if isinstance(max_age_s, bool) or not isinstance(max_age_s, (int, float)) or not max_age_s >= 0:
        raise ValueError(f"max_age_s must be a number of seconds >= 0, got {max_age_s!r}")
    path = shared_path(lm, **kwargs)
    saved = _saved(path, lm.name)
    if saved is not None and saved[1] <= max_age_s:
        cal, age = saved
        for message in fit_warnings(cal):
            warnings.warn(message, NoisyCalibrationWarning, stacklevel=2)
        cal.meta[SHARED_NOTE] = (f"reused the calibration made {_minutes(age)} ago on this device (kept "
                                 f"{_minutes(max_age_s)} in splitlab's cache folder)")
        return cal
    cal = calibrate(lm, **kwargs)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        try:
            os.replace(save(cal, tmp), path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        cal.meta[SHARED_NOTE] = (f"calibrated now (kept {_minutes(max_age_s)} in splitlab's cache folder for the runs "
                                 f"that follow)")
    except OSError as err:
        cal.meta[SHARED_NOTE] = f"calibrated now (not kept: {type(err).__name__}: {err})"
    return cal


def _saved(path: Path, model: str) -> tuple[Calibration, float] | None:
    """The calibration at ``path`` and the seconds since it was made, or None when there is none to reuse (no
    file, one that does not load, or an unreadable or future date)."""
    try:
        cal = load(path, model=model)
        made = datetime.datetime.fromisoformat(str(cal.meta.get("date")))
    except (CalibrationError, ValueError):
        return None
    if made.tzinfo is None:
        return None
    age = (datetime.datetime.now(datetime.timezone.utc) - made).total_seconds()
    return (cal, max(0.0, age)) if math.isfinite(age) and age >= -60 else None  # a minute of skew between processes


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
