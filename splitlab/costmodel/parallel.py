"""Tensor parallelism (TP) in the analytic cost model: a worker that is a group of ``tp`` devices.

Megatron-LM's layout (Shoeybi et al. 2019, sec. 3): every layer's attention heads and MLP columns are split over
the ``tp`` devices, so each device holds ``1/tp`` of the weights and of the KV cache (the KV heads are split, so
``tp`` must divide the KV heads and the attention heads), does ``1/tp`` of the FLOPs, and the group all-reduces
the activations TWICE per layer (after attention, after the MLP). A ring all-reduce of ``b`` bytes moves
``2 (tp - 1) / tp x b`` bytes through each device's link (Patarasuk and Yuan 2009), so a forward over ``n``
tokens adds

    2 x layers x (latency_s + 2 (tp - 1) / tp x n x hidden x dtype bytes / (link bandwidth x efficiency))

seconds, not overlapped with the compute (an upper bound: engines overlap some of it). The link is a named link
of :data:`splitlab.sizing.LINKS` (by default the GPU's ``tp_link``: NVLink for A100/H100/H200); ``efficiency``
(default :data:`ALLREDUCE_EFFICIENCY`) and ``latency_s`` (default :data:`ALLREDUCE_LATENCY_S`) are stated
assumptions, not measurements.

A hand-off between pools of different TP (:func:`reshard`): prefill device ``i`` sends its KV heads to the decode
device that holds the first of them; every head that lands on the wrong device crosses the decode group's link
once more (the re-shard, an extra step on the hand-off). Each device has its own NIC (a DGX/HGX node: one per
GPU), so a hand-off moves over ``min(tp_prefill, tp_decode)`` links at once.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

from ..sizing import GPUS, LINKS

__all__ = ["TensorParallel", "check_tp", "allreduce_terms", "reshard", "ALLREDUCE_EFFICIENCY", "ALLREDUCE_LATENCY_S",
           "ALLREDUCES_PER_LAYER"]

ALLREDUCE_EFFICIENCY = 0.7   # share of the link's one-direction bandwidth a ring all-reduce reaches (assumed)
ALLREDUCE_LATENCY_S = 1e-5   # fixed cost of one small all-reduce (s; assumed: NCCL on NVLink is of this order)
ALLREDUCES_PER_LAYER = 2     # Megatron-style: one after attention, one after the MLP


@dataclass(frozen=True)
class TensorParallel:
    """How one worker's ``tp`` devices talk: ``link`` (a name of :data:`splitlab.sizing.LINKS`; None: the GPU's
    ``tp_link``), ``efficiency`` (share of its bandwidth reached) and ``latency_s`` per all-reduce."""

    tp: int = 1
    link: str | None = None
    efficiency: float = ALLREDUCE_EFFICIENCY
    latency_s: float = ALLREDUCE_LATENCY_S


def check_tp(tp, heads: int, kv_heads: int, model: str = "the model") -> int:
    """``tp`` if it is a whole number >= 1 that divides the attention heads and the KV heads of ``model``.

    Raises:
        ValueError: ``tp`` not an integer >= 1, or it does not divide ``heads`` or ``kv_heads`` (the message lists
            the degrees that do). Engines replicate KV heads when ``tp`` exceeds them (vLLM); splitlab does not
            model that.
    """
    if isinstance(tp, bool) or not isinstance(tp, numbers.Integral) or tp < 1:
        raise ValueError(f"a tensor-parallel degree must be an integer >= 1, got {tp!r}")
    if heads % tp or kv_heads % tp:
        ok = [d for d in range(1, kv_heads + 1) if heads % d == 0 and kv_heads % d == 0]
        raise ValueError(f"TP {tp} does not divide {model}'s {heads} attention heads and {kv_heads} KV heads (each "
                         f"device holds whole heads): choose one of {', '.join(map(str, ok))}")
    return int(tp)


def _tp_link(par: TensorParallel, gpu: str) -> str:
    link = par.link or GPUS[gpu].get("tp_link")
    if link is None:
        raise ValueError(f"{gpu} has no GPU-to-GPU link in splitlab.sizing.GPUS: name the link its TP group "
                         f"all-reduces over (one of {', '.join(LINKS)})")
    if link not in LINKS:
        raise ValueError(f"unknown link {link!r}; choose one of {', '.join(LINKS)}")
    return link


def allreduce_terms(par: TensorParallel, gpu: str, layers: int, hidden: int, dtype_bytes: float) -> tuple[float, str]:
    """``(seconds per token, link)`` of a forward's all-reduces on a TP group of ``gpu`` (module docstring): the
    seconds grow by ``per_token x tokens`` plus ``ALLREDUCES_PER_LAYER x layers x latency_s`` once per forward.
    TP 1: no all-reduce, ``(0.0, "none")``.

    Raises:
        ValueError: an unknown link, a GPU with no ``tp_link`` and no link given, an efficiency outside (0, 1] or a
            negative latency.
    """
    if par.tp == 1:
        return 0.0, "none"
    if not 0 < par.efficiency <= 1:
        raise ValueError(f"the all-reduce efficiency must be in (0, 1] (a share of the link's bandwidth), got "
                         f"{par.efficiency!r}")
    if not par.latency_s >= 0:
        raise ValueError(f"the all-reduce latency must be >= 0 s, got {par.latency_s!r}")
    link = _tp_link(par, gpu)
    bw = LINKS[link]["bandwidth_bytes_per_s"] * par.efficiency
    ring = 2 * (par.tp - 1) / par.tp
    return ALLREDUCES_PER_LAYER * layers * ring * hidden * dtype_bytes / bw, link


def reshard(kv_bytes: float, kv_heads: int, tp_prefill: int, tp_decode: int) -> dict:
    """What a hand-off from a TP ``tp_prefill`` worker to a TP ``tp_decode`` worker costs beyond the transfer
    (module docstring): ``lanes`` (links used at once: ``min`` of the two), ``moved_bytes`` (of ``kv_bytes`` of
    cache, those that cross the decode group's link again because they landed on the wrong device) and
    ``moved_share``. Equal TP: nothing moves.

    Example: TP 1 prefill -> TP 4 decode moves 3/4 of the cache once more; TP 4 -> TP 1 moves nothing (the one
    decode device gathers four shards).
    """
    per_p, per_d = kv_heads // tp_prefill, kv_heads // tp_decode
    wrong = 0
    for head in range(kv_heads):
        sender = head // per_p
        lands = (sender * per_p) // per_d  # the decode device holding the sender's first head
        wrong += lands != head // per_d
    share = wrong / kv_heads
    return dict(lanes=min(tp_prefill, tp_decode), moved_share=share, moved_bytes=kv_bytes * share)
