"""What quantizing the KV cache changes in a model's output (chapter 8, on trained weights): the tokens, the
next-token distributions and the logits, beside the bytes it saves.

Each prompt is prefilled once at full precision; its cache is quantized (:func:`splitlab.kvcache.quant.quantize`,
int8 or fp8, KIVI's layout) and dequantized, as a decode worker receiving a quantized cache would; the first
token comes from the prefill either way. Then, for ``n_tokens`` - 1 decode steps:

- *free-running*: each cache decodes greedily on its own; the tokens that differ from the full-precision ones
  are counted (after a first difference the two texts usually part ways);
- *teacher-forced*: both caches are fed the full-precision tokens, and each step's next-token distributions are
  compared: KL(p_full || p_quantized) in nats, the largest absolute logit difference, and whether the greedy
  choice is the same.

The tokens decoded after the prefill are appended at full precision: only the transferred prompt's cache is
quantized. On random weights the distributions are nearly flat and the comparison says little; on a trained model
(``load_model("smollm2-135m-instruct")``) it is what a reader of the text would notice.
"""
from __future__ import annotations

import numbers
from typing import Iterable, Sequence

import pandas as pd
import torch

from ..kvcache.quant import SCHEMES, quantize
from .agreement import greedy_from
from .engine import decode_step, prefill
from .inputs import as_token_batch
from .models import LoadedModel, require_loaded

__all__ = ["kv_quant_quality"]


def kv_quant_quality(lm: LoadedModel, prompts: Sequence[Sequence[int]], n_tokens: int = 8,
                     schemes: Sequence[str] = ("int8", "fp8")) -> pd.DataFrame:
    """One row per scheme (and one for the full-precision cache itself) over ``prompts``, each run alone.

    Args:
        prompts: token id lists (e.g. ``lm.encode_chat(question)``), at least one (or what
            :func:`~splitlab.phases.inputs.as_token_batch` takes: texts, arrays).
        n_tokens: tokens generated per prompt (>= 2: the first comes from the prefill).
        schemes: names from :data:`splitlab.kvcache.quant.SCHEMES` (one row each: a repeated name counts once).

    Returns:
        Columns ``scheme``; ``kv_bytes`` (the prompts' caches, summed) and ``bytes_ratio`` (to the full-precision
        cache's); ``tokens``, ``tokens_differ`` (free-running, summed over prompts) and ``prompts_differ``;
        ``step_agreement`` (teacher-forced share of steps with the same greedy token); ``kl_mean``, ``kl_max``
        (nats, per step); ``logit_err_max`` (largest absolute logit difference).

    Raises:
        TypeError: ``lm`` is not a LoadedModel, ``schemes`` a string or not a list. ValueError: no prompts, ``n_tokens``
            < 2, an unknown scheme, and every error of :func:`splitlab.prefill`.
    """
    require_loaded(lm, "kv_quant_quality()")
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, numbers.Integral) or n_tokens < 2:
        raise ValueError(f"n_tokens must be an integer >= 2 (the first token comes from the prefill), got {n_tokens!r}")
    prompts = as_token_batch(lm, prompts, int(n_tokens))  # text, ids, arrays; checked against the context
    if isinstance(schemes, str):  # "int8" was the schemes 'i', 'n', 't', '8'
        raise TypeError(f"schemes must be a list of names, e.g. [{schemes!r}], got the string {schemes!r}")
    if not isinstance(schemes, Iterable):  # None: "'NoneType' object is not iterable"
        raise TypeError(f"schemes must be a list of names, e.g. ['int8'], got {type(schemes).__name__}")
    schemes = list(dict.fromkeys(schemes))  # a repeated scheme was summed twice into one row: bytes_ratio doubled
    unknown = [s for s in schemes if s not in SCHEMES]
    if unknown:
        raise ValueError(f"unknown schemes {unknown}; choose from {sorted(SCHEMES)}")
    rows = {s: dict(scheme=s, kv_bytes=0, tokens=0, tokens_differ=0, prompts_differ=0, agree=0, steps=0, kl=[],
                    logit_err_max=0.0) for s in ["full", *schemes]}
    for prompt in prompts:
        pre = prefill(lm, [prompt], max_new_tokens=n_tokens)
        reference, ref_logits, cache = [int(pre.logits[0].argmax())], [], pre.cache
        for _ in range(n_tokens - 1):  # the full-precision run, its logits kept for the teacher-forced comparison
            out = decode_step(lm, cache, [reference[-1]])
            cache = out.cache
            ref_logits.append(out.logits.float())
            reference.append(int(out.logits[0].argmax()))
        full = rows["full"]
        full.update(kv_bytes=full["kv_bytes"] + pre.cache.nbytes, tokens=full["tokens"] + n_tokens)
        for scheme in schemes:
            row, packed = rows[scheme], quantize(pre.cache, scheme)
            cache = packed.dequantize()
            first_miss = None
            for i, (fed, logits) in enumerate(zip(reference, ref_logits)):  # teacher-forced: fed the reference
                out = decode_step(lm, cache, [fed])
                cache = out.cache
                logp, logq = torch.log_softmax(logits, -1), torch.log_softmax(out.logits.float(), -1)
                row["kl"].append(float((logp.exp() * (logp - logq)).sum()))
                row["logit_err_max"] = max(row["logit_err_max"], float((logits - out.logits.float()).abs().max()))
                agree = int(out.logits[0].argmax()) == reference[i + 1]
                row["agree"] += agree
                first_miss = i if first_miss is None and not agree else first_miss
            # free-running: the same tokens as teacher-forced up to the first step that chose otherwise
            tokens = reference if first_miss is None else greedy_from(lm, packed.dequantize(), reference[:1],
                                                                       n_tokens)[0]
            differ = sum(a != b for a, b in zip(tokens, reference))
            row.update(kv_bytes=row["kv_bytes"] + packed.nbytes, tokens=row["tokens"] + n_tokens,
                       tokens_differ=row["tokens_differ"] + differ, prompts_differ=row["prompts_differ"] + bool(differ),
                       steps=row["steps"] + n_tokens - 1)
    full_bytes = rows["full"]["kv_bytes"]
    out = [dict(scheme=r["scheme"], kv_bytes=r["kv_bytes"], bytes_ratio=r["kv_bytes"] / full_bytes,
                tokens=r["tokens"], tokens_differ=r["tokens_differ"], prompts_differ=r["prompts_differ"],
                step_agreement=r["agree"] / r["steps"] if r["steps"] else 1.0,
                kl_mean=sum(r["kl"]) / len(r["kl"]) if r["kl"] else 0.0, kl_max=max(r["kl"], default=0.0),
                logit_err_max=r["logit_err_max"]) for r in rows.values()]
    return pd.DataFrame(out)
