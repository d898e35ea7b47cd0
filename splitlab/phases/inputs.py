"""What a prompt may be: normalising prompts to token-id lists and refusing bad ones early, with a clear error."""
from __future__ import annotations

import numbers
import operator
from typing import Sequence

import numpy as np
import torch

from .models import LoadedModel, require_loaded

__all__ = ["EmptyPromptError", "ContextLengthError", "as_token_batch", "integer_ids", "count"]


class EmptyPromptError(ValueError):
    """A prompt with no tokens: there is nothing to prefill."""


class ContextLengthError(ValueError):
    """Prompt plus new tokens would exceed the model's context window."""


def count(name: str, value) -> int:
    """``value`` as an int, or a TypeError naming ``name`` (a float would otherwise be truncated silently)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    return int(value)


def integer_ids(x, what: str):
    """A tensor or numpy array of token ids, refused unless its dtype holds integers."""
    kind = getattr(x.dtype, "kind", None)  # numpy: 'i'/'u' are integers
    floating = (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool) if isinstance(
        x, torch.Tensor) else kind not in ("i", "u")
    if floating:
        raise TypeError(f"{what} must be integer token ids, got a {x.dtype} array")
    return x


def as_token_batch(lm: LoadedModel, prompts, max_new_tokens: int = 0) -> list[list[int]]:
    """Normalise prompts to a list of token-id lists and validate them.

    ``prompts`` may be a string, a sequence of ints (one prompt), a list of strings / int sequences, or a
    1-D/2-D tensor or numpy array of integer ids.

    Raises:
        EmptyPromptError: no prompts, or a prompt with no tokens.
        TypeError: prompts of another kind (e.g. float ids, which would be truncated); max_new_tokens not an int.
        ValueError: a token id outside ``0..vocab_size-1``; max_new_tokens < 0; a tensor that is not 1-D or 2-D.
        ContextLengthError: prompt length + max_new_tokens > the model's context.
        TypeError: ``lm`` is not a :class:`LoadedModel` (a raw transformers model: wrap it with
            ``splitlab.load_model(model, tokenizer)``).
    """
    require_loaded(lm, "as_token_batch()")
    if isinstance(prompts, (torch.Tensor, np.ndarray)):
        if prompts.ndim not in (1, 2):
            raise ValueError(f"a tensor of prompts must be 1-D (one prompt) or 2-D [batch, tokens], "
                             f"got shape {tuple(prompts.shape)}")
        prompts = integer_ids(prompts, "prompts").tolist() if prompts.ndim == 2 else [integer_ids(
            prompts, "prompts").tolist()]
    elif isinstance(prompts, str) or (isinstance(prompts, Sequence) and prompts and isinstance(
            prompts[0], numbers.Number)):  # one prompt of ids (a float among them is refused below)
        prompts = [prompts]
    if prompts is None or isinstance(prompts, Sequence) and not prompts:
        raise EmptyPromptError("no prompts given")
    if not isinstance(prompts, Sequence):
        raise TypeError(f"prompts must be a string, a list of token ids, a list of those, or a 1-D/2-D tensor of "
                        f"ids; got {type(prompts).__name__}")
    max_new_tokens = count("max_new_tokens", max_new_tokens)
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    batch = []
    vocab = lm.vocab_size  # a property that walks the model: once per call, not once per token (~10 us each)
    for i, p in enumerate(prompts):
        if isinstance(p, (torch.Tensor, np.ndarray)) and p.ndim == 1:
            p = integer_ids(p, f"prompt {i}").tolist()
        if isinstance(p, str):
            ids = lm.encode(p)
        elif isinstance(p, Sequence):
            try:
                ids = list(map(operator.index, p))  # ints (numpy ones too); a float is refused, not truncated
            except TypeError:
                bad = next(t for t in p if not isinstance(t, numbers.Integral))
                raise TypeError(f"prompt {i} must hold integer token ids, got {bad!r}") from None
        else:
            raise TypeError(f"prompt {i} must be a string or a sequence of token ids, got {type(p).__name__}")
        if not ids or (isinstance(p, str) and not p):
            raise EmptyPromptError(f"prompt {i} is empty: prefill needs at least one token")
        bad = [t for t in ids if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"prompt {i} has token id {bad[0]} outside the vocabulary 0..{vocab - 1}")
        if len(ids) + max_new_tokens > lm.max_context:
            raise ContextLengthError(f"prompt {i} has {len(ids)} tokens + {max_new_tokens} new tokens = "
                                     f"{len(ids) + max_new_tokens}, beyond the model's context of {lm.max_context}")
        batch.append(ids)
    return batch
