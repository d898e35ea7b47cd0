"""KV-cache bytes from a model's config: the geometry of the cache, bytes per token, bytes of a batch.

Sources:
- KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x bytes per element
  (Pope et al. 2022, "Efficiently Scaling Transformer Inference", sec. 2; Kwon et al. 2023, vLLM, sec. 2).
- MQA: one K/V head shared by all query heads (Shazeer 2019). GQA: a few K/V heads, each shared by a group
  of query heads (Ainslie et al. 2023).

Everything here is arithmetic on configs; nothing loads a model and nothing imports torch.
"""
from __future__ import annotations

import json
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..common import dtypes, presets
from .tables import PUBLISHED_MODELS

__all__ = ["KVGeometry", "kv_geometry", "dtype_bytes", "kv_bytes_per_token", "kv_bytes", "resolve_config"]


def dtype_bytes(dtype: Any) -> float:
    """Bytes per element of a dtype given as a name ("fp16", "bfloat16", "int8", ...) or a torch.dtype.

    Raises:
        ValueError: an unknown dtype name.
    """
    return dtypes.element_bytes(dtype)


@dataclass(frozen=True)
class KVGeometry:
    """The shape of a model's KV cache: ``layers`` x (K, V) x ``kv_heads`` x ``head_dim`` per token.

    ``heads`` is the number of query heads; ``kv_heads == heads`` is MHA, ``1`` is MQA, in between is GQA.
    """

    layers: int
    heads: int
    kv_heads: int
    head_dim: int

    @property
    def attention(self) -> str:
        """'MHA', 'MQA' or 'GQA'."""
        if self.kv_heads == self.heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"


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


def kv_geometry(config: Any) -> KVGeometry:
    """KV geometry from a transformers config object or a config dict (Llama, GPT-2, GPTBigCode, Qwen2, ...).

    kv_heads comes from ``num_key_value_heads`` (or 1 for ``multi_query`` configs, else all heads);
    head_dim from ``head_dim``, falling back to hidden size / heads only for configs that have no head_dim.

    Raises:
        ValueError: the config lacks the number of layers or heads; a count that is not a positive integer; KV
            heads that do not divide the query heads; a hidden size that is not a multiple of the heads (when
            there is no head_dim).
    """
    layers_field, layers = _field(config, "num_hidden_layers", "n_layer", "num_layers")
    heads_field, heads = _field(config, "num_attention_heads", "n_head")
    if layers is None or heads is None:
        raise ValueError("config has no num_hidden_layers/num_attention_heads: cannot size its KV cache")
    layers, heads = _positive_int(layers_field, layers), _positive_int(heads_field, heads)
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
    return KVGeometry(layers, heads, kv_heads, _positive_int("head_dim", head_dim))


def kv_bytes_per_token(config: Any, dtype: Any = "fp16") -> float:
    """KV-cache bytes one token adds: 2 x layers x kv_heads x head_dim x bytes(dtype). Source: module docstring."""
    g = config if isinstance(config, KVGeometry) else kv_geometry(config)
    return 2 * g.layers * g.kv_heads * g.head_dim * dtype_bytes(dtype)


def kv_bytes(config: Any, tokens: int, batch: int = 1, dtype: Any = "fp16") -> float:
    """KV-cache bytes for ``batch`` sequences of ``tokens`` tokens each.

    Raises:
        ValueError: negative tokens or batch.
    """
    if tokens < 0 or batch < 0:
        raise ValueError(f"tokens and batch must be >= 0, got tokens={tokens}, batch={batch}")
    return kv_bytes_per_token(config, dtype) * tokens * batch


def resolve_config(name_or_path: str) -> dict:
    """A config dict for a published model name, a splitlab preset name, or a path to a config.json.

    Raises:
        ValueError: the name is none of those (the message lists the known names), a directory without a
            config.json, or a file that is not JSON text.
    """
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
                return json.loads(candidate.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                raise ValueError(f"{candidate} is not valid JSON: {err}") from None
    raise ValueError(f"unknown model {name_or_path!r}: not a published model ({', '.join(PUBLISHED_MODELS)}), "
                     f"a preset ({', '.join(presets.list_presets())}) or a config.json path")
