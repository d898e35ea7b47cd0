"""Choosing the next token from logits: greedy, or seeded sampling with temperature, top-k and top-p.

The warpers are transformers' own (``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper``;
Holtzman et al. 2020 for top-p); splitlab only fixes the random generator so runs reproduce.
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

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        if self.params.greedy:
            return logits.argmax(dim=-1)
        scores = logits.float()
        for warp in self.warpers:
            scores = warp(None, scores)
        probs = torch.softmax(scores, dim=-1)
        return torch.multinomial(probs, num_samples=1, generator=self.generator).squeeze(1)
