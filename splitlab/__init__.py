"""splitlab: see, measure and teach the prefill/decode split (disaggregated LLM serving).

Quick start::

    import splitlab as sl
    lm = sl.load_model("tiny")                 # embedded random-weight Llama-style GQA model, no download
    out = sl.generate(lm, "Hello", max_new_tokens=8)
    out.prefill_s, out.decode_step_s, out.kv_bytes_final

The package is laid out like the book (see ``docs/architecture.md``): :mod:`.phases` (models, engine, sampling,
device, profiling), :mod:`.kvcache`, :mod:`.transfer`, :mod:`.serving`, :mod:`.sizing`, :mod:`.costmodel`,
:mod:`.planning`, :mod:`.teach` (figures, widgets, exercise checkers) and :mod:`.cli`; :mod:`.common` holds the
facts they share. This module only re-exports names, each imported on first use (PEP 562), so ``import splitlab``
and model-free commands such as ``python -m splitlab kv-size`` do not pay for torch, transformers and matplotlib.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS = {
    "phases.device": ["Timer", "describe_device", "pick_device", "synchronize"],
    "phases.engine": ["DecodeOutput", "Generation", "PrefillOutput", "decode_step", "generate", "prefill",
                      "reference_generate"],
    "phases.inputs": ["ContextLengthError", "EmptyPromptError"],
    "kvcache": ["CacheMismatchError", "KVCache"],
    "phases.models": ["LoadedModel", "ModelLoadError", "load_model"],
    "phases.tokenizer": ["ByteTokenizer"],
    "common.presets": ["list_presets"],
    "phases.sampling_params": ["SamplingParams"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
#: short names of the modules chapters use (``sl.sizing``, ``sl.profiling``, ``sl.check``, ...) -> where they live
_MODULES = {"sizing": "sizing", "costmodel": "costmodel", "kvcache": "kvcache", "phases": "phases",
            "transfer": "transfer", "serving": "serving", "teach": "teach", "common": "common",
            "profiling": "phases.profiling", "check": "teach.check", "widgets": "teach.widgets",
            "figures": "teach.figures", "planning": "planning", "planner": "planning.planner"}

__all__ = sorted(_WHERE) + ["sizing"]


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    elif name in _MODULES:
        value = importlib.import_module(f".{_MODULES[name]}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE) | set(_MODULES))
