"""A workload with shared system prompts: ``N`` distinct system prompts of ``S`` tokens each, every request one of
them followed by its own user part (a request of any workload: its prompt is the user part). Chat deployments
look like this: a handful of applications, each with its own long instructions, many users. It is the traffic
prefix caching and prefix-aware routing are for (:mod:`.prefix_router`): with ``N`` prompts and ``W`` workers, a
router that keeps each system prompt on a few workers computes it about once per worker that holds it, while one
that spreads the requests by load alone has every worker compute every system prompt again as its cache turns over.
"""
from __future__ import annotations

import numbers
from typing import Sequence

import numpy as np

from .request import Request
from .workload import random_ids

__all__ = ["with_system_prompts", "system_prompt_ids"]

#: most distinct system prompts (each is drawn and kept once per workload)
MAX_SYSTEM_PROMPTS = 100_000


def _integer(name: str, value, lowest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lowest:
        raise ValueError(f"{name} must be an integer >= {lowest}, got {value!r}")
    return int(value)


def system_prompt_ids(system_prompts: int, system_prompt_tokens: int, seed: int = 0, vocab: int = 256
                      ) -> list[list[int]]:
    """The ``system_prompts`` system prompts of a seed: lists of ``system_prompt_tokens`` token ids in
    ``0..vocab-1`` each, distinct from their first block of tokens on (the first 16 tokens of two prompts differ
    with probability 1 - 256^-16).

    Raises:
        ValueError: a count or length that is not an integer >= 1, more than :data:`MAX_SYSTEM_PROMPTS` prompts."""
    n = _integer("system_prompts", system_prompts, 1)
    s = _integer("system_prompt_tokens", system_prompt_tokens, 1)
    if n > MAX_SYSTEM_PROMPTS:
        raise ValueError(f"system_prompts must be at most {MAX_SYSTEM_PROMPTS:,}, got {n:,}")
    return [random_ids(s, [seed, 7, k], vocab) for k in range(n)]


def with_system_prompts(requests: Sequence[Request], system_prompts: int, system_prompt_tokens: int, seed: int = 0,
                        max_context: int | None = None, vocab: int = 256) -> list[Request]:
    """``requests`` again (new Request objects, same ids, arrivals and answers), each prompt now one of
    ``system_prompts`` system prompts (:func:`system_prompt_ids`, chosen uniformly at random with ``seed``) followed
    by the request's own prompt (the user part).

    Args:
        requests: e.g. :func:`~.workload.make_workload`'s; their prompts become the user parts.
        system_prompts, system_prompt_tokens: N distinct system prompts of S tokens.
        max_context: the model's context (tokens); a request whose system prompt + user part + answer exceed it is
            refused here, naming it. None: not checked.
        vocab: token ids of the system prompts are drawn from ``0..vocab-1``.

    Returns:
        A list of :class:`~.request.Request`, ``len(requests)`` long; request i's prompt has ``S + len(user part)``
        tokens. The system prompt a request got: ``prompt[:S]`` (one of :func:`system_prompt_ids`).

    Raises:
        TypeError: requests not a list of Request. ValueError: N or S not an integer >= 1 (or N above
            :data:`MAX_SYSTEM_PROMPTS`), a request that no longer fits ``max_context``, an empty request list.
    """
    if isinstance(requests, (str, bytes)) or not all(isinstance(r, Request) for r in requests):
        raise TypeError("requests must be a list of splitlab.serving.Request (e.g. make_workload's)")
    requests = list(requests)
    if not requests:
        raise ValueError("with_system_prompts needs at least one request")
    prompts = system_prompt_ids(system_prompts, system_prompt_tokens, seed, vocab)
    if max_context is not None:
        longest = max(requests, key=lambda r: r.max_total_tokens)
        if system_prompt_tokens + longest.max_total_tokens > max_context:
            raise ValueError(f"a system prompt of {system_prompt_tokens} tokens + request {longest.id}'s prompt "
                             f"({longest.prompt_len}) and answer ({longest.max_new_tokens}) = "
                             f"{system_prompt_tokens + longest.max_total_tokens} tokens exceed the model's context of "
                             f"{max_context}: shorten the system prompts or the requests")
    which = np.random.default_rng([seed, 8]).integers(0, len(prompts), size=len(requests))
    return [Request(r.id, r.arrival_s, prompts[k] + r.prompt, r.max_new_tokens, r.sampling)
            for r, k in zip(requests, which.tolist())]
