"""The engine's shortcuts change nothing: an unpadded batch skips the attention mask and position ids, and a
decode loop reuses the transformers cache object of the previous step; both must be bit-identical."""
from __future__ import annotations

import pytest
import torch

import splitlab as sl
from splitlab.phases.engine import forward_logits

from conftest import cached_model

PRESETS = ["tiny", "tiny-gpt2", "tiny-bigcode-mqa", "tiny-qwen2", "tiny-mistral"]
IDS = list(b"Prefill reads the prompt once; decode adds one token at a time.")


@pytest.mark.parametrize("name", PRESETS)
def test_unpadded_shortcut_is_bit_identical(name):
    lm = cached_model(name)
    ids = torch.tensor([IDS[:40], IDS[5:45]])
    mask = torch.ones_like(ids)
    slow = forward_logits(lm, ids, mask, None, padded=True)  # mask and position ids given to the model
    fast = forward_logits(lm, ids, mask, None, padded=False)
    assert torch.equal(slow[0], fast[0])
    for a, b in zip(slow[1].keys + slow[1].values, fast[1].keys + fast[1].values):
        assert torch.equal(a, b)
    step_mask = torch.ones(2, 41, dtype=torch.long)
    tok = slow[0].argmax(-1)[:, None]
    slow2 = forward_logits(lm, tok, step_mask, slow[1], padded=True)
    fast2 = forward_logits(lm, tok, step_mask, fast[1], padded=False)
    assert torch.equal(slow2[0], fast2[0])


@pytest.mark.parametrize("name", ["tiny", "tiny-gpt2"])
def test_decode_from_the_same_cache_twice(name):
    lm = cached_model(name)
    pre = sl.prefill(lm, [IDS[:20], IDS[:33]])
    one = sl.decode_step(lm, pre.cache, pre.logits.argmax(-1))  # a cache made by a decode step
    kept = one.cache.clone()
    tok = one.logits.argmax(-1)
    a = sl.decode_step(lm, one.cache, tok)
    b = sl.decode_step(lm, one.cache, tok)
    assert torch.equal(a.logits, b.logits)
    for x, y, z in zip(a.cache.keys + a.cache.values, b.cache.keys + b.cache.values, kept.keys + kept.values):
        assert torch.equal(x, y)
        assert x.shape[2] == z.shape[2] + 1
    for x, z in zip(one.cache.keys + one.cache.values, kept.keys + kept.values):  # left unchanged
        assert torch.equal(x, z)
    g = sl.generate(lm, [IDS[:20], IDS[:33]], max_new_tokens=4)  # the loop that reuses the cache object
    assert [row[:3] for row in g.tokens] == [[int(pre.logits.argmax(-1)[r]), int(tok[r]), int(a.logits.argmax(-1)[r])]
                                             for r in range(2)]
