"""The link between the pools: one NIC per worker, the time a KV cache takes to cross, and layer-wise streaming.

**One NIC per worker** (:class:`Nic`, ``Worker.nic``). Every transfer leaves through its prefill worker's egress
and enters through its decode worker's ingress, and each of the two carries one transfer at a time at the link's
full rate: a transfer starts when both are free (first come, first served) and holds both until its cache has
arrived. So four prefill workers sending to one decode worker queue at its ingress, and what it takes in never
exceeds one link's bandwidth (queueing whole transfers rather than sharing the rate among them: the same bytes
per second, a different order of arrivals). A transfer takes the link's time: ``link_latency_s + bytes /
link_bytes_per_s`` when the run names a link (:func:`link_fields`: a link of :data:`splitlab.sizing.LINKS` or a
measured one), else what the back end measured or its cost model predicts (``CostModel.transfer_s``).

**Layer-wise transfer** (``transfer_mode="layerwise"``): layer i's cache is sent once layer i of the prefill
forward has computed it, so the transfer overlaps the prefill, as Splitwise (Patel et al., ISCA'24) and Mooncake
(Qin et al., FAST'25) stream the cache layer by layer while the prefill runs. Layer i is ready at ``f0 + (i + 1)
(f1 - f0) / L`` for a forward from ``f0`` to ``f1`` over ``L`` layers (an even pace), each layer takes a
``1 / L`` share of the link's time (its own latency with a named link: ``L`` messages) and the layers go in order:
the cache has arrived at ``max(start + L tau, f1 + tau)`` for a per-layer time ``tau``, the closed form of
:func:`splitlab.sizing.streamed_exposed_s`. A stream needs its destination before the prefill ends, while the
cluster picks the decode worker when it ends: the link is charged as if the worker picked then had been known
when the forward began, and only when one had room at once (a cache that waited for room is sent layer after
layer from the moment it leaves, every layer ready).
"""
from __future__ import annotations

from ..sizing.links import link_bandwidth

__all__ = ["Nic", "link_fields", "schedule", "DEFAULT_KV_LAYERS"]

#: layers a layer-wise transfer streams when the back end does not say (Llama-2-7B's and Llama-3-8B's 32)
DEFAULT_KV_LAYERS = 32


class Nic:
    """One worker's network interface: the times its egress and its ingress are free again (s)."""

    __slots__ = ("egress_free_s", "ingress_free_s", "forward_s")

    def __init__(self):
        self.egress_free_s = self.ingress_free_s = 0.0
        self.forward_s = (0.0, 0.0)  # its worker's latest prefill forward (start, end): when layers were ready


def link_fields(link: str | float, latency_s: float | None = None) -> dict:
    """The :class:`~.config.ServingConfig` fields that model the link between the pools: ``link`` is a name of
    :data:`splitlab.sizing.LINKS` (its bandwidth in one direction; latency ``latency_s`` or 0, the datasheets give
    none) or a bandwidth in bytes/s (a measured one: ``sizing.fit_latency_bandwidth``), with ``latency_s`` (s).

    Returns ``dict(link_bytes_per_s=..., link_latency_s=...)``, to pass as ``ServingConfig(**fields)`` or as the
    planner's options.

    Raises:
        ValueError: an unknown link name (the message lists the known ones) or a bandwidth that is not > 0; a bad
            latency is refused by ``ServingConfig``.
    """
    return dict(link_bytes_per_s=link_bandwidth(link), link_latency_s=0.0 if latency_s is None else float(latency_s))


def schedule(cfg, p, d, t: float, measured_s: float, nbytes: int, layers: int,
             prefill_end_s: float | None) -> tuple[float, float]:
    """When the cache of ``nbytes`` handed off at ``t`` from ``p`` to ``d`` (workers with a :class:`Nic`) is on the
    wire and when it has arrived: ``(start_s, end_s)``; both NICs are held until then (module docstring).
    ``measured_s``: the back end's seconds for the whole cache, charged unless ``cfg`` names a link; ``layers``:
    of the cache; ``prefill_end_s``: when its prefill ended (a layer-wise cache handed off then overlapped it)."""
    latency, bandwidth = cfg.link_latency_s, cfg.link_bytes_per_s
    free = max(p.nic.egress_free_s, d.nic.ingress_free_s)
    if cfg.transfer_mode == "layerwise" and layers > 1:
        tau = measured_s / layers if bandwidth is None else latency + nbytes / layers / bandwidth
        f0, f1 = p.nic.forward_s
        if f1 != prefill_end_s or t > f1:  # it waited for a decode worker: every layer is ready now
            f0 = f1 = t
        start = max(f0 + (f1 - f0) / layers, free)  # layer 0 is ready, both NICs are free
        end = max(start + layers * tau, f1 + tau)
    else:
        start = max(t, free)
        end = start + (measured_s if bandwidth is None else latency + nbytes / bandwidth)
    p.nic.egress_free_s = d.nic.ingress_free_s = end
    return start, end
