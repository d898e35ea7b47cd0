"""Speculative decoding, greedy: a cheap draft proposes ``k`` tokens, the target model checks them all in one
forward pass, and every proposal up to the first disagreement is kept, plus the target's own next token.

The tokens are exactly the target's greedy tokens (the target chooses every one of them; the draft only decides
how many come out of one target forward). What changes is how many tokens one target forward yields. With an
acceptance rate ``alpha`` per proposed token (each accepted independently), one verify step yields on average

    E[tokens] = (1 - alpha ** (k + 1)) / (1 - alpha)

(Leviathan, Kalman and Matias, "Fast Inference from Transformers via Speculative Decoding", ICML 2023, eq. 1;
Chen et al., "Accelerating Large Language Model Decoding with Speculative Sampling", 2023), and the time per
output token becomes ``(k x t_draft + t_verify) / E[tokens]`` instead of ``t_decode``.

Drafts:

- :class:`ModelDraft`: a small model decoding greedily with its own KV cache; :func:`layer_draft` makes one from the
  target's first layers (self-speculative decoding: Zhang et al., "Draft & Verify", ACL 2024; Elhoushi et al.,
  "LayerSkip", ACL 2024).
- :class:`NgramDraft`: no model at all: the tokens that followed the last occurrence of the sequence's final
  n-gram (prompt lookup decoding, Saxena 2023; vLLM's ``ngram`` speculator).

One request (batch 1); the target's cache is :class:`~splitlab.kvcache.KVCache`, cut back after every verify step
to the tokens kept.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Sequence

import torch

from ..kvcache import KVCache, cache_kwarg, output_cache
from .device import Timer
from .engine import prefill
from .models import LoadedModel

__all__ = ["ModelDraft", "NgramDraft", "SpeculativeResult", "speculative_generate", "layer_draft",
           "expected_tokens_per_step", "forward_all", "head"]


def head(cache: KVCache, n: int) -> KVCache:
    """The first ``n`` positions of a one-row, unpadded cache (views, no copy).

    Raises:
        ValueError: a batch of several rows, or ``n`` outside 1..seq_len.
    """
    if cache.batch_size != 1 or not 1 <= n <= cache.seq_len:
        raise ValueError(f"head() cuts one row to 1..{cache.seq_len} positions, got batch {cache.batch_size}, n={n}")
    return KVCache([k[:, :, :n] for k in cache.keys], [v[:, :, :n] for v in cache.values],
                   cache.attention_mask[:, :n], cache.model_id)


def forward_all(lm: LoadedModel, ids: Sequence[int], cache: KVCache | None) -> tuple[torch.Tensor, KVCache, float]:
    """Feed ``ids`` (one row, after ``cache`` or none) and return the logits of *every* new position
    ``[len(ids), vocab]`` float32, the extended cache and the forward's seconds. This is the verify step: the target
    scores all the draft's proposals in one pass."""
    x = torch.tensor([list(ids)], dtype=torch.long, device=lm.device)
    kwargs = dict(input_ids=x, use_cache=True)
    if cache is not None:
        kwargs[cache_kwarg(lm.model)] = cache.to_transformers()
    past = 0 if cache is None else cache.seq_len
    mask = torch.ones(1, past + len(ids), dtype=torch.long, device=lm.device)
    model_id = lm.model_id if cache is None else cache.model_id
    with torch.inference_mode(), Timer(lm.device) as timer:
        out = lm.model(**kwargs)
        logits = out.logits[0].float()
    return logits, KVCache.from_transformers(output_cache(out), mask, model_id), timer.seconds


def layer_draft(lm: LoadedModel, layers: int) -> LoadedModel:
    """A draft made of the target's first ``layers`` decoder layers, its embedding, final norm and output head
    (a copy: the target is untouched). It costs about ``layers / L`` of a target forward where per-layer work
    dominates.

    Raises:
        ValueError: ``layers`` outside 1..L-1; TypeError: a model whose layers are not at ``model.model.layers``.
    """
    total = lm.geometry.layers
    if not 1 <= layers < total:
        raise ValueError(f"a layer draft keeps 1..{total - 1} of the target's {total} layers, got {layers}")
    inner = getattr(lm.model, "model", None)
    if inner is None or not isinstance(getattr(inner, "layers", None), torch.nn.ModuleList):
        raise TypeError(f"layer_draft needs a decoder with model.model.layers (Llama-style), got "
                        f"{type(lm.model).__name__}")
    model = copy.deepcopy(lm.model)
    model.model.layers = model.model.layers[:layers]
    model.config.num_hidden_layers = layers
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = model.config.layer_types[:layers]
    return LoadedModel(f"{lm.name}-first{layers}", model, lm.tokenizer, lm.device, lm.dtype, lm.random_weights,
                       lm.seed)


class ModelDraft:
    """A draft model that proposes greedily, keeping a KV cache of the tokens it has read.

    :meth:`start` reads the prompt (the draft's own prefill, timed in ``prefill_s``). Before proposing it cuts its
    cache back to the longest prefix it shares with the current sequence and reads the rest in one forward;
    ``seconds`` counts those forwards.

    Raises:
        ValueError: (``propose``) a draft whose vocabulary differs from the target's is caught by
        :func:`speculative_generate`.
    """

    def __init__(self, lm: LoadedModel):
        self.lm = lm
        self.reset()

    def reset(self) -> None:
        self.cache: KVCache | None = None
        self.read: list[int] = []
        self.seconds = 0.0
        self.prefill_s = 0.0

    def start(self, prompt: Sequence[int]) -> None:
        """Read the prompt: the draft's prefill (in a split deployment, one more cache on the decode side)."""
        _, self.cache, self.prefill_s = forward_all(self.lm, list(prompt), None)
        self.read = list(prompt)

    def propose(self, seq: Sequence[int], k: int) -> list[int]:
        if k < 1:
            return []
        same = 0
        for a, b in zip(self.read, seq):
            if a != b:
                break
            same += 1
        same = min(same, len(seq) - 1)  # at least one token to read, for the logits of the next one
        cache = head(self.cache, same) if self.cache is not None and same > 0 else None
        logits, cache, seconds = forward_all(self.lm, seq[same:], cache)
        self.seconds += seconds
        self.read = list(seq)
        proposals = [int(logits[-1].argmax())]
        for _ in range(k - 1):
            logits, cache, seconds = forward_all(self.lm, proposals[-1:], cache)
            self.seconds += seconds
            self.read.append(proposals[-1])
            proposals.append(int(logits[-1].argmax()))
        self.cache = cache
        return proposals


class NgramDraft:
    """Prompt lookup: find the most recent earlier occurrence of the sequence's last ``n`` tokens (``n`` from
    ``max_n`` down to ``min_n``) and propose the ``k`` tokens that followed it; no proposal if none occurs.

    Raises:
        ValueError: ``min_n`` < 1 or ``max_n`` < ``min_n``.
    """

    def __init__(self, max_n: int = 3, min_n: int = 1):
        if min_n < 1 or max_n < min_n:
            raise ValueError(f"need 1 <= min_n <= max_n, got min_n={min_n}, max_n={max_n}")
        self.max_n, self.min_n = max_n, min_n
        self.reset()

    def reset(self) -> None:
        self.seconds = 0.0
        self.prefill_s = 0.0

    def start(self, prompt: Sequence[int]) -> None:
        """Nothing to read ahead: the lookup runs over the token ids themselves."""

    def propose(self, seq: Sequence[int], k: int) -> list[int]:
        with Timer("cpu") as timer:  # the clock the target's forwards are timed with (wall or thread)
            seq = list(seq)
            out: list[int] = []
            for n in range(min(self.max_n, len(seq) - 1), self.min_n - 1, -1):
                tail = seq[-n:]
                for start in range(len(seq) - n - 1, -1, -1):  # most recent first, not the tail itself
                    if seq[start:start + n] == tail:
                        out = seq[start + n:start + n + k]
                        break
                if out:
                    break
        self.seconds += timer.seconds
        return out


@dataclass
class SpeculativeResult:
    """What :func:`speculative_generate` did.

    Attributes:
        tokens: the output tokens (the target's greedy tokens).
        proposed, accepted: per verify step, tokens the draft proposed and how many of them the target kept
            (each step also emits one token of the target's own).
        verify_s, draft_s: per verify step, seconds of the target's forward and of the draft's work before it.
        prefill_s: the target's prefill; draft_prefill_s: the draft reading the prompt (its own prefill).
        token_time_s: when each token was available, seconds since the call started.
    """

    tokens: list[int]
    prefill_s: float
    draft_prefill_s: float = 0.0
    proposed: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    verify_s: list[float] = field(default_factory=list)
    draft_s: list[float] = field(default_factory=list)
    token_time_s: list[float] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.verify_s)

    @property
    def tokens_per_step(self) -> float:
        """Output tokens per verify step after the first token (accepted proposals + the target's own)."""
        return (len(self.tokens) - 1) / self.steps if self.steps else float("nan")

    @property
    def acceptance_rate(self) -> float:
        """alpha, estimated as accepted / tried: a step tries its proposals until the first rejection."""
        tried = sum(a + (a < p) for a, p in zip(self.accepted, self.proposed))
        return sum(self.accepted) / tried if tried else float("nan")

    @property
    def predicted_tokens_per_step(self) -> float:
        """Leviathan et al.'s E[tokens] at this run's :attr:`acceptance_rate`, averaged over the steps with the
        number of proposals each step actually had (an n-gram draft may propose fewer than ``k``, or none)."""
        if not self.steps:
            return float("nan")
        return sum(expected_tokens_per_step(self.acceptance_rate, p) for p in self.proposed) / self.steps

    @property
    def tpot_s(self) -> float:
        """(last token - first token) / (tokens - 1): the request's time per output token."""
        n = len(self.token_time_s)
        return (self.token_time_s[-1] - self.token_time_s[0]) / (n - 1) if n > 1 else float("nan")


def speculative_generate(target: LoadedModel, draft, prompt: Sequence[int], max_new_tokens: int, k: int = 4
                         ) -> SpeculativeResult:
    """Generate ``max_new_tokens`` greedy tokens of ``target`` for one prompt, ``k`` draft proposals per verify.

    Args:
        draft: a :class:`ModelDraft` or :class:`NgramDraft` (reset here), or anything with ``reset()``,
            ``start(prompt)`` (called after the target's prefill, before the first token counts as out) and
            ``propose(seq, k)`` returning at most ``k`` token ids, with a ``seconds`` counter.
        k: proposals per step (0 = plain decoding, one target forward per token).

    Raises:
        ValueError: k < 0, max_new_tokens < 1, a prompt beyond the context, or a draft model whose vocabulary
            differs from the target's (its proposals would be other tokens).
    """
    if k < 0 or max_new_tokens < 1:
        raise ValueError(f"need k >= 0 and max_new_tokens >= 1, got k={k}, max_new_tokens={max_new_tokens}")
    if isinstance(draft, ModelDraft) and draft.lm.vocab_size != target.vocab_size:
        raise ValueError(f"the draft's vocabulary ({draft.lm.vocab_size}) differs from the target's "
                         f"({target.vocab_size})")
    if len(prompt) + max_new_tokens + k > target.max_context:
        raise ValueError(f"{len(prompt)} prompt + {max_new_tokens} new + {k} draft tokens exceed the context "
                         f"({target.max_context})")
    draft.reset()
    t0 = time.perf_counter()
    pre = prefill(target, [list(prompt)])
    draft.start(list(prompt))
    out = [int(pre.logits[0].argmax())]
    res = SpeculativeResult([], pre.seconds, token_time_s=[time.perf_counter() - t0])
    cache = pre.cache
    while len(out) < max_new_tokens:
        before = draft.seconds
        proposals = draft.propose(list(prompt) + out, min(k, max_new_tokens - len(out) - 1))
        logits, longer, seconds = forward_all(target, [out[-1], *proposals], cache)
        choice = logits.argmax(-1).tolist()
        n = 0
        while n < len(proposals) and proposals[n] == choice[n]:
            n += 1
        out += proposals[:n] + [choice[n]]
        cache = head(longer, cache.seq_len + n + 1)
        now = time.perf_counter() - t0
        res.token_time_s += [now] * (n + 1)
        res.proposed.append(len(proposals))
        res.accepted.append(n)
        res.verify_s.append(seconds)
        res.draft_s.append(draft.seconds - before)
    res.tokens = out[:max_new_tokens]
    res.token_time_s = res.token_time_s[:max_new_tokens]
    res.draft_prefill_s = draft.prefill_s
    return res


def expected_tokens_per_step(alpha, k: int):
    """Mean tokens one verify step yields with ``k`` proposals accepted independently with probability
    ``alpha``: ``(1 - alpha^(k+1)) / (1 - alpha)`` (``k + 1`` at alpha = 1). Leviathan et al. 2023, eq. 1.
    Works on floats and numpy arrays of alpha."""
    import numpy as np

    a = np.nan_to_num(np.asarray(alpha, dtype=float))  # no proposals tried: one token per step
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(a < 1, (1 - a ** (k + 1)) / (1 - a), k + 1.0)
    return float(out) if out.ndim == 0 else out
