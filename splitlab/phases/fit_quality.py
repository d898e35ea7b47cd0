"""How far a calibration's fits miss their own measurements: :func:`fit_warnings` names each fit whose largest
relative residual exceeds :data:`NOISY_RESIDUAL` (the machine was busy while :func:`~.calibrate.calibrate`
measured), and :func:`~.calibrate.calibrate` warns with :class:`NoisyCalibrationWarning`."""
from __future__ import annotations

import numbers

from ..costmodel.calibration import Calibration

__all__ = ["fit_warnings", "NoisyCalibrationWarning", "NOISY_RESIDUAL"]

#: a fit that misses one of its own measurements by more than this share is flagged (:func:`fit_warnings`): on the
#: 2-core development machine quiet fits miss by 10-25% at worst, fits taken at a load average of 8 by 60-95%
NOISY_RESIDUAL = 0.5


class NoisyCalibrationWarning(UserWarning):
    """A fit of :func:`calibrate` misses its own measurements by more than :data:`NOISY_RESIDUAL`."""


def fit_warnings(cal: Calibration, threshold: float | None = None) -> list[str]:
    """One sentence per fit of ``cal`` whose largest |relative residual| exceeds ``threshold`` (default
    :data:`NOISY_RESIDUAL`; empty: every fit within it): the machine was probably busy while it measured, and what
    to do about it.

    Raises:
        TypeError: ``cal`` not a :class:`~splitlab.costmodel.Calibration`. ValueError: a ``threshold`` given that is
            not a share >= 0 (-1 flagged every fit as missing by "more than -100%", nan none).
    """
    if not isinstance(cal, Calibration):
        raise TypeError(f"fit_warnings takes a Calibration (from calibrate or splitlab.costmodel.load), got "
                        f"{type(cal).__name__}")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or
                                  not threshold >= 0):
        raise ValueError(f"threshold must be a share >= 0 of a measurement (default {NOISY_RESIDUAL}), got "
                         f"{threshold!r}")
    threshold = NOISY_RESIDUAL if threshold is None else threshold
    noisy = {name: f.max_abs_residual for name, f in cal.fits.items() if f.max_abs_residual > threshold}
    return [f"the {name} fit misses one of its own measurements by {worst:.0%} (more than {threshold:.0%}): the "
            f"machine was probably busy while it measured, so the simulator built on it predicts steps this much "
            f"off; calibrate again with one thread (OMP_NUM_THREADS=1, --threads 1) when the machine is idle, or "
            f"with more repeats" for name, worst in noisy.items()]
