"""Analytic sizing: KV-cache bytes, published model and GPU tables, the roofline model and KV transfer times.

Everything here is arithmetic on configs and datasheet numbers; nothing loads a model and nothing imports torch.
The chapters put these predictions beside what splitlab measures.

- :mod:`.kv`: the cache's geometry from a config, bytes per token and per batch (``kv_bytes``).
- :mod:`.layers`: what each layer keeps (full attention, a sliding window, an MLA latent), from the config.
- :mod:`.tables`: ``PUBLISHED_MODELS``, ``GPUS``, ``LINKS``, each entry with its source.
- :mod:`.roofline`: FLOPs and bytes of prefill and decode, intensity, ridge point, time bounds.
- :mod:`.budget`: a worker's KV budget (memory x utilization - weights - activations, as vLLM) and the
  requests it holds.
- :mod:`.links`: transfer time over a link (a named one's bandwidth: ``link_bandwidth``), fitted link models,
  layer-wise streaming, DistServe's hand-off.
"""
from .budget import (CPU_MEMORY_BYTES, MEMORY_UTILIZATION, activation_bytes_per_token, kv_budget_bytes,
                     requests_in_budget)
from .kv import (KVGeometry, LayerKV, RequestKVBytes, UnsupportedCacheError, dtype_bytes, kv_bytes, kv_bytes_per_token,
                 kv_geometry, resolve_config)
from .links import fit_latency_bandwidth, handoff, link_bandwidth, streamed_exposed_s, transfer_time_s
from .roofline import (arithmetic_intensity, decode_bytes, decode_flops, max_decode_batch, min_decode_step_s,
                       predicted_prefill_s, prefill_bytes, prefill_flops, ridge_point, roofline_time_s)
from .tables import GPUS, LINKS, PUBLISHED_MODELS

__all__ = ["KVGeometry", "LayerKV", "RequestKVBytes", "UnsupportedCacheError", "kv_geometry", "dtype_bytes",
           "kv_bytes_per_token", "kv_bytes", "resolve_config",
           "PUBLISHED_MODELS", "GPUS", "LINKS", "prefill_flops", "decode_flops", "prefill_bytes", "decode_bytes",
           "arithmetic_intensity", "ridge_point", "min_decode_step_s", "max_decode_batch", "roofline_time_s",
           "predicted_prefill_s", "transfer_time_s", "fit_latency_bandwidth", "streamed_exposed_s", "handoff",
           "link_bandwidth", "MEMORY_UTILIZATION", "CPU_MEMORY_BYTES", "activation_bytes_per_token", "kv_budget_bytes",
           "requests_in_budget"]
