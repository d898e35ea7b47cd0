"""Loading models: the embedded random-weight presets, and any Hugging Face model name or local path.

``load_model("tiny")`` (the default everywhere in the book) builds a small Llama-style GQA decoder from
``splitlab/configs/tiny.json`` with random weights fixed by a seed, and a byte-level tokenizer: no download,
under a second on a laptop CPU. Other presets in that folder have the shapes of real small models
(SmolLM2-135M, Qwen2.5-0.5B, Llama-3.2-1B) or other architectures (GPT-2, GPTBigCode-MQA, Qwen2, Mistral).
Random weights produce gibberish text but real compute, real caches and real timings.

Any other name goes to ``transformers.AutoModelForCausalLM.from_pretrained`` with its own tokenizer.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import transformers

from ..common.model_id import format_model_id
from ..common.presets import CONFIG_DIR, is_preset, list_presets, preset_fields
from ..sizing import KVGeometry, kv_geometry
from .device import pick_device, pick_dtype
from .tokenizer import ByteTokenizer

__all__ = ["ByteTokenizer", "LoadedModel", "load_model", "list_presets", "ModelLoadError", "CONFIG_DIR"]


class ModelLoadError(RuntimeError):
    """A model name or path could not be loaded (no network, no local copy, or not a causal LM)."""


@dataclass
class LoadedModel:
    """A causal LM ready for splitlab's engine.

    Attributes:
        name: what was asked for ("tiny", a preset, a hub name or a path).
        model: the transformers ``PreTrainedModel`` in eval mode.
        tokenizer: a :class:`ByteTokenizer` or the model's own Hugging Face tokenizer.
        device, dtype: where the weights live and their dtype.
        random_weights: True for presets (text is meaningless), False for trained weights.
        seed: the seed of a preset's random weights (None for trained weights).
    """

    name: str
    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    random_weights: bool
    seed: int | None = None
    geometry: KVGeometry = field(init=False)

    def __post_init__(self) -> None:
        self.geometry = kv_geometry(self.model.config)

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def vocab_size(self) -> int:
        """Rows of the output embedding: valid token ids are 0..vocab_size-1."""
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def max_context(self) -> int:
        """Longest sequence (prompt + generated tokens) the model accepts."""
        return int(self.config.max_position_embeddings)

    @property
    def model_id(self) -> str:
        """Identity stamped on every KV cache this model makes; caches of different identities never mix.

        ``name|model_type|L<layers>|H<heads>|KV<kv heads>|D<head_dim>|dtype``; a preset built from a seed other
        than 0 is named ``name@seed<seed>``, since other random weights make another model.
        """
        g = self.geometry
        return format_model_id(self.name, self.config.model_type, g.layers, g.heads, g.kv_heads, g.head_dim,
                               self.dtype, self.seed if self.random_weights else None)

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def weight_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` with this model's tokenizer (BOS added where the tokenizer does)."""
        if isinstance(self.tokenizer, ByteTokenizer):
            return self.tokenizer.encode(text)
        return list(self.tokenizer(text)["input_ids"])

    def decode(self, ids) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True) if not isinstance(
            self.tokenizer, ByteTokenizer) else self.tokenizer.decode(ids)

    def __repr__(self) -> str:
        g = self.geometry
        kind = "random weights" if self.random_weights else "trained weights"
        return (f"LoadedModel({self.name!r}, {self.config.model_type}, {self.n_params / 1e6:.1f}M params, "
                f"{g.layers} layers, {g.heads} heads, {g.kv_heads} KV heads ({g.attention}), head_dim {g.head_dim}, "
                f"{kind}, {self.device}, {str(self.dtype).replace('torch.', '')})")


def _preset_config(name: str) -> transformers.PretrainedConfig:
    fields = preset_fields(name)
    model_type = fields.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **fields)


def load_model(name: str = "tiny", device: str | torch.device | None = None, dtype: str | torch.dtype | None = None,
               seed: int = 0, attn_implementation: str | None = "sdpa") -> LoadedModel:
    """Load a model by preset name, Hugging Face name or local path.

    Args:
        name: a preset from :func:`list_presets` (random weights from ``seed``), a hub name such as
            "HuggingFaceTB/SmolLM2-135M", or a local directory saved with ``save_pretrained``.
        device: "cpu", "cuda", "mps" or None for the best available.
        dtype: None for float32 on CPU and bfloat16 on GPU, except the ``tiny*`` presets, which stay float32
            everywhere: their random weights give near-flat next-token distributions, and bf16 rounding that
            differs with batch shape flips greedy near-ties, so tokens would differ between a request served
            alone and in a batch (measured on an H200). Or a name/torch dtype.
        seed: seeds the random weights of presets (same seed -> identical weights; another seed is another
            model, with another ``model_id``).

    Raises:
        ModelLoadError: the name is not a preset and cannot be loaded (e.g. no network and no local copy, a path
            to a file or to a directory without config.json); the message says how to fall back to the embedded
            default.
        ValueError: bad device, dtype or seed.
    """
    dev = pick_device(device)
    if dtype is None and isinstance(name, str) and name.startswith("tiny") and is_preset(name):
        dtype = torch.float32
    dt = pick_dtype(dtype, dev)
    if not isinstance(name, str) or not name.strip():
        raise ValueError("model name must be a non-empty string, e.g. 'tiny'")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not -2 ** 63 <= seed < 2 ** 64:
        raise ValueError(f"seed must be an integer in -2**63 .. 2**64 - 1, got {seed!r}")
    if is_preset(name):
        config = _preset_config(name)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)
        model.generation_config.eos_token_id = None  # random weights: generate a fixed number of tokens
        model = model.to(device=dev, dtype=dt).eval()
        return LoadedModel(name, model, ByteTokenizer(), dev, dt, random_weights=True, seed=int(seed))
    fallback = (f"use the embedded default load_model('tiny') or a preset with random weights: "
                f"{', '.join(list_presets())}")
    path = Path(name).expanduser()
    if path.exists() and not path.is_dir():
        raise ModelLoadError(f"could not load model {name!r}: it is a file; give the directory a model was saved to "
                             f"with save_pretrained (config.json and weights), or {fallback}")
    if path.is_dir() and not (path / "config.json").is_file():
        raise ModelLoadError(f"could not load model {name!r}: the directory has no config.json (not a model saved "
                             f"with save_pretrained); {fallback}")
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(name, dtype=dt, attn_implementation=attn_implementation)
    except TypeError:  # transformers 4.x names the argument torch_dtype
        model = transformers.AutoModelForCausalLM.from_pretrained(name, torch_dtype=dt,
                                                                  attn_implementation=attn_implementation)
    except (OSError, ValueError) as err:
        raise ModelLoadError(
            f"could not load model {name!r} ({type(err).__name__}: {str(err).splitlines()[0][:200]}). "
            f"Without network access or a local copy, {fallback}") from None
    model = model.to(dev).eval()
    return LoadedModel(name, model, _load_tokenizer(name, model.config.vocab_size), dev, dt, random_weights=False)


#: Files one of which every saved Hugging Face tokenizer has.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                    "spiece.model", "merges.txt")


def _load_tokenizer(name: str, vocab_size: int) -> Any:
    """The tokenizer saved with hub model or directory ``name``, or a :class:`ByteTokenizer` when there is none.

    A directory without tokenizer files is not handed to ``AutoTokenizer``: transformers 5 would build an empty
    tokenizer from the model type (every text encodes to no ids), and 4.x asks for sentencepiece/protobuf to
    convert a tokenizer that does not exist.

    Raises:
        ModelLoadError: no tokenizer and a vocabulary too small for bytes; or the tokenizer needs a library that
            is not installed.
    """
    path = Path(name)
    if not path.is_dir() or any((path / f).is_file() for f in _TOKENIZER_FILES):
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(name)
        except ImportError as err:
            raise ModelLoadError(f"the tokenizer of {name!r} needs a library that is not installed: "
                                 f"{str(err).strip().splitlines()[0][:200]}") from None
        except (OSError, ValueError, TypeError):
            tokenizer = None
        if tokenizer is not None and tokenizer("Hello, world", add_special_tokens=False)["input_ids"]:
            return tokenizer
    if vocab_size < ByteTokenizer.vocab_size:
        raise ModelLoadError(f"{name!r} has no tokenizer and its vocabulary is too small for bytes")
    return ByteTokenizer()  # a local checkpoint saved without a tokenizer
