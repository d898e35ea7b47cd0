"""Serving metrics, defined once (the definitions of docs/architecture.md). All times in seconds.

- TTFT (time to first token): arrival -> first output token available to the client. It includes queueing,
  prefill, and, in a split, the KV transfer: by default the decode side emits the first token once the cache has
  arrived and the decode worker has admitted the request into its batch (``ServingConfig.first_token_on="decode"``),
  as vLLM's disaggregated proxy streams every token from the decode instance. ``first_token_on="prefill"`` is
  DistServe's convention: its simulator (``simdistserve/base/organize_data.py``) ends TTFT when the prefill ends
  and counts the transfer and the wait for a decode slot in the decode latency that it divides into TPOT.
- ITL (inter-token latency): every gap between consecutive output tokens of one request; a request with n
  tokens has n - 1 gaps. TTFT is not one of them.
- TPOT (time per output token): ``(E2E - TTFT) / (tokens - 1)`` per request, i.e. the mean ITL of that
  request; undefined (NaN) for a single-token request.
- E2E: arrival -> last output token.
- TTST (time to second token): arrival -> second output token, the TTFT plus the first ITL. splitlab's addition
  to DistServe's TTFT and TPOT (not a metric of DistServe or vLLM).
- SLO attainment: the share of *submitted* requests that finished with TTFT <= the TTFT SLO, TPOT <= the
  TPOT SLO and, when both are set, TTST <= TTFT SLO + TPOT SLO (a rejected or unfinished request is a miss; a
  one-token request meets any TPOT SLO). The TTST bound says that a stream has started only once its second token
  is out: without it a layout whose prefill side sends the first token at once, while the request then waits
  for a decode slot, would pass the TTFT SLO and average the wait away over hundreds of tokens of TPOT (the
  "backlog trap", which DistServe's convention falls into: its TTFT ends with the prefill and the wait for a
  decode slot goes into TPOT). With the first token on the decode side TTFT already holds the transfer and the
  wait for a batch slot; TTST still closes the trap for ``first_token_on="prefill"`` and for a colocated first
  ITL held up behind prefills.
- Link time (:func:`link_s`): a split request's KV hand-off from the moment its cache left the prefill worker's
  outbox to its arrival (queueing at the NICs and the part of the transfer no prefill hid). A TTFT or TTST miss
  is the link's (:func:`slo_misses`' ``transfer``) when the request would have met that bound without it.
- Throughput: output tokens of completed requests / (last finish - first arrival); per worker divides by every
  worker of both pools (a 1P+1D split is 2 workers, like colocated --workers 2).
- Goodput (Zhong et al., "DistServe", OSDI'24): the highest request rate at which SLO attainment >= 90%, here
  also per worker (rate / workers).

Percentiles use numpy's default linear interpolation; the same definitions appear in vLLM's benchmark_serving.
"""
from __future__ import annotations

import math
import numbers
from itertools import chain
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from .request import Request, State

__all__ = ["ttft_s", "ttst_s", "tpot_s", "e2e_s", "itl_s", "link_s", "slo_misses", "percentiles", "meets_slo", "slo_attainment",
           "throughput",
           "goodput", "request_table", "summarize", "DEFAULT_TTFT_SLO_S", "DEFAULT_TPOT_SLO_S"]

DEFAULT_TTFT_SLO_S = 1.0   # generous defaults for the tiny model on a laptop CPU; pass your own
DEFAULT_TPOT_SLO_S = 0.1
NAN = float("nan")


def ttft_s(r: Request) -> float:
    """Arrival -> first token (s); NaN if no token was emitted."""
    return r.token_times_s[0] - r.arrival_s if r.token_times_s else NAN


def ttst_s(r: Request) -> float:
    """Arrival -> second token (s); NaN for fewer than two tokens."""
    return r.token_times_s[1] - r.arrival_s if len(r.token_times_s) > 1 else NAN


def link_s(r: Request) -> float:
    """Time (s) from the hand-off of ``r``'s cache (it left the prefill worker's outbox) to its arrival at the decode
    worker: queueing at the NICs and the transfer time no prefill hid (:mod:`.nic`); 0 without a hand-off."""
    return r.transfer_end_s - r.transfer_start_s if r.transfer_end_s is not None else 0.0


def e2e_s(r: Request) -> float:
    """Arrival -> last token (s); NaN unless the request FINISHED."""
    return r.token_times_s[-1] - r.arrival_s if r.state == State.FINISHED else NAN


def tpot_s(r: Request) -> float:
    """``(E2E - TTFT) / (tokens - 1)`` (s per token); NaN for unfinished or single-token requests."""
    n = len(r.token_times_s)
    if r.state != State.FINISHED or n < 2:
        return NAN
    return (r.token_times_s[-1] - r.token_times_s[0]) / (n - 1)


def itl_s(r: Request) -> np.ndarray:
    """The ``tokens - 1`` gaps between consecutive output tokens (s); empty for fewer than 2 tokens."""
    return np.diff(np.asarray(r.token_times_s, dtype=float))


def percentiles(values: Iterable[float], qs: Sequence[float] = (50, 90, 99)) -> dict[str, float]:
    """``{"p50": ..., "p90": ..., "p99": ..., "mean": ...}`` of the finite values (NaN when there are none)."""
    x = values if isinstance(values, np.ndarray) else np.fromiter(
        (NAN if v is None else v for v in values), dtype=float)
    x = x[np.isfinite(x)]
    out = {f"p{q:g}": (float(np.percentile(x, q)) if x.size else NAN) for q in qs}
    out["mean"] = float(x.mean()) if x.size else NAN
    return out


def _check_slos(ttft_slo_s: float | None, tpot_slo_s: float | None) -> None:
    for name, slo in (("ttft_slo_s", ttft_slo_s), ("tpot_slo_s", tpot_slo_s)):
        if slo is not None and not (isinstance(slo, numbers.Real) and not isinstance(slo, bool) and slo > 0):  # NaN too
            raise ValueError(f"{name} must be a time > 0 s (or None for no limit), got {slo!r}")


def meets_slo(r: Request, ttft_slo_s: float | None, tpot_slo_s: float | None) -> bool:
    """True if ``r`` finished within both SLOs (None = no limit on that metric) and, with both set, its second
    token came within their sum (module docstring: the TTST bound).

    Raises:
        ValueError: an SLO that is not a time > 0 (a negative one would fail every request silently).
    """
    _check_slos(ttft_slo_s, tpot_slo_s)
    return _miss(r, ttft_slo_s, tpot_slo_s) is None


def _miss(r: Request, ttft_slo_s: float | None, tpot_slo_s: float | None) -> str | None:
    """The first SLO ``r`` misses ("unfinished", "ttft", "ttst", "tpot"), or None if it meets them all."""
    if r.state != State.FINISHED:
        return "unfinished"
    if ttft_slo_s is not None and not ttft_s(r) <= ttft_slo_s:
        return "ttft"
    if ttft_slo_s is not None and tpot_slo_s is not None and len(r.token_times_s) > 1 and \
            not ttst_s(r) <= ttft_slo_s + tpot_slo_s:
        return "ttst"
    tpot = tpot_s(r)
    if tpot_slo_s is not None and not (math.isnan(tpot) or tpot <= tpot_slo_s):
        return "tpot"
    return None


def slo_misses(requests: Sequence[Request], ttft_slo_s: float | None, tpot_slo_s: float | None) -> dict[str, int]:
    """How many requests miss each SLO, each counted once under the first it misses in the order unfinished
    (rejected, failed), ttft, ttst (the second token later than TTFT SLO + TPOT SLO), tpot; and ``transfer``: of
    the ttft and ttst misses, those the KV hand-off caused (the request would have met that bound without its
    :func:`link_s`), already counted under ttft or ttst.

    Raises:
        ValueError: an SLO that is not a time > 0.
    """
    _check_slos(ttft_slo_s, tpot_slo_s)
    out = dict(unfinished=0, ttft=0, ttst=0, tpot=0, transfer=0)
    for r in requests:
        miss = _miss(r, ttft_slo_s, tpot_slo_s)
        if miss:
            out[miss] += 1
            if miss == "ttft" and r.transfer_end_s is not None:
                out["transfer"] += ttft_s(r) - link_s(r) <= ttft_slo_s
            elif miss == "ttst" and r.transfer_end_s is not None:
                out["transfer"] += ttst_s(r) - link_s(r) <= ttft_slo_s + tpot_slo_s
    return out


def slo_attainment(requests: Sequence[Request], ttft_slo_s: float | None, tpot_slo_s: float | None) -> float:
    """Share (0..1) of all submitted requests meeting both SLOs; NaN for no requests.

    Raises:
        ValueError: an SLO that is not a time > 0.
    """
    _check_slos(ttft_slo_s, tpot_slo_s)
    if not requests:
        return NAN
    return sum(_miss(r, ttft_slo_s, tpot_slo_s) is None for r in requests) / len(requests)


def throughput(requests: Sequence[Request], n_workers: int = 1) -> dict[str, float]:
    """Output and prompt tokens per second over the run (first arrival -> last finish of a completed request).

    Returns ``throughput_tokens_per_s`` (output tokens), ``throughput_tokens_per_s_per_worker``,
    ``input_tokens_per_s`` and ``duration_s``.

    Raises:
        ValueError: n_workers < 1.
    """
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    done = [r for r in requests if r.state == State.FINISHED]
    if not done:
        return dict(throughput_tokens_per_s=0.0, throughput_tokens_per_s_per_worker=0.0, input_tokens_per_s=0.0,
                    duration_s=0.0)
    duration = max(r.finish_s for r in done) - min(r.arrival_s for r in requests)
    out_tokens = sum(len(r.output) for r in done)
    in_tokens = sum(r.prompt_len for r in done)
    rate = out_tokens / duration if duration > 0 else NAN
    return dict(throughput_tokens_per_s=rate, throughput_tokens_per_s_per_worker=rate / n_workers,
                input_tokens_per_s=in_tokens / duration if duration > 0 else NAN, duration_s=duration)


def goodput(points: Iterable[tuple[float, float]], target: float = 0.9, workers: int = 1) -> float:
    """DistServe goodput from measured ``(rate_per_s, attainment)`` pairs: the highest tested rate such that it
    and every lower tested rate reach ``target`` attainment, divided by ``workers`` (requests/s per worker).
    Stopping at the first failing rate keeps one lucky high-rate run from counting. 0.0 if even the lowest
    rate fails.

    Raises:
        ValueError: no points, target outside (0, 1], or workers not an integer >= 1.
    """
    pts = sorted((float(r), float(a)) for r, a in points)
    if not pts:
        raise ValueError("goodput needs at least one (rate, attainment) pair")
    if not 0 < target <= 1:
        raise ValueError(f"target must be in (0, 1], got {target}")
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1 (the rate is divided by it), got {workers!r}")
    best = 0.0
    for rate, att in pts:
        if not att >= target:
            break
        best = rate
    return best / workers


def request_table(requests: Sequence[Request]) -> pd.DataFrame:
    """One row per request: id, arrival_s, prompt_tokens, output_tokens, state, ttft_s, ttst_s, tpot_s, e2e_s,
    max_itl_s, prefill_worker, decode_worker, transfer_s, reject_reason."""
    rows = []
    for r in requests:
        gaps = itl_s(r)
        rows.append(dict(id=r.id, arrival_s=r.arrival_s, prompt_tokens=r.prompt_len, output_tokens=len(r.output),
                         state=r.state.value, ttft_s=ttft_s(r), ttst_s=ttst_s(r), tpot_s=tpot_s(r), e2e_s=e2e_s(r),
                         max_itl_s=float(gaps.max()) if gaps.size else NAN, prefill_worker=r.prefill_worker,
                         decode_worker=r.decode_worker,
                         transfer_s=(r.transfer_end_s - r.transfer_start_s) if r.transfer_end_s is not None else NAN,
                         reject_reason=r.reject_reason))
    return pd.DataFrame(rows, columns=_REQUEST_COLUMNS)  # the columns even for no requests (plots select them)


_REQUEST_COLUMNS = ["id", "arrival_s", "prompt_tokens", "output_tokens", "state", "ttft_s", "ttst_s", "tpot_s", "e2e_s",
                    "max_itl_s", "prefill_worker", "decode_worker", "transfer_s", "reject_reason"]


def _all_itl_s(requests: Sequence[Request]) -> np.ndarray:
    """Every ITL of ``requests``, in order: their token times as one array, differenced once with numpy, the gaps
    across two requests dropped (instead of an array per request)."""
    counts = np.fromiter((len(r.token_times_s) for r in requests), dtype=np.int64, count=len(requests))
    times = np.fromiter(chain.from_iterable(r.token_times_s for r in requests), dtype=float, count=int(counts.sum()))
    gaps = np.diff(times)
    starts = np.cumsum(counts)[:-1] - 1  # the gap from each request's last token to the next one's first
    return np.delete(gaps, starts[(starts >= 0) & (starts < gaps.size)])


def summarize(requests: Sequence[Request], n_workers: int = 1, ttft_slo_s: float | None = DEFAULT_TTFT_SLO_S,
              tpot_slo_s: float | None = DEFAULT_TPOT_SLO_S) -> dict:
    """All metrics of a run as one JSON-friendly dict: submitted, completed, rejected, failed, ``ttft_s``,
    ``tpot_s``, ``itl_s``, ``e2e_s`` (each ``{p50, p90, p99, mean}``), slo_attainment (with the SLOs used), the
    :func:`throughput` fields and n_workers; ``ttst_s`` (time to second token) too."""
    completed = [r for r in requests if r.state == State.FINISHED]
    return dict(submitted=len(requests), completed=len(completed),
                rejected=sum(r.state == State.REJECTED for r in requests),
                failed=sum(r.state == State.FAILED for r in requests),
                ttft_s=percentiles(ttft_s(r) for r in completed), ttst_s=percentiles(ttst_s(r) for r in completed),
                tpot_s=percentiles(tpot_s(r) for r in completed),
                itl_s=percentiles(_all_itl_s(completed)),
                e2e_s=percentiles(e2e_s(r) for r in completed),
                slo_attainment=slo_attainment(requests, ttft_slo_s, tpot_slo_s), ttft_slo_s=ttft_slo_s,
                tpot_slo_s=tpot_slo_s, n_workers=n_workers, **throughput(requests, n_workers))
