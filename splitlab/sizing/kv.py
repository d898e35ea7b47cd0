"""KV-cache bytes from a model's config: the geometry of the cache, bytes per token, bytes of a batch.

Sources:
- KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x bytes per element
  (Pope et al. 2022, "Efficiently Scaling Transformer Inference", sec. 2; Kwon et al. 2023, vLLM, sec. 2).
- MQA: one K/V head shared by all query heads (Shazeer 2019). GQA: a few K/V heads, each shared by a group
  of query heads (Ainslie et al. 2023).
- Per layer, in general: bytes = positions kept x kv_heads x (K width + V width) x bytes per element, summed
  over layers. A sliding-window layer of window W keeps at most W - 1 positions (Beltagy et al. 2020; Jiang et
  al. 2023, Mistral 7B, sec. 2); an MLA layer keeps kv_lora_rank + qk_rope_head_dim elements per position
  (DeepSeek-AI 2024, DeepSeek-V2, sec. 2.1). Which layers are which: :mod:`splitlab.sizing.layers`.

Everything here is arithmetic on configs; nothing loads a model and nothing imports torch.
"""
from __future__ import annotations

import json
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..common import dtypes, presets
from .layers import LayerKV, UnsupportedCacheError, layer_windows, mla_dims
from .tables import PUBLISHED_MODELS

__all__ = ["KVGeometry", "LayerKV", "UnsupportedCacheError", "kv_geometry", "dtype_bytes", "kv_bytes_per_token",
           "kv_bytes", "resolve_config", "RequestKVBytes"]


#: more layers than any model has: a config asking for more is a mistake, and a per-layer list that long would
#: take the machine's memory
MAX_LAYERS = 1 << 16


def dtype_bytes(dtype: Any) -> float:
    """Bytes per element of a dtype given as a name ("fp16", "bfloat16", "int8", ...) or a torch.dtype.

    Raises:
        ValueError: an unknown dtype name.
    """
    return dtypes.element_bytes(dtype)


@dataclass(frozen=True)
class KVGeometry:
    """The shape of a model's KV cache: ``layers`` x (K, V) x ``kv_heads`` x ``head_dim`` per token, and per
    layer what it keeps (:class:`LayerKV`: full attention, a sliding window, or an MLA latent).

    ``heads`` is the number of query heads; ``kv_heads == heads`` is MHA, ``1`` is MQA, in between is GQA.
    ``per_layer`` defaults to ``layers`` full-attention layers of ``kv_heads x head_dim`` keys and values. For MLA,
    ``kv_heads`` is 1 (one latent shared by every head) and ``head_dim`` the query/key width of a head
    (``qk_nope_head_dim + qk_rope_head_dim``, what attention FLOPs count).
    """

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    per_layer: tuple[LayerKV, ...] = ()

    def __post_init__(self) -> None:
        for name in ("layers", "heads", "kv_heads", "head_dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"KVGeometry.{name} must be a positive integer, got {value!r}")
        if self.layers > MAX_LAYERS:
            raise ValueError(f"{self.layers:,} layers: no model has more than {MAX_LAYERS:,} (a config error?)")
        if not self.per_layer:
            full = LayerKV(self.kv_heads, self.head_dim, self.head_dim)
            object.__setattr__(self, "per_layer", (full,) * self.layers)
        elif len(self.per_layer) != self.layers:
            raise ValueError(f"per_layer has {len(self.per_layer)} entries for {self.layers} layers")
        else:
            object.__setattr__(self, "per_layer", tuple(self.per_layer))

    @property
    def attention(self) -> str:
        """'MLA', 'MHA', 'MQA' or 'GQA'."""
        if any(layer.kind == "mla" for layer in self.per_layer):
            return "MLA"
        if self.kv_heads == self.heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"

    @property
    def windows(self) -> tuple[int | None, ...]:
        """Per layer: the sliding window ``W`` (the layer keeps ``W - 1`` positions), or None (keeps all)."""
        return tuple(layer.window for layer in self.per_layer)

    @property
    def sliding_layers(self) -> int:
        """How many layers have a sliding window."""
        return sum(w is not None for w in self.windows)

    @property
    def elements_per_token(self) -> int:
        """K and V elements one token adds over all layers while it is within every window."""
        return sum(layer.elements_per_position for layer in self.per_layer)

    def elements(self, tokens: int) -> int:
        """K and V elements one sequence of ``tokens`` tokens holds: sum over layers of
        positions kept (``tokens``, or at most ``W - 1`` in a windowed layer) x elements per position."""
        return sum(layer.positions(tokens) * layer.elements_per_position for layer in self.per_layer)


def _get(cfg: Any, *names: str) -> Any:
    return _field(cfg, *names)[1]


def _field(cfg: Any, *names: str) -> tuple[str, Any]:
    """(name, value) of the first of ``names`` the config sets; (names[0], None) if none."""
    for name in names:
        value = cfg.get(name) if isinstance(cfg, Mapping) else getattr(cfg, name, None)
        if value is not None:
            return name, value
    return names[0], None


def _positive_int(name: str, value: Any) -> int:
    """A config count as an int: a positive integer (2 or 2.0), else a ValueError naming the field."""
    ok = not isinstance(value, bool) and (isinstance(value, numbers.Integral) or (
        isinstance(value, float) and value.is_integer()))
    if not ok or value < 1:
        raise ValueError(f"config field {name} must be a positive integer, got {value!r}")
    return int(value)


def kv_geometry(config: Any, mla: str = "latent") -> KVGeometry:
    """KV geometry from a transformers config object or a config dict (Llama, GPT-2, GPTBigCode, Qwen2, Mistral,
    Gemma 2/3, DeepSeek-V3, ...), with what each layer keeps (:mod:`splitlab.sizing.layers`).

    kv_heads comes from ``num_key_value_heads`` (or 1 for ``multi_query`` configs, else all heads);
    head_dim from ``head_dim``, falling back to hidden size / heads only for configs that have no head_dim.
    An MLA config (``kv_lora_rank`` set) is sized as the latent an MLA engine caches (``mla="latent"``, what
    transformers 5 stores too), or with ``mla="expanded"`` as the per-head keys (``qk_nope_head_dim +
    qk_rope_head_dim`` wide) and values (``v_head_dim``) that transformers 4.x cached instead.

    Raises:
        ValueError: the config lacks the number of layers or heads; a count that is not a positive integer; KV
            heads that do not divide the query heads; a hidden size that is not a multiple of the heads (when
            there is no head_dim).
        UnsupportedCacheError (a ValueError): a layer kind sizing does not model, named in the message.
        TypeError: a name or path instead of a config (use :func:`resolve_config` first).
    """
    if isinstance(config, (str, Path)):
        raise TypeError(f"kv_geometry takes a config (a dict or a transformers config), not the name {str(config)!r}: "
                        f"use kv_geometry(resolve_config({str(config)!r}))")
    layers_field, layers = _field(config, "num_hidden_layers", "n_layer", "num_layers")
    heads_field, heads = _field(config, "num_attention_heads", "n_head")
    if layers is None or heads is None:
        raise ValueError("config has no num_hidden_layers/num_attention_heads: cannot size its KV cache")
    layers, heads = _positive_int(layers_field, layers), _positive_int(heads_field, heads)
    if layers > MAX_LAYERS:
        raise ValueError(f"config field {layers_field} is {layers:,}: no model has more than {MAX_LAYERS:,} layers")
    if mla not in ("latent", "expanded"):
        raise ValueError(f"mla must be 'latent' or 'expanded', got {mla!r}")
    latent = mla_dims(config)
    if latent is not None:
        return _mla_geometry(config, layers, heads, latent, mla)
    kv_heads = _get(config, "num_key_value_heads")
    if kv_heads is None:
        kv_heads = 1 if _get(config, "multi_query") else heads
    kv_heads = _positive_int("num_key_value_heads", kv_heads)
    if heads % kv_heads:
        raise ValueError(f"num_key_value_heads ({kv_heads}) must divide {heads_field} ({heads}): each KV head "
                         f"serves a whole group of query heads")
    head_dim = _get(config, "head_dim")
    if head_dim is None:
        hidden_field, hidden = _field(config, "hidden_size", "n_embd")
        if hidden is None:
            raise ValueError("config has neither head_dim nor hidden_size: cannot size its KV cache")
        hidden = _positive_int(hidden_field, hidden)
        if hidden % heads:
            raise ValueError(f"{hidden_field} ({hidden}) is not a multiple of {heads_field} ({heads}) and the "
                             f"config gives no head_dim")
        head_dim = hidden // heads
    head_dim = _positive_int("head_dim", head_dim)
    per_layer = tuple(LayerKV(kv_heads, head_dim, head_dim, w, "full" if w is None else "sliding")
                      for w in layer_windows(config, layers))
    return KVGeometry(layers, heads, kv_heads, head_dim, per_layer)


def _mla_geometry(config: Any, layers: int, heads: int, latent: tuple[int, int], mla: str) -> KVGeometry:
    rank, rope = latent
    nope = _get(config, "qk_nope_head_dim")
    nope = 0 if nope is None else _positive_int("qk_nope_head_dim", nope)
    windows = layer_windows(config, layers)
    if any(w is not None for w in windows):
        raise UnsupportedCacheError("cannot size the KV cache: MLA with sliding-window layers is not modelled")
    if mla == "latent":
        layer = LayerKV(1, rank, rope, None, "mla")
        return KVGeometry(layers, heads, 1, nope + rope, (layer,) * layers)
    v_dim = _get(config, "v_head_dim")
    if v_dim is None or not nope:
        raise UnsupportedCacheError("expanded MLA sizing needs qk_nope_head_dim and v_head_dim")
    layer = LayerKV(heads, nope + rope, _positive_int("v_head_dim", v_dim), None, "full")
    return KVGeometry(layers, heads, heads, nope + rope, (layer,) * layers)


def kv_bytes_per_token(config: Any, dtype: Any = "fp16") -> float:
    """KV-cache bytes one token adds while it is within every layer's window: sum over layers of
    kv_heads x (K width + V width) x bytes(dtype); for plain attention 2 x layers x kv_heads x head_dim x
    bytes(dtype). Source: module docstring. Past a sliding window a token adds nothing to that layer: use
    :func:`kv_bytes` for the bytes of a whole sequence."""
    g = config if isinstance(config, KVGeometry) else kv_geometry(config)
    return g.elements_per_token * dtype_bytes(dtype)


def kv_bytes(config: Any, tokens: int, batch: int = 1, dtype: Any = "fp16") -> float:
    """KV-cache bytes for ``batch`` sequences of ``tokens`` tokens each: per layer, the positions it keeps
    (``tokens``, at most ``W - 1`` in a layer with sliding window ``W``) x its elements per position, summed,
    x bytes(dtype) x batch.

    Raises:
        ValueError: tokens or batch that are not integers >= 0.
    """
    for name, value in (("tokens", tokens), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    g = config if isinstance(config, KVGeometry) else kv_geometry(config)
    return g.elements(tokens) * dtype_bytes(dtype) * batch


@dataclass(frozen=True)
class RequestKVBytes:
    """Bytes of one request's cache as a function of its cached tokens, layer by layer: ``layers`` holds
    ``(bytes per position, cap)`` per layer, cap 0 for a layer that keeps every position, else ``W - 1``.
    Plain data (it crosses processes as a list of pairs); call it: ``RequestKVBytes.of(geometry, "fp16")(4096)``.
    """

    layers: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, config: Any, dtype: Any = "fp16") -> "RequestKVBytes":
        g = config if isinstance(config, KVGeometry) else kv_geometry(config)
        element = dtype_bytes(dtype)
        return cls(tuple((int(layer.elements_per_position * element), layer.cap or 0) for layer in g.per_layer))

    @property
    def linear(self) -> bool:
        """No layer has a window: bytes grow linearly with tokens."""
        return all(cap == 0 for _, cap in self.layers)

    def __call__(self, tokens: int) -> int:
        return sum(b * (min(tokens, cap) if cap else tokens) for b, cap in self.layers)


def resolve_config(name_or_path: str) -> dict:
    """A config dict for a published model name, a splitlab preset name, or a path to a config.json.

    Raises:
        ValueError: the name is none of those (the message lists the known names), a directory without a
            config.json, or a file that is not JSON text or holds no config object (a list, a string: it failed
            later as "'list' object has no attribute 'get'"). TypeError: not a string or a path.
    """
    if not isinstance(name_or_path, (str, Path)):
        raise TypeError(f"give a model name or a config.json path (a string), got {type(name_or_path).__name__}")
    if name_or_path in PUBLISHED_MODELS:
        return PUBLISHED_MODELS[name_or_path]
    if not str(name_or_path).strip():
        raise ValueError("model name is empty: give a published model, a preset or a config.json path")
    preset = presets.CONFIG_DIR / f"{name_or_path}.json"
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise ValueError(f"directory {name_or_path!r} has no config.json")
    for candidate in (preset, path):
        if candidate.is_file():
            try:
                config = json.loads(candidate.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                raise ValueError(f"{candidate} is not valid JSON: {err}") from None
            if not isinstance(config, dict):
                raise ValueError(f"{str(name_or_path)!r} does not hold a config object (a JSON dict), but a "
                                 f"{type(config).__name__}")
            return config
    raise ValueError(f"unknown model {name_or_path!r}: not a published model ({', '.join(PUBLISHED_MODELS)}), "
                     f"a preset ({', '.join(presets.list_presets())}) or a config.json path")
