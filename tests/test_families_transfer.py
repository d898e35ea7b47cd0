"""Across two processes (one Peer for the whole module): caches of a sliding-window family, mixed sliding/global
families and an MLA family cross the wire whole, layer by layer and streamed during prefill, and the tokens
decoded over there equal those decoded here. The child loads each model from the path it was saved to."""
from __future__ import annotations

import pytest
import torch

import splitlab as sl
from splitlab.transfer.header import check, make_header
from splitlab.transfer.peer import Peer

from tiny_families import PROMPTS, loaded, saved_path

N_NEW = 6
CROSS = ["mistral-sw", "gemma3", "gemma2", "deepseek-v3"]  # all windowed, mixed (sdpa), mixed (eager), MLA


@pytest.fixture(scope="module")
def peer():
    with Peer(timeout_s=120) as p:
        yield p


@pytest.mark.parametrize("family", CROSS)
def test_tokens_equal_after_a_cross_process_transfer(peer, family):
    lm, path = loaded(family), saved_path(family)
    pre = sl.prefill(lm, PROMPTS)
    here = sl.generate(lm, PROMPTS, N_NEW).tokens
    assert peer.decode(pre.cache, pre.logits.argmax(-1).tolist(), N_NEW, model=path) == here
    for mode in ("whole", "layerwise"):
        r = peer.transfer(pre.cache, model=path, mode=mode)
        assert r["nbytes"] == pre.cache.nbytes
    back, _ = peer.echo(pre.cache)
    assert back.cache.windows == pre.cache.windows
    assert all(torch.equal(a, b) for a, b in zip(pre.cache.keys + pre.cache.values,
                                                 back.cache.keys + back.cache.values))


@pytest.mark.parametrize("family", ["mistral-sw", "gemma3"])
def test_streaming_during_prefill_sends_each_layer_what_it_keeps(peer, family):
    lm, path = loaded(family), saved_path(family)
    r = peer.stream(lm, PROMPTS, model=path, then="decode", n_tokens=N_NEW)
    assert r["tokens"] == sl.generate(lm, PROMPTS, N_NEW).tokens
    ref = sl.prefill(lm, PROMPTS).cache
    assert r["prefill"].cache.layer_lengths == ref.layer_lengths
    assert all(torch.equal(a, b) for a, b in zip(ref.keys + ref.values, r["prefill"].cache.keys +
                                                 r["prefill"].cache.values))
    assert r["receiver"]["segments"] == lm.geometry.layers


def test_a_windowed_cache_is_refused_by_a_full_attention_receiver():
    """Same heads and widths, different windows: the header names the layers that differ."""
    sliding, full = loaded("mistral-sw"), loaded("llama")
    header = make_header(sl.prefill(sliding, PROMPTS).cache)
    assert header.nbytes < make_header(sl.prefill(full, PROMPTS).cache).nbytes  # 7 positions, not 13
    with pytest.raises(sl.CacheMismatchError, match=r"layer 0 \(kv_heads, k_dim, v_dim, window\): sent "
                                                    r"\(2, 8, 8, 8\), receiver expects \(2, 8, 8, 0\)"):
        check(header, full)
