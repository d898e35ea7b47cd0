"""Choosing the next token from logits: greedy, or seeded sampling with temperature, top-k and top-p.

The warpers are transformers' own (``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper``;
Holtzman et al. 2020 for top-p); splitlab only fixes the random draws so runs reproduce.

Given the index of the token being chosen (``sampler(logits, index=i)``), the draw depends only on the request's
seed and ``i``: the same token comes out whether the request is alone or in a batch, on a colocated worker or on
the decode worker of a split, and after a retry on another worker (what the serving back ends rely on).
"""
from __future__ import annotations

import torch
from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

from .sampling_params import SamplingParams

__all__ = ["SamplingParams", "Sampler"]


class Sampler:
    """Stateful token picker: ``Sampler(params, device)(logits)`` with logits ``[batch, vocab]`` returns
    token ids ``[batch]`` (int64). The generator is seeded once, so a sequence of calls is reproducible.

    Raises:
        TypeError: ``params`` is neither None nor a :class:`SamplingParams`.
    """

    def __init__(self, params: SamplingParams | None, device: torch.device):
        if params is not None and not isinstance(params, SamplingParams):
            raise TypeError(f"sampling must be None (greedy) or a splitlab.SamplingParams, got {params!r}")
        self.params = params or SamplingParams()
        self.generator = torch.Generator(device=device).manual_seed(self.params.seed)
        self.warpers = []
        if not self.params.greedy:
            self.warpers.append(TemperatureLogitsWarper(self.params.temperature))
            if self.params.top_k is not None:
                self.warpers.append(TopKLogitsWarper(self.params.top_k))
            if self.params.top_p is not None and self.params.top_p < 1:
                self.warpers.append(TopPLogitsWarper(self.params.top_p))

    def __call__(self, logits: torch.Tensor, index: int | None = None) -> torch.Tensor:
        """Token ids ``[batch]`` for ``logits [batch, vocab]``. ``index``: the position of the token in its
        request's output; with it every row draws from a generator seeded by (seed, index) alone, without it
        from this sampler's own generator (one stream for the calls in order)."""
        if self.params.greedy:
            return logits.argmax(dim=-1)
        scores = logits.float()
        for warp in self.warpers:
            scores = warp(None, scores)
        probs = torch.softmax(scores, dim=-1)
        if index is None:
            return torch.multinomial(probs, num_samples=1, generator=self.generator).squeeze(1)
        key = (self.params.seed * 0x9E3779B97F4A7C15 + int(index)) % 2 ** 63  # a distinct stream per token
        rows = [torch.multinomial(p[None], 1, generator=torch.Generator(device=probs.device).manual_seed(key))
                for p in probs]
        return torch.cat(rows).squeeze(1)
