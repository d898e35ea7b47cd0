"""generate's bookkeeping (timings, cache bytes), prompt forms, and stopping at EOS."""
from __future__ import annotations

import pytest
import torch

import splitlab as sl
from splitlab import sizing
from splitlab.phases.inputs import as_token_batch

from conftest import PROMPTS

N_NEW = 6


@pytest.fixture(scope="module")
def gen(lm):
    return sl.generate(lm, PROMPTS, max_new_tokens=N_NEW)


def test_timings(gen):
    assert len(gen.decode_step_s) == N_NEW - 1
    assert len(gen.token_time_s) == N_NEW
    assert all(b > a for a, b in zip(gen.token_time_s, gen.token_time_s[1:]))
    assert gen.ttft_s == gen.token_time_s[0]
    assert 0 < gen.prefill_s <= gen.ttft_s
    assert all(s > 0 for s in gen.decode_step_s)
    # each gap between tokens contains that step's forward pass
    for gap, step in zip(torch.diff(torch.tensor(gen.token_time_s)).tolist(), gen.decode_step_s):
        assert gap >= step * 0.999


def test_kv_bytes_grow_as_predicted(lm, gen):
    per_token = sizing.kv_bytes_per_token(lm.config, lm.dtype)
    batch, longest = len(PROMPTS), max(gen.prompt_lengths)
    assert gen.kv_bytes_after_prefill == per_token * longest * batch
    assert gen.kv_bytes_final - gen.kv_bytes_after_prefill == per_token * (N_NEW - 1) * batch
    assert gen.kv_bytes_final == gen.cache.nbytes
    assert gen.cache.lengths.tolist() == [n + N_NEW - 1 for n in gen.prompt_lengths]


def test_prompt_lengths_and_tokens(lm, gen):
    assert gen.prompt_lengths == [len(lm.encode(p)) for p in PROMPTS]
    assert [len(t) for t in gen.tokens] == [N_NEW] * len(PROMPTS)
    assert all(0 <= t < lm.vocab_size for row in gen.tokens for t in row)


def test_prompt_forms_are_equivalent(lm):
    text = "same prompt"
    ids = lm.encode(text)
    assert as_token_batch(lm, text) == [ids]
    assert as_token_batch(lm, ids) == [ids]
    assert as_token_batch(lm, torch.tensor(ids)) == [ids]
    assert as_token_batch(lm, torch.tensor([ids, ids])) == [ids, ids]
    assert as_token_batch(lm, [text, ids]) == [ids, ids]
    assert sl.generate(lm, text, 3).tokens == sl.generate(lm, torch.tensor(ids), 3).tokens


def test_prefill_output(lm):
    out = sl.prefill(lm, PROMPTS)
    assert out.logits.shape == (len(PROMPTS), lm.vocab_size) and out.logits.dtype == torch.float32
    assert out.seconds > 0
    assert out.cache.model_id == lm.model_id


def test_stop_at_eos(lm, monkeypatch):
    """Rows stop at the tokenizer's EOS (and only when asked); other rows go on."""
    free = sl.generate(lm, PROMPTS[:2], max_new_tokens=N_NEW).tokens
    # pretend the first token of row 0 that row 1 never produces (and that is not row 0's first) is EOS
    cut = next((i for i, t in enumerate(free[0]) if 0 < i < N_NEW - 1 and t not in free[1] + free[0][:i]), None)
    if cut is None:
        pytest.skip("no token of row 0 is absent from row 1 with these weights")
    monkeypatch.setattr(lm.tokenizer, "eos_token_id", free[0][cut])
    stopped = sl.generate(lm, PROMPTS[:2], max_new_tokens=N_NEW, stop_at_eos=True).tokens
    assert stopped == [free[0][:cut + 1], free[1]]
    assert sl.generate(lm, PROMPTS[:2], max_new_tokens=N_NEW).tokens == free


def test_cpu_timer_does_not_touch_cuda(lm, monkeypatch):
    def no_events(*args, **kwargs):
        raise AssertionError("CUDA event created for a CPU timing")

    monkeypatch.setattr(torch.cuda, "Event", no_events)
    with sl.Timer("cpu") as timer:
        sum(range(10_000))
    assert timer.seconds > 0
    assert sl.prefill(lm, "cpu").seconds > 0
