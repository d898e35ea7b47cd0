"""The header every KV transfer carries, and the receiver's check of it.

A :class:`TransferHeader` names the model identity, dtype, layers, each layer's KV heads, key and value widths and
sliding window, sequence lengths, and the first token(s) the prefill side chose. A sliding-window layer of window
W carries only its last ``min(seq_len, W - 1)`` positions, so it sends at most its window whatever the prompt. The
receiver calls :func:`check` before touching the tensors, so a cache from another model, dtype or shape fails with a
:class:`~splitlab.kvcache.CacheMismatchError` that names every mismatching field, before any decode step runs.
"""
from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields

from ..common import dtypes
from ..kvcache import CacheMismatchError, KVCache
from ..phases.models import require_loaded

__all__ = ["TransferHeader", "Packet", "make_header", "check", "pack", "model_layer_dims"]


@dataclass(frozen=True)
class TransferHeader:
    """What the receiver must know before it accepts a cache. ``seq_len`` is the padded length of the batch's
    grid, ``lengths`` the real tokens per row, ``first_tokens`` the tokens the prefill side sampled (one per
    row). ``layer_dims``: per layer ``(kv_heads, k_dim, v_dim, window)``, window 0 for full attention (empty:
    every layer ``(kv_heads, head_dim, head_dim, 0)``); ``kv_heads`` and ``head_dim`` are layer 0's."""

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
    layer_dims: tuple[tuple[int, int, int, int], ...] = ()

    def __post_init__(self) -> None:
        """Every field has the type it names (a tampered or garbled header fails here, naming the field)."""
        for name in ("model_id", "dtype"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"header {name} {getattr(self, name)!r} is not a string")
        for name in ("layers", "kv_heads", "head_dim", "batch", "seq_len"):
            if not _is_int(getattr(self, name)):
                raise ValueError(f"header {name} {getattr(self, name)!r} is not an integer")
        if not 0 <= self.layers <= 1 << 16:
            raise ValueError(f"header layers {self.layers!r} is not a layer count")
        for name in ("lengths", "first_tokens", "request_ids"):
            value = getattr(self, name)
            if not isinstance(value, (tuple, list)) or not all(map(_is_int, value)):
                raise ValueError(f"header {name} {value!r:.100} is not a list of integers")
            object.__setattr__(self, name, tuple(value))
        dims = self.layer_dims or ((self.kv_heads, self.head_dim, self.head_dim, 0),) * self.layers
        if not isinstance(dims, (tuple, list)) or not all(
                isinstance(d, (tuple, list)) and len(d) == 4 and all(map(_is_int, d)) for d in dims):
            raise ValueError(f"header layer_dims {dims!r:.100} is not a list of (kv_heads, k_dim, v_dim, window) "
                             f"integers")
        object.__setattr__(self, "layer_dims", tuple(tuple(int(x) for x in d) for d in dims))

    def layer_len(self, i: int) -> int:
        """Positions layer ``i`` carries: ``seq_len``, or at most ``window - 1`` for a sliding layer."""
        window = self.layer_dims[i][3]
        return self.seq_len if not window else min(self.seq_len, window - 1)

    @property
    def windows(self) -> tuple[int | None, ...]:
        """Per layer the sliding window, None for full attention (as :attr:`KVCache.windows`)."""
        return tuple(d[3] or None for d in self.layer_dims)

    def tensor_shapes(self) -> list[tuple[int, int, int, int]]:
        """Shapes of the payload's tensors in wire order ``K_0, V_0, K_1, V_1, ...``."""
        out = []
        for i, (heads, k_dim, v_dim, _) in enumerate(self.layer_dims):
            n = self.layer_len(i)
            out += [(self.batch, heads, n, k_dim), (self.batch, heads, n, v_dim)]
        return out

    def tensor_nbytes(self) -> list[int]:
        """Bytes of each payload tensor, in wire order.

        Raises:
            ValueError: ``dtype`` is not a torch dtype name.
        """
        if not isinstance(self.dtype, str) or dtypes.ALIASES.get(self.dtype) not in dtypes.WIRE_DTYPES:
            raise ValueError(f"header dtype {self.dtype!r} is not a torch dtype a cache can have")
        element = int(dtypes.element_bytes(self.dtype))
        return [b * h * n * d * element for b, h, n, d in self.tensor_shapes()]

    def segment_sizes(self, segments: int) -> list[int]:
        """Bytes of each payload message: ``[nbytes]`` (one), one per K/V tensor (``2 x layers``), or one per
        layer (K and V of the layer back to back). Raises ValueError for another count."""
        tensors = self.tensor_nbytes()
        if segments == 1:
            return [sum(tensors)]
        if segments == len(tensors):
            return tensors
        if segments == self.layers:
            return [tensors[2 * i] + tensors[2 * i + 1] for i in range(self.layers)]
        raise ValueError(f"{segments} segments for a cache of {self.layers} layers")

    def possible(self, segments: int) -> bool:
        """The header describes a cache that can exist, sent in a segment count the wire protocol uses."""
        layers = self.layers
        if self.dtype not in dtypes.WIRE_DTYPES or min(layers, self.batch, self.kv_heads, self.head_dim) < 1 or \
                self.seq_len < 1 or len(self.lengths) != self.batch or segments not in (1, layers, 2 * layers) \
                or any(not 1 <= n <= self.seq_len for n in self.lengths) or len(self.layer_dims) != layers:
            return False
        return all(len(d) == 4 and min(d[:3]) >= 1 and (d[3] == 0 or d[3] >= 2) for d in self.layer_dims)

    @property
    def nbytes(self) -> int:
        """Bytes of keys and values the header announces (padding included; sliding layers at most their
        window): the sum over layers of batch x kv_heads x positions x (k_dim + v_dim) x element size.

        Raises:
            ValueError: ``dtype`` is not a torch dtype name.
        """
        return sum(self.tensor_nbytes())

    def to_bytes(self) -> bytes:
        """JSON encoding (to send ahead of the tensors over torch.distributed or a socket)."""
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "TransferHeader":
        """The header :meth:`to_bytes` wrote. Raises ValueError for bytes that hold no header (not JSON, not an
        object, missing or unknown fields, a field of the wrong type)."""
        try:
            d = json.loads(bytes(data).decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"not a KV transfer header (not JSON text: {err})") from None
        names = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.default is MISSING}
        if not isinstance(d, dict) or not required <= set(d) <= names:
            got = sorted(d) if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"not a KV transfer header: fields {got}, expected {sorted(names)}")
        d = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return cls(**d)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass
class Packet:
    """A header and the cache it describes, as handed from the prefill side to the decode side."""

    header: TransferHeader
    cache: KVCache


def make_header(cache: KVCache, first_tokens=None, request_ids=None) -> TransferHeader:
    """The header describing ``cache`` (``first_tokens``/``request_ids``: one per row, optional)."""
    dims = tuple((k.shape[1], k.shape[3], v.shape[3], w or 0) for k, v, w in zip(cache.keys, cache.values,
                                                                                   cache.windows))
    return TransferHeader(cache.model_id, dtypes.name_of(cache.dtype), cache.num_layers, dims[0][0], dims[0][1],
                          cache.batch_size, cache.seq_len, tuple(int(x) for x in cache.lengths.tolist()),
                          tuple(int(t) for t in (first_tokens if first_tokens is not None else ())),
                          tuple(int(i) for i in (request_ids if request_ids is not None else ())), dims)


def model_layer_dims(lm) -> tuple[tuple[int, int, int, int], ...]:
    """``layer_dims`` of the caches model ``lm`` makes (from its measured geometry)."""
    return tuple((layer.kv_heads, layer.k_dim, layer.v_dim, layer.window or 0) for layer in lm.geometry.per_layer)


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
    lm = require_loaded(lm, "check()")
    if not isinstance(header, TransferHeader):
        raise TypeError(f"check() takes a TransferHeader (make_header(cache)), got {type(header).__name__}")
    if cache is not None and not isinstance(cache, KVCache):
        raise TypeError(f"check() takes the cache as a splitlab.KVCache or None, got {type(cache).__name__}")
    dims = model_layer_dims(lm)
    want = dict(model_id=lm.model_id, dtype=dtypes.name_of(lm.dtype), layers=lm.geometry.layers,
                kv_heads=dims[0][0], head_dim=dims[0][1])
    problems = [f"{k}: sent {getattr(header, k)!r}, receiver expects {v!r}" for k, v in want.items()
                if getattr(header, k) != v]
    if len(header.layer_dims) != header.layers:
        problems.append(f"layer_dims: {len(header.layer_dims)} entries for a header of {header.layers} layers")
    if header.layers == len(dims) and header.layer_dims != dims:
        bad = [i for i, (a, b) in enumerate(zip(header.layer_dims, dims)) if a != b]
        problems += [f"layer {i} (kv_heads, k_dim, v_dim, window): sent {header.layer_dims[i]}, receiver expects "
                     f"{dims[i]}" for i in bad[:3]] + ([f"... and {len(bad) - 3} more layers"] if len(bad) > 3 else [])
    if cache is not None:
        try:
            cache.check()
        except CacheMismatchError as err:
            problems.append(str(err))
        got = make_header(cache)
        problems += [f"{k}: header says {getattr(header, k)!r}, tensors have {getattr(got, k)!r}"
                     for k in ("model_id", "dtype", "layers", "layer_dims", "batch", "seq_len", "lengths")
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
