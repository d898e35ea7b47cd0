"""A calibration: a :class:`~.model.CostModel` fitted on one device for one model, with its fits, their residuals
and what it was measured on; saved to and loaded from JSON (torch-free, so the simulator and the planner read it
without a model).

The file records ``device``, ``model``, ``dtype``, ``torch`` (version), ``date`` (ISO 8601, UTC), ``splitlab``
(version) and ``clock`` (what timed the steps: "wall", "thread" CPU time, or "cuda events") beside the
coefficients, so a file is never used for a model it was not measured on:
:func:`load` checks the format, every field, and (given ``model=``) the model.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .fit import Fit, coefficients, fit_decode, fit_prefill, fit_transfer
from .model import HYBRID_PATHS, CostModel

__all__ = ["Calibration", "CalibrationError", "save", "load", "combine", "FORMAT"]

FORMAT = "splitlab-calibration/1"
META_FIELDS = ("device", "model", "dtype", "torch", "date")
OPTIONAL_META = ("splitlab", "clock")  # strings too, where a file has them (older files lack them)
COST_FIELDS = tuple(f.name for f in dataclasses.fields(CostModel))
#: how the engine ran hybrid steps, and why two passes: a file written before they existed was of a fused engine
HYBRID_FIELDS = {"hybrid_path": "fused", "two_pass_reason": None}
#: terms a file may lack: 0 (not measured, or written before the term existed)
ZERO_BY_DEFAULT = ("prefill_masked_per_pair_s", "decode_batched_s", "activation_bytes_per_token", "hybrid_per_row_s",
                   "hybrid_per_context_token_s")


class CalibrationError(ValueError):
    """A calibration file that cannot be used: not JSON, not a calibration, fields missing or out of range, or
    measured on another model."""


@dataclass
class Calibration:
    """What :func:`splitlab.profiling.calibrate` measured: ``cost`` (the fitted model), ``fits`` (name ->
    :class:`~.fit.Fit`, with their measurements and residuals) and ``meta`` (device, model, dtype, torch, date,
    splitlab)."""

    cost: CostModel
    fits: dict[str, Fit]
    meta: dict = field(default_factory=dict)

    def table(self):
        """One row per fit: the fitted model (seconds of one forward), the largest and the rms relative residual
        (%), R^2 and the number of measurements."""
        import pandas as pd
        rows = {name: {"fitted model (seconds)": f.formula(), "max |residual| (%)": round(100 * f.max_abs_residual, 1),
                       "rms residual (%)": round(100 * f.rms_residual, 1), "R^2": round(f.r2, 3), "points": len(f.rows)}
                for name, f in self.fits.items()}
        return pd.DataFrame(rows).T

    def to_json(self) -> dict:
        cost = {k: (None if isinstance(v, float) and math.isinf(v) else v)
                for k, v in dataclasses.asdict(self.cost).items()}
        fits = {name: dict(f.summary(), rows=f.rows) for name, f in self.fits.items()}
        return dict(format=FORMAT, **{k: self.meta.get(k) for k in (*META_FIELDS, *OPTIONAL_META)}, cost_model=cost,
                    fits=fits)

    def __repr__(self) -> str:
        fits = ", ".join(f"{n} max residual {f.max_abs_residual:.1%}" for n, f in self.fits.items())
        return f"Calibration({self.meta.get('model')} on {self.meta.get('device')}, {self.meta.get('date')}: {fits})"


def combine(calibrations) -> Calibration:
    """One calibration from several of the same model on the same device: every fit made again on all their
    measurements together. Calibrating before and after a run and combining the two brackets the run: on a
    machine whose speed drifts (a shared CPU), the fit then sees the speeds of the whole span, not of one moment.

    Args:
        calibrations: :class:`Calibration` objects (at least one) with their measurement rows (as
            :func:`splitlab.profiling.calibrate` returns them or :func:`load` reads them).

    Returns:
        a Calibration: the refitted cost model (its other fields from the first), the new fits, the first one's
        meta with ``date`` the span of dates and ``combined`` the number of calibrations.

    Raises:
        TypeError: ``calibrations`` is not a list (or other iterable) of them.
        ValueError: no calibrations, calibrations of different models or devices, or of engines that ran hybrid
            steps differently (``CostModel.hybrid_path``: a file written before the field loads as fused), or a fit
            without measurements.
    """
    if isinstance(calibrations, Calibration) or not isinstance(calibrations, Iterable):
        raise TypeError(f"combine needs a list of Calibration objects, got {type(calibrations).__name__}")
    cals = list(calibrations)
    if not cals or not all(isinstance(c, Calibration) for c in cals):
        raise ValueError(f"combine needs one or more Calibration objects, got "
                         f"{[type(c).__name__ for c in cals][:4]}")
    for key in ("model", "device"):
        seen = {c.meta.get(key) for c in cals}
        if len(seen) > 1:
            raise ValueError(f"cannot combine calibrations of different {key}s: {sorted(map(str, seen))}")
    paths = {c.cost.hybrid_path for c in cals}
    if len(paths) > 1:  # an older file of a sliding-window model loads as fused: calibrate it again
        raise ValueError(f"cannot combine calibrations whose engines ran hybrid steps differently "
                         f"({', '.join(sorted(paths))}: cost.hybrid_path); calibrate again with this splitlab, "
                         f"which records the path")
    fitters = {"prefill": fit_prefill, "decode": fit_decode, "transfer": fit_transfer}
    fits = {}
    for name, fitter in fitters.items():
        rows = [r for c in cals for r in c.fits[name].rows] if all(name in c.fits for c in cals) else []
        if not rows:
            raise ValueError(f"the {name} fit of a calibration holds no measurements to fit again")
        fits[name] = fitter(rows)
    dates = [str(c.meta.get("date")) for c in cals]
    meta = dict(cals[0].meta, date=dates[0] if len(set(dates)) == 1 else f"{min(dates)}..{max(dates)}",
                combined=len(cals))
    return Calibration(dataclasses.replace(cals[0].cost, **coefficients(fits.values())), fits, meta)


def save(calibration: Calibration, path: str | Path) -> Path:
    """Write ``calibration`` as JSON to ``path`` (parent directories must exist). Returns the path.

    Raises:
        TypeError: ``calibration`` is not a :class:`Calibration` (a bare CostModel has no fits to save), or
            ``path`` is not a path.
    """
    if not isinstance(calibration, Calibration):
        raise TypeError(f"save writes a Calibration (as profiling.calibrate returns it), got "
                        f"{type(calibration).__name__}")
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a file name, got {type(path).__name__}")
    path = Path(path)
    path.write_text(json.dumps(calibration.to_json(), indent=1, allow_nan=False))
    return path


def _finite(value) -> bool:
    """A JSON number a float holds: not a bool, not inf/nan, not an integer too large for a float (10**400 made
    ``math.isfinite`` raise OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _number(name: str, value, positive: bool = False) -> float:
    ok = _finite(value)
    if not ok or value < 0 or (positive and value == 0):
        got = (f"an integer of {len(str(abs(value)))} digits, too large for a float" if ok is False and
               isinstance(value, int) and not isinstance(value, bool) else repr(value))
        raise CalibrationError(f"field cost_model.{name} must be a finite number {'> 0' if positive else '>= 0'}, "
                               f"got {got}")
    return float(value)


def _fit(name: str, f, where: str) -> Fit:
    """One fit of a file: ``terms`` (names), ``coef`` (one finite number each) and ``rows`` (measurements, each
    an object with numbers ``measured_s``, ``predicted_s`` and ``residual``), or a CalibrationError naming it."""
    def bad(why: str):
        return CalibrationError(f"{where}: fit {name!r} is malformed ({why})")
    if not isinstance(f, dict):
        raise bad(f"an object with terms, coef and rows, got {type(f).__name__}")
    terms, coef, rows = f.get("terms"), f.get("coef"), f.get("rows", [])
    if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
        raise bad(f"terms must be a list of names, got {terms!r:.60}")
    if not isinstance(coef, list) or len(coef) != len(terms) or not all(_finite(c) for c in coef):
        raise bad(f"coef must be {len(terms)} finite numbers, one per term, got {coef!r:.60}")
    keys = ("measured_s", "predicted_s", "residual")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and all(_finite(r.get(k)) for k in keys)
                                             for r in rows):
        raise bad(f"rows must be a list of measurements, each with finite numbers {', '.join(keys)}")
    return Fit(name, tuple(terms), tuple(float(c) for c in coef), rows)


def from_json(data: dict, where: str = "calibration") -> Calibration:
    """A :class:`Calibration` from the dict :meth:`Calibration.to_json` wrote; see :func:`load` for the checks."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise CalibrationError(f"{where} is not a splitlab calibration (format {got!r}, expected {FORMAT!r}); "
                               f"write one with `python -m splitlab calibrate --out FILE`")
    missing = [k for k in (*META_FIELDS, "cost_model", "fits") if data.get(k) in (None, "")]
    cost = data.get("cost_model") if isinstance(data.get("cost_model"), dict) else {}
    optional = ("memory_bytes", "source", "padded_prefill", *ZERO_BY_DEFAULT, *HYBRID_FIELDS)
    missing += [f"cost_model.{k}" for k in COST_FIELDS if k not in cost and k not in optional]
    if missing:
        raise CalibrationError(f"{where} lacks the field(s) {', '.join(missing)}")
    texts = [(k, data.get(k)) for k in (*META_FIELDS, *OPTIONAL_META)] + [("cost_model.source", cost.get("source"))]
    for k, v in texts:  # "source": {"a": 1} printed "cost model: {'a': 1}"; "model": 5 matched no --model
        if v is not None and not isinstance(v, str):
            raise CalibrationError(f"{where}: field {k} must be a string, got {type(v).__name__} {v!r:.60}")
    values = {}
    for k in COST_FIELDS:
        v = cost.get(k)
        if k == "padded_prefill":  # bool("no") is True: a string must not pass for a flag
            values[k] = cost.get(k, False)
            if not isinstance(values[k], bool):
                raise CalibrationError(f"field cost_model.padded_prefill must be true or false, got {values[k]!r}")
        elif k == "source":
            values[k] = str(v or f"measured: {data['model']} on {data['device']}")
        elif k in HYBRID_FIELDS:
            values[k] = cost.get(k, HYBRID_FIELDS[k])
            path = k == "hybrid_path"
            if not (values[k] in HYBRID_PATHS if path else values[k] is None or isinstance(values[k], str)):
                want = " or ".join(HYBRID_PATHS) if path else "a string or null"
                raise CalibrationError(f"field cost_model.{k} must be {want}, got {values[k]!r:.60}")
        elif k == "memory_bytes":
            values[k] = None if v is None else _number(k, v, positive=True)
        elif k == "transfer_bytes_per_s":
            values[k] = math.inf if v is None else _number(k, v, positive=True)
        elif k in ZERO_BY_DEFAULT and v is None:  # a file written before these terms existed
            values[k] = 0.0
        elif k in ("kv_bytes_per_token", "max_context"):
            values[k] = _number(k, v, positive=True)
            if not values[k].is_integer():  # int(100.7) was 100 tokens of context, said nowhere
                raise CalibrationError(f"field cost_model.{k} must be a whole number, got {v!r}")
            values[k] = int(values[k])
        else:
            values[k] = _number(k, v)
    if not isinstance(data["fits"], dict):
        raise CalibrationError(f"{where}: fits must be an object of fit name -> fit, got "
                               f"{type(data['fits']).__name__}")
    fits = {name: _fit(name, f, where) for name, f in data["fits"].items()}
    meta = {k: data.get(k) for k in (*META_FIELDS, *OPTIONAL_META) if data.get(k) is not None}
    return Calibration(CostModel(**values), fits, meta)


def load(path: str | Path, model: str | None = None) -> Calibration:
    """Read a calibration JSON written by :func:`save`.

    Args:
        path: the file.
        model: if given, the model the caller is about to simulate: a file measured on another model is refused.

    Raises:
        CalibrationError (a ValueError): the file does not exist, is not UTF-8 text, is not JSON (a corrupt or
            truncated file), is not a calibration, lacks a field, has a coefficient out of range or too large for a
            float (an integer such as 10**400), a text field (device, model, dtype, torch, date, splitlab, clock,
            cost_model.source) that is not a string, or was measured on another model.
        TypeError: ``path`` is not a path.
    """
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a file name, got {type(path).__name__}")
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise CalibrationError(f"cannot read calibration {path}: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:  # read_text raised it bare, naming neither the file nor a calibration
        raise CalibrationError(f"{path} is not a calibration JSON: not UTF-8 text (byte {raw[err.start]:#04x} at "
                               f"offset {err.start})") from None
    try:
        data = json.loads(text)
    except ValueError as err:  # JSONDecodeError, or an integer of more digits than Python converts
        raise CalibrationError(f"{path} is not valid JSON (corrupt or truncated?): {err}") from None
    cal = from_json(data, str(path))
    if model is not None and cal.meta["model"] != model:
        raise CalibrationError(f"{path} was measured on model {cal.meta['model']!r} ({cal.meta['device']}), not "
                               f"{model!r}: calibrate this model with `python -m splitlab calibrate --model {model}`")
    return cal
