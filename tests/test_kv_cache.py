"""KVCache: copies, dtype changes, select/split/merge for continuous batching, and the transformers bridge."""
from __future__ import annotations

import pytest
import torch

import splitlab as sl
from splitlab import CacheMismatchError, KVCache

from conftest import PROMPTS, cached_model


@pytest.fixture(scope="module")
def batch_prefill(lm):
    return sl.prefill(lm, PROMPTS)


def greedy_from(lm, cache, logits, n):
    """Greedy tokens per row for ``n`` steps continuing from a cache and its last logits."""
    tokens = [[] for _ in range(cache.batch_size)]
    for step in range(n):
        nxt = logits.argmax(dim=-1)
        for b, t in enumerate(nxt.tolist()):
            tokens[b].append(t)
        if step < n - 1:
            out = sl.decode_step(lm, cache, nxt)
            cache, logits = out.cache, out.logits
    return tokens


def assert_same_cache(a: KVCache, b: KVCache, real_slots_only: bool = False):
    """Bit-equal caches; with ``real_slots_only`` the left-padding slots (masked, any content) are ignored."""
    assert a.model_id == b.model_id
    assert torch.equal(a.attention_mask, b.attention_mask)
    keep = a.attention_mask.bool()[:, None, :, None]
    for x, y in zip((*a.keys, *a.values), (*b.keys, *b.values)):
        assert x.shape == y.shape
        if real_slots_only:
            x, y = x.masked_fill(~keep, 0), y.masked_fill(~keep, 0)
        assert torch.equal(x, y)


def test_clone_is_independent_storage(batch_prefill):
    cache = batch_prefill.cache
    copy = cache.clone()
    assert_same_cache(cache, copy)
    for x, y in zip((*cache.keys, *cache.values, cache.attention_mask),
                    (*copy.keys, *copy.values, copy.attention_mask)):
        assert x.untyped_storage().data_ptr() != y.untyped_storage().data_ptr()
    before = cache.keys[0].clone()
    copy.keys[0].add_(1.0)
    copy.attention_mask[0, -1] = 0
    assert torch.equal(cache.keys[0], before)
    assert cache.attention_mask[0, -1] == 1


def test_decode_step_leaves_its_input_cache_unchanged(lm, batch_prefill):
    cache = batch_prefill.cache
    snapshot = cache.clone()
    out = sl.decode_step(lm, cache, batch_prefill.logits.argmax(-1))
    assert out.cache.seq_len == cache.seq_len + 1
    assert_same_cache(cache, snapshot)
    # the first seq_len positions of the new cache are the old ones
    torch.testing.assert_close(out.cache.keys[0][:, :, :-1], cache.keys[0], atol=0, rtol=0)


def test_to_dtype_changes_dtype_and_model_id(lm, batch_prefill):
    cache = batch_prefill.cache
    half = cache.to(dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16 and all(v.dtype == torch.bfloat16 for v in half.values)
    assert half.nbytes * 2 == cache.nbytes
    assert half.model_id != cache.model_id and half.model_id.endswith("|bfloat16")
    assert cache.dtype == torch.float32  # the original is untouched
    with pytest.raises(CacheMismatchError, match="not by this model"):
        sl.decode_step(lm, half, batch_prefill.logits.argmax(-1))
    # a bf16 model of the same preset accepts it
    assert half.model_id == cached_model("tiny", "bfloat16").model_id
    # and back to float32: the identity (and so the decode) comes back
    back = half.to(dtype=torch.float32)
    assert back.model_id == cache.model_id
    sl.decode_step(lm, back, batch_prefill.logits.argmax(-1))
    assert cache.to(dtype=torch.float32).model_id == cache.model_id


def test_select_removes_padding_and_matches_prefill_alone(lm, batch_prefill):
    cache = batch_prefill.cache
    lengths = [len(lm.encode(p)) for p in PROMPTS]
    assert cache.lengths.tolist() == lengths
    for b, part in enumerate(cache.split()):
        assert part.batch_size == 1 and part.seq_len == lengths[b]
        assert int(part.attention_mask.sum()) == lengths[b]
        alone = sl.prefill(lm, PROMPTS[b]).cache
        for x, y in zip((*part.keys, *part.values), (*alone.keys, *alone.values)):
            torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-5)
    two = cache.select([2, 0])
    assert two.seq_len == max(lengths[2], lengths[0])
    with pytest.raises(ValueError, match="at least one row"):
        cache.select([])


def test_merge_of_split_rows_decodes_like_the_batch(lm, batch_prefill):
    n = 6
    batched = sl.generate(lm, PROMPTS, max_new_tokens=n).tokens
    merged = KVCache.merge(batch_prefill.cache.split())
    assert_same_cache(merged, batch_prefill.cache, real_slots_only=True)
    assert greedy_from(lm, merged, batch_prefill.logits, n) == batched
    # another order: each row still gets its own tokens
    order = [2, 0, 1]
    parts = batch_prefill.cache.split()
    merged = KVCache.merge([parts[i] for i in order])
    assert greedy_from(lm, merged, batch_prefill.logits[order], n) == [batched[i] for i in order]


def test_merge_requests_at_different_stages(lm):
    """Continuous batching: a request already 3 tokens into decode joins one just prefilled."""
    a, b = lm.encode(PROMPTS[1]), lm.encode(PROMPTS[0])
    alone_a = sl.generate(lm, a, max_new_tokens=7).tokens[0]
    alone_b = sl.generate(lm, b, max_new_tokens=4).tokens[0]
    pre = sl.prefill(lm, a)
    cache, logits = pre.cache, pre.logits
    for _ in range(3):
        out = sl.decode_step(lm, cache, logits.argmax(-1))
        cache, logits = out.cache, out.logits
    pre_b = sl.prefill(lm, b)
    merged = KVCache.merge([cache, pre_b.cache])
    assert merged.lengths.tolist() == [len(a) + 3, len(b)]
    rest = greedy_from(lm, merged, torch.cat([logits, pre_b.logits]), 4)
    assert alone_a[3:] == rest[0]
    assert alone_b == rest[1]


def test_merge_rejects_other_models_and_empty(batch_prefill):
    other = sl.prefill(cached_model("tiny-mqa"), PROMPTS[0]).cache
    with pytest.raises(CacheMismatchError, match="different models"):
        KVCache.merge([batch_prefill.cache, other])
    with pytest.raises(CacheMismatchError, match="different models"):
        KVCache.merge([batch_prefill.cache, batch_prefill.cache.to(dtype=torch.bfloat16)])
    with pytest.raises(ValueError, match="at least one cache"):
        KVCache.merge([])


def test_transformers_round_trip(lm, batch_prefill):
    cache = batch_prefill.cache
    dc = cache.to_transformers()
    assert dc.get_seq_length() == cache.seq_len
    back = KVCache.from_transformers(dc, cache.attention_mask, cache.model_id)
    assert_same_cache(back, cache)
    assert back.keys[0].data_ptr() == cache.keys[0].data_ptr()  # a view, not a copy
    legacy = KVCache.from_transformers(list(zip(cache.keys, cache.values)), cache.attention_mask, cache.model_id)
    assert_same_cache(legacy, cache)
    with pytest.raises(CacheMismatchError, match="positions but the mask"):
        KVCache.from_transformers(dc, cache.attention_mask[:, 1:], cache.model_id)


def test_shape_and_repr(lm, batch_prefill):
    cache = batch_prefill.cache
    g = lm.geometry
    assert cache.shape == (g.layers, 2, len(PROMPTS), g.kv_heads, cache.seq_len, g.head_dim)
    assert f"nbytes={cache.nbytes:,}" in repr(cache)
