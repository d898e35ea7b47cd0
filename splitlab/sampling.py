"""Choosing the next token from logits: greedy, or seeded sampling with temperature, top-k and top-p.

The warpers are transformers' own (``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper``;
Holtzman et al. 2020 for top-p); splitlab only fixes the random generator so runs reproduce.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

__all__ = ["SamplingParams", "Sampler"]


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens. ``temperature == 0`` means greedy (argmax); otherwise sample from
    softmax(logits / temperature), optionally restricted to the ``top_k`` most likely tokens and/or the
    smallest set whose probability reaches ``top_p``. ``seed`` fixes the draws.

    Raises:
        ValueError: temperature < 0, top_k < 1, or top_p outside (0, 1].
    """

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


class Sampler:
    """Stateful token picker: ``Sampler(params, device)(logits)`` with logits ``[batch, vocab]`` returns
    token ids ``[batch]`` (int64). The generator is seeded once, so a sequence of calls is reproducible."""

    def __init__(self, params: SamplingParams | None, device: torch.device):
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
