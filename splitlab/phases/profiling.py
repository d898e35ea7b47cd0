"""Measuring this device: prefill time vs prompt length, decode step time vs batch and context, cached decode
vs full recompute, and the raw matmul FLOP/s and memory bandwidth that the roofline needs.

Each function warms up once, repeats, and reports the median, so one slow outlier (a page fault, another
process) does not move the result. ``statistic="min"`` reports the fastest run instead: on a shared machine other
processes only ever add time, so the fastest run is the closest to what the hardware can do (the convention of
Python's ``timeit``). Results are pandas DataFrames with units in the column names.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import sys
from typing import Callable

import pandas as pd
import torch

from ..sizing import kv_bytes
from .device import Timer
from .engine import decode_step, forward_logits, prefill
from .models import LoadedModel, require_loaded

__all__ = ["warm_up", "random_prompt", "text_prompt", "PROMPT_TEXT", "measure_prefill", "measure_decode", "measure_cached_vs_recompute",
           "measure_kv_growth", "measure_matmul_flops", "measure_peak_flops", "measure_memory_bandwidth",
           "op_shares"]


def random_prompt(lm: LoadedModel, tokens: int, seed: int = 0) -> list[int]:
    """``tokens`` token ids drawn with a fixed seed from ids every model here accepts (the byte range 0..255,
    or the whole vocabulary if it is smaller). Raises ValueError for tokens < 1."""
    require_loaded(lm, "random_prompt()")
    if tokens < 1:
        raise ValueError(f"a prompt needs at least one token, got {tokens}")
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, min(256, lm.vocab_size), (tokens,), generator=g).tolist()


#: English text that :func:`text_prompt` repeats, so trained models get a meaningful prompt.
PROMPT_TEXT = ("The prefill phase reads the whole prompt at once and fills the key-value cache; the decode phase "
               "then adds one token at a time, reading every weight and every cached key and value for each step. ")


def text_prompt(lm: LoadedModel, tokens: int, seed: int = 0) -> list[int]:
    """Exactly ``tokens`` prompt ids, the same for the same seed: :data:`PROMPT_TEXT` repeated, starting
    ``seed`` characters in, in this model's tokenizer (byte ids 0..255 for the random-weight presets), so a
    trained model sees real text and writes real text. Raises ValueError for tokens < 1."""
    require_loaded(lm, "text_prompt()")
    if tokens < 1:
        raise ValueError(f"a prompt needs at least one token, got {tokens}")
    start = seed % len(PROMPT_TEXT)
    text = PROMPT_TEXT[start:] + PROMPT_TEXT[:start]
    repeats = 1
    while True:
        ids = lm.encode(text * repeats)
        if len(ids) >= tokens:
            return ids[:tokens]
        repeats *= 2


def warm_up(lm: LoadedModel, prompt_tokens: int = 512, new_tokens: int = 32) -> None:
    """Run one throw-away request so that one-time costs (allocator growth, kernel selection, lazy imports,
    an idle GPU raising its clocks: a first run on an H200 decoded 10x slower than the next) do not land in
    the first measurement."""
    require_loaded(lm, "warm_up()")
    ids = random_prompt(lm, min(prompt_tokens, lm.max_context - new_tokens), seed=12345)
    pre = prefill(lm, [ids], max_new_tokens=new_tokens)
    cache, token = pre.cache, pre.logits.argmax(-1)
    for _ in range(new_tokens):
        out = decode_step(lm, cache, token)
        cache, token = out.cache, out.logits.argmax(-1)


_STATISTICS = {"median": statistics.median, "min": min}


def _summarize(times, statistic: str) -> float:
    if statistic not in _STATISTICS:
        raise ValueError(f"statistic must be one of {sorted(_STATISTICS)}, got {statistic!r}")
    return _STATISTICS[statistic](list(times))


def _median_seconds(fn, repeats: int, statistic: str = "median") -> float:
    fn()  # warm-up: allocator, kernel selection, lazy init
    return _summarize((fn() for _ in range(repeats)), statistic)


def measure_prefill(lm: LoadedModel, prompt_tokens: list[int], batch: int = 1, repeats: int = 3,
                    seed: int = 0, statistic: str = "median", rounds: int = 1) -> pd.DataFrame:
    """Median (or, with ``statistic="min"``, fastest) prefill time per prompt length.

    ``rounds`` > 1 runs the whole sweep that many times, one length after another, and summarises each length
    over all its runs: a burst of activity from another program then slows only some runs of each length.
    Returns columns ``prompt_tokens``, ``batch``, ``prefill_s``, ``tokens_per_s`` (prompt tokens x batch / s).
    """
    require_loaded(lm, "measure_prefill()")
    times: list[list[float]] = [[] for _ in prompt_tokens]
    for _ in range(rounds):
        for i, n in enumerate(prompt_tokens):
            prompts = [random_prompt(lm, n, seed + b) for b in range(batch)]
            prefill(lm, prompts)  # warm-up: allocator, kernel selection, lazy init
            times[i].extend(prefill(lm, prompts).seconds for _ in range(repeats))
    rows = []
    for n, runs in zip(prompt_tokens, times):
        s = _summarize(runs, statistic)
        rows.append(dict(prompt_tokens=n, batch=batch, prefill_s=s, tokens_per_s=n * batch / s))
    return pd.DataFrame(rows)


def measure_decode(lm: LoadedModel, batch_sizes: list[int], context: int, steps: int = 8,
                   seed: int = 0, statistic: str = "median", rounds: int = 1) -> pd.DataFrame:
    """Median (or, with ``statistic="min"``, fastest) decode step time for each batch size, every row holding
    ``context`` cached tokens (plus the few generated during the measurement).

    ``rounds`` > 1 runs the whole sweep that many times (a fresh prefill each time) and summarises each batch
    size over all its ``rounds x steps`` steps.
    Returns columns ``batch``, ``context``, ``step_s``, ``tokens_per_s`` (batch / step_s).
    """
    require_loaded(lm, "measure_decode()")
    times: list[list[float]] = [[] for _ in batch_sizes]
    for _ in range(rounds):
        # one prefill of the largest batch per round; each batch size decodes from the cache of its first rows
        big = max(batch_sizes)
        pre = prefill(lm, [random_prompt(lm, context, seed + j) for j in range(big)], max_new_tokens=steps + 1)
        for i, b in enumerate(batch_sizes):
            cache, tokens = pre.cache.select(list(range(b))), pre.logits[:b].argmax(-1)
            decode_step(lm, cache, tokens)  # warm-up
            for _ in range(steps):
                out = decode_step(lm, cache, tokens)
                cache, tokens = out.cache, out.logits.argmax(-1)
                times[i].append(out.seconds)
    rows = []
    for b, runs in zip(batch_sizes, times):
        s = _summarize(runs, statistic)
        rows.append(dict(batch=b, context=context, step_s=s, tokens_per_s=b / s))
    return pd.DataFrame(rows)


def measure_cached_vs_recompute(lm: LoadedModel, prompt_tokens: int, new_tokens: int, repeats: int = 3,
                                seed: int = 0) -> pd.DataFrame:
    """Time each generated token two ways: a cached decode step (one new token against the KV cache), and a
    full forward over the whole sequence without a cache (what a model without a KV cache must do).

    Each step is timed ``repeats`` times both ways and the median kept.
    Returns columns ``step``, ``context`` (tokens before the new one), ``cached_s``, ``recompute_s``,
    ``same_token`` (both ways chose the same greedy token).
    """
    require_loaded(lm, "measure_cached_vs_recompute()")
    ids = random_prompt(lm, prompt_tokens, seed)
    pre = prefill(lm, [ids], max_new_tokens=new_tokens)
    cache, token = pre.cache, pre.logits.argmax(-1)
    seq = ids + token.tolist()
    rows = []
    for step in range(1, new_tokens):
        outs = [decode_step(lm, cache, token) for _ in range(repeats)]
        out = outs[0]
        full = torch.tensor([seq], device=lm.device)
        recomputes = [forward_logits(lm, full, torch.ones_like(full), None) for _ in range(repeats)]
        logits = recomputes[0][0]
        rows.append(dict(step=step, context=len(seq) - 1, cached_s=statistics.median(o.seconds for o in outs),
                         recompute_s=statistics.median(r[2] for r in recomputes),
                         same_token=bool(out.logits.argmax(-1).item() == logits.argmax(-1).item())))
        cache, token = out.cache, out.logits.argmax(-1)
        seq.append(int(token))
    return pd.DataFrame(rows)


def measure_kv_growth(lm: LoadedModel, prompt_tokens: int, new_tokens: int, seed: int = 0) -> pd.DataFrame:
    """Exact KV-cache bytes after prefill and after every decode step of one request, beside the formula
    (:func:`splitlab.sizing.kv_bytes`: ``tokens x kv_bytes_per_token`` for full attention; a sliding-window
    layer stops growing at ``W - 1`` positions).

    Returns columns ``tokens_in_cache``, ``nbytes`` (measured: sum of the real tensors), ``predicted_nbytes``,
    ``step_s`` (forward time of the pass that produced that cache; the first row is the prefill).
    """
    require_loaded(lm, "measure_kv_growth()")
    pre = prefill(lm, [random_prompt(lm, prompt_tokens, seed)], max_new_tokens=new_tokens)
    cache, token, seconds = pre.cache, pre.logits.argmax(-1), pre.seconds
    rows = []
    for _ in range(new_tokens):
        rows.append(dict(tokens_in_cache=cache.seq_len, nbytes=cache.nbytes,
                         predicted_nbytes=kv_bytes(lm.geometry, cache.seq_len, dtype=lm.dtype), step_s=seconds))
        out = decode_step(lm, cache, token)
        cache, token, seconds = out.cache, out.logits.argmax(-1), out.seconds
    return pd.DataFrame(rows)


def measure_matmul_flops(device: torch.device | str, dtype: torch.dtype = torch.float32, n: int = 1024,
                         repeats: int = 5, statistic: str = "median") -> float:
    """Achieved FLOP/s of an n x n x n matmul (2 n^3 FLOPs) on ``device``: this machine's practical compute peak.
    ``statistic="min"`` uses the fastest of ``repeats`` runs (the best rate) instead of the median."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)

    def once() -> float:
        with Timer(device) as t:
            a @ b
        return t.seconds

    return 2 * n ** 3 / _median_seconds(once, repeats, statistic)


def measure_peak_flops(device: torch.device | str, dtype: torch.dtype = torch.float32,
                       sizes: tuple[int, ...] | None = None, repeats: int = 10) -> tuple[float, int]:
    """This device's practical compute peak (FLOP/s): the best rate of square matmuls of a few ``sizes``, each
    the fastest of ``repeats`` runs. No single size is best everywhere (small ones fit in caches, big ones keep
    more cores busy), so several are tried: 512..2048 on CPUs, 2048..8192 on GPUs by default.

    Returns (FLOP/s, the size n that reached it).
    """
    if sizes is None:
        sizes = (512, 1024, 2048) if torch.device(device).type == "cpu" else (2048, 4096, 8192)
    rates = {n: measure_matmul_flops(device, dtype, n=n, repeats=repeats, statistic="min") for n in sizes}
    best = max(rates, key=rates.get)
    return rates[best], best


def measure_memory_bandwidth(device: torch.device | str, nbytes: int = 256 * 2 ** 20, repeats: int = 5,
                             statistic: str = "median") -> float:
    """Achieved memory bandwidth (bytes/s) of copying a ``nbytes`` buffer (counts the read and the write).
    ``statistic="min"`` uses the fastest of ``repeats`` copies (the best rate) instead of the median."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)

    def once() -> float:
        with Timer(device) as t:
            dst.copy_(src)
        return t.seconds

    return 2 * nbytes / _median_seconds(once, repeats, statistic)


@contextlib.contextmanager
def _quiet_native_stderr():
    """Send the process's file descriptor 2 to /dev/null for a moment (the profiler's C++ side prints
    start/stop lines there); Python-level errors still show."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def op_shares(fn: Callable[[], object], device: torch.device | str, repeats: int = 3, top: int = 5) -> pd.DataFrame:
    """Where the time of ``fn()`` goes: run it once to warm up, then ``repeats`` times under ``torch.profiler``.

    ATen operators are ranked by self time (time of the GPU kernels they launch on CUDA devices, CPU time
    elsewhere).
    Returns the ``top`` operators with columns ``operator`` (aten name), ``ms_per_call`` (self time per call
    of ``fn``, milliseconds) and ``share`` (fraction of all operators' self time).
    """
    from torch.profiler import ProfilerActivity, profile

    on_gpu = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    fn()
    with _quiet_native_stderr(), profile(activities=activities) as prof:
        for _ in range(repeats):
            fn()
    # aten operators only (on CUDA the kernels they launch appear as rows of their own); times in microseconds
    ops = [(e.key, e.self_device_time_total if on_gpu else e.self_cpu_time_total) for e in prof.key_averages()
           if e.key.startswith("aten::")]
    total = sum(t for _, t in ops) or 1.0
    ops.sort(key=lambda op: -op[1])
    return pd.DataFrame([dict(operator=name, ms_per_call=t / 1e3 / repeats, share=t / total)
                         for name, t in ops[:top]])
