"""Measuring this device: prefill time vs prompt length, decode step time vs batch and context, cached decode
vs full recompute, the bytes a decode step reads, and (from :mod:`.hardware`) the raw matmul FLOP/s, memory
bandwidth and last-level cache size that the roofline needs.

Each function warms up once, repeats, and reports the median, so one slow outlier (a page fault, another
process) does not move the result. ``statistic="min"`` reports the fastest run instead: on a shared machine other
processes only ever add time, so the fastest run is the closest to what the hardware can do (the convention of
Python's ``timeit``). Results are pandas DataFrames with units in the column names.
"""
from __future__ import annotations

import statistics

import pandas as pd
import torch

from .. import sizing
from ..sizing import kv_bytes
from .calibrate import calibrate, fit_warnings  # noqa: F401  (sl.profiling.calibrate: measure, fit a cost model)
from .calibrate_shared import calibrate_or_reuse  # noqa: F401  (the same, reused by the chapters that follow)
from .device import STATISTICS, Timer, check_measurement
from .engine import accepts_logits_to_keep, decode_step, forward_logits, prefill
from .hardware import last_level_cache, measure_matmul_flops, measure_memory_bandwidth, measure_peak_flops
from .models import LoadedModel, require_loaded
from .op_profile import op_shares

__all__ = ["warm_up", "random_prompt", "text_prompt", "PROMPT_TEXT", "measure_prefill", "measure_decode",
           "measure_cached_vs_recompute", "measure_kv_growth", "measure_matmul_flops", "measure_peak_flops",
           "measure_memory_bandwidth", "last_level_cache", "weight_bytes_read", "flops_of_prefill", "flops_of_decode",
           "op_shares", "decode_op_shares", "measure_weight_matmuls"]


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




def _summarize(times, statistic: str) -> float:
    check_measurement(statistic)
    return STATISTICS[statistic](list(times))


def measure_prefill(lm: LoadedModel, prompt_tokens: list[int], batch: int = 1, repeats: int = 3,
                    seed: int = 0, statistic: str = "median", rounds: int = 1) -> pd.DataFrame:
    """Median (or, with ``statistic="min"``, fastest) prefill time per prompt length.

    ``rounds`` > 1 runs the whole sweep that many times, one length after another, and summarises each length
    over all its runs: a burst of activity from another program then slows only some runs of each length.
    Returns columns ``prompt_tokens``, ``batch``, ``prefill_s``, ``tokens_per_s`` (prompt tokens x batch / s).
    """
    require_loaded(lm, "measure_prefill()")
    check_measurement(statistic, batch=batch, repeats=repeats, rounds=rounds)
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
    check_measurement(statistic, steps=steps, rounds=rounds, **{f"batch size {b}": b for b in batch_sizes})
    times: list[list[float]] = [[] for _ in batch_sizes]
    for _ in range(rounds):
        # one prefill of the largest batch per round; each batch size decodes from the cache of its first rows
        big = max(batch_sizes)
        pre = prefill(lm, [random_prompt(lm, context, seed + j) for j in range(big)], max_new_tokens=steps + 1)
        for i, b in enumerate(batch_sizes):
            cache, tokens = pre.cache.select(list(range(b))), pre.logits[:b].argmax(-1)
            out = decode_step(lm, cache, tokens)  # warm-up; it also gives the cache its room to append in place
            cache, tokens = out.cache, out.logits.argmax(-1)
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

    The cached generation runs ``repeats`` times from the same prefill, each a chain of decode steps as a real
    loop makes them; each recompute is timed ``repeats`` times; the median per token is kept both ways.
    Returns columns ``step``, ``context`` (tokens before the new one), ``cached_s``, ``recompute_s``,
    ``same_token`` (both ways chose the same greedy token).
    """
    require_loaded(lm, "measure_cached_vs_recompute()")
    check_measurement("median", repeats=repeats)
    ids = random_prompt(lm, prompt_tokens, seed)
    pre = prefill(lm, [ids], max_new_tokens=new_tokens)
    cached: list[list[float]] = []
    for _ in range(repeats):
        cache, token, times, chosen = pre.cache, pre.logits.argmax(-1), [], [int(pre.logits.argmax(-1))]
        for _ in range(1, new_tokens):
            out = decode_step(lm, cache, token)
            cache, token = out.cache, out.logits.argmax(-1)
            times.append(out.seconds)
            chosen.append(int(token))
        cached.append(times)
    rows = []
    for step in range(1, new_tokens):
        seq = ids + chosen[:step]
        full = torch.tensor([seq], device=lm.device)
        recomputes = [forward_logits(lm, full, torch.ones_like(full), None) for _ in range(repeats)]
        rows.append(dict(step=step, context=len(seq) - 1, cached_s=statistics.median(t[step - 1] for t in cached),
                         recompute_s=statistics.median(r[2] for r in recomputes),
                         same_token=bool(int(recomputes[0][0].argmax(-1)) == chosen[step])))
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


def weight_bytes_read(lm: LoadedModel) -> int:
    """Bytes of weights one decode step reads in full: every parameter, except an input embedding table that is
    not tied to the output layer (a step reads only one row of it per sequence, counted here as nothing).

    With tied embeddings (SmolLM2, the llama2.c models) the output layer reads the whole table, so this equals
    ``lm.weight_bytes``; an untied table is subtracted once."""
    embed, head = lm.model.get_input_embeddings(), lm.model.get_output_embeddings()
    total = lm.weight_bytes
    if embed is not None and (head is None or embed.weight is not head.weight):
        total -= embed.weight.numel() * embed.weight.element_size()
    return int(total)


def _matmul_params(lm: LoadedModel) -> tuple[int, int]:
    """(parameters every token is multiplied by except the output layer's, the output layer's): an input
    embedding not tied to the output layer is a table lookup and counts in neither."""
    embed, head = lm.model.get_input_embeddings(), lm.model.get_output_embeddings()
    head_n = sum(p.numel() for p in head.parameters()) if head is not None else 0
    untied = embed is not None and (head is None or embed.weight is not head.weight)
    return lm.n_params - head_n - (embed.weight.numel() if untied else 0), head_n


def flops_of_prefill(lm: LoadedModel, prompt_tokens: int, batch: int = 1) -> float:
    """FLOPs of one prefill as splitlab's engine runs it (``sizing.prefill_flops``: 2 x params x tokens plus
    causal attention): the output layer only at the last position, since the engine asks for the last logits
    alone (transformers' ``logits_to_keep=1``; a model without that argument gets every position counted), and
    an untied input embedding as a lookup (no FLOPs). With a large vocabulary the difference is large: counting
    ``2 x n_params`` per prompt token overstates stories42m's prefill by 60%."""
    body, head = _matmul_params(lm)
    head_tokens = 1 if accepts_logits_to_keep(type(lm.model)) else prompt_tokens
    return sizing.prefill_flops(body, prompt_tokens, lm.geometry, batch) + batch * 2 * head * head_tokens


def flops_of_decode(lm: LoadedModel, batch: int, context: int) -> float:
    """FLOPs of one decode step of ``batch`` sequences at ``context`` cached tokens (``sizing.decode_flops``),
    with an untied input embedding counted as a lookup (no FLOPs)."""
    body, head = _matmul_params(lm)
    return sizing.decode_flops(body + head, batch, context, lm.geometry)


def measure_weight_matmuls(lm: LoadedModel, batch_sizes: list[int], repeats: int = 5) -> pd.DataFrame:
    """The matmuls of one decode step alone: every ``nn.Linear`` weight of the model (the output layer included)
    multiplied by ``batch`` random rows, one after another, with nothing else in between; the fastest of
    ``repeats`` passes. It separates what the BLAS library's matrix kernels achieve on these shapes from the rest
    of a step (norms, attention, Python).

    Returns columns ``batch``, ``matmul_s`` (all weights once) and ``bytes_per_s`` (their bytes / matmul_s).
    """
    require_loaded(lm, "measure_weight_matmuls()")
    weights = [m.weight for m in lm.model.modules() if isinstance(m, torch.nn.Linear)]
    head = lm.model.get_output_embeddings()
    if head is not None and not isinstance(head, torch.nn.Linear):
        weights.append(head.weight)
    nbytes = sum(w.numel() * w.element_size() for w in weights)
    rows = []
    for b in batch_sizes:
        inputs = {w.shape[1]: torch.randn(b, w.shape[1], device=lm.device, dtype=w.dtype) for w in weights}

        def once() -> float:
            with torch.inference_mode(), Timer(lm.device) as t:
                for w in weights:
                    torch.nn.functional.linear(inputs[w.shape[1]], w)
            return t.seconds

        once()
        best = min(once() for _ in range(repeats))
        rows.append(dict(batch=b, matmul_s=best, bytes_per_s=nbytes / best))
    return pd.DataFrame(rows)


def decode_op_shares(lm: LoadedModel, batch: int = 1, context: int = 64, top: int = 5,
                     repeats: int = 3) -> pd.DataFrame:
    """:func:`op_shares` of steady decode steps: ``batch`` prompts of ``context`` tokens are prefilled, then every
    call, profiled or not, is the next step of the same chain (as in a real decode loop, so the cache appends in
    place). ``attrs`` holds the step's wall-clock seconds with and without the profiler (see :func:`op_shares`)."""
    require_loaded(lm, "decode_op_shares()")
    pre = prefill(lm, [random_prompt(lm, context, seed=j) for j in range(batch)], max_new_tokens=4 + 2 * repeats)
    state = [pre.cache, pre.logits.argmax(-1)]

    def step() -> None:
        out = decode_step(lm, state[0], state[1])
        state[0], state[1] = out.cache, out.logits.argmax(-1)

    step()
    return op_shares(step, lm.device, repeats=repeats, top=top)
