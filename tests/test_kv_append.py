"""Appending to the cache in place (kvcache/append.py): same tokens as transformers' generate, old caches never
change, two branches from one prefix stay apart, and the room grows; plus the device measurements the roofline
chapter compares a decode step with (phases/hardware.py)."""
from __future__ import annotations

import pytest
import torch

import splitlab as sl
from splitlab.kvcache.append import MIN_ROOM, AppendLayer, room_for
from splitlab.phases import hardware, profiling

from conftest import ARCH_PRESETS, cached_model


def _steps(lm, cache, token, n):
    tokens = []
    for _ in range(n):
        out = sl.decode_step(lm, cache, token)
        cache, token = out.cache, out.logits.argmax(-1)
        tokens.append(int(token[0]))
    return cache, tokens


@pytest.mark.parametrize("name", ARCH_PRESETS)
def test_tokens_match_transformers_generate_past_the_first_room(name):
    lm = cached_model(name)
    prompt = profiling.random_prompt(lm, 20, seed=3)
    n = MIN_ROOM + 30  # longer than the room the first step reserves: the buffer is reallocated at least once
    assert sl.generate(lm, [prompt], max_new_tokens=n).tokens[0] == sl.reference_generate(lm, prompt, n)


def test_a_decode_step_leaves_its_input_cache_unchanged(lm):
    pre = sl.prefill(lm, [profiling.random_prompt(lm, 12)])
    cache, _ = _steps(lm, pre.cache, pre.logits.argmax(-1), 3)
    before = cache.clone()
    after, _ = _steps(lm, cache, torch.tensor([7]), 5)
    assert after.seq_len == cache.seq_len + 5
    for x, y in zip((*cache.keys, *cache.values), (*before.keys, *before.values)):
        assert torch.equal(x, y)


def test_two_branches_from_one_prefix_do_not_see_each_other(lm):
    pre = sl.prefill(lm, [profiling.random_prompt(lm, 12)])
    prefix, _ = _steps(lm, pre.cache, pre.logits.argmax(-1), 2)
    a, tokens_a = _steps(lm, prefix, torch.tensor([5]), 6)
    b, tokens_b = _steps(lm, prefix, torch.tensor([9]), 6)  # decoded again from the same cache
    fresh, tokens_fresh = _steps(lm, prefix.clone(), torch.tensor([5]), 6)  # branch a, from its own copy
    assert tokens_a == tokens_fresh
    assert torch.equal(a.keys[0], fresh.keys[0]) and not torch.equal(a.keys[0], b.keys[0])


def test_batched_caches_select_and_merge_after_in_place_steps(lm):
    pre = sl.prefill(lm, ["one", "a longer prompt"])
    cache, _ = _steps(lm, pre.cache, pre.logits.argmax(-1), 3)
    alone = sl.prefill(lm, ["a longer prompt"])
    row, _ = _steps(lm, cache.select([1]), torch.tensor([11]), 2)
    merged = sl.KVCache.merge([cache.select([0]), cache.select([1])])
    assert merged.seq_len == cache.seq_len and torch.equal(merged.attention_mask, cache.attention_mask)
    assert row.seq_len == alone.cache.seq_len + 5


def test_the_layer_reserves_room_and_reports_only_what_it_holds():
    layer = AppendLayer(torch.zeros(2, 3, 10, 4), torch.zeros(2, 3, 10, 4))
    k, v = layer.update(torch.ones(2, 3, 1, 4), torch.ones(2, 3, 1, 4))
    assert k.shape == (2, 3, 11, 4) and layer._buffers[0].shape[2] == room_for(11) == 11 + MIN_ROOM
    first = layer._buffers[0]
    layer.update(torch.ones(2, 3, 1, 4), torch.ones(2, 3, 1, 4))
    assert layer._buffers[0] is first, "a step with room left writes in place"
    assert room_for(1000) == 1500
    assert torch.equal(layer.keys[:, :, 10:], torch.ones(2, 3, 2, 4))


def test_memory_bandwidth_kinds_and_bad_input():
    for kind in ("copy", "read"):
        assert hardware.measure_memory_bandwidth("cpu", nbytes=2 ** 20, repeats=2, kind=kind) > 1e8
    with pytest.raises(ValueError, match="kind"):
        hardware.measure_memory_bandwidth("cpu", nbytes=2 ** 20, kind="write")
    with pytest.raises(ValueError, match="repeats"):
        hardware.measure_memory_bandwidth("cpu", nbytes=2 ** 20, repeats=0)
    with pytest.raises(ValueError, match="statistic"):
        hardware.measure_memory_bandwidth("cpu", nbytes=2 ** 20, statistic="mean")


def test_last_level_cache_is_read_from_the_machine_or_falls_back(monkeypatch):
    size, source = hardware.last_level_cache("cpu")
    assert size >= 2 ** 16 and source
    monkeypatch.setattr(hardware.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(hardware.os, "sysconf", lambda name: (_ for _ in ()).throw(ValueError(name)))
    assert hardware.last_level_cache("cpu") == (hardware.FALLBACK_LLC_BYTES, "assumed (the machine does not report it)")
    assert hardware._size_bytes("32768K") == 32 * 2 ** 20 and hardware._size_bytes("512") == 512


def test_weight_bytes_read_counts_an_untied_embedding_as_one_row():
    tied, untied = cached_model("tiny-gpt2"), cached_model("tiny")
    assert profiling.weight_bytes_read(tied) == tied.weight_bytes
    table = untied.model.get_input_embeddings().weight
    assert profiling.weight_bytes_read(untied) == untied.weight_bytes - table.numel() * table.element_size()


def test_the_memory_bound_preset_exceeds_this_machines_last_level_cache():
    cfg = sl.sizing.resolve_config("stories42m")
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_key_value_heads"]) == (512, 8, 8)
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    params = v * h + cfg["num_hidden_layers"] * (4 * h * h + 3 * h * i + 2 * h) + h  # tied output layer
    assert 41e6 < params < 42.5e6  # "42M"
    assert params * 4 > hardware.last_level_cache("cpu")[0]


def test_keys_and_values_of_different_head_dims_append_in_place():
    """MLA layers keep a latent as keys and a RoPE key as values, of different widths."""
    layer = AppendLayer(torch.zeros(1, 1, 5, 8), torch.zeros(1, 1, 5, 4))
    for step in range(3):
        k, v = layer.update(torch.full((1, 1, 1, 8), step + 1.0), torch.full((1, 1, 1, 4), -(step + 1.0)))
    assert k.shape == (1, 1, 8, 8) and v.shape == (1, 1, 8, 4)
    assert k[0, 0, 5:, 0].tolist() == [1.0, 2.0, 3.0] and v[0, 0, 5:, 0].tolist() == [-1.0, -2.0, -3.0]


def test_a_cropped_layer_never_overwrites_what_a_longer_view_shows():
    layer = AppendLayer(torch.zeros(1, 1, 4, 2), torch.zeros(1, 1, 4, 2))
    longer, _ = layer.update(torch.ones(1, 1, 2, 2), torch.ones(1, 1, 2, 2))  # 6 positions, the last two ones
    layer.crop(-2)
    layer.update(torch.full((1, 1, 1, 2), 7.0), torch.full((1, 1, 1, 2), 7.0))
    assert longer[0, 0, 4:, 0].tolist() == [1.0, 1.0] and layer.keys[0, 0, 4:, 0].tolist() == [7.0]
