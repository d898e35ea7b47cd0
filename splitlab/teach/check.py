"""Exercise checkers: ``splitlab.check.<exercise>(answer, ...)`` prints whether the answer is right and returns
True/False. Expected values are always computed from the same inputs the reader has (never typed in), with the
tolerance given. ``None`` means "not answered yet" (prints a reminder, returns False).
"""
from __future__ import annotations

import math
from typing import Any

from .. import sizing

__all__ = ["forward_passes", "recompute_tokens", "kv_bytes_per_token", "max_tokens_in_memory", "ridge_point",
           "decode_intensity", "compute_bound_batch", "itl_spike", "requests_in_kv_budget", "chunked_prefill_steps",
           "colocated_tpot", "transfer_seconds", "min_prefill_workers", "kv_transfer_bytes", "link_transfer_seconds",
           "transfer_decode_steps", "streamed_exposed"]


def _verdict(answer: Any, expected: float, rel_tol: float, what: str, hint: str) -> bool:
    if answer is None:
        print(f"Not answered yet: set your answer for {what} and run the cell again.")
        return False
    try:
        value = float(answer)
    except (TypeError, ValueError):
        print(f"Not a number: {answer!r}. {what} is a number.")
        return False
    if math.isclose(value, expected, rel_tol=rel_tol, abs_tol=1e-12):
        print(f"Correct: {what} = {expected:,.6g}.")
        return True
    print(f"Not yet: {value:,.6g} is not {what} (tolerance {rel_tol:.0%}). Hint: {hint}")
    return False


def forward_passes(answer: Any, new_tokens: int) -> bool:
    """Ch. 1: forward passes to generate ``new_tokens`` tokens with a KV cache (1 prefill + new_tokens-1 decodes)."""
    return _verdict(answer, new_tokens, 0, f"the forward passes for {new_tokens} new tokens",
                    "prefill makes the first token; each decode step makes one more.")


def recompute_tokens(answer: Any, prompt_tokens: int, new_tokens: int) -> bool:
    """Ch. 1: tokens pushed through the model to generate ``new_tokens`` tokens WITHOUT a KV cache.

    Token k (k = 1..N) needs a forward pass over the prompt plus the k-1 tokens already generated:
    sum_{k=1..N} (T + k - 1) = N*T + N*(N-1)/2.
    """
    n, t = new_tokens, prompt_tokens
    return _verdict(answer, n * t + n * (n - 1) // 2, 0, "the tokens processed without a cache",
                    "each new token re-reads the prompt and every token generated before it.")


def kv_bytes_per_token(answer: Any, model: str, dtype: str = "fp16") -> bool:
    """Ch. 2: KV bytes per token of a published model or preset, in ``dtype`` (formula in splitlab.sizing)."""
    expected = sizing.kv_bytes_per_token(sizing.resolve_config(model), dtype)
    return _verdict(answer, expected, 0.001, f"KV bytes per token of {model} in {dtype}",
                    "2 (K and V) x layers x KV heads x head_dim x bytes per element; use the KV heads, not the "
                    "query heads.")


def max_tokens_in_memory(answer: Any, model: str, gpu: str, dtype: str = "fp16") -> bool:
    """Ch. 2: how many tokens of KV cache fit on ``gpu`` after the fp16/bf16 weights of ``model``."""
    cfg = sizing.resolve_config(model)
    free = sizing.GPUS[gpu]["memory_bytes"] - cfg["n_params"] * sizing.dtype_bytes(dtype)
    expected = max(0.0, free) // sizing.kv_bytes_per_token(cfg, dtype)
    return _verdict(answer, expected, 0.02, f"the tokens of {model} KV cache that fit on a {gpu}",
                    "(GPU memory - parameters x bytes per parameter) / KV bytes per token.")


def ridge_point(answer: Any, gpu: str) -> bool:
    """Ch. 3: the ridge point (FLOP/byte) of a GPU from splitlab.sizing.GPUS."""
    g = sizing.GPUS[gpu]
    return _verdict(answer, sizing.ridge_point(g["peak_flops_per_s"], g["bandwidth_bytes_per_s"]), 0.01,
                    f"the ridge point of the {gpu} in FLOP/byte", "peak FLOP/s divided by memory bandwidth in B/s.")


def decode_intensity(answer: Any, batch: int, bytes_per_param: float = 2) -> bool:
    """Ch. 3: arithmetic intensity (FLOP/byte) of a decode step's weight matmuls at ``batch``, ignoring the KV
    cache: 2 x params x batch FLOPs over params x bytes_per_param bytes = 2 x batch / bytes_per_param."""
    return _verdict(answer, 2 * batch / bytes_per_param, 0.01, f"the decode intensity at batch {batch}",
                    "each weight (bytes_per_param bytes) is read once and used for 2 FLOPs per sequence.")


def compute_bound_batch(answer: Any, gpu: str, bytes_per_param: float = 2) -> bool:
    """Ch. 3: smallest decode batch whose weight-matmul intensity (2B/bytes_per_param) reaches the ridge point."""
    g = sizing.GPUS[gpu]
    ridge = sizing.ridge_point(g["peak_flops_per_s"], g["bandwidth_bytes_per_s"])
    return _verdict(answer, math.ceil(ridge * bytes_per_param / 2), 0.02,
                    f"the batch at which decode becomes compute-bound on a {gpu}",
                    "solve 2 x batch / bytes_per_param = ridge point for batch.")


def itl_spike(answer: Any, prefill_table, prompt_tokens: int, decode_step_s: float) -> bool:
    """Ch. 4: the stall (s) that running streams see when a ``prompt_tokens`` prompt is prefilled between two of
    their decode steps (prefill-first): its prefill time, interpolated linearly in ``prefill_table`` (columns
    ``prompt_tokens``, ``prefill_s``, e.g. from :func:`splitlab.profiling.measure_prefill`), plus one decode step."""
    import numpy as np

    table = prefill_table.sort_values("prompt_tokens")
    expected = float(np.interp(prompt_tokens, table["prompt_tokens"], table["prefill_s"])) + decode_step_s
    return _verdict(answer, expected, 0.02, f"the predicted stall for a {prompt_tokens}-token prompt (s)",
                    "interpolate the prefill time between the two measured lengths around it (np.interp), then "
                    "add the decode step that still has to run before the streams' next token.")


def requests_in_kv_budget(answer: Any, budget_bytes: int, prompt_tokens: int, new_tokens: int,
                          kv_bytes_per_token: int) -> bool:
    """Ch. 4: how many identical requests a worker admits at once when admission reserves each one's final cache
    (prompt + new tokens) against a KV budget: floor(budget / ((prompt + new) x bytes per token))."""
    expected = budget_bytes // ((prompt_tokens + new_tokens) * kv_bytes_per_token)
    return _verdict(answer, expected, 0, "the requests that fit in the KV budget at once",
                    "each admitted request reserves (prompt + new tokens) x KV bytes per token; round down.")


def chunked_prefill_steps(answer: Any, prompt_tokens: int, chunk_tokens: int, decode_batch: int) -> bool:
    """Ch. 4: steps a prompt needs under chunked prefill when ``decode_batch`` streams keep decoding: each step's
    budget of ``chunk_tokens`` gives one token to every stream and the rest to the prompt,
    ceil(prompt / (chunk_tokens - decode_batch))."""
    expected = math.ceil(prompt_tokens / (chunk_tokens - decode_batch))
    return _verdict(answer, expected, 0, f"the chunked-prefill steps for a {prompt_tokens}-token prompt",
                    "every decoding stream takes one token of each step's budget; the prompt gets the rest.")


def colocated_tpot(answer: Any, decode_step_s: float, rate_per_s: float, workers: int, mean_prefill_s: float) -> bool:
    """Ch. 6: predicted mean TPOT (s) on a colocated worker whose decode streams pause for every prefill there.

    Each of ``workers`` workers gets ``rate_per_s / workers`` requests/s, so a share
    rho = rate_per_s / workers x mean_prefill_s of its time goes to prefill; decode steps of ``decode_step_s`` fill
    the rest, so a stream gets one token per decode_step_s / (1 - rho) seconds.
    """
    rho = rate_per_s / workers * mean_prefill_s
    if rho >= 1:
        print(f"With these inputs a worker needs {rho:.2f} of its time for prefill alone: it never catches up, "
              f"and TPOT grows without bound. Pick a lower rate or more workers.")
        return False
    return _verdict(answer, decode_step_s / (1 - rho), 0.01, "the predicted colocated TPOT in seconds",
                    "the share of a worker's time spent in prefill is rate / workers x mean prefill time; decode "
                    "gets the rest, so divide the decode step time by (1 - that share).")


def transfer_seconds(answer: Any, lm, prompt_tokens: int, link_bytes_per_s: float) -> bool:
    """Ch. 6: seconds to move the KV cache of a ``prompt_tokens``-token prompt of model ``lm`` (a
    :class:`splitlab.LoadedModel`, in its own dtype) over a link of ``link_bytes_per_s`` bytes/s."""
    per_token = sizing.kv_bytes_per_token(lm.geometry, lm.dtype)
    return _verdict(answer, prompt_tokens * per_token / link_bytes_per_s, 0.01,
                    f"the transfer time of a {prompt_tokens}-token cache in seconds",
                    "KV bytes = prompt tokens x (2 x layers x KV heads x head_dim x bytes per element); divide by "
                    "the link's bytes per second.")


def min_prefill_workers(answer: Any, rate_per_s: float, mean_prefill_s: float, max_utilization: float = 0.7) -> bool:
    """Ch. 6: fewest prefill workers that keep each one busy at most ``max_utilization`` of the time when
    requests arrive at ``rate_per_s`` and a prefill takes ``mean_prefill_s`` on average (spread evenly)."""
    if not 0 < max_utilization <= 1:
        raise ValueError(f"max_utilization must be in (0, 1], got {max_utilization}")
    load = rate_per_s * mean_prefill_s  # busy prefill-seconds per second, in worker units
    expected = max(1, math.ceil(load / max_utilization - 1e-9))
    return _verdict(answer, expected, 0, f"the number of prefill workers for {rate_per_s:g} requests/s",
                    "all prompts need rate x mean prefill time worker-seconds per second; each worker may give at "
                    "most max_utilization of a second per second. Round up.")


def kv_transfer_bytes(answer: Any, model: str, prompt_tokens: int, dtype: str = "fp16", batch: int = 1) -> bool:
    """Ch. 5: bytes the prefill worker must send for ``batch`` prompts of ``prompt_tokens`` tokens of ``model`` (a
    published model or preset) in ``dtype``: the whole KV cache, :func:`splitlab.sizing.kv_bytes`."""
    expected = sizing.kv_bytes(sizing.resolve_config(model), prompt_tokens, batch, dtype)
    return _verdict(answer, expected, 0.001, f"the KV bytes to move for {batch} x {prompt_tokens} tokens of {model}",
                    "prompt tokens x 2 (K and V) x layers x KV heads x head_dim x bytes per element.")


def link_transfer_seconds(answer: Any, model: str, prompt_tokens: int, link: str, dtype: str = "fp16") -> bool:
    """Ch. 5: seconds to move the KV cache of one ``prompt_tokens`` prompt of ``model`` over ``link`` (a name in
    :data:`splitlab.sizing.LINKS`, one direction's bandwidth), latency ignored."""
    expected = sizing.handoff(model, prompt_tokens, link, dtype=dtype)["transfer_s"]
    return _verdict(answer, expected, 0.01, f"the transfer time over {link} in seconds",
                    "KV bytes of the prompt divided by the link's bytes per second (sizing.LINKS[link]"
                    "['bandwidth_bytes_per_s']; GB/s x 1e9).")


def transfer_decode_steps(answer: Any, model: str, prompt_tokens: int, link: str, gpu: str = "H100",
                          dtype: str = "fp16") -> bool:
    """Ch. 5: how many minimum decode steps of ``model`` on ``gpu`` (weights + this cache read once per step) the
    transfer of one ``prompt_tokens`` prompt's cache over ``link`` lasts (:func:`splitlab.sizing.handoff`)."""
    expected = sizing.handoff(model, prompt_tokens, link, gpu, dtype)["decode_steps"]
    return _verdict(answer, expected, 0.02, f"the transfer over {link} in {gpu} decode steps",
                    "transfer time / sizing.min_decode_step_s(weight bytes, KV bytes of the prompt, GPU memory "
                    "bandwidth); weight bytes = parameters x bytes per element.")


def streamed_exposed(answer: Any, prefill_s: float, nbytes: float, layers: int, bandwidth_bytes_per_s: float,
                     latency_s: float = 0.0) -> bool:
    """Ch. 5: transfer time (s) left after a prefill of ``prefill_s`` when each of ``layers`` layers sends its
    share of ``nbytes`` as soon as it is computed (:func:`splitlab.sizing.streamed_exposed_s`)."""
    expected = sizing.streamed_exposed_s(prefill_s, nbytes, layers, bandwidth_bytes_per_s, latency_s)
    return _verdict(answer, expected, 0.02, "the transfer time left after the prefill (s)",
                    "layer i is ready at (i + 1) x prefill / layers; the link sends one layer after another, each "
                    "taking latency + its bytes / bandwidth; subtract the prefill time from when the last one "
                    "arrives. If the link keeps up, only the last layer is left.")
