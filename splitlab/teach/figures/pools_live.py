"""The map's layout names as serving layouts (:mod:`splitlab.planning.split_map` writes "2P+2D",
"4 colocated (prefill-first)", "4 colocated (chunked, 256-token chunks)"): :func:`split_pools` reads a split's
pools, :func:`layout_config` builds the :class:`~splitlab.serving.ServingConfig` of any name, and ``_on_link`` puts
a map's own KV link (a slider's slower link) into a layout's options. Chapter 7's steady-state check of the map
(:mod:`.map_steady`) serves its cells with them, and chapter 6's loss words (:mod:`.split_loss`) read a split's pools.
"""
from __future__ import annotations

import re
from typing import Sequence

from ...planning.options import chunk_of

__all__ = ["split_pools", "layout_config", "short_name"]


def split_pools(name: str) -> tuple[int, int] | None:
    """(prefill workers, decode workers) of a map's split name ("2P+2D"); None for any other name (a non-string
    too)."""
    split = re.fullmatch(r"(\d+)P\+(\d+)D", name) if isinstance(name, str) else None
    return (int(split[1]), int(split[2])) if split else None


def layout_config(name: str, workers: int, chunk_tokens: Sequence[int], **options):
    """The :class:`~splitlab.serving.ServingConfig` of a map's layout name ("2P+2D", "4 colocated (prefill-first)",
    "4 colocated (chunked, 256-token chunks)"), with ``options`` (``max_batch``...).

    Raises:
        ValueError: a name the map does not write, or one of another cluster size than ``workers`` ("4 colocated
        (prefill-first)" with workers=2 was served on 2 workers in silence)."""
    from ...serving import ServingConfig
    if not isinstance(name, str):
        raise ValueError(f"not a layout name of a map: {name!r}")
    split = split_pools(name)
    named = sum(split) if split else int(re.match(r"\d+", name)[0]) if re.match(r"\d+ colocated", name) else None
    if named is not None and named != workers:
        raise ValueError(f"{name!r} is a layout of {named} workers, not of the map's {workers}")
    if split:
        return ServingConfig.disaggregated(*split, **options)
    chunk = chunk_of(name)
    if chunk:
        return ServingConfig.colocated(workers, policy="chunked", chunk_tokens=chunk, **options)
    if name.endswith("(prefill-first)"):
        return ServingConfig.colocated(workers, **options)
    raise ValueError(f"not a layout name of a map: {name!r}")


def _on_link(m, options: dict) -> dict:
    """``options`` with the KV link of the map ``m`` where it names one (a slider's slower link: its bandwidth, no
    latency, as :func:`~splitlab.planning.split_map.split_map` ran its splits), else as given."""
    if m.link_bytes_per_s is None:
        return options
    return dict(options, link_bytes_per_s=float(m.link_bytes_per_s), link_latency_s=0.0)


def short_name(name: str) -> str:
    """A map's layout name as the live pages write it in a sentence: "4 colocated (prefill-first)" as "4 colocated",
    "4 colocated (chunked, 256-token chunks)" as "4 chunked 256"; a split's name as it is."""
    return name.replace(" (prefill-first)", "").replace(" colocated (chunked, ", " chunked ").replace("-token chunks)",
                                                                                                  "")
