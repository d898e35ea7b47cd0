"""What moving a KV cache costs here: in-process copy, cross-process whole and layer-wise transfer, and the raw
bandwidth of the backend, for several prompt lengths (``python -m splitlab transfer`` prints this table).

Methods (every one moves the same ``nbytes`` of keys and values):

- ``in-process``: :func:`splitlab.transfer.copy.copy_cache` on one device (a clone: what the emulated split does).
- ``whole``: :func:`splitlab.transfer.link.send_cache` to a second process, timed until the receiver acknowledges a
  usable cache (header checked, views built). The cache is the one a prefill worker sends
  (:func:`splitlab.transfer.link.prefill_flat`: written into one send buffer during the forward), so the payload is
  one message; the receiver posts its buffer first, from the plan announced on the control plane.
- ``layerwise``: the same bytes as one message per layer (packed just before it leaves) plus the trailer. This
  row also says how much of the transfer streaming hides behind the prefill (DistServe, OSDI'24), from a
  prefill that sends each layer as soon as it is computed (:func:`splitlab.transfer.link.prefill_streaming`):
  ``exposed_s`` is the transfer time left after its forward ended (until the receiver acknowledged), and
  ``hidden_fraction = 1 - exposed_s / whole_s`` the share of a whole transfer that streaming took off the
  critical path (1 = all of it; <= 0 = nothing). ``prefill_s`` (a plain prefill) beside ``stream_prefill_s``
  (the forward that streamed) shows what the sends cost the compute, e.g. when both share two CPU cores.
- ``raw``: one contiguous uint8 tensor of ``nbytes`` (the very buffer ``whole`` sends) over the same backend,
  acknowledged the same way: the ceiling for the cross-process methods.

``seconds`` is the median over ``repeats`` (methods alternate inside each repeat, after one unrecorded warm-up
round); ``gbps`` = nbytes / seconds / 1e9; ``seconds_min`` the fastest repeat.
"""
from __future__ import annotations

import statistics
from typing import Sequence

__all__ = ["measure_transfers", "METHODS"]

METHODS = ("in-process", "whole", "layerwise", "raw")
#: largest cache measured (bytes): each method holds copies of it in both processes; a batch of 100,000 16-token
#: rows of tiny (3.3 GB) ran past 200 s before its first row on a shared 2-core machine
MAX_CACHE_BYTES = 2 ** 31


def measure_transfers(model: str = "tiny", prompt_tokens: Sequence[int] = (128, 512, 2048), batch: int = 1,
                      repeats: int = 7, dtype: str | None = None, seed: int = 0, peer=None, lm=None,
                      timeout_s: float = 60.0, threads: int = 1, say=None) -> list[dict]:
    """Measure every method of the module docstring for each prompt length.

    Args:
        model, dtype, seed: the model both processes use (or pass a loaded ``lm``); prompts are seeded byte ids.
        batch: rows per cache (every row the same length).
        peer: a started :class:`splitlab.transfer.peer.Peer` to reuse (default: one is started and stopped here, with
            ``threads`` torch threads; give this process as many, e.g. ``torch.set_num_threads(1)``: OpenMP
            threads spinning next to the other process's make both slow on a small machine).
        say: None, or a function called with one line per stage (starting the second process, each prompt
            length), e.g. ``print``: the whole takes tens of seconds on a busy machine.

    Returns:
        One dict per (prompt length, method): ``prompt_tokens``, ``batch``, ``nbytes``, ``method``, ``seconds``,
        ``gbps``, ``seconds_min``, ``repeats``, ``backend``, ``model``, ``dtype``; the ``layerwise`` rows add
        ``prefill_s``, ``stream_prefill_s``, ``total_s``, ``exposed_s``, ``hidden_fraction`` and the repeats'
        spread of the two prefills, ``prefill_lo_s``/``prefill_hi_s`` and ``stream_prefill_lo_s``/``_hi_s`` (the
        fastest and slowest repeat: whether streaming slowed the forward beyond the timings' noise).

    Raises:
        ValueError: repeats < 1, an empty list or a prompt beyond the model's context; a cache of ``batch`` rows of
            the longest prompt above :data:`MAX_CACHE_BYTES` (2 GiB);
        splitlab.transfer.group.DistributedError: the second process could not start or died.
    """
    from ..phases.engine import prefill
    from ..phases.models import load_model
    from ..phases.profiling import random_prompt
    from .copy import copy_cache
    from .link import prefill_flat
    from .peer import Peer
    from .wire import _flat_backed
    if repeats < 1 or not prompt_tokens or batch < 1:
        raise ValueError("need repeats >= 1, batch >= 1 and at least one prompt length")
    lm = lm if lm is not None else load_model(model, device="cpu", dtype=dtype, seed=seed)
    too_long = [n for n in prompt_tokens if not 1 <= n <= lm.max_context]
    if too_long:
        raise ValueError(f"prompt lengths {too_long} are outside 1..{lm.max_context} (the model's context)")
    largest = batch * lm.kv_bytes(max(prompt_tokens))
    if largest > MAX_CACHE_BYTES:
        raise ValueError(f"a batch of {batch:,} rows of {max(prompt_tokens):,} tokens is a {largest / 2 ** 30:.1f} GiB "
                         f"cache of {lm.name}: transfer measures caches of at most {MAX_CACHE_BYTES / 2 ** 30:g} GiB "
                         f"(each method holds copies of it in both processes); give a smaller batch or shorter prompts")
    say = say or (lambda line: None)
    own = peer is None
    if own:
        say("starting the second process (it imports torch: seconds, more on a busy machine)")
    peer = Peer(timeout_s=timeout_s, threads=threads).start() if own else peer
    rows = []
    try:
        for i, n in enumerate(prompt_tokens):
            say(f"measuring {n:,}-token caches ({i + 1} of {len(prompt_tokens)}): {len(METHODS)} methods and a "
                f"streamed prefill, {repeats} repeats after a warm-up")
            prompts = [random_prompt(lm, n, seed + b) for b in range(batch)]
            cache = prefill_flat(lm, prompts).cache
            buffer = _flat_backed([t for kv in zip(cache.keys, cache.values) for t in kv])
            nbytes = cache.nbytes
            t: dict[str, list[float]] = {m: [] for m in (*METHODS, "prefill", "stream", "total", "exposed")}
            for rep in range(repeats + 1):  # round 0 warms every path up and is dropped
                sample = {"in-process": copy_cache(cache)[1].seconds,
                          "whole": peer.transfer(cache)["seconds"],
                          "layerwise": peer.transfer(cache, mode="layerwise")["seconds"],
                          "raw": peer.raw(buffer),
                          "prefill": prefill(lm, prompts).seconds}
                streamed = peer.stream(lm, prompts)
                sample.update(total=streamed["total_s"], exposed=streamed["exposed_s"],
                              stream=streamed["stats"].compute_s)
                if rep:
                    for k, v in sample.items():
                        t[k].append(v)
            med = {k: statistics.median(v) for k, v in t.items()}
            common = dict(prompt_tokens=n, batch=batch, nbytes=nbytes, repeats=repeats, backend=peer.options["backend"],
                          model=lm.name, dtype=str(lm.dtype).replace("torch.", ""))
            for m in METHODS:
                row = dict(common, method=m, seconds=med[m], gbps=nbytes / med[m] / 1e9, seconds_min=min(t[m]))
                if m == "layerwise":
                    row.update(prefill_s=med["prefill"], stream_prefill_s=med["stream"], total_s=med["total"],
                               exposed_s=med["exposed"], hidden_fraction=1 - med["exposed"] / med["whole"],
                               prefill_lo_s=min(t["prefill"]), prefill_hi_s=max(t["prefill"]),
                               stream_prefill_lo_s=min(t["stream"]), stream_prefill_hi_s=max(t["stream"]))
                rows.append(row)
    finally:
        if own:
            peer.close()
    return rows
