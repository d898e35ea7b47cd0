"""What a worker's memory leaves for KV cache, and how many requests that holds.

A serving engine sizes its KV cache the way vLLM does at start-up (``gpu_memory_utilization``, "the fraction of
GPU memory to be used for the model executor", default 0.9, 0.92 in vLLM's newest releases; ``vllm/config/
cache.py``): of ``utilization`` x the device's memory, it keeps what the weights and the peak activations of the
largest forward do not take, and cuts that into KV blocks::

    KV budget = utilization x device memory - weights - activation bytes per token x tokens of the largest forward

vLLM measures the activations in a profiling forward of ``max_num_batched_tokens`` tokens; splitlab estimates
them from the config (:func:`activation_bytes_per_token`). A worker then holds as many requests as their caches
fit (:func:`requests_in_budget`: splitlab reserves each request's largest cache, prompt + output, up front).

Everything here is arithmetic on configs; nothing loads a model and nothing imports torch.
"""
from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any

from .kv import _get, dtype_bytes, kv_geometry

__all__ = ["MEMORY_UTILIZATION", "CPU_MEMORY_BYTES", "activation_bytes_per_token", "kv_budget_bytes",
           "requests_in_budget"]

#: the share of a device's memory a worker uses (weights, activations and KV cache): vLLM's default
#: ``gpu_memory_utilization`` (0.9; 0.92 in its newest releases)
MEMORY_UTILIZATION = 0.9
#: the memory splitlab states for a worker whose cost model gives none (the built-in one: a tiny model on a
#: laptop CPU): 16 GiB of RAM, a laptop's. A calibrated CPU model records this machine's RAM instead.
CPU_MEMORY_BYTES = 16 * 2 ** 30


def activation_bytes_per_token(config: Any, dtype: Any = "bf16", tp: int = 1) -> float:
    """Bytes of activations one token of a forward holds at the forward's peak: the tensors of one layer alive at
    once, ``2 h`` (the residual stream and its normalised copy) + ``q`` + ``k`` + ``v`` widths + ``h`` (the
    attention's output) + ``3 I`` (the MLP's gate and up projections and their product), elements of ``dtype``.
    ``h`` is the hidden size, ``I`` the MLP width (``intermediate_size``, ``ffn_dim`` or ``n_inner``; 4 h when the
    config gives none). An estimate in the spirit of vLLM's profiling run, which measures this peak instead;
    Llama-3-8B in bf16: 61,440 elements, 122,880 bytes per token (0.25 GB for a 2,048-token forward).

    On a worker of ``tp`` devices (tensor parallelism, Megatron's layout: :mod:`splitlab.costmodel.parallel`)
    every device holds the ``3 h`` of the residual stream, its copy and the attention's output whole and a
    ``1/tp`` share of the heads' ``q``, ``k``, ``v`` and the MLP's ``3 I``; the bytes returned are the group's,
    summed over its devices: ``tp x 3 h + q + k + v + 3 I`` elements (Llama-3-8B at TP 8: 147,456).

    Args:
        config: a config dict or object, a published model's name, a preset or a config.json path.
        dtype: the activations' dtype (a name or a torch.dtype).
        tp: devices of the worker (an integer >= 1).

    Raises:
        ValueError: a config without a hidden size or heads, an unknown dtype, a tp not an integer >= 1 (and those of
            :func:`~splitlab.sizing.kv_geometry`).
    """
    from .kv import resolve_config
    cfg = resolve_config(config) if isinstance(config, (str, Path)) else config
    hidden = _get(cfg, "hidden_size", "n_embd", "d_model")
    if not isinstance(hidden, numbers.Integral) or isinstance(hidden, bool) or hidden < 1:
        raise ValueError(f"config has no hidden size (hidden_size, n_embd or d_model), got {hidden!r}")
    geo = kv_geometry(cfg)
    mlp = _get(cfg, "intermediate_size", "ffn_dim", "n_inner") or 4 * hidden
    if isinstance(tp, bool) or not isinstance(tp, numbers.Integral) or tp < 1:
        raise ValueError(f"a tensor-parallel degree must be an integer >= 1, got {tp!r}")
    elements = 3 * hidden * tp + geo.heads * geo.head_dim + 2 * geo.kv_heads * geo.head_dim + 3 * int(mlp)
    return float(elements * dtype_bytes(dtype))


def kv_budget_bytes(memory_bytes: float, weight_bytes: float = 0.0, activation_bytes: float = 0.0,
                    utilization: float = MEMORY_UTILIZATION) -> int:
    """A worker's KV budget in bytes: ``utilization`` x ``memory_bytes`` - ``weight_bytes`` - ``activation_bytes``
    (the peak activations of its largest forward), as vLLM sizes its cache (module docstring).

    Raises:
        ValueError: a utilization outside (0, 1], a memory that is not > 0, negative weights or activations, or
            nothing left for a KV cache (the message gives every term).
    """
    if isinstance(utilization, bool) or not isinstance(utilization, numbers.Real) or not 0 < utilization <= 1:
        raise ValueError(f"memory utilization must be in (0, 1] (vLLM's gpu_memory_utilization: a share of the "
                         f"device's memory), got {utilization!r}")
    if not (isinstance(memory_bytes, numbers.Real) and math.isfinite(memory_bytes) and memory_bytes > 0):
        raise ValueError(f"device memory must be a number of bytes > 0, got {memory_bytes!r}")
    if not (weight_bytes >= 0 and activation_bytes >= 0):
        raise ValueError(f"weights and activations must be >= 0 bytes, got {weight_bytes!r} and {activation_bytes!r}")
    budget = int(utilization * memory_bytes - weight_bytes - activation_bytes)
    if budget <= 0:
        raise ValueError(f"no room for a KV cache: {utilization:g} x {memory_bytes:,.0f} bytes of memory - "
                         f"{weight_bytes:,.0f} bytes of weights - {activation_bytes:,.0f} bytes of activations "
                         f"= {budget:,} bytes")
    return budget


def requests_in_budget(budget_bytes: float | None, request_bytes: float) -> float:
    """How many requests of ``request_bytes`` of KV cache each (the largest cache a request holds: prompt +
    output tokens x KV bytes per token) a budget of ``budget_bytes`` holds at once: ``floor(budget / request)``;
    inf for an unlimited budget (None).

    Raises:
        ValueError: ``request_bytes`` not > 0.
    """
    if not request_bytes > 0:
        raise ValueError(f"a request's KV bytes must be > 0, got {request_bytes!r}")
    return math.inf if budget_bytes is None else float(budget_bytes // request_bytes)
