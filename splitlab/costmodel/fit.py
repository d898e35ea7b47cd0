"""Fitting a cost model to measurements, with the residuals that say how well it fits.

Three linear models (the terms of :class:`~.model.CostModel`):

- ``prefill``: one forward, ``prefill_s ~ a + b * tokens + c * squares [+ d * masked_pairs] [+ e * hybrid_rows
  + f * hybrid_context_tokens]`` (``tokens`` of all rows, ``squares`` the sum of each row's length squared,
  ``masked_pairs`` the query x key pairs attended through an explicit mask: a padded batch, a chunk after a
  cached prefix; a fused hybrid forward's decode rows and their cached tokens, 0 in any other forward:
  :func:`splitlab.costmodel.model.hybrid_fit_row`);
- ``decode``: one step, ``step_s ~ a + b * batch + c * context_tokens [+ d * batched]`` (cached tokens of all
  rows; ``batched`` is 1 for a batch of more than one sequence, else 0);
- ``transfer``: one KV copy, ``seconds ~ a + nbytes / bandwidth``.

The prefill form is DistServe's (Zhong et al., OSDI'24, sec. 4.2: ``a + b*sum(l) + c*sum(l^2)``, attention
growing with the square of the length); the decode form is its ``a + b*B + c*sum(context)``. The bracketed
terms are used where the measurements have their column (:func:`splitlab.profiling.calibrate` measures them):
they give a second kernel path its own coefficient, as Vidur (Agrawal et al., MLSys'24) profiles each kernel.

Coefficients are non-negative least squares on the *relative* error (each row divided by its measured time), so
a 1 ms prefill counts as much as a 100 ms one: the simulator must get short and long steps right alike. With at most
six terms the exact non-negative solution is found by trying every subset of terms (63). torch-free.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Fit", "fit_linear", "fit_prefill", "fit_decode", "fit_transfer", "coefficients"]

#: fit name -> (columns of the terms, measured column, CostModel field of each term)
FORMS = {
    "prefill": (("1", "tokens", "squares", "masked_pairs", "hybrid_rows", "hybrid_context_tokens"), "prefill_s",
                ("prefill_base_s", "prefill_per_token_s", "prefill_per_token2_s", "prefill_masked_per_pair_s",
                 "hybrid_per_row_s", "hybrid_per_context_token_s")),
    "decode": (("1", "batch", "context_tokens", "batched"), "step_s",
               ("decode_base_s", "decode_per_seq_s", "decode_per_token_s", "decode_batched_s")),
    "transfer": (("1", "nbytes"), "seconds", ("transfer_base_s", "transfer_s_per_byte")),
}
#: terms fitted only where the measurements have their column (a row without it counts 0 of it)
OPTIONAL_TERMS = ("masked_pairs", "batched", "hybrid_rows", "hybrid_context_tokens")


@dataclass
class Fit:
    """One fitted model: ``terms`` (column names, "1" = the constant), ``coef`` (seconds per unit of each term),
    ``rows`` (the measurements: a list of dicts with ``measured_s``, ``predicted_s`` and ``residual``, the
    relative error predicted / measured - 1), and summaries of the residuals."""

    name: str
    terms: tuple[str, ...]
    coef: tuple[float, ...]
    rows: list[dict] = field(default_factory=list)

    @property
    def residuals(self) -> np.ndarray:
        return np.array([r["residual"] for r in self.rows], dtype=float)

    @property
    def max_abs_residual(self) -> float:
        """Largest |predicted / measured - 1| over the measurements."""
        return float(np.abs(self.residuals).max()) if self.rows else math.nan

    @property
    def rms_residual(self) -> float:
        return float(np.sqrt(np.mean(self.residuals ** 2))) if self.rows else math.nan

    @property
    def r2(self) -> float:
        """Coefficient of determination of the predicted against the measured seconds."""
        y = np.array([r["measured_s"] for r in self.rows])
        p = np.array([r["predicted_s"] for r in self.rows])
        ss = float(((y - y.mean()) ** 2).sum())
        return 1.0 - float(((y - p) ** 2).sum()) / ss if ss > 0 else math.nan

    def predict(self, **values: float) -> float:
        """Predicted seconds for the given term values (e.g. ``predict(tokens=512, squares=512**2)``)."""
        return sum(c * (1.0 if t == "1" else float(values[t])) for t, c in zip(self.terms, self.coef))

    def formula(self) -> str:
        """The fitted model in readable units, e.g. ``"5.47 ms + 0.14 ms x batch + 1.14 us x context_tokens"``."""
        parts = []
        for t, c in zip(self.terms, self.coef):
            if t == "nbytes":
                parts.append(f"bytes / {1 / c / 1e9:.3g} GB/s" if c > 0 else "bytes / (too fast to measure)")
                continue
            scale, unit = next(((f, u) for f, u in ((1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")) if abs(c) >= f),
                               (1e-12, "ps") if c else (1.0, "s"))
            parts.append(f"{c / scale:.3g} {unit}" + ("" if t == "1" else f" x {t}"))
        return " + ".join(parts)

    def summary(self) -> dict:
        """JSON-ready: name, terms, coef, max_abs_residual, rms_residual, r2, n (measurements)."""
        return dict(name=self.name, terms=list(self.terms), coef=list(self.coef), n=len(self.rows),
                    max_abs_residual=self.max_abs_residual, rms_residual=self.rms_residual, r2=self.r2)

    def __repr__(self) -> str:
        terms = " + ".join(f"{c:.3g}" + ("" if t == "1" else f"*{t}") for t, c in zip(self.terms, self.coef))
        return (f"Fit({self.name}: {terms}; residuals max {self.max_abs_residual:.1%}, rms {self.rms_residual:.1%}, "
                f"n={len(self.rows)})")


def _rows(table) -> list[dict]:
    """Rows of a pandas DataFrame or a list of dicts, as dicts."""
    if hasattr(table, "to_dict"):
        return table.to_dict("records")
    return [dict(r) for r in table]


def fit_linear(name: str, table, terms: tuple[str, ...], measured: str, relative: bool = True) -> Fit:
    """Non-negative least squares of ``measured`` on ``terms``, with residuals.

    ``relative``: minimise the squared *relative* error (each row divided by its measured time: short and long
    steps count alike; right for a few points that are each a median of repeats). ``relative=False``: the plain
    squared error, whose fit is the *mean* time at given terms: right for many single noisy steps, where the
    relative fit leans to the fast ones (it weights each step by 1 / time squared) and so predicts below the mean
    time that queues and TPOT add up.

    Raises:
        ValueError: fewer measurements than terms, a missing column, or a measured time that is not > 0.
    """
    rows = _rows(table)
    if len(rows) < len(terms):
        raise ValueError(f"the {name} fit needs at least {len(terms)} measurements, got {len(rows)}")
    missing = [c for c in (*terms, measured) if c != "1" and c not in rows[0]]
    if missing:
        raise ValueError(f"the {name} measurements lack the column(s) {missing}")
    y = np.array([float(r[measured]) for r in rows])
    if not (np.isfinite(y).all() and (y > 0).all()):
        raise ValueError(f"the {name} measurements hold a time that is not > 0: {y.min()}")
    x = np.array([[1.0 if t == "1" else float(r[t]) for t in terms] for r in rows])
    xw, yw = (x / y[:, None], np.ones_like(y)) if relative else (x, y)  # relative: each row / its measured time
    best, best_err = np.zeros(len(terms)), math.inf
    for k in range(1, len(terms) + 1):
        for subset in itertools.combinations(range(len(terms)), k):
            coef, *_ = np.linalg.lstsq(xw[:, subset], yw, rcond=None)
            if (coef < 0).any():
                continue
            full = np.zeros(len(terms))
            full[list(subset)] = coef
            err = float(((xw @ full - yw) ** 2).sum())
            if err < best_err - 1e-15:
                best, best_err = full, err
    pred = x @ best
    out = [dict(r, measured_s=float(m), predicted_s=float(p), residual=float(p / m - 1))
           for r, m, p in zip(rows, y, pred)]
    return Fit(name, tuple(terms), tuple(float(c) for c in best), out)


def _form(name: str, table) -> tuple[list[dict], tuple[str, ...], str]:
    """The rows of ``table`` and the terms of fit ``name`` they support (optional ones where a row has them)."""
    rows = _rows(table)
    terms, measured, _ = FORMS[name]
    terms = tuple(t for t in terms if t not in OPTIONAL_TERMS or any(t in r for r in rows))
    rows = [r if all(t in r for t in terms if t != "1") else {**{t: 0 for t in terms if t != "1"}, **r} for r in rows]
    return rows, terms, measured


def fit_prefill(table, relative: bool = True) -> Fit:
    """``prefill_s ~ a + b * tokens + c * squares [+ d * masked_pairs] [+ e * hybrid_rows + f *
    hybrid_context_tokens]`` (see the module docstring). Also takes the
    table of ``profiling.measure_prefill`` (``batch`` rows of ``prompt_tokens`` each: tokens = batch x
    prompt_tokens, squares = batch x prompt_tokens^2; equal lengths, so no masked pairs)."""
    rows = [r if "tokens" in r or "prompt_tokens" not in r else
            {**r, "tokens": r.get("batch", 1) * r["prompt_tokens"],
             "squares": r.get("batch", 1) * r["prompt_tokens"] ** 2} for r in _rows(table)]
    rows, terms, measured = _form("prefill", rows)
    return fit_linear("prefill", rows, terms, measured, relative)


def fit_decode(table, relative: bool = True) -> Fit:
    """``step_s ~ a + b * batch + c * context_tokens [+ d * batched]`` (see the module docstring). Also takes the
    table of ``profiling.measure_decode`` (``batch`` rows of ``context`` cached tokens each: context_tokens =
    batch x context)."""
    rows = [r if "context_tokens" in r or "context" not in r else {**r, "context_tokens": r["batch"] * r["context"]}
            for r in _rows(table)]
    rows, terms, measured = _form("decode", rows)
    return fit_linear("decode", rows, terms, measured, relative)


def fit_transfer(table) -> Fit:
    """``seconds ~ a + nbytes / bandwidth`` (the slope is 1 / bandwidth)."""
    terms, measured, _ = FORMS["transfer"]
    return fit_linear("transfer", table, terms, measured)


def coefficients(fits) -> dict:
    """The :class:`~.model.CostModel` fields the ``fits`` set (a transfer fit's slope becomes a bandwidth; a
    zero slope, a link too fast to measure, becomes an infinite one)."""
    out = {}
    for f in fits:
        fields = dict(zip(FORMS[f.name][0], FORMS[f.name][2]))
        for field_name, c in zip((fields[t] for t in f.terms), f.coef):
            if field_name == "transfer_s_per_byte":
                out["transfer_bytes_per_s"] = 1.0 / c if c > 0 else math.inf
            else:
                out[field_name] = float(c)
    return out
