"""The verdict of a paired live check (chapter 7's steady-state check of the map, :mod:`.map_steady`): the mean
paired gap (:func:`~.split_seeds.paired_gaps`, each seed's requests served by both layouts) and its 95% confidence
interval over the seeds (Student's t: :func:`gap_interval`), and a tie by an equivalence test (:func:`even`: the
gap's 90% interval within +-:data:`TIE_GAP` points; a tie is confirmed only where a layout was loaded, below
:data:`TIE_LOADED`%). With three seeds an interval that excludes zero also has every seed's gap on one side of zero
(chapter 6's rule), and more: a lead of one request in one seed and fifty in the others no longer passes.
"""
from __future__ import annotations

import math

import pandas as pd

from .split_seeds import paired_gaps, t_interval

__all__ = ["T95", "TIE_GAP", "TIE_LOADED", "even", "gap_interval"]

#: the 95% quantile of Student's t with 1 .. 10 degrees of freedom (the table of :data:`~.split_seeds.T975`): a
#: two-sided 90% interval's half-width, the interval of an equivalence test by two one-sided tests at 5% each
#: (Schuirmann, 1987)
T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812)


def gap_interval(attainment: pd.DataFrame, a: str, b: str) -> dict:
    """``a``'s lead over ``b`` in SLO attainment (points; ``attainment`` in %, one row per seed, as
    :func:`~.split_seeds.paired_gaps` reads it) with its 95% confidence interval over the seeds: :func:`paired_gaps`'
    keys and ``ci_low``, ``ci_high`` (mean -/+ t x sd / sqrt(seeds), t of :data:`~.split_seeds.T975`; beyond 11
    seeds the 10 degrees of freedom's, a little wider than the true one; clipped to +-100 points, the widest a gap in
    attainment can be), ``excludes_zero`` (the interval lies on one side of zero: its leader leads outside the runs' own
    spread), and ``eq_low``, ``eq_high``: the 90% interval (t of :data:`T95`), which an equivalence test reads
    (:func:`even`). One seed has no spread: its intervals are unbounded.

    Raises:
        TypeError: ``attainment`` not a DataFrame. ValueError: an attainment not finite (inf made the interval NaN
        in silence); those of :func:`~.split_seeds.paired_gaps`."""
    if not isinstance(attainment, pd.DataFrame):
        raise TypeError(f"attainment must be a DataFrame (one row per seed, one column per layout, in %), got "
                        f"{type(attainment).__name__}")
    g = paired_gaps(attainment, a, b)
    if not all(math.isfinite(x) for x in g["gaps"]):
        raise ValueError(f"attainment of {a!r} and {b!r} must be finite percentages, got gaps {g['gaps']}")
    low, high = t_interval(g["gaps"], T95)  # the 95% interval is paired_gaps' (ci_low, ci_high)
    return dict(g, eq_low=low, eq_high=high, excludes_zero=g["decisive"])


#: a tie's mean paired gap in attainment (points) may be at most this far from zero: with three seeds an interval
#: holds zero for gaps of 50 points, which no one calls even
TIE_GAP = 10.0


def even(g: dict) -> bool:
    """Whether the paired gap ``g`` (:func:`gap_interval`) shows a tie: its 90% interval lies within +-:data:`TIE_GAP`
    points, an equivalence test by two one-sided tests at 5% each (Schuirmann, 1987). An interval that merely holds
    zero is no tie: three seeds leave one 50 points wide (ch07 once took gaps of 0, -54 and -50 for a tie), and
    gaps of 0, -100 and +100 average to zero."""
    return -TIE_GAP <= g["eq_low"] and g["eq_high"] <= TIE_GAP


#: a tie matches live only where a layout met the SLOs for less than this share (%) on average: both at 100% in every
#: seed is a gap of 0 whatever the layouts (ch07 once "matched" a tie at 100/100)
TIE_LOADED = 95.0
