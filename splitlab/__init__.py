"""splitlab: see, measure and teach the prefill/decode split (disaggregated LLM serving).

Quick start::

    import splitlab as sl
    lm = sl.load_model("tiny")                 # embedded random-weight Llama-style GQA model, no download
    out = sl.generate(lm, "Hello", max_new_tokens=8)
    out.prefill_s, out.decode_step_s, out.kv_bytes_final

Names are imported on first use (PEP 562), so ``import splitlab`` and model-free commands such as
``python -m splitlab kv-size`` do not pay for importing torch, transformers and matplotlib.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> submodule that defines it
_EXPORTS = {
    "device": ["Timer", "describe_device", "pick_device", "synchronize"],
    "engine": ["ContextLengthError", "DecodeOutput", "EmptyPromptError", "Generation", "PrefillOutput",
               "decode_step", "generate", "prefill", "reference_generate"],
    "kv_cache": ["CacheMismatchError", "KVCache"],
    "models": ["ByteTokenizer", "LoadedModel", "ModelLoadError", "list_presets", "load_model"],
    "sampling": ["SamplingParams"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
#: submodules reachable as attributes (``sl.sizing``, ``sl.plots``, ...) without importing them first
_SUBMODULES = ["check", "dist_serve", "distributed", "kv_wire", "peer", "plots", "profiling", "serving",
               "serving_plots", "sizing", "transfer", "transfer_bench", "transfer_plots", "widgets"]

__all__ = ["load_model", "list_presets", "LoadedModel", "ByteTokenizer", "ModelLoadError", "KVCache",
           "CacheMismatchError", "prefill", "decode_step", "generate", "reference_generate", "PrefillOutput",
           "DecodeOutput", "Generation", "EmptyPromptError", "ContextLengthError", "SamplingParams", "sizing",
           "Timer", "pick_device", "synchronize", "describe_device"]


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE) | set(_SUBMODULES))
