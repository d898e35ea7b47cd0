"""KV-cache quantization: fewer bytes per cached element, for the memory a cache holds and the link it crosses.

:func:`quantize` turns a :class:`~splitlab.kvcache.KVCache` into a :class:`QuantizedKV` of 8-bit elements plus
scales; :meth:`QuantizedKV.dequantize` gives back a KVCache of the original dtype that any model of that identity
decodes from. Two schemes:

- ``"int8"``: symmetric int8, ``q = round(x / s)`` clipped to [-127, 127], ``s = max|x| / 127``;
- ``"fp8"``: float8 e4m3 (``torch.float8_e4m3fn``, largest finite value 448), ``q = fp8(x / s)``, ``s = max|x| / 448``.

Where the scales are taken follows KIVI (Liu et al., "KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV
Cache", ICML 2024): keys per channel (one scale per row, KV head and head_dim channel, over the cached positions:
a few channels of the keys carry large outliers) and values per token (one scale per row, head and position).
Scales are stored in float16, as the paper's kernels do.

Bytes per cached token and KV head: ``2 x head_dim`` bytes of elements + 2 bytes of value scale, against
``2 x head_dim x s`` at ``s`` bytes per element unquantized: 0.52x of fp16 at head_dim 32 (and 0.26x of fp32); the
per-channel key scales add ``2 x head_dim`` bytes per row and head for the whole cache.

This module only uses KVCache's public fields (keys, values, attention_mask, model_id).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .cache import KVCache

__all__ = ["QuantizedKV", "quantize", "SCHEMES", "relative_error"]

#: scheme -> (element dtype, largest representable magnitude used for the scale)
SCHEMES = {"int8": (torch.int8, 127.0), "fp8": (torch.float8_e4m3fn, 448.0)}
SCALE_DTYPE = torch.float16
_TINY = 1e-8  # scale floor: an all-zero channel (a padding column) quantizes to zeros, not NaN


@dataclass
class QuantizedKV:
    """A quantized KV cache.

    Attributes:
        keys, values: per layer, 8-bit tensors ``[batch, kv_heads, seq, head_dim]`` (int8 or float8_e4m3fn).
        key_scales: per layer ``[batch, kv_heads, 1, head_dim]`` float16 (per channel).
        value_scales: per layer ``[batch, kv_heads, seq, 1]`` float16 (per token).
        attention_mask, model_id: as in the source :class:`KVCache`.
        dtype: the source cache's dtype (what :meth:`dequantize` returns).
        scheme: "int8" or "fp8".
    """

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    key_scales: list[torch.Tensor]
    value_scales: list[torch.Tensor]
    attention_mask: torch.Tensor
    model_id: str
    dtype: torch.dtype
    scheme: str

    @property
    def nbytes(self) -> int:
        """Bytes of the quantized elements and their scales (what a transfer moves; the mask is not counted,
        as :attr:`KVCache.nbytes` does not count it)."""
        return sum(t.numel() * t.element_size()
                   for t in (*self.keys, *self.values, *self.key_scales, *self.value_scales))

    def dequantize(self) -> KVCache:
        """A :class:`KVCache` of the original dtype and model identity: ``q x s`` per element."""
        keys = [(q.to(torch.float32) * s.to(torch.float32)).to(self.dtype) for q, s in zip(self.keys, self.key_scales)]
        values = [(q.to(torch.float32) * s.to(torch.float32)).to(self.dtype)
                  for q, s in zip(self.values, self.value_scales)]
        return KVCache(keys, values, self.attention_mask.clone(), self.model_id)

    def to_bytes(self) -> torch.Tensor:
        """Every element and scale packed into one contiguous uint8 tensor of :attr:`nbytes` bytes, in the order
        keys, values, key scales, value scales, layer by layer (the buffer one send moves)."""
        parts = [t.contiguous().reshape(-1).view(torch.uint8)
                 for t in (*self.keys, *self.values, *self.key_scales, *self.value_scales)]
        return torch.cat(parts)

    def from_bytes(self, buffer: torch.Tensor) -> "QuantizedKV":
        """The inverse of :meth:`to_bytes`: a QuantizedKV with this one's shapes, read from ``buffer``.

        Raises:
            ValueError: ``buffer`` is not a uint8 tensor of exactly :attr:`nbytes` bytes.
        """
        if not isinstance(buffer, torch.Tensor) or buffer.dtype != torch.uint8 or buffer.numel() != self.nbytes:
            raise ValueError(f"need a uint8 tensor of {self.nbytes:,} bytes, got "
                             f"{getattr(buffer, 'dtype', type(buffer).__name__)} of "
                             f"{getattr(buffer, 'numel', lambda: '?')()} elements")
        out, pos = [], 0
        for t in (*self.keys, *self.values, *self.key_scales, *self.value_scales):
            n = t.numel() * t.element_size()
            out.append(buffer[pos:pos + n].clone().view(t.dtype).reshape(t.shape))
            pos += n
        L = len(self.keys)
        return QuantizedKV(out[:L], out[L:2 * L], out[2 * L:3 * L], out[3 * L:], self.attention_mask.clone(),
                           self.model_id, self.dtype, self.scheme)

    def __repr__(self) -> str:
        return (f"QuantizedKV({self.scheme}, layers={len(self.keys)}, shape={tuple(self.keys[0].shape)}, "
                f"nbytes={self.nbytes:,}, from {str(self.dtype).replace('torch.', '')}, model={self.model_id!r})")


def _quantize(x: torch.Tensor, dim: int, scheme: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(8-bit elements, float16 scales) of ``x`` with one scale per slice along every dimension but ``dim``."""
    qdtype, qmax = SCHEMES[scheme]
    x32 = x.to(torch.float32)
    scale = (x32.abs().amax(dim=dim, keepdim=True) / qmax).clamp(min=_TINY).to(SCALE_DTYPE)
    y = x32 / scale.to(torch.float32)
    if scheme == "int8":
        q = y.round().clamp(-qmax, qmax).to(qdtype)
    else:
        q = y.clamp(-qmax, qmax).to(qdtype)
    return q, scale


def quantize(cache: KVCache, scheme: str = "int8") -> QuantizedKV:
    """Quantize every layer's keys per channel and values per token (KIVI's layout), see the module docstring.

    Args:
        cache: any :class:`KVCache` (padded rows included: their zero slots stay zero).
        scheme: "int8" or "fp8".

    Returns:
        A :class:`QuantizedKV`; ``.dequantize()`` is the cache to decode from, ``.nbytes`` the bytes to move.

    Raises:
        TypeError: ``cache`` is not a KVCache. ValueError: an unknown scheme, or a cache that is not floating point.
    """
    if not isinstance(cache, KVCache):
        raise TypeError(f"quantize needs a splitlab KVCache, got {type(cache).__name__}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {sorted(SCHEMES)}, got {scheme!r}")
    if not cache.keys[0].is_floating_point():
        raise ValueError(f"the cache is already {cache.keys[0].dtype}: quantize a floating-point cache")
    keys, key_scales = zip(*(_quantize(k, 2, scheme) for k in cache.keys))      # over positions: per channel
    values, value_scales = zip(*(_quantize(v, 3, scheme) for v in cache.values))  # over channels: per token
    return QuantizedKV(list(keys), list(values), list(key_scales), list(value_scales), cache.attention_mask.clone(),
                       cache.model_id, cache.keys[0].dtype, scheme)


def relative_error(cache: KVCache, other: KVCache) -> float:
    """``||a - b|| / ||a||`` over every key and value element of two caches of the same shapes (real slots and
    padding alike): how far a dequantized cache is from the original.

    Raises:
        ValueError: caches of different layer counts or shapes.
    """
    if cache.num_layers != other.num_layers or any(
            a.shape != b.shape for a, b in zip(cache.keys + cache.values, other.keys + other.values)):
        raise ValueError("relative_error compares caches of the same layers and shapes")
    num = sum(float((a.float() - b.float()).pow(2).sum()) for a, b in zip(cache.keys + cache.values,
                                                                          other.keys + other.values))
    den = sum(float(a.float().pow(2).sum()) for a in cache.keys + cache.values)
    return (num / den) ** 0.5 if den > 0 else 0.0
