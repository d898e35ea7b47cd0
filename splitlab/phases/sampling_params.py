"""How a request wants its tokens picked: greedy, or seeded sampling (temperature, top-k, top-p).

torch-free, so that requests and workloads (and the simulator) can carry sampling settings without a model;
:class:`splitlab.phases.sampling.Sampler` applies them to logits.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = ["SamplingParams"]


def _number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    return float(value)


def _integer(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens. ``temperature == 0`` means greedy (argmax); otherwise sample from
    softmax(logits / temperature), optionally restricted to the ``top_k`` most likely tokens and/or the
    smallest set whose probability reaches ``top_p``. ``seed`` fixes the draws.

    ``temperature`` and ``top_p`` may be given as ints (``temperature=1``); they are stored as floats.

    Raises:
        TypeError: temperature or top_p not a number, top_k or seed not an integer.
        ValueError: temperature < 0 or not finite, top_k < 1, top_p outside (0, 1], or a seed torch cannot take
            (outside -2**63 .. 2**64 - 1).
    """

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        temperature = _number("temperature", self.temperature)
        if not (math.isfinite(temperature) and temperature >= 0):
            raise ValueError(f"temperature must be >= 0 and finite (0 = greedy), got {self.temperature}")
        object.__setattr__(self, "temperature", temperature)  # transformers' warper refuses an int
        if self.top_k is not None:
            object.__setattr__(self, "top_k", _integer("top_k", self.top_k))
            if self.top_k < 1:
                raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.top_p is not None:
            object.__setattr__(self, "top_p", _number("top_p", self.top_p))
            if not 0 < self.top_p <= 1:
                raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        object.__setattr__(self, "seed", _integer("seed", self.seed))
        if not -2 ** 63 <= self.seed < 2 ** 64:
            raise ValueError(f"seed must be in -2**63 .. 2**64 - 1 (torch's range), got {self.seed}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0
