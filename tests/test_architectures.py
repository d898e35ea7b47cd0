"""The engine on every tiny architecture: cached decode == full recompute, splitlab greedy == transformers
greedy, batching changes nothing per row, and the cache holds exactly the bytes the formula predicts."""
from __future__ import annotations

import torch

import splitlab as sl
from splitlab import sizing
from splitlab.phases.engine import forward_logits

from conftest import PROMPTS, greedy_chain

N_NEW = 8


def test_cached_decode_equals_full_recompute(arch_lm):
    lm = arch_lm
    prompt = lm.encode("Cached decode must equal recompute.")
    tokens, cached_logits = greedy_chain(lm, prompt, N_NEW)
    for k in range(N_NEW):  # logits that chose token k: forward over prompt + tokens[:k], no cache at all
        ids = torch.tensor([prompt + tokens[:k]])
        full, _, _ = forward_logits(lm, ids, torch.ones_like(ids), None)
        torch.testing.assert_close(cached_logits[k], full[0], atol=1e-4, rtol=1e-4)
        assert int(full[0].argmax()) == tokens[k]


def test_greedy_equals_transformers_generate(arch_lm):
    lm = arch_lm
    prompt = lm.encode("Hello, world")
    ours = sl.generate(lm, prompt, max_new_tokens=12).tokens[0]
    assert len(ours) == 12
    assert ours == sl.reference_generate(lm, prompt, 12)


def test_batch_rows_equal_single_prompts(arch_lm):
    lm = arch_lm
    ids = [lm.encode(p) for p in PROMPTS]
    assert len({len(p) for p in ids}) == len(ids)  # really different lengths: left padding is exercised
    batched = sl.generate(lm, PROMPTS, max_new_tokens=N_NEW)
    assert batched.prompt_lengths == [len(p) for p in ids]
    pre = sl.prefill(lm, PROMPTS)
    for b, p in enumerate(ids):
        alone = sl.generate(lm, p, max_new_tokens=N_NEW)
        assert batched.tokens[b] == alone.tokens[0], f"row {b} changed by batching"
        torch.testing.assert_close(pre.logits[b], sl.prefill(lm, p).logits[0], atol=1e-4, rtol=1e-4)


def test_kv_bytes_measured_equal_formula(arch_lm):
    lm = arch_lm
    gen = sl.generate(lm, PROMPTS[:2], max_new_tokens=4)
    cache = gen.cache
    g = lm.geometry
    assert cache.batch_size == 2
    assert cache.num_layers == g.layers
    for k, v in zip(cache.keys, cache.values):
        assert tuple(k.shape) == (2, g.kv_heads, cache.seq_len, g.head_dim)
        assert tuple(v.shape) == (2, g.kv_heads, cache.seq_len, g.head_dim)
        assert k.dtype == v.dtype == lm.dtype
    real = sum(t.numel() * t.element_size() for t in (*cache.keys, *cache.values))
    assert cache.nbytes == real
    assert cache.nbytes == sizing.kv_bytes_per_token(lm.config, lm.dtype) * cache.seq_len * cache.batch_size
    assert cache.seq_len == max(gen.prompt_lengths) + 4 - 1  # the last token is chosen, never fed back


def test_geometry_matches_preset_config(arch_lm):
    """The analytic geometry of the preset's config.json equals the loaded model's (and its attention kind)."""
    lm = arch_lm
    assert sizing.kv_geometry(sizing.resolve_config(lm.name)) == lm.geometry
    expected = {"tiny": "GQA", "tiny-gpt2": "MHA", "tiny-bigcode-mqa": "MQA", "tiny-qwen2": "GQA",
                "tiny-mistral": "GQA", "tiny-mha": "MHA", "tiny-mqa": "MQA"}[lm.name]
    assert lm.geometry.attention == expected
