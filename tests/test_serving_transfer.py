"""splitlab.transfer: headers that catch a wrong receiver before any decode, and bit-exact copies."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import splitlab as sl
from splitlab import transfer as T
from splitlab.kvcache import CacheMismatchError

from conftest import cached_model


@pytest.fixture(scope="module")
def prefilled(lm):
    return sl.prefill(lm, [[1, 2, 3, 4, 5], [9, 8, 7]])


def test_header_describes_the_cache_and_round_trips_as_bytes(lm, prefilled):
    packet = T.pack(prefilled.cache, first_tokens=[11, 12], request_ids=[3, 4])
    h = packet.header
    assert (h.model_id, h.dtype, h.layers, h.kv_heads, h.head_dim) == (lm.model_id, "float32", 4, 2, 32)
    assert (h.batch, h.seq_len, h.lengths, h.first_tokens) == (2, 5, (5, 3), (11, 12))
    assert h.nbytes == prefilled.cache.nbytes
    assert T.TransferHeader.from_bytes(h.to_bytes()) == h
    T.check(h, lm, prefilled.cache)  # the right receiver accepts it


@pytest.mark.parametrize("receiver, fields", [
    (("tiny-mha", "float32"), ["model_id", "kv_heads"]),
    (("tiny", "bfloat16"), ["model_id", "dtype"]),
    (("tiny-qwen2", "float32"), ["model_id"]),
])
def test_a_different_model_or_dtype_is_refused_with_every_mismatch_named(prefilled, receiver, fields):
    other = cached_model(*receiver)
    with pytest.raises(CacheMismatchError) as err:
        T.receive(T.pack(prefilled.cache), other)
    for f in fields:
        assert f"{f}: sent" in str(err.value)


def test_a_header_that_lies_about_the_tensors_is_refused(lm, prefilled):
    header = dataclasses.replace(T.make_header(prefilled.cache), lengths=(5, 5))
    with pytest.raises(CacheMismatchError, match="lengths: header says"):
        T.receive(T.Packet(header, prefilled.cache), lm)
    header = dataclasses.replace(T.make_header(prefilled.cache), first_tokens=(1,))
    with pytest.raises(CacheMismatchError, match="first_tokens"):
        T.check(header, lm)


@pytest.mark.parametrize("mode", ["whole", "layerwise"])
def test_copies_are_bit_exact_new_storage_and_measured(lm, prefilled, mode):
    seen = []
    received, stats = T.copy_cache(prefilled.cache, "cpu", mode=mode, on_layer=lambda i, s: seen.append(i))
    for a, b in zip(prefilled.cache.keys + prefilled.cache.values, received.keys + received.values):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()
    assert torch.equal(received.attention_mask, prefilled.cache.attention_mask)
    assert stats.nbytes == prefilled.cache.nbytes and stats.seconds > 0 and stats.method == "clone"
    assert (len(stats.layer_seconds), seen) == ((4, [0, 1, 2, 3]) if mode == "layerwise" else (0, []))
    with pytest.raises(ValueError):
        T.copy_cache(prefilled.cache, mode="streaming")


def test_decoding_from_a_received_cache_gives_the_same_tokens(lm, prefilled):
    tokens = prefilled.logits.argmax(-1)
    received, _ = T.receive(T.pack(prefilled.cache, tokens.tolist()), lm)
    local = sl.decode_step(lm, prefilled.cache, tokens)
    remote = sl.decode_step(lm, received, tokens)
    assert torch.equal(local.logits, remote.logits)


def test_cuda_without_an_index_is_the_current_gpu(monkeypatch):
    """A copy to "cuda" of a cache on "cuda:0" is a clone on that GPU, not a trip through pinned host memory (seen on
    an H200: "cuda" != "cuda:0", and a GPU is not its own peer)."""
    from splitlab.transfer.copy import _indexed, _method
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert _indexed(torch.device("cuda")) == torch.device("cuda", 0)
    assert _method(torch.device("cuda", 0), _indexed(torch.device("cuda")), via_host=False) == "clone"
    assert _method(torch.device("cuda", 0), _indexed(torch.device("cuda")), via_host=True) == "via-pinned-host"
    assert _indexed(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_paths_are_bit_exact():
    gpu = sl.load_model("tiny", device="cuda", dtype="bfloat16")
    cache = sl.prefill(gpu, [[1, 2, 3, 4]]).cache
    for device, via_host, method in [("cuda", False, "clone"), ("cuda", True, "via-pinned-host"),
                                     ("cpu", False, "gpu-to-host")]:
        received, stats = T.copy_cache(cache, device, via_host=via_host)
        assert stats.method == method
        assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(cache.keys, received.keys))
    back, stats = T.copy_cache(cache.to("cpu"), "cuda")
    assert stats.method == "host-to-gpu" and back.device.type == "cuda"
