"""What a loaded model is: :class:`LoadedModel` (a transformers model, its tokenizer, device, dtype and the KV
cache's measured geometry) and :func:`require_loaded`, the check every engine call makes on its first argument.
:func:`splitlab.load_model` (:mod:`.models`) makes them."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

import torch

from ..common.model_id import format_model_id
from ..sizing import KVGeometry, kv_bytes
from .layout import probe_geometry
from .tokenizer import ByteTokenizer

__all__ = ["LoadedModel", "require_loaded"]


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
        threads: the CPU threads torch runs (set by :func:`splitlab.load_model`, see
            :mod:`splitlab.phases.cpu_threads`; torch's count is one per process: the last model loaded sets it).
        threads_note: one line saying who chose ``threads`` and why.
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
    threads: int | None = field(init=False, default=None)
    threads_note: str = field(init=False, default="")

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
            ValueError: the tokenizer has no chat template (random-weight presets, base models); an empty list, a
                message that is not a dict with a str ``role`` (system, user, assistant or tool) and a str
                ``content``, or ``system`` beside a list (put it first in the list).
            TypeError: ``message`` neither a str nor a list, ``system`` neither a str nor None.
        """
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise ValueError(f"{self.name!r} has no chat template: give a plain prompt (encode) or load an "
                             f"instruct model such as 'smollm2-135m-instruct'")
        ids = self.tokenizer.apply_chat_template(_chat_messages(message, system), add_generation_prompt=True)
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
        text = repr(self).replace(" ", "\0").replace(",\0", ", ")
        return textwrap.fill(text, 40, subsequent_indent="  ").replace("\0", " ")


#: the roles a chat message may have (those of the chat templates of transformers' models)
CHAT_ROLES = ("system", "user", "assistant", "tool")


def _chat_messages(message, system) -> list[dict]:
    """The messages of :meth:`LoadedModel.encode_chat`'s arguments, checked: the templates turned a dict without
    'content' into jinja's UndefinedError, bytes into the text "b'...'", and ignored ``system`` beside a list."""
    if system is not None and not isinstance(system, str):
        raise TypeError(f"system must be a str (a system prompt) or None, got {type(system).__name__}")
    if isinstance(message, str):
        return [{"role": "system", "content": system}] * (system is not None) + [{"role": "user", "content": message}]
    if not isinstance(message, list):
        raise TypeError(f"message must be a str (the user's message) or a list of {{'role': ..., 'content': ...}} "
                        f"dicts, got {type(message).__name__}")
    if system is not None:
        raise ValueError("system goes with a single message; with a list, make its first message "
                         "{'role': 'system', 'content': ...}")
    if not message:
        raise ValueError("message is an empty list: give the user's message, or at least one {'role': ..., "
                         "'content': ...} dict")
    for i, m in enumerate(message):
        if not (isinstance(m, dict) and m.get("role") in CHAT_ROLES and isinstance(m.get("content"), str)):
            raise ValueError(f"message[{i}] must be a dict with a 'role' of {', '.join(CHAT_ROLES)} and a str "
                             f"'content', got {repr(m)[:80]}")
    return message


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
