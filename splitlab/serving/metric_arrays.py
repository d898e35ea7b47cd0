"""A run's requests as numpy arrays, for metrics over many requests at once: :func:`columns` reads each request
once, :func:`per_request` gives every request's TTFT, TTST, TPOT and E2E by the very float operations of
:mod:`.metrics`' per-request functions, :func:`miss_masks` the first SLO each misses. :mod:`.metrics` builds its
summaries, attainment and miss counts on them (``tests/test_serving_metrics.py`` checks them float for float
against the per-request definitions)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .request import Request, State

__all__ = ["columns", "per_request", "miss_masks"]

NAN = float("nan")


def columns(requests: Sequence[Request]) -> dict[str, np.ndarray]:
    """What the metrics read of each request, as arrays in request order (one pass of Python over the requests,
    then numpy): ``finished`` (bool), ``tokens`` (token times), ``output`` (tokens), ``prompt``, ``arrival``, ``first``,
    ``second``, ``last`` (token times, NaN where there is none) and ``finish`` (``finish_s``, NaN where None), s."""
    finished = State.FINISHED
    rows = [(r.state == finished, len(tt), len(r.output), len(r.prompt), r.arrival_s, tt[0] if tt else NAN,
             tt[1] if len(tt) > 1 else NAN, tt[-1] if tt else NAN, NAN if r.finish_s is None else r.finish_s)
            if "_lazy" not in d else _deferred(r, finished)
            for r in requests for d in (r.__dict__,) for tt in (d.get("token_times_s"),)]
    a = np.array(rows, dtype=float).reshape(len(rows), 9)
    return dict(finished=a[:, 0] == 1, tokens=a[:, 1].astype(np.int64), output=a[:, 2].astype(np.int64),
                prompt=a[:, 3].astype(np.int64), arrival=a[:, 4], first=a[:, 5], second=a[:, 6], last=a[:, 7],
                finish=a[:, 8])


def _deferred(r: Request, finished: State) -> tuple:
    """A row of :func:`columns` for a request whose tokens the simulator deferred (not expanded to read it)."""
    n, first, second, last = r.token_summary()
    return (r.state == finished, n, n, len(r.prompt), r.arrival_s, first, second, last,
            NAN if r.finish_s is None else r.finish_s)


def per_request(c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """TTFT, TTST, TPOT and E2E of every request of :func:`columns` (s; NaN where :func:`.metrics.ttft_s` and the others
    give NaN), by the same float operations as those functions."""
    n, done = c["tokens"], c["finished"]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(done & (n > 1), (c["last"] - c["first"]) / (n - 1), NAN)
    return dict(ttft=c["first"] - c["arrival"], ttst=c["second"] - c["arrival"], tpot=tpot,
                e2e=np.where(done, c["last"] - c["arrival"], NAN))


def miss_masks(c: dict[str, np.ndarray], ttft_slo_s: float | None, tpot_slo_s: float | None) -> dict[str, np.ndarray]:
    """Per request, the first SLO it misses, as disjoint masks (the order of :func:`.metrics.slo_misses`)."""
    m, left = per_request(c), c["finished"].copy()
    out = dict(unfinished=~left, ttft=np.zeros_like(left), ttst=np.zeros_like(left), tpot=np.zeros_like(left))
    if ttft_slo_s is not None:
        out["ttft"] = left & ~(m["ttft"] <= ttft_slo_s)
        left &= ~out["ttft"]
        if tpot_slo_s is not None:
            out["ttst"] = left & (c["tokens"] > 1) & ~(m["ttst"] <= ttft_slo_s + tpot_slo_s)
            left &= ~out["ttst"]
    if tpot_slo_s is not None:
        out["tpot"] = left & ~(np.isnan(m["tpot"]) | (m["tpot"] <= tpot_slo_s))
    return out
