"""The header every KV transfer carries, and the receiver's check of it.

A :class:`TransferHeader` names the model identity, dtype, layers, KV heads, head_dim, sequence lengths, and the
first token(s) the prefill side chose. The receiver calls :func:`check` before touching the tensors, so a cache
from another model, dtype or shape fails with a :class:`~splitlab.kvcache.CacheMismatchError` that names every
mismatching field, before any decode step runs.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from ..common import dtypes
from ..kvcache import CacheMismatchError, KVCache
from ..sizing import KVGeometry, kv_bytes

__all__ = ["TransferHeader", "Packet", "make_header", "check", "pack"]


@dataclass(frozen=True)
class TransferHeader:
    """What the receiver must know before it accepts a cache. ``seq_len`` is the padded length held per row,
    ``lengths`` the real tokens per row, ``first_tokens`` the tokens the prefill side sampled (one per row)."""

    model_id: str
    dtype: str
    layers: int
    kv_heads: int
    head_dim: int
    batch: int
    seq_len: int
    lengths: tuple[int, ...]
    first_tokens: tuple[int, ...] = ()
    request_ids: tuple[int, ...] = ()

    @property
    def nbytes(self) -> int:
        """Bytes of keys and values the header announces (padding included).

        Raises:
            ValueError: ``dtype`` is not a torch dtype name.
        """
        if not isinstance(self.dtype, str) or dtypes.ALIASES.get(self.dtype) not in dtypes.WIRE_DTYPES:
            raise ValueError(f"header dtype {self.dtype!r} is not a torch dtype a cache can have")
        geometry = KVGeometry(self.layers, self.kv_heads, self.kv_heads, self.head_dim)  # query heads do not count
        return int(kv_bytes(geometry, self.seq_len, self.batch, self.dtype))

    def to_bytes(self) -> bytes:
        """JSON encoding (to send ahead of the tensors over torch.distributed or a socket)."""
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "TransferHeader":
        d = json.loads(bytes(data).decode())
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


@dataclass
class Packet:
    """A header and the cache it describes, as handed from the prefill side to the decode side."""

    header: TransferHeader
    cache: KVCache


def make_header(cache: KVCache, first_tokens=None, request_ids=None) -> TransferHeader:
    """The header describing ``cache`` (``first_tokens``/``request_ids``: one per row, optional)."""
    _, _, batch, kv_heads, seq, head_dim = cache.shape
    return TransferHeader(cache.model_id, dtypes.name_of(cache.dtype), cache.num_layers, kv_heads,
                          head_dim, batch, seq, tuple(int(x) for x in cache.lengths.tolist()),
                          tuple(int(t) for t in (first_tokens if first_tokens is not None else ())),
                          tuple(int(i) for i in (request_ids if request_ids is not None else ())))


def pack(cache: KVCache, first_tokens=None, request_ids=None) -> Packet:
    """Wrap ``cache`` with its header for sending."""
    return Packet(make_header(cache, first_tokens, request_ids), cache)


def check(header: TransferHeader, lm, cache: KVCache | None = None) -> None:
    """Raise :class:`CacheMismatchError` unless the receiving model ``lm`` (a :class:`splitlab.LoadedModel`) can
    decode the cache ``header`` announces, and, if ``cache`` is given, the tensors really have that shape.

    The header must also agree with itself: one length per row, each in ``1..seq_len``, one first token (in the
    receiver's vocabulary) and one request id per row when they are given.
    The message lists every mismatching field as ``field: sent X, receiver expects Y``.
    """
    g = lm.geometry
    want = dict(model_id=lm.model_id, dtype=dtypes.name_of(lm.dtype), layers=g.layers,
                kv_heads=g.kv_heads, head_dim=g.head_dim)
    problems = [f"{k}: sent {getattr(header, k)!r}, receiver expects {v!r}" for k, v in want.items()
                if getattr(header, k) != v]
    if cache is not None:
        got = make_header(cache)
        problems += [f"{k}: header says {getattr(header, k)!r}, tensors have {getattr(got, k)!r}"
                     for k in ("model_id", "dtype", "layers", "kv_heads", "head_dim", "batch", "seq_len", "lengths")
                     if getattr(header, k) != getattr(got, k)]
    if header.batch < 1 or header.seq_len < 1:
        problems.append(f"batch {header.batch} x seq_len {header.seq_len}: a cache holds at least one token")
    if len(header.lengths) != header.batch:
        problems.append(f"lengths: {len(header.lengths)} for a batch of {header.batch}")
    if any(not 1 <= n <= header.seq_len for n in header.lengths):
        problems.append(f"lengths: {list(header.lengths)}, each row holds 1..seq_len ({header.seq_len}) tokens")
    if header.first_tokens and len(header.first_tokens) != header.batch:
        problems.append(f"first_tokens: {len(header.first_tokens)} for a batch of {header.batch}")
    if header.first_tokens:
        vocab = lm.vocab_size
        bad = [t for t in header.first_tokens if not 0 <= t < vocab]
        if bad:
            problems.append(f"first_tokens: {bad} outside the receiver's vocabulary 0..{vocab - 1}")
    if header.request_ids and len(header.request_ids) != header.batch:
        problems.append(f"request_ids: {len(header.request_ids)} for a batch of {header.batch}")
    if max(header.lengths, default=0) + 1 > lm.max_context:
        problems.append(f"lengths: {max(header.lengths)} tokens leave no room in a context of {lm.max_context}")
    if problems:
        raise CacheMismatchError("KV cache transfer rejected before decoding:\n  " + "\n  ".join(problems))
