"""An analytic cost model: a published model on a datasheet GPU, from the roofline (nothing measured, everything
predicted), so the simulator and the planner can answer "Llama-3-8B on H100?" without one.

Every forward is bounded by compute or by memory traffic (Williams, Waterman and Patterson 2009) and takes

    step_overhead_s + max(FLOPs / (peak x compute_efficiency), bytes / (bandwidth x memory_efficiency))

- prefill over rows adding ``n_i`` tokens after ``p_i`` cached ones: FLOPs = 2 x params x sum(n_i) (Kaplan et al.
  2020) + 2 x layers x heads x head_dim x sum((p_i + n_i)^2 - p_i^2) (causal attention, as
  :func:`splitlab.sizing.prefill_flops`); bytes = weights + sum(n_i) x KV bytes per token (the cache written).
- a decode step of ``B`` sequences holding ``C`` cached tokens: FLOPs = 2 x params x B + 4 x layers x heads x
  head_dim x C; bytes = weights + C x KV bytes per token (every weight and cached K/V read once).
- a hybrid step (chunked prefill): ONE forward over the chunks and the decode rows: the FLOPs of both passes
  summed, the bytes of both less one weight read (the weights are read once for every token of the step).
- a KV transfer: ``nbytes / link bandwidth`` over a link of :data:`splitlab.sizing.LINKS` (latency ignored).
- a worker of ``tp`` devices (tensor parallelism, :mod:`.parallel`): ``tp`` x the peak, the bandwidth, the memory
  and the hand-off links (one NIC per device) of one device, plus every forward's all-reduces over the group's link
  (``comm_base_s + comm_per_token_s x tokens``, not overlapped with the compute).

The efficiency factors are assumptions, stated in the model's ``source``: by default 0.6 of the dense
tensor-core peak (large GEMMs; long-prompt prefill is compute-bound) and 0.8 of the HBM bandwidth (decode is
memory-bound), no per-step overhead. Measure your own with :func:`splitlab.profiling.calibrate` where you can.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..common.presets import is_preset
from ..sizing import (GPUS, LINKS, PUBLISHED_MODELS, activation_bytes_per_token, dtype_bytes, kv_bytes_per_token,
                      kv_geometry, resolve_config)
from ..sizing.tables import gpu_spec
from .model import CostModel
from .parallel import TensorParallel, allreduce_terms, check_tp

__all__ = ["RooflineCostModel", "roofline_cost_model", "roofline_models", "COMPUTE_EFFICIENCY", "MEMORY_EFFICIENCY",
           "ROOFLINE_OPTIONS", "check_roofline_options"]

COMPUTE_EFFICIENCY = 0.6  # share of the datasheet dense peak reached by prefill GEMMs (assumed)
MEMORY_EFFICIENCY = 0.8   # share of the datasheet memory bandwidth reached by a decode step's reads (assumed)
MIN_EFFICIENCY = 0.01     # lowest share accepted: below 1% of peak a roofline predicts nothing an LLM's GPU does


@dataclass(frozen=True)
class RooflineCostModel(CostModel):
    """A :class:`CostModel` whose prefill and decode times are roofline maxima (module docstring). The linear
    fields hold each phase's usual bound (prefill: compute; decode: memory), which the max only ever raises."""

    flops_per_token: float = 0.0        # 2 x params
    attn_flops_per_square: float = 0.0  # 2 x layers x heads x head_dim
    peak_flops_per_s: float = 1.0       # datasheet peak x compute efficiency
    bandwidth_bytes_per_s: float = 1.0  # datasheet bandwidth x memory efficiency
    step_overhead_s: float = 0.0
    layers: int = 0                     # of the model: a layer-wise KV transfer streams them one by one
    tp: int = 1                         # devices of the worker (tensor parallelism)
    comm_base_s: float = 0.0            # all-reduce latencies of one forward (2 x layers x latency_s)
    comm_per_token_s: float = 0.0       # all-reduce bytes of one token's activations / the link's bandwidth

    def prefill_s(self, tokens: int, squares: int | None = None, masked_pairs: int = 0) -> float:
        """The roofline of one prefill forward; ``masked_pairs`` is ignored (a GPU server's attention kernels
        take ragged rows and cached prefixes without an explicit mask)."""
        squares = tokens * tokens if squares is None else squares
        flops = self.flops_per_token * tokens + self.attn_flops_per_square * squares
        nbytes = self.weight_bytes + self.kv_bytes_per_token * tokens
        return (self.step_overhead_s + max(flops / self.peak_flops_per_s, nbytes / self.bandwidth_bytes_per_s)
                + self._comm_s(tokens))

    def _comm_s(self, tokens):
        """Seconds of the all-reduces of one forward over ``tokens`` tokens (0 on one device)."""
        return self.comm_base_s + self.comm_per_token_s * tokens if self.tp > 1 else 0.0

    def decode_s(self, batch: int, context_tokens: int) -> float:
        flops = self.flops_per_token * batch + 2 * self.attn_flops_per_square * context_tokens
        nbytes = self.weight_bytes + self.kv_bytes_per_token * context_tokens
        return (self.step_overhead_s + max(flops / self.peak_flops_per_s, nbytes / self.bandwidth_bytes_per_s)
                + self._comm_s(batch))

    def fused_hybrid_s(self, chunk_tokens: int, chunk_squares: int, masked_pairs: int, decode_batch: int,
                       decode_context_tokens: int) -> float:
        """The roofline of one fused hybrid forward (``CostModel.hybrid_s``'s arguments; ``masked_pairs`` is
        ignored as in :meth:`prefill_s`): FLOPs of the chunks and of the decode rows summed; bytes = weights
        (once) + the chunks' KV written + the decode rows' KV read."""
        flops = (self.flops_per_token * (chunk_tokens + decode_batch) + self.attn_flops_per_square * chunk_squares
                 + 2 * self.attn_flops_per_square * decode_context_tokens)
        nbytes = self.weight_bytes + self.kv_bytes_per_token * (chunk_tokens + decode_context_tokens)
        return (self.step_overhead_s + max(flops / self.peak_flops_per_s, nbytes / self.bandwidth_bytes_per_s)
                + self._comm_s(chunk_tokens + decode_batch))

    def decode_run_s(self, batch: int, context_tokens: int, steps: int) -> np.ndarray:
        context = context_tokens + batch * np.arange(steps, dtype=np.float64)
        flops = self.flops_per_token * batch + 2 * self.attn_flops_per_square * context
        nbytes = self.weight_bytes + self.kv_bytes_per_token * context
        return (self.step_overhead_s + np.maximum(flops / self.peak_flops_per_s, nbytes / self.bandwidth_bytes_per_s)
                + self._comm_s(batch))


def roofline_models() -> list[str]:
    """The names :func:`roofline_cost_model` takes: the published models with a parameter count (the presets'
    configs carry none; a config.json path with ``n_params`` works too)."""
    return [name for name, cfg in PUBLISHED_MODELS.items() if cfg.get("n_params")]


#: most parameters a config may give the roofline: 1e15, about 6,000 x GPT-3 (1e300 printed a 300-digit shard)
MAX_PARAMS = 1e15


def _roofline_config(model) -> dict:
    """The config of ``model`` if the roofline can use it (it has ``n_params``), or a ValueError saying what to
    give instead."""
    instead = f"give a published model ({', '.join(roofline_models())}) or a config.json path with n_params"
    if isinstance(model, str) and model not in PUBLISHED_MODELS and not is_preset(model) and not Path(model).exists():
        raise ValueError(f"unknown model {model!r} for the roofline cost model: {instead}")
    cfg = resolve_config(model)
    if not cfg.get("n_params"):
        kind = "the preset" if is_preset(model) else "the config of"
        raise ValueError(f"{kind} {model!r} has no n_params (the parameter count the roofline cost model needs): "
                         f"{instead}")
    n, context = cfg["n_params"], cfg.get("max_position_embeddings") or 4096
    if isinstance(n, bool) or not isinstance(n, numbers.Real) or not 0 < n <= MAX_PARAMS:  # NaN, 'abc', -8e9, 1e300
        raise ValueError(f"the config of {model!r} has n_params {n!r}: a parameter count must be a number > 0 and at "
                         f"most {MAX_PARAMS:.0e}")
    if isinstance(context, bool) or not isinstance(context, numbers.Integral) or context < 1:
        raise ValueError(f"the config of {model!r} has max_position_embeddings {context!r}: a context must be a "
                         f"whole number of tokens >= 1")
    return cfg


def roofline_cost_model(model: str = "Llama-3-8B", gpu: str = "H100", dtype: str = "bf16",
                        compute_efficiency: float = COMPUTE_EFFICIENCY, memory_efficiency: float = MEMORY_EFFICIENCY,
                        link: str = "400 Gb/s network", step_overhead_s: float = 0.0,
                        tp: int | TensorParallel = 1) -> RooflineCostModel:
    """The predicted cost model of ``model`` (a published model, a preset or a config.json path with
    ``n_params``) in ``dtype`` on a worker of ``tp`` ``gpu`` devices of :data:`splitlab.sizing.GPUS` (an int, or a
    :class:`~.parallel.TensorParallel` naming the all-reduce link, efficiency and latency), its caches moving over
    ``link`` (a name of :data:`splitlab.sizing.LINKS`; one per device). The KV budget of a worker (the simulator's
    "auto" budget) is 90% of its devices' memory (vLLM's ``gpu_memory_utilization``;
    ``ServingConfig.memory_utilization``) minus the weights and the activations of the largest forward
    (:func:`splitlab.sizing.kv_budget_bytes`).

    Raises:
        ValueError: an unknown model, GPU or link (the message lists the known ones: for the model, those of
            :func:`roofline_models`), a preset or config without ``n_params`` (the message says what to give),
            efficiencies outside [0.01, 1], a negative overhead, a TP degree that does not divide the attention or
            KV heads (:func:`~.parallel.check_tp`), or a shard (weights / tp + the KV of one request at the
            model's whole context / tp) that does not fit 90% of one device.
    """
    check_roofline_options(gpu, dtype, link, compute_efficiency, memory_efficiency, step_overhead_s)
    cfg = _roofline_config(model)
    g, geo = GPUS[gpu], kv_geometry(cfg)
    par = tp if isinstance(tp, TensorParallel) else TensorParallel(tp)
    n = check_tp(par.tp, geo.heads, geo.kv_heads, model)
    weights = float(cfg["n_params"]) * dtype_bytes(dtype)
    per_token = kv_bytes_per_token(cfg, dtype)
    context = int(cfg.get("max_position_embeddings") or 4096)
    _check_fits(model, dtype, gpu, n, weights, per_token * context, context)
    hidden = int(cfg.get("hidden_size") or geo.heads * geo.head_dim)
    comm_token, tp_link = allreduce_terms(par, gpu, geo.layers, hidden, dtype_bytes(dtype))
    comm_base = 2 * geo.layers * par.latency_s if n > 1 else 0.0
    peak, bw = n * g["peak_flops_per_s"] * compute_efficiency, n * g["bandwidth_bytes_per_s"] * memory_efficiency
    flops_token, attn = 2.0 * float(cfg["n_params"]), 2.0 * geo.layers * geo.heads * geo.head_dim
    group = "" if n == 1 else (f" x TP{n} (all-reduce over {tp_link} at {par.efficiency:g} of its bandwidth, "
                               f"{par.latency_s * 1e6:g} us each)")
    source = (f"predicted: roofline of {model} ({dtype}) on {gpu}{group}, {compute_efficiency:g} of peak FLOP/s, "
              f"{memory_efficiency:g} of memory bandwidth, KV over {link}")
    return RooflineCostModel(
        prefill_base_s=step_overhead_s + comm_base, prefill_per_token_s=flops_token / peak + comm_token,
        prefill_per_token2_s=attn / peak, decode_base_s=step_overhead_s + comm_base + weights / bw,
        decode_per_seq_s=comm_token, decode_per_token_s=per_token / bw,
        transfer_base_s=0.0, transfer_bytes_per_s=n * LINKS[link]["bandwidth_bytes_per_s"],
        kv_bytes_per_token=int(round(per_token)), max_context=context,
        memory_bytes=float(n * g["memory_bytes"]), weight_bytes=weights, source=source,
        activation_bytes_per_token=activation_bytes_per_token(cfg, dtype, n), flops_per_token=flops_token,
        attn_flops_per_square=attn, peak_flops_per_s=peak, bandwidth_bytes_per_s=bw, step_overhead_s=step_overhead_s,
        tp=n, comm_base_s=comm_base, comm_per_token_s=comm_token, layers=geo.layers)


#: the options of :func:`roofline_cost_model` besides the model, GPU, dtype, link and TP (a caller's ``**options``)
ROOFLINE_OPTIONS = ("compute_efficiency", "memory_efficiency", "step_overhead_s")


def check_roofline_options(gpu: str, dtype: str = "bf16", link: str = "400 Gb/s network",
                           compute_efficiency: float = COMPUTE_EFFICIENCY, memory_efficiency: float = MEMORY_EFFICIENCY,
                           step_overhead_s: float = 0.0) -> None:
    """What :func:`roofline_cost_model` checks before it reads the model, whatever the model and TP (so that a
    caller trying several TP degrees can refuse a bad option once, not as every degree's reason).

    Raises:
        ValueError: an unknown GPU, dtype or link (the message lists the known ones), efficiencies outside
            [0.01, 1], a negative overhead."""
    gpu_spec(gpu)  # an unknown GPU refused, naming the known ones
    dtype_bytes(dtype)
    if link not in LINKS:
        raise ValueError(f"unknown link {link!r}; choose one of {', '.join(LINKS)}")
    for name, x in (("compute_efficiency", compute_efficiency), ("memory_efficiency", memory_efficiency)):
        if not MIN_EFFICIENCY <= x <= 1:  # 1e-300 of the bandwidth printed a TTFT of 300 digits of milliseconds
            raise ValueError(f"{name} must be in [{MIN_EFFICIENCY:g}, 1] (a share of the datasheet's peak; served "
                             f"LLMs reach 0.3-0.8), got {x!r}")
    if not step_overhead_s >= 0:
        raise ValueError(f"step_overhead_s must be >= 0 s, got {step_overhead_s!r}")


def _check_fits(model: str, dtype: str, gpu: str, tp: int, weights: float, kv_context: float, context: int) -> None:
    """A ValueError unless one device of a TP ``tp`` worker holds its shard: weights / tp and the KV of one
    request at the whole context / tp, within 90% of its memory; the message names the smallest TP that fits.
    (vLLM refuses to start the same way when one request of ``max_model_len`` tokens does not fit its KV cache.)"""
    memory = GPUS[gpu]["memory_bytes"]
    if (weights + kv_context) / tp <= 0.9 * memory:
        return
    need = next((t for t in (2, 4, 8, 16, 32, 64) if (weights + kv_context) / t <= 0.9 * memory), None)
    hint = f"; TP {need} would fit (if it divides the heads)" if need and need > tp else ""
    raise ValueError(f"{model} in {dtype} does not fit {'one' if tp == 1 else f'a TP{tp} group of'} {gpu} "
                     f"({memory / 1e9:.0f} GB each): a device's shard is {weights / tp / 1e9:.1f} GB of weights + "
                     f"{kv_context / tp / 1e9:.1f} GB of KV for one {context:,}-token request, over 90% of its "
                     f"memory{hint}")
