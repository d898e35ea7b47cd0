"""Measuring this device: prefill time vs prompt length, decode step time vs batch and context, cached decode
vs full recompute, and the raw matmul FLOP/s and memory bandwidth that the roofline needs.

Each function warms up once, repeats, and reports the median, so one slow outlier (a page fault, another
process) does not move the result. Results are pandas DataFrames with units in the column names.
"""
from __future__ import annotations

import statistics

import pandas as pd
import torch

from .device import Timer
from .engine import decode_step, forward_logits, prefill
from .models import LoadedModel

__all__ = ["warm_up", "random_prompt", "measure_prefill", "measure_decode", "measure_cached_vs_recompute",
           "measure_kv_growth", "measure_matmul_flops", "measure_memory_bandwidth"]


def random_prompt(lm: LoadedModel, tokens: int, seed: int = 0) -> list[int]:
    """``tokens`` token ids drawn with a fixed seed from ids every model here accepts (the byte range 0..255,
    or the whole vocabulary if it is smaller). Raises ValueError for tokens < 1."""
    if tokens < 1:
        raise ValueError(f"a prompt needs at least one token, got {tokens}")
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, min(256, lm.vocab_size), (tokens,), generator=g).tolist()


def warm_up(lm: LoadedModel, prompt_tokens: int = 512, new_tokens: int = 4) -> None:
    """Run one throw-away request so that one-time costs (allocator growth, kernel selection, lazy imports)
    do not land in the first measurement."""
    ids = random_prompt(lm, min(prompt_tokens, lm.max_context - new_tokens), seed=12345)
    pre = prefill(lm, [ids], max_new_tokens=new_tokens)
    cache, token = pre.cache, pre.logits.argmax(-1)
    for _ in range(new_tokens):
        out = decode_step(lm, cache, token)
        cache, token = out.cache, out.logits.argmax(-1)


def _median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: allocator, kernel selection, lazy init
    return statistics.median(fn() for _ in range(repeats))


def measure_prefill(lm: LoadedModel, prompt_tokens: list[int], batch: int = 1, repeats: int = 3,
                    seed: int = 0) -> pd.DataFrame:
    """Median prefill time per prompt length.

    Returns columns ``prompt_tokens``, ``batch``, ``prefill_s``, ``tokens_per_s`` (prompt tokens x batch / s).
    """
    rows = []
    for n in prompt_tokens:
        prompts = [random_prompt(lm, n, seed + b) for b in range(batch)]
        s = _median_seconds(lambda: prefill(lm, prompts).seconds, repeats)
        rows.append(dict(prompt_tokens=n, batch=batch, prefill_s=s, tokens_per_s=n * batch / s))
    return pd.DataFrame(rows)


def measure_decode(lm: LoadedModel, batch_sizes: list[int], context: int, steps: int = 8,
                   seed: int = 0) -> pd.DataFrame:
    """Median decode step time for each batch size, every row holding ``context`` cached tokens.

    Returns columns ``batch``, ``context``, ``step_s``, ``tokens_per_s`` (batch / step_s).
    """
    rows = []
    for b in batch_sizes:
        pre = prefill(lm, [random_prompt(lm, context, seed + i) for i in range(b)], max_new_tokens=steps + 1)
        tokens = pre.logits.argmax(-1)
        decode_step(lm, pre.cache, tokens)  # warm-up
        times = []
        cache = pre.cache
        for _ in range(steps):
            out = decode_step(lm, cache, tokens)
            cache, tokens = out.cache, out.logits.argmax(-1)
            times.append(out.seconds)
        s = statistics.median(times)
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
    ``tokens x kv_bytes_per_token(config, dtype)``.

    Returns columns ``tokens_in_cache``, ``nbytes`` (measured: sum of the real tensors), ``predicted_nbytes``,
    ``step_s`` (forward time of the pass that produced that cache; the first row is the prefill).
    """
    from .sizing import kv_bytes_per_token  # local: sizing is model-free, profiling is not

    per_token = kv_bytes_per_token(lm.config, lm.dtype)
    pre = prefill(lm, [random_prompt(lm, prompt_tokens, seed)], max_new_tokens=new_tokens)
    cache, token, seconds = pre.cache, pre.logits.argmax(-1), pre.seconds
    rows = []
    for _ in range(new_tokens):
        rows.append(dict(tokens_in_cache=cache.seq_len, nbytes=cache.nbytes,
                         predicted_nbytes=cache.seq_len * per_token, step_s=seconds))
        out = decode_step(lm, cache, token)
        cache, token, seconds = out.cache, out.logits.argmax(-1), out.seconds
    return pd.DataFrame(rows)


def measure_matmul_flops(device: torch.device | str, dtype: torch.dtype = torch.float32, n: int = 1024,
                         repeats: int = 5) -> float:
    """Achieved FLOP/s of an n x n x n matmul (2 n^3 FLOPs) on ``device``: this machine's practical compute peak."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)

    def once() -> float:
        with Timer(device) as t:
            a @ b
        return t.seconds

    return 2 * n ** 3 / _median_seconds(once, repeats)


def measure_memory_bandwidth(device: torch.device | str, nbytes: int = 256 * 2 ** 20, repeats: int = 5) -> float:
    """Achieved memory bandwidth (bytes/s) of copying a ``nbytes`` buffer (counts the read and the write)."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)

    def once() -> float:
        with Timer(device) as t:
            dst.copy_(src)
        return t.seconds

    return 2 * nbytes / _median_seconds(once, repeats)
