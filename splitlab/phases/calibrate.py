"""Calibrating the simulator on this device: measure prefill, decode and KV copies of a real model with the very
engine calls the emulated back end times, and fit the cost model of :mod:`splitlab.costmodel` to them.

    import splitlab as sl
    lm = sl.load_model("tiny")
    cal = sl.profiling.calibrate(lm)          # a few seconds on a CPU
    cal.table()                               # each fit's coefficients and residuals
    sl.costmodel.save(cal, "tiny.json")       # or: python -m splitlab calibrate --model tiny --out tiny.json
    res = sl.serving.run(reqs, cfg, sl.serving.CostModelExecutor(cal.cost))

What is measured (each point is the ``statistic`` of ``repeats`` runs after a warm-up): the step kinds the
serving scheduler runs, each the way the emulated back end runs it.

- prefill: one forward of one prompt of ``n`` tokens for every ``n`` of ``prompt_tokens`` (the causal kernel);
  of 2 prompts for the ``n`` from 64 to half the longest and of ``prefill_batch`` prompts for those up to an eighth,
  their lengths spread from ``n / 2`` to ``n`` (a prefill-first batch: left-padded to the longest, so attention
  goes through an explicit mask); and of chunks of ``n`` new tokens after ``p`` cached ones (chunked prefill:
  the chunk's queries attend to the cached prefix through a mask), for ``n`` in ``chunk_tokens`` and ``p`` in
  ``chunk_prefixes``; and, where the engine runs them (:func:`splitlab.phases.fused.fused_unsupported`), fused
  hybrid forwards: a chunk of ``n`` tokens after the first prefix packed with a decode batch of a quarter and all
  of the largest decode batch (rows holding each of ``contexts`` down to half of it), each counted as the prefill
  forward :func:`splitlab.costmodel.model.hybrid_as_prefill` makes of it plus its decode rows and their cached
  tokens. Fitted as ``a + b * tokens + c * squares + d * masked_pairs + e * hybrid_rows + f *
  hybrid_context_tokens`` (:func:`splitlab.costmodel.fit_prefill`; the last two are 0 in every other forward),
  a batch counted as its rows padded to the longest.
- decode: ``b`` rows for every ``b`` of ``decode_batches`` and ``c`` of ``contexts``, the rows holding from
  ``c / 2`` to ``c`` cached tokens (a serving batch is ragged, and a padded batch takes the engine's masked
  path); each run is the next step of the one before (its cache appended in place, as a running batch is),
  so a one-time copy into a fresh buffer lands only on the warm-up. Fitted as ``a + b * batch + c *
  context_tokens + d * batched`` (``batched``: more than one row; a batch of one runs matrix-vector kernels).
- transfer: a same-device copy (``KVCache.clone``, what the emulated hand-off does on one device) of caches of
  ``transfer_tokens`` tokens; fitted as ``a + bytes / bandwidth``.

splitlab's engine pads a batch of prompts to the longest, so the calibration sets ``padded_prefill``; where it
runs hybrid steps in two passes, it sets ``hybrid_path`` "two-pass" and ``two_pass_reason``, so the simulator
charges them as that engine runs them.
"""
from __future__ import annotations

import datetime
import math
import numbers
import warnings
from typing import Iterable, Sequence

import torch

from ..common.progress import progress_bar, show_progress
from ..costmodel import Calibration, CostModel, fit_decode, fit_prefill, fit_transfer
from ..costmodel.fit import coefficients
from ..costmodel.model import hybrid_fit_row, hybrid_terms
from ..kvcache import KVCache
from ..sizing import activation_bytes_per_token, kv_bytes_per_token
from .device import _CPU_CLOCK, STATISTICS, Timer, check_measurement, describe_device
from .engine import decode_step, forward_logits, prefill
from .fit_quality import NOISY_RESIDUAL, NoisyCalibrationWarning, fit_warnings  # re-exported
from .fused import fused_unsupported, hybrid_forward
from .hardware import device_memory_bytes
from .models import LoadedModel

__all__ = ["calibrate", "fit_warnings", "NoisyCalibrationWarning", "NOISY_RESIDUAL"]

def _ids(lm: LoadedModel, n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, min(256, lm.vocab_size), (n,), generator=g).tolist()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("splitlab")
    except PackageNotFoundError:
        return "unknown"


def _timed(fn, repeats: int) -> list[float]:
    fn()  # warm-up
    return [fn() for _ in range(repeats)]


def _given(values, default):
    """``values`` unless None (an empty list is the caller's and is refused by :func:`_lengths`)."""
    return default if values is None else values


#: the most tokens one measured forward may hold (rows x tokens): a prefill of prefill_batch prompts, or the
#: prefill that builds the caches of the largest decode batch (prefill_batch=100000 ran for minutes)
MAX_FORWARD_TOKENS = 1 << 16
#: the most KV cache the decode grid may build (its largest batch x its longest context x KV bytes per token):
#: decode_batches=[65536], contexts=[2000] asked for 134 GB after 32 s of measuring
MAX_KV_BYTES = 8 << 30


def _lengths(values, name: str, limit: int) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list of whole numbers, got {type(values).__name__} {values!r:.40}")
    values = list(values)
    if any(isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v)
           or not float(v).is_integer() for v in values):
        raise ValueError(f"{name} must be whole numbers, got {values!r:.80}")
    out = sorted({int(v) for v in values})
    if not out or out[0] < 1 or out[-1] > limit:
        raise ValueError(f"{name} must be integers in 1..{limit}, got {list(values)}")
    return out


def _check_size(lm: LoadedModel, prompt_tokens: list[int], prefill_batch: int, decode_batches: list[int],
                contexts: list[int]) -> None:
    """Refuse, before anything is measured, a forward of more than :data:`MAX_FORWARD_TOKENS` tokens or a decode
    grid whose caches exceed :data:`MAX_KV_BYTES` (or half this device's memory)."""
    longest = prompt_tokens[-1]
    batched = [n for n in prompt_tokens if n * 8 <= longest] if prefill_batch > 2 else []
    if batched and prefill_batch * batched[-1] > MAX_FORWARD_TOKENS:
        raise ValueError(f"prefill_batch {prefill_batch} x {batched[-1]} prompt tokens = "
                         f"{prefill_batch * batched[-1]:,} tokens in one forward, more than the {MAX_FORWARD_TOKENS:,} "
                         f"calibrate measures: use a prefill_batch <= {max(1, MAX_FORWARD_TOKENS // batched[-1])}")
    rows, context = max(decode_batches), max(contexts)
    if rows * context > MAX_FORWARD_TOKENS:
        raise ValueError(f"decode_batches up to {rows} x contexts up to {context} tokens = {rows * context:,} cached "
                         f"tokens built in one forward, more than the {MAX_FORWARD_TOKENS:,} calibrate measures: use "
                         f"fewer rows or shorter contexts")
    per_token = kv_bytes_per_token(lm.geometry, lm.dtype)
    budget = min(MAX_KV_BYTES, device_memory_bytes(lm.device) // 2)
    need = rows * context * per_token
    if need > budget:
        raise ValueError(f"decode_batches up to {rows} x contexts up to {context} tokens need {_size(need)} of KV "
                         f"cache ({per_token:,.0f} bytes per token), more than the {_size(budget)} calibrate allows "
                         f"({_size(MAX_KV_BYTES)} or half the device's memory): use fewer rows or shorter contexts")


def _size(nbytes: float) -> str:
    return f"{nbytes / 2 ** 30:.1f} GiB" if nbytes >= 2 ** 29 else f"{nbytes / 2 ** 20:.1f} MiB"


def _hybrid_points(lm: LoadedModel, chunk_tokens, prefix: int, decode_batches, contexts, seed: int) -> list:
    """Measurement points of fused hybrid forwards (module docstring), as prefill rows with their per-row columns
    (:func:`splitlab.costmodel.model.hybrid_fit_row`)."""
    big, points = max(decode_batches), []
    cached = prefill(lm, [_ids(lm, prefix, seed + 7)]).cache
    for c in contexts:
        rows = [c - (c // 2) * j // max(1, big - 1) for j in range(big)]
        caches = prefill(lm, [_ids(lm, n, seed + 11 + j) for j, n in enumerate(rows)]).cache.split()
        for b in sorted({max(1, big // 4), big}):
            decode = KVCache.merge(caches[:b])
            for n in chunk_tokens:
                ids = _ids(lm, n, seed + 8)
                row = dict(batch=1, prompt_tokens=n, cached=prefix, hybrid_decode_batch=b,
                           **hybrid_fit_row(**hybrid_terms(b, sum(rows[:b]), [(prefix, n)])))
                points.append(("prefill", row, lambda decode=decode, b=b, ids=ids: hybrid_forward(
                    lm, decode, [0] * b, [(cached, ids)]).seconds, None))
    return points


def calibrate(lm: LoadedModel, prompt_tokens: Sequence[int] | None = None, prefill_batch: int = 4,
              decode_batches: Sequence[int] = (1, 2, 3, 4, 6, 8, 16), contexts: Sequence[int] | None = None,
              transfer_tokens: Sequence[int] | None = None, repeats: int = 3, statistic: str = "median",
              rounds: int = 1, seed: int = 0, chunk_tokens: Sequence[int] | None = None,
              chunk_prefixes: Sequence[int] | None = None, progress: bool | None = None) -> Calibration:
    """Measure ``lm`` on its device and fit a cost model (see the module docstring for what is measured).

    Args:
        lm: the model (from :func:`splitlab.load_model`).
        prompt_tokens: prefill lengths (default: powers of two from 16 to half the context, at most 1024).
        prefill_batch: the batch of the third prefill sweep (its lengths: those up to an eighth of the longest).
        chunk_tokens, chunk_prefixes: chunk sizes and cached prefixes of the chunk sweep (default: a sixteenth and
            a quarter of the longest prompt length; a quarter and a half of it); ``chunk_tokens=()`` skips it.
        decode_batches, contexts: decode grid (default contexts: 3 from 64 to half the longest prompt length).
        transfer_tokens: cache sizes to copy (default: 4 up to the longest prompt length).
        repeats, statistic, rounds: each point is the "median" (or "min") of ``repeats`` runs in each of
            ``rounds`` passes over all the points (a burst of other work on the machine then hits only some runs
            of each point).
        seed: prompt ids.
        progress: a bar of the points measured on stderr: True, False or None (when stderr is a terminal).

    Returns:
        a :class:`splitlab.costmodel.Calibration`: ``.cost`` (a CostModel for
        :class:`~splitlab.serving.CostModelExecutor`), ``.fits`` (with the measurements and relative residuals),
        ``.meta`` (device, model, dtype, torch, date, splitlab); save it with :func:`splitlab.costmodel.save`;
        :func:`fit_warnings` lists its noisy fits again (of a loaded or combined one too).

    Warns:
        NoisyCalibrationWarning: a fit misses one of its own measurements by more than :data:`NOISY_RESIDUAL`
        (the machine was busy: calibrate again idle, with one thread).

    Raises:
        TypeError: ``lm`` is not a LoadedModel. ValueError (all before anything is measured): lengths outside the
        context, not a list or not whole numbers, an empty list of lengths, batches < 1, ``repeats``, ``rounds`` or
        ``prefill_batch`` not an integer >= 1 (2.5, nan, '3'), a seed outside 0 .. 2**63 - 1, an unknown
        statistic, a forward of more than :data:`MAX_FORWARD_TOKENS` tokens (``prefill_batch`` x its prompt
        length, or the largest decode batch x the longest context), or a decode grid whose KV cache exceeds
        :data:`MAX_KV_BYTES` or half the device's memory.
    """
    if not isinstance(lm, LoadedModel):
        raise TypeError(f"calibrate needs a splitlab LoadedModel (from splitlab.load_model), got {type(lm).__name__}")
    check_measurement(statistic, repeats=repeats, rounds=rounds, prefill_batch=prefill_batch)
    show = show_progress(progress)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2 ** 63:
        raise ValueError(f"seed must be an integer in 0 .. 2**63 - 1, got {seed!r}")
    summarize, ctx = STATISTICS[statistic], lm.max_context
    top = min(1024, ctx // 2)
    doublings = max(1, (top // 16).bit_length() - 1)
    prompt_tokens = _lengths(_given(prompt_tokens, [*(16 << i for i in range(doublings)), top]), "prompt_tokens",
                             ctx - 1)
    contexts = _lengths(_given(contexts, [64, max(65, prompt_tokens[-1] // 4), max(66, prompt_tokens[-1] // 2)]),
                        "contexts", ctx - 2)
    decode_batches = _lengths(decode_batches, "decode_batches", 1 << 16)
    transfer_tokens = _lengths(_given(transfer_tokens, [max(1, prompt_tokens[-1] >> k) for k in (3, 2, 1, 0)]),
                               "transfer_tokens", ctx - 1)
    longest = prompt_tokens[-1]
    chunk_tokens = [] if chunk_tokens is not None and len(chunk_tokens) == 0 else _lengths(
        chunk_tokens or [max(1, longest // 16), max(1, longest // 4)], "chunk_tokens", ctx - 2)
    chunk_prefixes = _lengths(chunk_prefixes or [max(1, longest // 4), max(1, longest // 2)], "chunk_prefixes",
                              ctx - 1 - max(chunk_tokens, default=0))

    _check_size(lm, prompt_tokens, prefill_batch, decode_batches, contexts)

    points = []  # (fit, row, how to time it once, how to start a round), measured round after round
    sweeps = [(1, prompt_tokens), (2, [n for n in prompt_tokens if 64 <= n <= longest // 2]),
              (prefill_batch, [n for n in prompt_tokens if n * 8 <= longest] if prefill_batch > 2 else [])]
    for batch, lengths in sweeps:
        for n in lengths:
            prompts = [_ids(lm, n - (n // 2) * b // max(1, batch - 1), seed + b) for b in range(batch)]
            masked = batch * n * n if len({len(p) for p in prompts}) > 1 else 0  # padded: the masked kernel
            points.append(("prefill", dict(batch=batch, prompt_tokens=n, tokens=batch * n, squares=batch * n * n,
                                           masked_pairs=masked), lambda prompts=prompts: prefill(lm, prompts).seconds,
                           None))
    for p in chunk_prefixes if chunk_tokens else ():
        cached = prefill(lm, [_ids(lm, p, seed + 7)]).cache
        for n in chunk_tokens:
            ids = torch.tensor([_ids(lm, n, seed + 8)], device=lm.device)
            mask = torch.ones(1, p + n, dtype=torch.long, device=lm.device)
            points.append(("prefill", dict(batch=1, prompt_tokens=n, cached=p, tokens=n, squares=(p + n) ** 2 - p * p,
                                           masked_pairs=n * (p + n)),
                           lambda ids=ids, mask=mask, cached=cached: forward_logits(lm, ids, mask, cached)[2], None))
    two_pass = fused_unsupported(lm)  # why the engine runs hybrid steps in two passes (None: one fused forward)
    if chunk_tokens and two_pass is None:
        points += _hybrid_points(lm, chunk_tokens, chunk_prefixes[0], decode_batches, contexts, seed)
    batched = min(decode_batches) == 1 < max(decode_batches)  # the batched term is fitted where both kinds are
    for c in contexts:
        big = max(decode_batches)
        rows = [c - (c // 2) * j // max(1, big - 1) for j in range(big)]  # c, ..., c / 2 cached tokens
        caches = prefill(lm, [_ids(lm, n, seed + j) for j, n in enumerate(rows)]).cache.split()
        for b in decode_batches:
            state = {"start": KVCache.merge(caches[:b]), "tokens": torch.zeros(b, dtype=torch.long)}

            def step(state=state) -> float:  # the next step of a running batch, as serving runs it
                out = decode_step(lm, state["cache"], state["tokens"])
                state["cache"] = out.cache
                return out.seconds

            row = dict(batch=b, context=c, context_tokens=sum(rows[:b]) + b * (repeats + 1) // 2)
            points.append(("decode", dict(row, batched=int(b > 1)) if batched else row, step,
                           lambda state=state: state.update(cache=state["start"])))
    for n in transfer_tokens:
        cache = prefill(lm, [_ids(lm, n, seed)]).cache

        def copy(cache=cache) -> float:
            with Timer(lm.device) as t:
                cache.clone()
            return max(t.seconds, 1e-9)

        points.append(("transfer", dict(tokens=n, nbytes=cache.nbytes), copy, None))
    times: list[list[float]] = [[] for _ in points]
    with progress_bar(rounds * len(points), f"calibrate {lm.name}", show, "point") as bar:
        for _ in range(rounds):
            for i, (kind, _, once, start) in enumerate(points):
                bar.set_postfix_str(kind, refresh=False)
                if start is not None:
                    start()
                times[i].extend(_timed(once, repeats))
                bar.update()
    measured = {"prefill": "prefill_s", "decode": "step_s", "transfer": "seconds"}
    rows = {"prefill": [], "decode": [], "transfer": []}
    for (kind, row, _, _), t in zip(points, times):
        rows[kind].append(dict(row, **{measured[kind]: float(summarize(t))}))
    prefill_rows, decode_rows, transfer_rows = rows["prefill"], rows["decode"], rows["transfer"]
    fits = {"prefill": fit_prefill(prefill_rows), "decode": fit_decode(decode_rows),
            "transfer": fit_transfer(transfer_rows)}
    clock = "cuda events" if lm.device.type == "cuda" else _CPU_CLOCK["clock"]
    meta = dict(device=describe_device(lm.device), model=lm.name, dtype=str(lm.dtype).replace("torch.", ""),
                clock=clock, torch=torch.__version__, splitlab=_version(),
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    cost = CostModel(**coefficients(fits.values()), kv_bytes_per_token=int(kv_bytes_per_token(lm.geometry, lm.dtype)),
                     max_context=ctx, memory_bytes=device_memory_bytes(lm.device), weight_bytes=lm.weight_bytes,
                     activation_bytes_per_token=activation_bytes_per_token(lm.config, lm.dtype), padded_prefill=True,
                     hybrid_path="fused" if two_pass is None else "two-pass", two_pass_reason=two_pass,
                     source=f"measured: {lm.name} ({meta['dtype']}) on {meta['device']}, {meta['date']}")
    cal = Calibration(cost, fits, meta)
    for message in fit_warnings(cal):
        warnings.warn(message, NoisyCalibrationWarning, stacklevel=2)
    return cal
