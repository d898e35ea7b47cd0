"""The two phases on a real model: loading models (presets with random weights, hub names, local paths, model
objects; the attention implementation and the cache's per-layer geometry they get), the
engine (``prefill``, ``decode_step``, ``generate``), token sampling, the device and its timers, and the
measurements the chapters plot (:mod:`.profiling`).

Submodules are imported on first use, so ``import splitlab.phases`` stays cheap.
"""
from __future__ import annotations

import importlib

_SUBMODULES = ("agreement", "attention", "cpu_threads", "device", "engine", "inputs", "layout", "loaded", "locate",
               "models", "profiling", "sampling", "speculative", "tokenizer")


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
