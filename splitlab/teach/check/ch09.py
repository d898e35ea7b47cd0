"""Chapter 9 (from splitlab to production): its exercise checkers."""
from __future__ import annotations

from typing import Any

from .verdict import verdict

__all__ = ["handoff_gb_per_s", "resharded_share", "mean_handoff_ms"]


def handoff_gb_per_s(answer: Any, model: str, prompt_tokens: int, rps: float, decode_links: int = 1) -> bool:
    """Ch. 9: the KV hand-off load (GB/s) on each of ``decode_links`` decode device links when a split serves
    ``rps`` requests/s of ``prompt_tokens``-token prompts of ``model`` in bf16: rps x prompt x KV bytes per token
    / links (:func:`splitlab.sizing.kv_bytes_per_token`)."""
    from ... import sizing

    per_token = sizing.kv_bytes_per_token(sizing.resolve_config(model), "bf16")
    expected = rps * prompt_tokens * per_token / decode_links / 1e9
    return verdict(answer, expected, 0.02, f"the hand-off load of {model} at {rps:.3g} requests/s (GB/s)",
                   "one cache is prompt x KV bytes per token (2 x layers x KV heads x head_dim x 2 bytes); the "
                   "decode side takes rps of them per second, shared by its links.")


def resharded_share(answer: Any, model: str, tp_prefill: int, tp_decode: int) -> bool:
    """Ch. 9: the share of a cache that lands on the wrong decode device and crosses its NVLink once more, from a
    TP ``tp_prefill`` prefill worker to a TP ``tp_decode`` decode worker (:func:`splitlab.costmodel.reshard`)."""
    from ... import sizing
    from ...costmodel import reshard

    heads = sizing.kv_geometry(sizing.resolve_config(model)).kv_heads
    expected = reshard(1.0, heads, tp_prefill, tp_decode)["moved_share"]
    return verdict(answer, expected, 0.01, f"the share re-sharded from TP {tp_prefill} to TP {tp_decode}",
                   f"{model} has {heads} KV heads; prefill device i sends its heads to the decode device holding "
                   "the first of them: count the heads whose decode device is another one.")


def mean_handoff_ms(answer: Any, result) -> bool:
    """Ch. 9 (experiment): the mean hand-off time (ms: NIC queue + the transfer no prefill hid,
    :func:`splitlab.serving.metrics.link_s`) of the finished requests of the reader's own run ``result``."""
    from ...serving import metrics as M

    times = [M.link_s(r) for r in result.requests if r.state.value == "finished"]
    expected = 1e3 * sum(times) / len(times) if times else 0.0
    return verdict(answer, expected, 0.02, "the mean hand-off time of this run (ms)",
                   "average metrics.link_s(r) over the finished requests of res.requests, times 1,000.")
