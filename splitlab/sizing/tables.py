"""Published numbers readers size against: model configs, GPUs and links, each entry with its source
(``splitlab/data/published.json``)."""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["PUBLISHED_MODELS", "GPUS", "LINKS", "gpu_spec"]

_DATA = json.loads((Path(__file__).resolve().parents[1] / "data" / "published.json").read_text())
#: Published model configs (fields of each model's config.json on the Hugging Face Hub) with parameter counts.
PUBLISHED_MODELS: dict[str, dict] = _DATA["models"]
#: GPUs readers use: dense fp16/bf16 tensor-core peak (FLOP/s, without sparsity), memory bandwidth (B/s),
#: memory (bytes), each with the datasheet it comes from; ``tdp_w`` (the datasheet's TDP, W: an upper bound on the
#: draw) and ``tdp_source``; ``price_per_hour`` per device, a stated assumption with its ``price_source`` (None
#: where no source gives one); ``tp_link``: the :data:`LINKS` name its tensor-parallel group all-reduces over.
GPUS: dict[str, dict] = _DATA["gpus"]
#: Links a KV cache can cross: ``bandwidth_bytes_per_s`` in ONE direction (what one transfer can use), a ``note``
#: on how it follows from the specification (lanes, encoding, the bidirectional total), and the ``source``.
LINKS: dict[str, dict] = _DATA["links"]


def gpu_spec(name: str) -> dict:
    """The datasheet row of GPU ``name`` in :data:`GPUS`.

    Raises:
        ValueError: a name :data:`GPUS` does not hold (the message lists those it does)."""
    if not isinstance(name, str) or name not in GPUS:
        raise ValueError(f"unknown GPU {name!r}; choose one of {', '.join(GPUS)}")
    return GPUS[name]
