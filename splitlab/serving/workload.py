"""Seeded workloads: when requests arrive and how long their prompts and outputs are.

Arrivals:
- Poisson: exponential gaps with mean ``1 / rate`` (the usual open-loop serving benchmark; DistServe, OSDI'24,
  and vLLM's benchmark_serving draw arrivals this way).
- Bursty: gamma-distributed gaps with the same mean and a coefficient of variation ``cv`` (shape ``1/cv^2``);
  ``cv = 1`` is Poisson, ``cv > 1`` clumps requests into bursts (as vLLM's ``--burstiness`` does, with
  burstiness = shape).

Lengths: :class:`Fixed`, :class:`Uniform` and :class:`LogNormal` (given by its median, clipped to a range).

Named workloads (sizes for a model with a 2048-token context, so that CPU runs stay short; scaled by
``model.max_context / 2048`` up to 4x for larger presets, and clipped to fit the context):

| name      | prompt tokens              | output tokens    | shape of the traffic                            |
|-----------|----------------------------|------------------|-------------------------------------------------|
| chat      | lognormal, median 200      | uniform 32-96    | medium prompts, medium answers                  |
| research  | uniform 600-1000           | uniform 16-48    | long prompts (retrieved context), short answers |
| summarize | uniform 1000-1500          | uniform 16-32    | very long prompts, short outputs                |
| code      | uniform 30-80              | uniform 100-150  | short prompts, long outputs                     |
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ..phases.sampling_params import SamplingParams
from .request import Request

__all__ = ["random_ids", "Fixed", "Uniform", "LogNormal", "WorkloadSpec", "WORKLOADS", "poisson_arrivals",
           "gamma_arrivals", "make_workload", "workload_scale"]

BASE_CONTEXT = 2048  # context the named workloads' sizes are written for (the tiny model's)
#: most requests one workload holds: a million chat requests take ~2 GB of prompt ids and minutes to simulate
#: (100k took 13-24 s here); 1e11 asked numpy for 745 GiB of arrival times
MAX_REQUESTS = 1_000_000


def random_ids(n: int, seed, vocab: int = 256) -> list[int]:
    """``n`` token ids drawn uniformly from ``0..vocab-1`` by numpy's generator seeded with ``seed`` (an int or a
    sequence of ints), so every prompt of a workload is reproducible on its own."""
    return np.random.default_rng(seed).integers(0, vocab, size=n).tolist()


def _check_lengths(kind: str, low: float, high: float, **others) -> None:
    """A ValueError unless ``low <= high`` are finite numbers >= 1 (token counts) and ``others`` finite numbers >= 0
    (a lognormal's median and sigma; a NaN failed deep in numpy, a length of 0 or -5 was served as 1 token)."""
    real = lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)  # noqa: E731
    if not (real(low) and real(high) and 1 <= low <= high) or not all(real(v) and v >= 0 for v in others.values()):
        if kind == "Fixed":
            raise ValueError(f"Fixed length n must be a finite token count >= 1, got {low!r}")
        got = ", ".join(f"{k}={v!r}" for k, v in {"low": low, "high": high, **others}.items())
        raise ValueError(f"{kind} lengths must be finite token counts with 1 <= low <= high"
                         + (f" ({', '.join(others)} finite, >= 0)" if others else "") + f", got {got}")


@dataclass(frozen=True)
class Fixed:
    """Every length equals ``n`` (a finite number >= 1, else ValueError)."""

    n: int

    def __post_init__(self):
        _check_lengths("Fixed", self.n, self.n)

    def sample(self, count: int, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
        return np.full(count, max(1, round(self.n * scale)), dtype=int)


@dataclass(frozen=True)
class Uniform:
    """Integers uniform in ``[low, high]`` (both included; 1 <= low <= high, else ValueError)."""

    low: int
    high: int

    def __post_init__(self):
        _check_lengths("Uniform", self.low, self.high)

    def sample(self, count: int, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
        lo, hi = max(1, round(self.low * scale)), max(1, round(self.high * scale))
        return rng.integers(lo, hi + 1, size=count)


@dataclass(frozen=True)
class LogNormal:
    """Lognormal with the given ``median`` and log-space ``sigma``, rounded and clipped to ``[low, high]``
    (real prompt lengths are heavy-tailed; the clip keeps them inside the context). ValueError: a median or sigma
    that is not a finite number >= 0 (the median > 0), or not 1 <= low <= high."""

    median: float
    sigma: float
    low: int
    high: int

    def __post_init__(self):
        _check_lengths("LogNormal", self.low, self.high, median=self.median, sigma=self.sigma)
        if not self.median > 0:
            raise ValueError(f"LogNormal median must be > 0 tokens, got {self.median!r}")

    def sample(self, count: int, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
        x = rng.lognormal(np.log(self.median * scale), self.sigma, size=count)
        return np.clip(np.rint(x), max(1, round(self.low * scale)), max(1, round(self.high * scale))).astype(int)


@dataclass(frozen=True)
class WorkloadSpec:
    """A named workload: prompt and output length distributions, and what it stands for."""

    name: str
    prompt: Fixed | Uniform | LogNormal
    output: Fixed | Uniform | LogNormal
    description: str = ""


WORKLOADS: dict[str, WorkloadSpec] = {w.name: w for w in [
    WorkloadSpec("chat", LogNormal(200, 0.5, 32, 600), Uniform(32, 96), "medium prompts and answers"),
    WorkloadSpec("research", Uniform(600, 1000), Uniform(16, 48), "long prompts, short streamed answers"),
    WorkloadSpec("summarize", Uniform(1000, 1500), Uniform(16, 32), "very long prompts, short outputs"),
    WorkloadSpec("code", Uniform(30, 80), Uniform(100, 150), "short prompts, long outputs"),
]}


def _check_rate(n: int, rate_per_s: float) -> None:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"number of requests must be an integer, got {n!r}")
    if not 0 <= n <= MAX_REQUESTS:
        raise ValueError(f"number of requests must be in 0 .. {MAX_REQUESTS:,} (a workload holds at most "
                         f"{MAX_REQUESTS:,} requests: their prompts are built in memory), got {n:,}")
    if isinstance(rate_per_s, bool) or not isinstance(rate_per_s, numbers.Real):
        raise TypeError(f"rate_per_s must be a number of requests/s, got {rate_per_s!r}")
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ValueError(f"rate_per_s must be a finite rate > 0 requests/s, got {rate_per_s}")


def poisson_arrivals(n: int, rate_per_s: float, seed: int = 0) -> np.ndarray:
    """``n`` arrival times (s, ascending, first gap included) of a Poisson process of ``rate_per_s``."""
    _check_rate(n, rate_per_s)
    return np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate_per_s, size=n))


def gamma_arrivals(n: int, rate_per_s: float, cv: float = 2.0, seed: int = 0) -> np.ndarray:
    """``n`` arrival times with gamma gaps of mean ``1/rate_per_s`` and coefficient of variation ``cv``.

    ``cv`` is kept in [0.001, 100]: below, the gaps are evenly spaced to a millionth (and ``cv ** 2`` underflows
    to 0 at 1e-200); above, the gamma shape ``1 / cv^2`` is so small that a run's whole span is one or two draws,
    so the rate it realises is no longer the rate asked (and ``cv ** 2`` overflows at 1e200).

    Raises:
        ValueError: cv outside [0.001, 100], rate <= 0 or n < 0.
    """
    _check_rate(n, rate_per_s)
    if isinstance(cv, bool) or not isinstance(cv, numbers.Real) or not 1e-3 <= cv <= 100:
        raise ValueError(f"cv must be in [0.001, 100] (1 = Poisson, > 1 = bursty; below 0.001 the gaps are even, "
                         f"above 100 a run is one or two bursts and misses its rate), got {cv!r}")
    shape = 1.0 / cv ** 2
    return np.cumsum(np.random.default_rng(seed).gamma(shape, 1.0 / (rate_per_s * shape), size=n))


def workload_scale(max_context: int) -> float:
    """How much to stretch the named workloads' lengths for a model of ``max_context`` tokens (0.25x..4x)."""
    return float(np.clip(max_context / BASE_CONTEXT, 0.25, 4.0))


#: fewest tokens of context a workload fits in: a prompt token and one answer token
MIN_CONTEXT = 2
#: most tokens of context a workload is drawn for: 2**31 (past 2**63 numpy cannot even clip the lengths to it; the
#: longest published contexts are about 1e7)
MAX_CONTEXT = 2 ** 31


def _longest(lengths: Fixed | Uniform | LogNormal) -> int:
    return getattr(lengths, "high", getattr(lengths, "n", 1))


def _shortest(lengths: Fixed | Uniform | LogNormal) -> int:
    return getattr(lengths, "low", getattr(lengths, "n", 1))


def _round_up(x: float) -> float:
    """``x`` rounded up to 3 significant digits (a smallest scale printed with .3g must still work)."""
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    return math.ceil(x / step) * step


def _tokens(x: float) -> str:
    """A token count as text: 3,200; past 1e15 (a scale of 1e300) 3.2e+301, not 300 digits."""
    return f"{x:,.0f}" if x < 1e15 else f"{x:.3g}"


def _check_context(context: int) -> None:
    if context > MAX_CONTEXT:
        raise ValueError(f"a context of {context:.3g} tokens is out of scale: a workload is drawn for a model (or "
                         f"cost model) with max_context <= 2**31 ({MAX_CONTEXT:,})")
    if context < MIN_CONTEXT:
        raise ValueError(f"a context of {context} token{'s' if context != 1 else ''} cannot hold a prompt and one "
                         f"answer token: a workload needs a model (or cost model) with max_context >= {MIN_CONTEXT}")


def _check_scale(spec: WorkloadSpec, scale: float, context: int) -> None:
    """A scale that makes even the shortest prompt reach the context would clip every prompt to ``context - 1``
    and every answer to one token (and past 2**63 tokens numpy cannot draw the lengths at all): refused. So is one
    that shrinks the longest prompt below one token, or the longest answer (of a workload whose answers have two
    tokens or more) below two: every request would get one answer token, and no TPOT could be measured."""
    if context < 3:  # a prompt token and two answer tokens: the fewest that measure a TPOT
        raise ValueError(f"no scale fits a context of {context} tokens: every {spec.name} prompt would be cut to "
                         f"{context - 1} token and every answer to 1 (no TPOT); a scale needs max_context >= 3")
    shortest = _shortest(spec.prompt)
    if not shortest * scale < context - 1 - 0.5:  # round(); inf (scale 1e308) could not be rounded
        raise ValueError(f"scale {scale:g} stretches every {spec.name} prompt past the context of {context} tokens "
                         f"(the shortest, {shortest} tokens, becomes {_tokens(shortest * scale)}): every prompt would "
                         f"be cut to {context - 1} tokens and every answer to 1; use a scale <= "
                         f"{(context - 2) / shortest:.3g}")
    prompt, answer = _longest(spec.prompt), _longest(spec.output)
    smallest = _round_up(max(0.5 / prompt * (1 + 1e-9), 1.5 / answer if answer >= 2 else 0.0))
    if answer >= 2 and round(answer * scale) < 2:
        raise ValueError(f"scale {scale:g} cuts every {spec.name} answer to one token (the longest, {answer} tokens, "
                         f"becomes {answer * scale:.3g}): no TPOT could be measured; use a scale >= {smallest:.3g}")
    if round(prompt * scale) < 1:
        raise ValueError(f"scale {scale:g} shrinks every {spec.name} prompt below one token (the longest, {prompt} "
                         f"tokens, becomes {prompt * scale:.3g}); use a scale >= {smallest:.3g}")


def make_workload(name: str | WorkloadSpec, n_requests: int, rate_per_s: float, seed: int = 0, model=None,
                  arrival: str = "poisson", cv: float = 2.0, scale: float | None = None,
                  sampling: SamplingParams | None = None) -> list[Request]:
    """Requests of a named (or custom) workload with seeded arrivals, lengths and prompt ids.

    Args:
        name: a key of :data:`WORKLOADS` or a :class:`WorkloadSpec`.
        n_requests, rate_per_s: how many requests, and their mean arrival rate (requests/s).
        seed: fixes arrivals, lengths and token ids (same seed -> identical workload).
        model: a :class:`splitlab.LoadedModel` (or None: a 2048-token context and byte ids 0..255). Prompt ids
            are drawn from ``0..min(256, vocab)-1`` like :func:`splitlab.profiling.random_prompt`.
        arrival: "poisson" or "gamma" (bursty, with ``cv``).
        scale: length multiplier; None derives it from the model's context (:func:`workload_scale`).
        sampling: None (greedy) or sampling settings; each request gets seed ``sampling.seed + id``.

    Every request fits the context: output lengths are cut to ``context - prompt`` and prompts to
    ``context - 1``. A ``scale`` that would cut every prompt (the shortest already reaches the context) is refused,
    and so is one that leaves every request a single answer token (no TPOT): the message gives the scales that work.

    Raises:
        KeyError: unknown workload name (the message lists the known ones).
        TypeError: a count, rate, name, model or sampling of the wrong kind.
        ValueError: bad rate, cv, count, scale (finite, > 0, leaving some prompt inside the context and the longest
            answer two tokens or more), seed (an integer >= 0) or arrival kind; a context below
            :data:`MIN_CONTEXT` (2) tokens, or below 3 with a ``scale``.
    """
    if scale is not None and not (isinstance(scale, numbers.Real) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number > 0 (or None: from the model's context), got {scale!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if isinstance(name, str):
        if name not in WORKLOADS:
            raise KeyError(f"unknown workload {name!r}; choose one of {sorted(WORKLOADS)}")
        spec = WORKLOADS[name]
    elif isinstance(name, WorkloadSpec):
        spec = name
    else:
        raise TypeError(f"name must be a workload name ({', '.join(sorted(WORKLOADS))}) or a WorkloadSpec, got "
                        f"{type(name).__name__}")
    if sampling is not None and not isinstance(sampling, SamplingParams):
        raise TypeError(f"sampling must be None (greedy) or a splitlab.SamplingParams, got {sampling!r}")
    if model is not None and not (hasattr(model, "max_context") and hasattr(model, "vocab_size")):
        raise TypeError(f"model must be a splitlab LoadedModel (lm = splitlab.load_model({model!r:.40})) or None, got "
                        f"{type(model).__name__}")
    context = int(model.max_context) if model is not None else BASE_CONTEXT
    vocab = 256 if model is None or model.vocab_size is None else min(256, int(model.vocab_size))  # a cost model: None
    _check_context(context)
    if scale is not None:
        _check_scale(spec, scale, context)
    scale = workload_scale(context) if scale is None else scale
    if arrival == "poisson":
        times = poisson_arrivals(n_requests, rate_per_s, seed)
    elif arrival == "gamma":
        times = gamma_arrivals(n_requests, rate_per_s, cv, seed)
    else:
        raise ValueError(f"arrival must be 'poisson' or 'gamma', got {arrival!r}")
    rng = np.random.default_rng([seed, 1])
    prompts = np.minimum(spec.prompt.sample(n_requests, rng, scale), context - 1)
    outputs = np.maximum(1, np.minimum(spec.output.sample(n_requests, rng, scale), context - prompts))
    requests = []
    for i in range(n_requests):
        ids = random_ids(int(prompts[i]), [seed, 2, i], vocab)
        params = None if sampling is None else SamplingParams(sampling.temperature, sampling.top_k, sampling.top_p,
                                                              sampling.seed + i)
        requests.append(Request(i, float(times[i]), ids, int(outputs[i]), params))
    return requests
