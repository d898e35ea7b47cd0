"""Analytic sizing: KV-cache bytes, published model and GPU tables, and the roofline model.

Everything here is arithmetic on configs and datasheet numbers; nothing loads a model. The chapters put
these predictions beside what splitlab measures.

Sources:
- KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x bytes per element
  (Pope et al. 2022, "Efficiently Scaling Transformer Inference", sec. 2; Kwon et al. 2023, vLLM, sec. 2).
- MQA: one K/V head shared by all query heads (Shazeer 2019). GQA: a few K/V heads, each shared by a group
  of query heads (Ainslie et al. 2023).
- About 2 FLOPs per parameter per token for the matmuls of a forward pass (Kaplan et al. 2020, sec. 2.1).
- Roofline: attainable FLOP/s = min(peak, intensity x bandwidth); ridge point = peak / bandwidth
  (Williams, Waterman and Patterson 2009).
- Moving the KV cache from a prefill to a decode worker: time = latency + KV bytes / link bandwidth, to compare
  with a decode step and a prefill (Zhong et al. 2024, DistServe, OSDI'24, sec. 4); link speeds in ``LINKS``, each
  with its specification or datasheet.
"""
from __future__ import annotations

import json
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ["KVGeometry", "kv_geometry", "dtype_bytes", "kv_bytes_per_token", "kv_bytes", "PUBLISHED_MODELS",
           "GPUS", "prefill_flops", "decode_flops", "prefill_bytes", "decode_bytes", "arithmetic_intensity",
           "ridge_point", "min_decode_step_s", "roofline_time_s", "resolve_config", "LINKS", "transfer_time_s",
           "fit_latency_bandwidth", "streamed_exposed_s", "predicted_prefill_s", "handoff"]

_DTYPE_BYTES = {"float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2,
                "float8": 1, "fp8": 1, "int8": 1, "int4": 0.5}


def dtype_bytes(dtype: Any) -> float:
    """Bytes per element of a dtype given as a name ("fp16", "bfloat16", "int8", ...) or a torch.dtype.

    Raises:
        ValueError: an unknown dtype name.
    """
    if hasattr(dtype, "itemsize"):  # torch.dtype
        return dtype.itemsize
    key = str(dtype).lower().replace("torch.", "")
    if key not in _DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {sorted(_DTYPE_BYTES)}")
    return _DTYPE_BYTES[key]


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


_DATA = json.loads((Path(__file__).parent / "data" / "published.json").read_text())
#: Published model configs (fields of each model's config.json on the Hugging Face Hub) with parameter counts.
PUBLISHED_MODELS: dict[str, dict] = _DATA["models"]
#: GPUs readers use: dense fp16/bf16 tensor-core peak (FLOP/s, without sparsity), memory bandwidth (B/s),
#: memory (bytes), each with the datasheet it comes from.
GPUS: dict[str, dict] = _DATA["gpus"]
#: Links a KV cache can cross: ``bandwidth_bytes_per_s`` in ONE direction (what one transfer can use), a ``note``
#: on how it follows from the specification (lanes, encoding, the bidirectional total), and the ``source``.
LINKS: dict[str, dict] = _DATA["links"]


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
    preset = Path(__file__).parent / "configs" / f"{name_or_path}.json"
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
    presets = sorted(p.stem for p in (Path(__file__).parent / "configs").glob("*.json"))
    raise ValueError(f"unknown model {name_or_path!r}: not a published model ({', '.join(PUBLISHED_MODELS)}), "
                     f"a preset ({', '.join(presets)}) or a config.json path")


# --- roofline -------------------------------------------------------------------------------------------

def prefill_flops(n_params: float, prompt_tokens: int, geometry: KVGeometry, batch: int = 1) -> float:
    """FLOPs of a prefill: 2 x params x tokens for the matmuls (Kaplan et al. 2020) plus causal attention,
    2 x layers x heads x head_dim x tokens^2 (QK^T and AV over the lower triangle), per sequence."""
    t = prompt_tokens
    attn = 2 * geometry.layers * geometry.heads * geometry.head_dim * t * t
    return batch * (2 * n_params * t + attn)


def decode_flops(n_params: float, batch: int, context: int, geometry: KVGeometry) -> float:
    """FLOPs of one decode step for ``batch`` sequences at ``context`` cached tokens each:
    2 x params per token plus 4 x layers x heads x head_dim x context (QK^T and AV over the cache)."""
    attn = 4 * geometry.layers * geometry.heads * geometry.head_dim * context
    return batch * (2 * n_params + attn)


def prefill_bytes(weight_bytes: float, prompt_tokens: int, kv_bytes_token: float, batch: int = 1) -> float:
    """Bytes moved by a prefill: the weights read once plus the KV cache written."""
    return weight_bytes + batch * prompt_tokens * kv_bytes_token


def decode_bytes(weight_bytes: float, batch: int, context: int, kv_bytes_token: float) -> float:
    """Bytes moved by one decode step: the weights read once plus every sequence's KV cache read."""
    return weight_bytes + batch * context * kv_bytes_token


def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """FLOPs per byte moved (Williams et al. 2009). Raises ValueError if ``nbytes`` <= 0."""
    if nbytes <= 0:
        raise ValueError("bytes moved must be positive")
    return flops / nbytes


def ridge_point(peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Intensity (FLOP/byte) above which a kernel is compute-bound: peak FLOP/s / memory bandwidth."""
    if peak_flops_per_s <= 0 or bandwidth_bytes_per_s <= 0:
        raise ValueError("peak FLOP/s and bandwidth must be positive")
    return peak_flops_per_s / bandwidth_bytes_per_s


def min_decode_step_s(weight_bytes: float, kv_bytes_total: float, bandwidth_bytes_per_s: float) -> float:
    """Lower bound on one decode step (s): every weight and every cached K/V byte is read once per step,
    so step >= (weight bytes + KV bytes) / memory bandwidth."""
    if bandwidth_bytes_per_s <= 0:
        raise ValueError("bandwidth must be positive")
    return (weight_bytes + kv_bytes_total) / bandwidth_bytes_per_s


def roofline_time_s(flops: float, nbytes: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Roofline time (s) of a kernel: max(FLOPs / peak, bytes / bandwidth)."""
    return max(flops / peak_flops_per_s, nbytes / bandwidth_bytes_per_s)


# --- moving the KV cache between workers ------------------------------------------------------------------

def transfer_time_s(nbytes: float, bandwidth_bytes_per_s: float, latency_s: float = 0.0) -> float:
    """Time (s) to move ``nbytes`` over a link: latency + bytes / bandwidth.

    Raises:
        ValueError: a bandwidth <= 0 or negative bytes or latency.
    """
    if bandwidth_bytes_per_s <= 0 or nbytes < 0 or latency_s < 0:
        raise ValueError("need bandwidth > 0, bytes >= 0 and latency >= 0")
    return latency_s + nbytes / bandwidth_bytes_per_s


def fit_latency_bandwidth(nbytes, seconds) -> tuple[float, float]:
    """Fit ``seconds = latency + nbytes / bandwidth`` to measured transfers, minimising the squared *relative*
    errors (so that small transfers, where the latency shows, count as much as large ones).

    Returns ``(latency_s, bandwidth_bytes_per_s)``. A negative fitted latency (noise) is clipped to 0 and the
    bandwidth refitted through the origin.

    Raises:
        ValueError: fewer than two distinct sizes, times that are not positive, or a fit without a positive slope.
    """
    import numpy as np

    n, t = np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float)
    if n.shape != t.shape or len(np.unique(n)) < 2:
        raise ValueError("need matching arrays with at least two distinct sizes")
    if (t <= 0).any():
        raise ValueError("transfer times must be positive")
    slope, latency = np.polyfit(n, t, 1, w=1 / t)
    if latency < 0:
        latency, slope = 0.0, float(np.mean(n / t) / np.mean((n / t) ** 2))  # min sum ((slope n - t) / t)^2
    if slope <= 0:
        raise ValueError("the measured times do not grow with the bytes: no bandwidth can be fitted")
    return float(latency), float(1 / slope)


def streamed_exposed_s(prefill_s: float, nbytes: float, layers: int, bandwidth_bytes_per_s: float,
                       latency_s: float = 0.0) -> float:
    """Transfer time left after the prefill ends when each layer's KV is sent as soon as it is computed.

    Model: the forward computes the ``layers`` layers at an even pace, so layer i's KV (``nbytes / layers``) is
    ready at (i + 1) x prefill_s / layers; the link sends one layer at a time, each taking latency + its bytes /
    bandwidth, in order. Returns (when the last layer has arrived) - prefill_s: at least one layer's transfer,
    and more when the link is slower than the compute.
    """
    if layers < 1:
        raise ValueError("layers must be >= 1")
    per_layer = transfer_time_s(nbytes / layers, bandwidth_bytes_per_s, latency_s)
    finish = 0.0
    for i in range(layers):
        finish = max(finish, (i + 1) * prefill_s / layers) + per_layer
    return finish - prefill_s


def predicted_prefill_s(model: str, prompt_tokens: int, gpu: str = "H100", dtype: Any = "fp16") -> float:
    """Roofline prefill time (s) of one ``prompt_tokens`` prompt of a published ``model`` on a datasheet ``gpu``:
    max(FLOPs / peak, (weights + KV written) / memory bandwidth). A lower bound: real kernels reach a fraction of
    the peak."""
    cfg, g = resolve_config(model), GPUS[gpu]
    per_token = kv_bytes_per_token(cfg, dtype)
    return roofline_time_s(prefill_flops(cfg["n_params"], prompt_tokens, kv_geometry(cfg)),
                           prefill_bytes(cfg["n_params"] * dtype_bytes(dtype), prompt_tokens, per_token),
                           g["peak_flops_per_s"], g["bandwidth_bytes_per_s"])


def handoff(model: str, prompt_tokens: int, link: str | float, gpu: str = "H100", dtype: Any = "fp16") -> dict:
    """DistServe's comparison for one request: the KV bytes its prompt leaves behind, the time to move them over
    ``link`` (a name in ``LINKS`` or bytes/s), the minimum decode step of the same model on ``gpu`` (weights plus
    this cache read once, :func:`min_decode_step_s`) and its roofline prefill (:func:`predicted_prefill_s`).

    Returns a dict: ``kv_bytes``, ``transfer_s``, ``decode_step_s``, ``prefill_s``, ``decode_steps`` (transfer /
    decode step) and ``prefill_share`` (transfer / prefill).
    """
    cfg = resolve_config(model)
    bandwidth = LINKS[link]["bandwidth_bytes_per_s"] if isinstance(link, str) else float(link)
    nbytes = kv_bytes(cfg, prompt_tokens, dtype=dtype)
    transfer = transfer_time_s(nbytes, bandwidth)
    step = min_decode_step_s(cfg["n_params"] * dtype_bytes(dtype), nbytes, GPUS[gpu]["bandwidth_bytes_per_s"])
    prefill = predicted_prefill_s(model, prompt_tokens, gpu, dtype)
    return dict(kv_bytes=nbytes, transfer_s=transfer, decode_step_s=step, prefill_s=prefill,
                decode_steps=transfer / step, prefill_share=transfer / prefill)
