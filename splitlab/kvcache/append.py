"""Appending to a KV cache in place: each layer keeps room for more positions, so a decode step writes one
position instead of copying the whole cache.

transformers' ``DynamicLayer`` appends by ``torch.cat``: every decode step allocates new key and value tensors
and copies every cached position into them, a memory traffic of the whole cache per step that grows with
batch x context (ch. 3 measures it as ``aten::cat``). Serving engines preallocate KV memory and write the new
token in place (vLLM's paged blocks, TensorRT-LLM's and SGLang's KV pools). :class:`AppendLayer` does the same in
the simplest form: one buffer per layer with room to grow, the cache a view of its filled part.

Old caches stay valid: a step writes only positions beyond everything handed out so far, and a layer extends only
a buffer it allocated itself, so a :class:`~splitlab.kvcache.KVCache` that is decoded twice (two branches from
one prefix) gets a fresh buffer the second time and never sees the other branch's tokens.
"""
from __future__ import annotations

import torch
from transformers.cache_utils import DynamicLayer

__all__ = ["AppendLayer", "appendable", "room_for"]

#: Positions of headroom a buffer gets beyond what it holds when it is (re)allocated, at least.
MIN_ROOM = 64


def room_for(positions: int) -> int:
    """Capacity (positions) of a buffer that must hold ``positions``: half as many again, at least
    :data:`MIN_ROOM` more, so a growing cache is copied O(log n) times in all instead of once per step."""
    return positions + max(MIN_ROOM, positions // 2)


class AppendLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``update`` writes new positions into a preallocated buffer.

    ``keys``/``values`` are always views ``[batch, kv_heads, :seq, head_dim]`` of the buffer (not contiguous
    once the buffer has spare room), so every reader of a transformers cache sees the usual tensors.
    """

    def __init__(self, keys: torch.Tensor | None = None, values: torch.Tensor | None = None) -> None:
        super().__init__()
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None
        if keys is not None:
            self.keys, self.values = keys, values
            self.device, self.is_initialized = keys.device, True

    def _owns_filled_part(self, new_positions: int, key_states: torch.Tensor, value_states: torch.Tensor) -> bool:
        """True when ``keys``/``values`` are the start of this layer's buffers, the buffers have room for
        ``new_positions`` more, and the new states fit them (batch, heads, head dims, dtype)."""
        if self._buffers is None:
            return False
        seq = self.keys.shape[-2]
        for held, buf, new in ((self.keys, self._buffers[0], key_states),
                               (self.values, self._buffers[1], value_states)):
            if (buf.shape[-2] < seq + new_positions or buf.shape[:2] != new.shape[:2] or buf.shape[-1] != new.shape[-1]
                    or buf.dtype != new.dtype or held.data_ptr() != buf.data_ptr() or held.stride() != buf.stride()):
                return False
        return True

    def crop(self, tokens_to_remove: int) -> None:
        """transformers' crop (drop the last positions), then give up the buffer: views of the longer cache may
        still be held elsewhere, and the next append must not overwrite the positions they show."""
        super().crop(tokens_to_remove)
        self._buffers = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        """Append ``key_states``/``value_states`` ``[batch, kv_heads, new, head_dim]`` (keys and values may have
        different head dims, as MLA's latent and RoPE key do); return the whole cache of this layer (views).
        Reallocates (one copy of what is held) only when the buffer is full or was never this layer's."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        seq, new = (self.keys.shape[-2] if self.keys.numel() else 0), key_states.shape[-2]
        if not self._owns_filled_part(new, key_states, value_states):
            room = room_for(seq + new)
            kb = key_states.new_empty((*key_states.shape[:2], room, key_states.shape[-1]))
            vb = value_states.new_empty((*value_states.shape[:2], room, value_states.shape[-1]))
            if seq:
                kb[:, :, :seq].copy_(self.keys)
                vb[:, :, :seq].copy_(self.values)
            self._buffers = (kb, vb)
        kb, vb = self._buffers
        kb[:, :, seq:seq + new].copy_(key_states)
        vb[:, :, seq:seq + new].copy_(value_states)
        self.keys, self.values = kb[:, :, :seq + new], vb[:, :, :seq + new]
        return self.keys, self.values

def appendable(cache):
    """``cache`` (a transformers ``DynamicCache``) with each plain ``DynamicLayer`` replaced by an
    :class:`AppendLayer` holding the same tensors; other layer kinds (sliding windows, ...) and layers that already
    append in place are kept. Returns the same object, so attributes set on it (splitlab's own marks) survive."""
    layers = getattr(cache, "layers", None)
    if layers is None:
        return cache
    for i, layer in enumerate(layers):
        if type(layer) is DynamicLayer and layer.is_initialized:
            layers[i] = AppendLayer(layer.keys, layer.values)
    return cache
