"""Chapter 4 (interference): its exercise checkers."""
from __future__ import annotations

import math
from typing import Any

from .verdict import verdict

__all__ = ['itl_spike', 'requests_in_kv_budget', 'chunked_prefill_steps']


def itl_spike(answer: Any, prefill_table, prompt_tokens: int, decode_step_s: float) -> bool:
    """Ch. 4: the stall (s) that running streams see when a ``prompt_tokens`` prompt is prefilled between two of
    their decode steps (prefill-first): its prefill time, interpolated linearly in ``prefill_table`` (columns
    ``prompt_tokens``, ``prefill_s``, e.g. from :func:`splitlab.profiling.measure_prefill`), plus one decode step."""
    import numpy as np

    table = prefill_table.sort_values("prompt_tokens")
    expected = float(np.interp(prompt_tokens, table["prompt_tokens"], table["prefill_s"])) + decode_step_s
    return verdict(answer, expected, 0.02, f"the predicted stall for a {prompt_tokens}-token prompt (s)",
                   "interpolate the prefill time between the two measured lengths around it (np.interp), then "
                   "add the decode step that still has to run before the streams' next token.")


def requests_in_kv_budget(answer: Any, budget_bytes: int, prompt_tokens: int, new_tokens: int,
                          kv_bytes_per_token: int) -> bool:
    """Ch. 4: how many identical requests a worker admits at once when admission reserves each one's final cache
    (prompt + new tokens) against a KV budget: floor(budget / ((prompt + new) x bytes per token))."""
    expected = budget_bytes // ((prompt_tokens + new_tokens) * kv_bytes_per_token)
    return verdict(answer, expected, 0, "the requests that fit in the KV budget at once",
                   "each admitted request reserves (prompt + new tokens) x KV bytes per token; round down.")


def chunked_prefill_steps(answer: Any, prompt_tokens: int, chunk_tokens: int, decode_batch: int, result=None,
                          request_id: int | None = None) -> bool:
    """Ch. 4: steps a prompt needs under chunked prefill when ``decode_batch`` streams keep decoding: each step's
    budget of ``chunk_tokens`` gives one token to every stream and the rest to the prompt,
    ceil(prompt / (chunk_tokens - decode_batch)). With a served ``result`` (a ServingResult) and the prompt's
    ``request_id``, the answer must also equal the prefill pieces that run really gave that request (the
    experiment: the formula, checked against the reader's own run)."""
    expected = math.ceil(prompt_tokens / (chunk_tokens - decode_batch))
    ok = verdict(answer, expected, 0, f"the chunked-prefill steps for a {prompt_tokens}-token prompt",
                 "every decoding stream takes one token of each step's budget; the prompt gets the rest.")
    if ok and result is not None:
        pieces = result.timeline.query("kind == 'prefill'")
        got = int(pieces.request_ids.apply(lambda ids: request_id in ids).sum())
        print(f"The run agrees: it prefilled request {request_id} in {got} pieces." if got == expected else
              f"But the run prefilled request {request_id} in {got} pieces: were the streams still decoding "
              f"throughout?")
        ok = got == expected
    return ok

