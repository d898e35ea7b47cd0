"""KV transfer between two local processes over gloo (this pytest process is rank 0, one spawned child rank 1).

Round trips are bit-exact for several dtypes and architectures, a receiver built for another model or dtype
refuses the header (and the link still works afterwards), and tokens decoded in the other process after the
transfer equal tokens decoded here. The model-free parts of the wire format are tested in-process first.
"""
from __future__ import annotations

import socket

import pytest
import torch

import splitlab as sl
from splitlab.transfer import link as L, wire as W
from splitlab.transfer.group import Mailbox, make_store
from splitlab.kvcache import CacheMismatchError
from splitlab.transfer.peer import Peer
from splitlab.transfer.header import make_header

from conftest import cached_model

ARCHS = ["tiny", "tiny-gpt2", "tiny-bigcode-mqa"]  # Llama GQA, GPT-2 MHA, GPTBigCode MQA
DTYPES = ["float32", "bfloat16", "float16"]
ROWS = [list(b"The prefill/decode split"), list(b"KV cache")]  # two rows of different lengths: left padding


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bytes of a tensor, so that equality means bit-exact (NaN and -0.0 included)."""
    return t.contiguous().view(torch.uint8)


def assert_same_cache(a: sl.KVCache, b: sl.KVCache) -> None:
    assert a.model_id == b.model_id and a.shape == b.shape and a.dtype == b.dtype
    assert torch.equal(a.attention_mask, b.attention_mask)
    for x, y in zip(a.keys + a.values, b.keys + b.values):
        assert torch.equal(bits(x), bits(y))


# --- in-process: layout, header, plans, ports, mailbox ----------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_flat_layout_round_trips_and_views_share_one_buffer(dtype):
    lm = cached_model("tiny", dtype)
    cache = sl.prefill(lm, ROWS).cache
    flat = W.pack_flat(cache)
    assert flat.dtype == torch.uint8 and flat.numel() == cache.nbytes == make_header(cache).nbytes
    back = W.unpack_flat(flat, make_header(cache))
    assert_same_cache(cache, back)
    assert all(t.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr() for t in back.keys + back.values)
    assert W.cache_plan(back)["segments"] == 1  # a cache that came off the wire is sent as one message
    assert W.cache_plan(cache) == dict(nbytes=cache.nbytes, segments=2 * lm.geometry.layers, mode="whole", batch=2)
    assert W.cache_plan(cache, "layerwise")["segments"] == lm.geometry.layers


@pytest.mark.parametrize("name", ARCHS + ["tiny-qwen2", "tiny-mistral"])
def test_prefill_into_a_send_buffer_is_bit_identical_and_one_message(name):
    lm = cached_model(name)
    plain, flat = sl.prefill(lm, ROWS), L.prefill_flat(lm, ROWS)
    assert_same_cache(plain.cache, flat.cache)
    assert torch.equal(plain.logits, flat.logits)
    assert W.cache_plan(flat.cache)["segments"] == 1


def test_garbage_is_not_taken_for_a_header():
    with pytest.raises(W.ProtocolError, match="no splitlab KV header"):
        W._parse_header(torch.zeros(W.HEADER_BYTES, dtype=torch.uint8), src=1)


def test_a_port_in_use_is_replaced_by_a_free_one():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        store = make_store(port=taken, timeout_s=5)
        assert store.port != taken


def test_mailbox_delivers_json_messages_in_order():
    store = make_store(timeout_s=60)  # limits, not waits: each returns as soon as the message is there
    box = Mailbox(store, 0, "test")
    try:
        box.send(0, kind="a", n=1)
        box.send(0, kind="b", items=[[1, 2]])
        assert box.get(timeout=60) == dict(kind="a", n=1, src=0)
        assert box.get(timeout=60)["items"] == [[1, 2]]
        assert box.get(timeout=0.05) is None
    finally:
        box.close()


# --- two processes ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def peer():
    with Peer(timeout_s=60) as p:
        yield p


@pytest.mark.parametrize("name", ARCHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_is_bit_exact(peer, name, dtype):
    lm = cached_model(name, dtype)
    cache = sl.prefill(lm, ROWS).cache
    flat = L.prefill_flat(lm, ROWS).cache
    for c, mode, segments in ((cache, "whole", "tensors"), (cache, "whole", "flat"), (cache, "layerwise", "tensors"),
                              (flat, "whole", "tensors")):
        back, stats = peer.echo(c, first_tokens=[11, 12], mode=mode, segments=segments)
        assert stats["mode"] == mode
        assert back.header == make_header(cache, [11, 12])
        assert_same_cache(cache, back.cache)


def test_transfer_reports_bytes_and_time(peer, lm):
    cache = sl.prefill(lm, ROWS).cache
    r = peer.transfer(cache, model="tiny")
    assert r["nbytes"] == cache.nbytes and r["seconds"] > 0 and r["gbps"] > 0
    assert r["send"].segments == 2 * lm.geometry.layers and r["receiver"]["mode"] == "whole"
    assert peer.raw(cache.nbytes) > 0


@pytest.mark.parametrize("receiver, fields", [
    (("tiny-mha", "float32"), ["model_id", "kv_heads"]),
    (("tiny", "bfloat16"), ["model_id", "dtype"]),
    (("tiny-gpt2", "float32"), ["model_id", "layers"]),
])
def test_a_receiver_of_another_model_refuses_the_header_and_decodes_nothing(peer, lm, receiver, fields):
    cache = sl.prefill(lm, ROWS).cache
    with pytest.raises(CacheMismatchError) as err:
        peer.transfer(cache, model=receiver[0], dtype=receiver[1])
    for f in fields:
        assert f"{f}: sent" in str(err.value)
    with pytest.raises(CacheMismatchError, match="rejected before decoding"):
        peer.decode(cache, [1, 2], 4, model=receiver[0], dtype=receiver[1])
    assert peer.transfer(cache, model="tiny")["nbytes"] == cache.nbytes  # the link is still in step


@pytest.mark.parametrize("name", ARCHS)
def test_tokens_decoded_after_the_transfer_equal_local_tokens(peer, name):
    lm = cached_model(name)
    pre = sl.prefill(lm, ROWS)
    got = peer.decode(pre.cache, pre.logits.argmax(-1).tolist(), 6, model=name)
    assert got == sl.generate(lm, ROWS, max_new_tokens=6).tokens  # the same batch, decoded here
    for row in ROWS:  # and one request alone, the path of the serving cluster
        single = sl.prefill(lm, [row])
        assert peer.decode(single.cache, [int(single.logits[0].argmax())], 6, model=name) == \
            sl.generate(lm, [row], max_new_tokens=6).tokens


@pytest.mark.parametrize("name", ["tiny", "tiny-gpt2"])
def test_layerwise_streaming_during_prefill_moves_the_same_cache(peer, name):
    lm = cached_model(name)
    r = peer.stream(lm, ROWS, model=name, then="decode", n_tokens=5)
    assert r["tokens"] == sl.generate(lm, ROWS, max_new_tokens=5).tokens
    assert_same_cache(sl.prefill(lm, ROWS).cache, r["prefill"].cache)
    stats = r["stats"]
    assert stats.mode == "layerwise" and len(stats.layer_s) == lm.geometry.layers
    assert stats.layer_s == sorted(stats.layer_s) and 0 < stats.compute_s <= r["total_s"]
    assert r["receiver"]["segments"] == lm.geometry.layers
