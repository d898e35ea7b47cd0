"""The prefix-cache and system-prompt options of ``serve``, ``simulate`` and ``compare`` (``--routing``,
``--prefix-cache-tokens``, ``--system-prompts N --system-prompt-tokens S``): their checks, the
:class:`~splitlab.serving.ServingConfig` fields they set, and the workload's shared system prompts
(:mod:`splitlab.serving.prefix_router`, :mod:`splitlab.serving.system_prompts`)."""
from __future__ import annotations

import math

from ..serving.config import ServingConfig
from ..serving.system_prompts import MAX_SYSTEM_PROMPTS
from .registry import CLIError

__all__ = ["prefix_fields", "with_system"]

PREFIX_BLOCK_TOKENS = ServingConfig.prefix_block_tokens  # the prefix cache's block, tokens


def _given(args, *names) -> str:
    """The flags of ``names`` the command line gave, e.g. '--routing and --prefix-cache-tokens' or '--routing'."""
    return " and ".join(f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is not None)


def prefix_fields(args) -> dict:
    """The prefix-cache fields: none unless --routing or --prefix-cache-tokens (then unlimited by default).

    Raises:
        CLIError: --system-prompts without --system-prompt-tokens (or the other way), more than
            :data:`MAX_SYSTEM_PROMPTS`, or without --rate and the SLOs; --routing or --prefix-cache-tokens on a back
            end that runs a model or with a conditional split; a cache smaller than one block. Each names only the
            flags given."""
    if (args.system_prompts is None) != (args.system_prompt_tokens is None):
        raise CLIError("--system-prompts N and --system-prompt-tokens S go together (N system prompts of S tokens)")
    if args.system_prompts is not None and args.system_prompts > MAX_SYSTEM_PROMPTS:
        raise CLIError(f"--system-prompts must be at most {MAX_SYSTEM_PROMPTS:,}, got {args.system_prompts:,}")
    if args.system_prompts is not None and None in (args.rate, args.ttft_slo, args.tpot_slo):
        raise CLIError("with --system-prompts give --rate, --ttft-slo and --tpot-slo: the defaults are chosen for the "
                       "workload's prompts without their system prompts")
    if args.routing is None and args.prefix_cache_tokens is None:
        return {}
    flags = _given(args, "routing", "prefix_cache_tokens")
    if args.backend != "simulated":
        raise CLIError(f"{flags} run{'s' * (' and ' not in flags)} on the simulated back end only: the "
                       f"{args.backend} back end runs a real model, whose prefill would need the cached keys and "
                       "values")
    if args.local_prefill_tokens is not None or args.local_prefill_queue is not None:
        raise CLIError(f"{flags} do{'es' * (' and ' not in flags)} not go with "
                       f"{_given(args, 'local_prefill_tokens', 'local_prefill_queue')}: a conditional split's decode "
                       f"workers keep no prefix cache in splitlab")
    cache = math.inf if args.prefix_cache_tokens is None else args.prefix_cache_tokens
    if cache < PREFIX_BLOCK_TOKENS:
        raise CLIError(f"--prefix-cache-tokens must be at least {PREFIX_BLOCK_TOKENS} (one block), got {cache}")
    return dict(routing=args.routing or "least-loaded", prefix_cache_tokens=cache)


def with_system(args, reqs, context: int, vocab: int | None):
    """``reqs`` with --system-prompts N of --system-prompt-tokens S in front of their prompts (else as they are).

    Raises:
        CLIError: a system prompt that, with the longest request, exceeds the model's ``context`` (tokens)."""
    if args.system_prompts is None:
        return reqs
    from ..serving.system_prompts import with_system_prompts
    try:
        return with_system_prompts(reqs, args.system_prompts, args.system_prompt_tokens, args.seed, context,
                                   min(256, vocab or 256))
    except ValueError as err:  # too long for the context: in the command line's words
        raise CLIError(f"--system-prompt-tokens {args.system_prompt_tokens}: {err}") from None
