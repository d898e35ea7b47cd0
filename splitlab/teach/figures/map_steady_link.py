"""How hard a slow KV link is, in chapter 7's steady-state check (:mod:`.map_steady`'s records): one request's
cache moved over a slow link's cell against its prompt's prefill and its TTFT SLO, and how busy each of the split's
prefill workers' links is (:func:`moved_words`); that cost in prefills beside a datasheet case's, for scale
(:func:`scale_words`: a link is slow only against the prefill it follows).
"""
from __future__ import annotations

import dataclasses
import math
import numbers

from .map_steady import SteadyCell
from .map_steady_place import _positive
from .pools_live import split_pools
from .pools_live_args import whole
from .style import and_list, fmt2, fmt3

__all__ = ["moved_words", "scale_words", "MAX_TOKENS"]

#: the longest datasheet prompt :func:`scale_words` weighs (tokens): past any model's context
MAX_TOKENS = 10_000_000


def moved_words(c: SteadyCell) -> str:
    """On a slow link's cell: how long one request's KV cache (its prompt's tokens, the whole cache at once: the
    runs' ``transfer_mode``) takes to cross the link, against its prompt's prefill, on the cost model that placed
    the cell (its ``extra["cost"]``), and against its TTFT SLO, and how busy that makes each of the split's prefill
    workers' links at the runs' rate (each sends its own prompts' caches, one link each): ", over which one
    request's cache (119 prompt tokens served, 244 kB) takes 24.4 ms to move, 43% of its TTFT SLO and 2.1 prefills
    of its prompt on the placed cost model; at the runs' rate each of the split's 2 prefill workers' links is busy
    69% of the time"; "" on the cost
    model's own link or a record without that model. ValueError: a cost it cannot read (missing a field the words
    read, or not :class:`~splitlab.costmodel.CostModel`'s); a link, prompt, TTFT SLO, KV size or prefill not a finite
    number > 0."""
    moved = _moved(c, "moved_words")
    if moved is None:
        return ""
    cost, nbytes, moved_s = moved
    where = f"moved_words: the {c.region!r} cell's"
    prefills = moved_s / _positive(f"{where} prefill of its prompt on its cost", cost.prefill_s(c.prompt_tokens))
    _positive(f"{where} ttft_slo_s", c.ttft_slo_s)
    busy = _busy(c, moved_s)
    busy = ("" if busy is None else f"; at the runs' rate each of the split's {busy[0]} prefill workers' links is "
            f"busy {fmt2(busy[1])}% of the time")
    return (f", over which one request's cache ({c.prompt_tokens} prompt tokens served, {fmt3(nbytes / 1e3)} kB) "
            f"takes {fmt3(moved_s * 1e3)} ms to move, {fmt2(100 * moved_s / c.ttft_slo_s)}% of its TTFT SLO and "
            f"{fmt2(prefills)} prefills of its prompt on the placed cost model{busy}")


def _moved(c: SteadyCell, who: str) -> tuple | None:
    """(the placed CostModel, bytes of one request's cache, seconds it takes on the cell's link) of a slow link's
    cell; None on the cost model's own link or a record without that model. Errors: :func:`moved_words`'."""
    from ...costmodel import CostModel
    if not isinstance(c, SteadyCell):
        raise ValueError(f"{who}: c must be a SteadyCell (a record's cell), got {type(c).__name__}")
    if c.link_gbps is None or not isinstance(c.extra, dict) or "cost" not in c.extra:
        return None
    where, cost = f"{who}: the {c.region!r} cell's", c.extra["cost"]
    need = [k for k in ("kv_bytes_per_token", "prefill_base_s", "prefill_per_token_s") if k not in cost] \
        if isinstance(cost, dict) else "a dict of a CostModel's fields"
    if need:  # a field left out was read as the default model's, in silence
        raise ValueError(f"{where} extra['cost'] must hold the placed CostModel's fields, missing {need}")
    try:
        cost = CostModel(**cost)
    except TypeError as err:
        raise ValueError(f"{where} extra['cost'] is not a CostModel's fields: {err}") from None
    bad = [k for k, v in dataclasses.asdict(cost).items() if k.endswith("_s") and v is not None
           and not (isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v))]
    if bad:  # a field as text ("0.1") failed deep in the arithmetic
        raise ValueError(f"{where} extra['cost'] fields {bad} must be finite numbers")
    nbytes = _positive(f"{where} prompt_tokens", c.prompt_tokens) * _positive(
        f"{where} cost's kv_bytes_per_token", cost.kv_bytes_per_token)
    bandwidth = _positive(f"{where} link_gbps", c.link_gbps) * 1e9
    moved_s = cost.over_link(bandwidth).transfer_s(nbytes) if math.isfinite(bandwidth) else math.nan
    if not (math.isfinite(moved_s) and moved_s > 0):  # 1e-320 GB/s moved it in "inf ms", 1e300 overflowed
        raise ValueError(f"{where} link_gbps of {c.link_gbps!r} moves its {nbytes:g}-byte cache in {moved_s!r} s: "
                         f"not a link this check can weigh")
    return cost, nbytes, moved_s


def _busy(c: SteadyCell, moved_s: float) -> tuple | None:
    """(the split's prefill workers, how busy (%) each one's link is at the cell's rate), each cache ``moved_s`` on
    it (each prefill worker sends its own prompts' caches): rate per worker x workers / prefill workers x moved_s.
    None: no split in the cell."""
    pools = split_pools(c.winner) or split_pools(c.rival)
    rate = _positive(f"the {c.region!r} cell's rate_per_worker", c.rate_per_worker)
    return None if pools is None else (pools[0], 100 * rate * c.workers / pools[0] * moved_s)


def scale_words(c: SteadyCell, cost, name: str, link, prompt_tokens=(2048, 8192)) -> str:
    """The slow link of the cell ``c`` set beside a datasheet case, for scale, in prefills of the prompt (below one
    a transfer can hide behind the next prefill; above one the link, not the GPU, bounds the prefill pool): its
    cache's transfer against its prompt's prefill (:func:`moved_words`' arithmetic), and ``name``'s (a model on a GPU:
    ``cost``, a :class:`~splitlab.costmodel.CostModel` such as :func:`~splitlab.costmodel.roofline_cost_model`'s) over
    each of ``link`` (a name of :data:`splitlab.sizing.LINKS`, or several) at each of ``prompt_tokens``, the whole
    cache after the prefill over one link per GPU; then whether this link is harsher, gentler, within the range of or
    as harsh as the first (on the numbers as printed, 2 significant digits): " For scale: over the 0.01 GB/s link one
    request's cache (119 prompt tokens) takes 2.1 times as long to move as its prompt takes to prefill; Llama-3-8B
    on an H100, at 2,048 or 8,192 tokens, takes 1.5 or 1.4 times its prefill over a 25 Gb/s network and 0.094 or
    0.085 times over a 400 Gb/s network ... this link is harsher than a 25 Gb/s network, itself link-bound." "" on
    the cost model's own link or a record without that model.

    Raises:
        ValueError: ``c`` not a SteadyCell; ``cost`` not a CostModel, or giving a prefill or KV size not finite > 0;
            ``name`` not a non-empty str; ``link`` not names of LINKS; ``prompt_tokens`` not distinct whole numbers
            in 1 .. :data:`MAX_TOKENS`; those of :func:`moved_words`."""
    from ...costmodel import CostModel
    from ...sizing import LINKS
    moved = _moved(c, "scale_words")
    if moved is None:
        return ""
    if not isinstance(cost, CostModel):
        raise ValueError(f"scale_words: cost must be a CostModel (roofline_cost_model's), got {type(cost).__name__}")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"scale_words: name must be the datasheet case in words, got {name!r}")
    links = [link] if isinstance(link, str) else list(link) if isinstance(link, (list, tuple)) else None
    if not links or any(not isinstance(x, str) or x not in LINKS for x in links) or len(set(links)) < len(links):
        raise ValueError(f"scale_words: link must be distinct names of {sorted(LINKS)}, got {link!r}")
    tokens = list(prompt_tokens) if isinstance(prompt_tokens, (list, tuple)) else None
    if not tokens or any(not whole(p) or not 1 <= p <= MAX_TOKENS for p in tokens) or len(set(tokens)) < len(tokens):
        raise ValueError(f"scale_words: prompt_tokens must be distinct whole numbers in 1 .. {MAX_TOKENS:,}, got "
                         f"{prompt_tokens!r:.100}")
    tokens = [int(p) for p in tokens]
    here_cost, _, moved_s = moved
    here = moved_s / _positive(f"scale_words: the {c.region!r} cell's prefill of its prompt", here_cost.prefill_s(
        c.prompt_tokens))
    kv = _positive("scale_words: the datasheet cost's kv_bytes_per_token", cost.kv_bytes_per_token)
    prefill = [_positive(f"scale_words: the datasheet prefill of {p} tokens", cost.prefill_s(p)) for p in tokens]
    there = {x: [cost.over_link(x).transfer_s(p * kv) / f for p, f in zip(tokens, prefill)] for x in links}
    printed = lambda v: float(fmt2(v).replace(",", ""))  # noqa: E731  the words follow the numbers as printed
    shown, far = printed(here), [printed(v) for v in there[links[0]]]
    side = ("harsher than" if shown > max(far) else "gentler than" if shown < min(far) else
            "within the range of" if min(far) < max(far) else "as harsh as")
    over = " and ".join(f"{' or '.join(fmt2(v) for v in vs)} times{' its prefill' if i == 0 else ''} over a {x}"
                        for i, (x, vs) in enumerate(there.items()))
    bound = ", itself link-bound" if min(far) > 1 else ""
    return (f" For scale: over the {c.link_gbps:g} GB/s link one request's cache ({c.prompt_tokens} prompt tokens) "
            f"takes {fmt2(here)} times as long to move as its prompt takes to prefill; {name}, at "
            f"{' or '.join(f'{p:,}' for p in tokens)} {'token' if tokens == [1] else 'tokens'}, takes {over} (the "
            f"analytic model: the whole cache after the prefill, one link per GPU). Below one prefill a transfer can "
            f"hide behind the next prefill; above one the link, not the GPU, bounds the prefill pool: this link is "
            f"{side} a {links[0]}{bound}.")
