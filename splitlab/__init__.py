"""splitlab: see, measure and teach the prefill/decode split (disaggregated LLM serving).

Quick start::

    import splitlab as sl
    lm = sl.load_model("tiny")                 # embedded random-weight Llama-style GQA model, no download
    out = sl.generate(lm, "Hello", max_new_tokens=8)
    out.prefill_s, out.decode_step_s, out.kv_bytes_final
"""
from .device import Timer, describe_device, pick_device, synchronize
from .engine import (ContextLengthError, DecodeOutput, EmptyPromptError, Generation, PrefillOutput, decode_step,
                     generate, prefill, reference_generate)
from .kv_cache import CacheMismatchError, KVCache
from .models import ByteTokenizer, LoadedModel, ModelLoadError, list_presets, load_model
from .sampling import SamplingParams
from . import check, plots, profiling, sizing, widgets

__version__ = "0.1.0"

__all__ = ["load_model", "list_presets", "LoadedModel", "ByteTokenizer", "ModelLoadError", "KVCache",
           "CacheMismatchError", "prefill", "decode_step", "generate", "reference_generate", "PrefillOutput",
           "DecodeOutput", "Generation", "EmptyPromptError", "ContextLengthError", "SamplingParams", "sizing",
           "Timer", "pick_device", "synchronize", "describe_device"]
