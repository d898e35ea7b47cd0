"""The two phases, written out: ``prefill`` reads whole prompts once and builds the KV cache; ``decode_step``
feeds one token per sequence and extends the cache by one position; ``generate`` chains them.

Batches of prompts of different lengths are left-padded: the attention mask hides pad slots and the
position ids count only real tokens, so each row computes exactly what it would alone.
Every forward pass is timed with :class:`splitlab.phases.device.Timer` (CUDA events on GPU).
"""
from __future__ import annotations

import functools
import inspect
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from ..kvcache import CacheMismatchError, KVCache, cache_kwarg, output_cache
from .device import Timer
from .inputs import ContextLengthError, EmptyPromptError, as_token_batch, count, integer_ids
from .models import LoadedModel, require_loaded
from .sampling import Sampler, SamplingParams

__all__ = ["prefill", "decode_step", "generate", "PrefillOutput", "DecodeOutput", "Generation", "as_token_batch",
           "EmptyPromptError", "ContextLengthError", "reference_generate", "forward_logits",
           "accepts_logits_to_keep"]


@dataclass
class PrefillOutput:
    """Result of :func:`prefill`.

    Attributes:
        cache: the KV cache of all prompts, ``[batch, kv_heads, max_prompt_len, head_dim]`` per layer (a
            sliding-window layer: at most its window minus one positions).
        logits: ``[batch, vocab]`` float32 logits for each row's first output token.
        seconds: wall time of the forward pass (synchronised).
    """

    cache: KVCache
    logits: torch.Tensor
    seconds: float


@dataclass
class DecodeOutput:
    """Result of :func:`decode_step`: the cache one position longer, ``[batch, vocab]`` logits, seconds."""

    cache: KVCache
    logits: torch.Tensor
    seconds: float


@dataclass
class Generation:
    """Result of :func:`generate` for a batch of requests.

    Attributes:
        tokens: generated ids per request (prompt excluded).
        prompt_lengths: prompt tokens per request.
        prefill_s: prefill forward time (s).
        ttft_s: time from the call's start to the first token of every request being chosen (s).
        decode_step_s: forward time of each decode step (s); one per generated token after the first.
        token_time_s: time since the call's start at which each step's tokens were available (s);
            ``token_time_s[0] == ttft_s``.
        kv_bytes_after_prefill, kv_bytes_final: exact cache bytes after prefill and at the end.
        cache: the final KV cache.
    """

    tokens: list[list[int]]
    prompt_lengths: list[int]
    prefill_s: float
    ttft_s: float
    decode_step_s: list[float] = field(default_factory=list)
    token_time_s: list[float] = field(default_factory=list)
    kv_bytes_after_prefill: int = 0
    kv_bytes_final: int = 0
    cache: KVCache | None = None


@functools.lru_cache(maxsize=None)
def accepts_logits_to_keep(model_cls: type) -> bool:
    return "logits_to_keep" in inspect.signature(model_cls.forward).parameters


def forward_logits(lm: LoadedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   cache: KVCache | None, padded: bool | None = None) -> tuple[torch.Tensor, KVCache, float]:
    """One timed forward pass over ``input_ids [batch, new]`` after ``cache`` (or none).

    ``attention_mask`` is ``[batch, cached + new]``; position ids are derived from it (count of real tokens
    before each slot). When no slot is padding (``padded`` False, or None and the mask is all ones) the model
    gets neither: it then numbers positions from the cache length and applies plain causal attention, which is
    the same computation with less work per step. Returns (last-position logits ``[batch, vocab]`` float32,
    the extended cache, seconds).
    """
    require_loaded(lm, "forward_logits()")
    if padded is None:
        padded = not bool(attention_mask.all())
    kwargs = dict(input_ids=input_ids, use_cache=True)
    if padded:
        kwargs["attention_mask"] = attention_mask
        kwargs["position_ids"] = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)[:, -input_ids.shape[1]:]
    if cache is not None:
        kwargs[cache_kwarg(lm.model)] = cache.to_transformers()
    if accepts_logits_to_keep(type(lm.model)):
        kwargs["logits_to_keep"] = 1
    model_id = lm.model_id if cache is None else cache.model_id  # callers check that the two are equal
    with torch.inference_mode(), Timer(lm.device) as timer:
        out = lm.model(**kwargs)
        logits = out.logits[:, -1, :].float()
    return logits, KVCache.from_transformers(output_cache(out), attention_mask, model_id), timer.seconds


def prefill(lm: LoadedModel, prompts, max_new_tokens: int = 0) -> PrefillOutput:
    """Run the prompts through the model in one forward pass and build their KV cache.

    Args:
        lm: a model from :func:`splitlab.load_model`.
        prompts: see :func:`as_token_batch`; rows of different lengths are left-padded.
        max_new_tokens: tokens to be generated afterwards, only to check the context limit early.

    Raises:
        EmptyPromptError, ContextLengthError, ValueError, TypeError: see :func:`as_token_batch`.
    """
    batch = as_token_batch(require_loaded(lm, "prefill()"), prompts, max_new_tokens)
    seq = max(map(len, batch))
    ids = torch.zeros(len(batch), seq, dtype=torch.long)
    mask = torch.zeros(len(batch), seq, dtype=torch.long)
    for b, p in enumerate(batch):
        ids[b, seq - len(p):] = torch.tensor(p)
        mask[b, seq - len(p):] = 1
    padded = min(map(len, batch)) < seq
    logits, cache, seconds = forward_logits(lm, ids.to(lm.device), mask.to(lm.device), None, padded)
    return PrefillOutput(cache, logits, seconds)


def decode_step(lm: LoadedModel, cache: KVCache, tokens: torch.Tensor | Sequence[int]) -> DecodeOutput:
    """Feed one new token per row and extend the cache by one position.

    Args:
        cache: from :func:`prefill`, a previous step, a transfer or :meth:`KVCache.merge`; not modified.
        tokens: ``[batch]`` the latest token of each row.

    Raises:
        CacheMismatchError: the cache was made by another model (or dtype), its tensors do not have this model's
            layers, KV heads, widths, windows or dtype, a layer holds the wrong number of positions, or
            ``tokens`` has the wrong length.
        TypeError: ``lm`` is not a :class:`LoadedModel` (a raw transformers model: wrap it with
            :func:`splitlab.load_model`), ``cache`` is not a :class:`KVCache`, or ``tokens`` are not integer ids.
        ValueError: a token id outside the vocabulary.
        ContextLengthError: a row is already at the model's context limit.
    """
    require_loaded(lm, "decode_step()")
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a splitlab.KVCache, got {type(cache).__name__}")
    if cache.model_id != lm.model_id:
        raise CacheMismatchError(f"cache was made by {cache.model_id!r}, not by this model {lm.model_id!r}")
    g = lm.geometry
    if cache.num_layers != g.layers or cache.dtype != lm.dtype or cache.windows != g.windows or any(
            (k.shape[1], k.shape[3], v.shape[3]) != (layer.kv_heads, layer.k_dim, layer.v_dim)
            for k, v, layer in zip(cache.keys, cache.values, g.per_layer)):
        want = sorted({(layer.kv_heads, layer.k_dim, layer.v_dim, layer.window) for layer in g.per_layer},
                      key=str)
        raise CacheMismatchError(f"the cache's tensors do not fit this model ({g.layers} layers of (KV heads, "
                                 f"K width, V width, window) {want}, {lm.dtype}): {cache!r}")
    cache.check()
    try:
        tokens = torch.as_tensor(tokens)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"tokens must be integer token ids, one per row; got {tokens!r}") from None
    if tokens.numel():  # torch.as_tensor([]) is float32: an empty list is the wrong count, said below
        integer_ids(tokens, "tokens")
    tokens = tokens.to(device=lm.device, dtype=torch.long).reshape(-1)
    if tokens.numel() != cache.batch_size:
        raise CacheMismatchError(f"{tokens.numel()} tokens for a cache of batch {cache.batch_size}")
    if tokens.min() < 0 or tokens.max() >= lm.vocab_size:
        raise ValueError(f"token ids must be in 0..{lm.vocab_size - 1}, got {tokens.tolist()}")
    if int(cache.lengths.max()) >= lm.max_context:
        raise ContextLengthError(f"a row already holds {int(cache.lengths.max())} tokens, the model's context")
    return _decode(lm, cache, tokens, padded=None)


def _decode(lm: LoadedModel, cache: KVCache, tokens: torch.Tensor, padded: bool | None) -> DecodeOutput:
    """:func:`decode_step` without its checks, for loops whose inputs are valid by construction."""
    mask = torch.cat([cache.attention_mask, cache.attention_mask.new_ones(cache.batch_size, 1)], dim=1)
    logits, new_cache, seconds = forward_logits(lm, tokens[:, None], mask, cache, padded)
    return DecodeOutput(new_cache, logits, seconds)


def generate(lm: LoadedModel, prompts, max_new_tokens: int = 16, sampling: SamplingParams | None = None,
             on_token: Callable[[int, int], None] | None = None, stop_at_eos: bool = False) -> Generation:
    """Prefill then decode ``max_new_tokens`` tokens per prompt, one step at a time.

    Args:
        sampling: None for greedy, else :class:`SamplingParams` (seeded).
        on_token: called as ``on_token(request_index, token_id)`` as soon as each token is chosen (streaming).
        stop_at_eos: stop a row at the tokenizer's EOS (off by default: serving benchmarks fix output lengths).

    Raises:
        ValueError: max_new_tokens < 1; and every error of :func:`prefill`.
        TypeError: ``sampling`` is not a :class:`SamplingParams`; max_new_tokens is not an int.
    """
    require_loaded(lm, "generate()")
    if count("max_new_tokens", max_new_tokens) < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    batch = as_token_batch(lm, prompts, max_new_tokens)
    sampler = Sampler(sampling, lm.device)
    eos = getattr(lm.tokenizer, "eos_token_id", None) if stop_at_eos else None
    t0 = time.perf_counter()
    pre = prefill(lm, batch)
    cache, logits = pre.cache, pre.logits
    padded = min(map(len, batch)) < max(map(len, batch))  # decode appends one real token to every row
    result = Generation([[] for _ in batch], [len(p) for p in batch], pre.seconds, 0.0,
                        kv_bytes_after_prefill=cache.nbytes)
    done = [False] * len(batch)
    for step in range(max_new_tokens):
        if step:
            out = _decode(lm, cache, next_tokens, padded)  # checked up front by as_token_batch
            cache, logits = out.cache, out.logits
            result.decode_step_s.append(out.seconds)
        next_tokens = sampler(logits, index=step)
        ids = next_tokens.tolist()
        result.token_time_s.append(time.perf_counter() - t0)
        for b, t in enumerate(ids):
            if not done[b]:
                result.tokens[b].append(t)
                if on_token is not None:
                    on_token(b, t)
                done[b] = t == eos
        if all(done):
            break
    result.ttft_s = result.token_time_s[0]
    result.kv_bytes_final = cache.nbytes
    result.cache = cache
    return result


def reference_generate(lm: LoadedModel, prompt: Sequence[int], max_new_tokens: int) -> list[int]:
    """Greedy tokens from transformers' own ``generate`` for one prompt (EOS ignored), to check splitlab's loop."""
    require_loaded(lm, "reference_generate()")
    ids = torch.tensor([list(prompt)], device=lm.device)
    gen_cfg = lm.model.generation_config
    saved = gen_cfg.eos_token_id
    gen_cfg.eos_token_id = None
    try:
        with torch.inference_mode():
            out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                    min_new_tokens=max_new_tokens, do_sample=False,
                                    pad_token_id=getattr(lm.tokenizer, "pad_token_id", None) or 0)
    finally:
        gen_cfg.eos_token_id = saved
    return out[0, ids.shape[1]:].tolist()
