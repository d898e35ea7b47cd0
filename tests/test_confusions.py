"""Chapter 8's package pieces: KV quantization, speculative decoding, paged KV memory, prefix caching, token
agreement, and the chapter's checkers. One tiny model for the whole module; prompts short."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import splitlab as sl
from splitlab import serving
from splitlab.kvcache import quant
from splitlab.phases import agreement, profiling, speculative
from splitlab.serving import paged, prefix

from conftest import cached_model


@pytest.fixture(scope="module")
def tiny():
    return cached_model("tiny")


@pytest.fixture(scope="module")
def pre(tiny):
    return sl.prefill(tiny, [profiling.random_prompt(tiny, 40, seed=1)])


# --- KV quantization -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["int8", "fp8"])
def test_quantize_bytes_error_and_round_trip(tiny, pre, scheme):
    cache = pre.cache
    q = quant.quantize(cache, scheme)
    g = tiny.geometry
    T = cache.seq_len
    assert q.nbytes == g.layers * g.kv_heads * (2 * T * g.head_dim + 2 * g.head_dim + 2 * T)  # the docstring's count
    back = q.dequantize()
    assert back.dtype == cache.dtype and back.model_id == cache.model_id and back.shape == cache.shape
    err = quant.relative_error(cache, back)
    assert 0 < err < (0.01 if scheme == "int8" else 0.05)
    again = q.from_bytes(q.to_bytes())
    assert all(torch.equal(a.view(torch.uint8), b.view(torch.uint8))
               for a, b in zip(q.keys + q.values, again.keys + again.values))
    assert all(torch.equal(a, b) for a, b in zip(q.value_scales, again.value_scales))
    out = sl.decode_step(tiny, back, pre.logits.argmax(-1))  # a model of that identity decodes from it
    assert out.cache.seq_len == T + 1


def test_quantize_keeps_padding_zero_and_rejects_bad_input(tiny, pre):
    short = sl.prefill(tiny, [profiling.random_prompt(tiny, 10, seed=2)]).cache
    batch = sl.KVCache.merge([pre.cache, short])
    back = quant.quantize(batch, "int8").dequantize()
    pad = batch.attention_mask[1] == 0
    assert pad.any() and all(float(k[1, :, pad].abs().max()) == 0 for k in back.keys + back.values)
    with pytest.raises(TypeError, match="KVCache"):
        quant.quantize("not a cache")
    with pytest.raises(ValueError, match="scheme"):
        quant.quantize(pre.cache, "int3")
    q = quant.quantize(pre.cache)
    int_cache = sl.KVCache(q.keys, q.values, pre.cache.attention_mask, pre.cache.model_id)
    with pytest.raises(ValueError, match="floating-point"):
        quant.quantize(int_cache)
    with pytest.raises(ValueError, match="uint8"):
        q.from_bytes(torch.zeros(3, dtype=torch.uint8))


def test_token_agreement_with_itself_is_total(tiny, pre):
    first = [int(pre.logits.argmax())]
    a = agreement.token_agreement(tiny, pre.cache, pre.cache.clone(), first, 6)
    assert a["identical_rows"] == 1 and a["equal_share"] == 1.0 and a["step_agreement"] == 1.0
    assert a["first_difference"] == [None] and len(a["reference"][0]) == 6
    assert a["reference"][0] == sl.generate(tiny, [profiling.random_prompt(tiny, 40, seed=1)], 6).tokens[0]
    with pytest.raises(ValueError):
        agreement.greedy_from(tiny, pre.cache, first, 0)


# --- speculative decoding --------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 3])
def test_speculative_tokens_are_the_targets(tiny, k):
    prompt = profiling.random_prompt(tiny, 24, seed=3)
    ref = sl.generate(tiny, [prompt], max_new_tokens=20).tokens[0]
    for draft in (speculative.ModelDraft(speculative.layer_draft(tiny, 1)), speculative.NgramDraft(2)):
        r = speculative.speculative_generate(tiny, draft, prompt, 20, k)
        assert r.tokens == ref
        assert len(r.token_time_s) == 20 and all(a <= p <= k for a, p in zip(r.accepted, r.proposed))
        assert sum(r.accepted) + r.steps == 19  # every step: its accepted proposals + the target's own token


def test_a_perfect_draft_is_always_accepted(tiny):
    prompt = profiling.random_prompt(tiny, 24, seed=4)
    r = speculative.speculative_generate(tiny, speculative.ModelDraft(tiny), prompt, 17, 3)  # the target itself
    assert r.acceptance_rate == 1.0 and r.accepted == [3, 3, 3, 3] and r.tokens_per_step == 4.0
    assert r.tokens == sl.generate(tiny, [prompt], max_new_tokens=17).tokens[0]
    assert r.predicted_tokens_per_step == 4.0


def test_expected_tokens_and_draft_errors(tiny):
    assert speculative.expected_tokens_per_step(0.0, 4) == 1.0
    assert speculative.expected_tokens_per_step(1.0, 4) == 5.0
    assert math.isclose(speculative.expected_tokens_per_step(0.5, 2), 1.75)
    assert np.allclose(speculative.expected_tokens_per_step(np.array([0.0, 0.5]), 1), [1.0, 1.5])
    for bad in (0, tiny.geometry.layers):
        with pytest.raises(ValueError, match="layer draft"):
            speculative.layer_draft(tiny, bad)
    d = speculative.layer_draft(tiny, 2)
    assert d.geometry.layers == 2 and d.model_id != tiny.model_id and tiny.geometry.layers == 4
    with pytest.raises(ValueError, match="vocabulary"):
        speculative.speculative_generate(tiny, speculative.ModelDraft(SimpleNamespace(vocab_size=100)), [1, 2, 3], 4, 2)
    with pytest.raises(ValueError):
        speculative.speculative_generate(tiny, speculative.NgramDraft(), [1, 2], 4, -1)
    with pytest.raises(ValueError):
        speculative.head(sl.prefill(tiny, [[1, 2, 3]]).cache, 4)


def test_ngram_draft_looks_up_the_latest_occurrence():
    d = speculative.NgramDraft(max_n=2)
    assert d.propose([5, 6, 7, 8, 5, 6], 3) == [7, 8, 5]
    assert d.propose([1, 2, 3], 2) == []  # nothing repeats
    assert d.propose([9, 1, 9, 2, 9], 2) == [2, 9]  # the most recent earlier 9 wins
    with pytest.raises(ValueError):
        speculative.NgramDraft(max_n=1, min_n=2)


# --- paged KV memory -------------------------------------------------------------------------------------------
def test_block_allocator():
    a = paged.BlockAllocator(num_blocks=4, block_tokens=16)
    assert a.allocate(1, 20) == [0, 1] and a.waste_tokens() == 12
    assert a.append(1, 12) == [] and a.append(1, 1) == [2]
    with pytest.raises(paged.OutOfBlocks):
        a.allocate(2, 33)  # needs 3, one is free: nothing is taken
    assert a.free_blocks == 1 and 2 not in a.tables
    assert a.free(1) == 3 and a.free_blocks == 4 and a.free(99) == 0
    assert a.allocate(3, 64) == [3, 0, 1, 2] and a.peak_blocks == 4  # freed blocks are reused
    with pytest.raises(ValueError):
        a.allocate(3, 1)
    with pytest.raises(KeyError):
        a.append(42)
    with pytest.raises(ValueError):
        paged.BlockAllocator(block_tokens=0)
    assert paged.blocks_for(33, 16) == 3


@pytest.mark.parametrize("layout", ["colocated", "disaggregated"])
def test_memory_schemes_bounds(layout):
    reqs = serving.make_workload("chat", 20, 6.0, seed=2)
    cfg = serving.ServingConfig(layout=layout, kv_budget_bytes=None)
    res = serving.run(reqs, cfg)
    s = paged.memory_schemes(res, 16, bytes_per_position=2, max_context=2048)
    assert (s.used <= s.paged).all() and (s.paged < s.used + 2 * 16 * s.requests.clip(lower=1)).all()
    assert (s.reserved >= s.used).all() and (s.padded >= s.reserved).all() and (s.max_context >= s.reserved).all()
    assert s.groupby("worker").tail(1).requests.eq(0).all()  # every request's memory is released at the end
    w = paged.waste_summary(s)
    assert w.loc["used", "waste_share"] == 0
    assert 0 < w.loc["paged", "waste_share"] < w.loc["reserved", "waste_share"] < w.loc["max_context", "waste_share"]
    assert (w.peak_bytes >= w.mean_bytes).all()
    if layout == "disaggregated":
        assert set(s.worker) == {"P0", "D0"}


# --- prefix caching --------------------------------------------------------------------------------------------
def test_prefix_cache_matches_whole_blocks_and_evicts_deepest_first():
    pc = prefix.PrefixCache(block_tokens=4, capacity_blocks=3)
    a = list(range(10))
    assert pc.insert(a) == 2 and pc.match(a) == 8 and pc.match(a[:7]) == 4 and pc.match([0, 1, 2, 9]) == 0
    assert pc.lookup(a, limit=5) == (5, None) and pc.hit_rate == 0.5
    b = [0, 1, 2, 3, 7, 7, 7, 7, 8, 8, 8, 8]
    pc.insert(b)  # shares the first block; two new blocks push one out: the least recently used deepest one
    assert len(pc) == 3 and pc.match(b) == 12 and pc.match(a) == 4
    with pytest.raises(ValueError):
        prefix.PrefixCache(block_tokens=0)


def test_prefill_cached_equals_a_full_prefill(tiny):
    system = profiling.random_prompt(tiny, 48, seed=5)
    pc = prefix.PrefixCache(block_tokens=16)
    first = prefix.prefill_cached(tiny, pc, system + [7, 8, 9])
    assert first.cached_tokens == 0 and first.computed_tokens == 51
    prompt = system + [10, 11, 12, 13, 14]
    hit = prefix.prefill_cached(tiny, pc, prompt)
    full = sl.prefill(tiny, [prompt])
    assert hit.cached_tokens == 48 and hit.computed_tokens == 5
    assert torch.allclose(hit.logits, full.logits, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(hit.cache.keys, full.cache.keys))
    again = prefix.prefill_cached(tiny, pc, system)  # wholly cached: the last token is still computed
    assert again.cached_tokens == 47 and again.computed_tokens == 1
    with pytest.raises(ValueError):
        prefix.prefill_cached(tiny, pc, [])
    other = cached_model("tiny-mqa")
    with pytest.raises(ValueError, match="holds KV of"):
        prefix.prefill_cached(other, pc, prompt)


def test_prefix_aware_routing_computes_least():
    systems = [list(range(100 * g, 100 * g + 64)) for g in range(3)]
    prompts = [systems[i % 3] + [900 + i, 901 + i] for i in range(30)]
    done = {p: prefix.simulate_routing(prompts, 2, p, 16, capacity_blocks=8).computed_tokens.sum()
            for p in ("round-robin", "least-loaded", "prefix-aware")}
    assert done["prefix-aware"] < done["round-robin"] and done["prefix-aware"] < done["least-loaded"]
    assert done["prefix-aware"] == 3 * 64 + 30 * 2  # one copy of each system prompt, then only the new tokens
    with pytest.raises(ValueError):
        prefix.simulate_routing(prompts, 2, "random")


# --- checkers --------------------------------------------------------------------------------------------------
def test_chapter_8_checkers(capsys):
    res = serving.run(serving.make_workload("chat", 10, 5.0, seed=1), serving.ServingConfig(kv_budget_bytes=None))
    share = float(paged.waste_summary(paged.memory_schemes(res, 64)).loc["paged", "waste_share"])
    assert sl.check.paged_waste_share(share, res, 64) and not sl.check.paged_waste_share(share * 2, res, 64)
    g = sl.sizing.kv_geometry(sl.sizing.PUBLISHED_MODELS["Llama-3-8B"])
    right = g.layers * g.kv_heads * (2 * 4096 * g.head_dim + 2 * g.head_dim + 2 * 4096)
    assert sl.check.quantized_kv_bytes(right, "Llama-3-8B", 4096)
    assert not sl.check.quantized_kv_bytes(right * 2, "Llama-3-8B", 4096)
    assert sl.check.speculative_tpot(0.03 / 1.75, 0.5, 2, 0.01, 0.02)
    assert not sl.check.speculative_tpot(0.03, 0.5, 2, 0.01, 0.02)
    assert not sl.check.speculative_tpot(None, 0.5, 2, 0.01, 0.02)
    assert "Not answered yet" in capsys.readouterr().out


# --- the trained model's notes follow their tables (model-free: made-up rows) ---------------------------------
def _lookup_rows(plain_s, spec_s, acceptance=0.8):
    import pandas as pd
    rows = []
    for r, (p, s) in enumerate(zip(plain_s, spec_s)):
        for k, t in ((0, p), (4, s)):
            rows.append(dict(prompt=0, k=k, acceptance=float("nan") if k == 0 else acceptance,
                             tokens_per_step=1.0 if k == 0 else 2.2, predicted_tokens_per_step=1.0 if k == 0 else 2.1,
                             tpot_s=t, speedup=p / t, verify_s=0.07 if k == 0 else 0.09, draft_s=0.0,
                             same_tokens=True, repeat=r))
    return pd.DataFrame(rows)


def test_prompt_lookup_claims_a_speed_up_only_outside_the_spread():
    from splitlab.teach.figures import confusions_real as notes
    apart = notes.lookup_spread(_lookup_rows([0.070, 0.075, 0.090], [0.040, 0.045, 0.050]))
    assert apart.set_index("k").loc[4, "verdict"] == "faster"
    assert "1.75x (median), outside the spread" in notes.lookup_note(apart, ["copy"])
    overlap = notes.lookup_spread(_lookup_rows([0.070, 0.075, 0.090], [0.060, 0.072, 0.095]))
    assert overlap.set_index("k").loc[4, "verdict"] == "within the spread"
    note = notes.lookup_note(overlap, ["copy"])
    assert "neither a speed-up nor a slow-down is claimed" in note and "speed-up of" not in note
    slower = notes.lookup_spread(_lookup_rows([0.070, 0.071, 0.072], [0.080, 0.085, 0.090]))
    assert slower.set_index("k").loc[4, "verdict"] == "slower"
    table = notes.lookup_table(apart, ["copy"])
    assert table.loc[("copy", 4), "TPOT (ms)"] == "45 (40–50)" and table.loc[("copy", 4), "accepted"] == "80%"


def test_kv_quality_and_chat_notes_say_what_their_tables_show():
    import pandas as pd
    from splitlab.teach.figures import confusions_real as notes
    q = pd.DataFrame([dict(scheme="full", kv_bytes=4096, bytes_ratio=1.0, tokens=20, tokens_differ=0, prompts_differ=0,
                           step_agreement=1.0, kl_mean=0.0, kl_max=0.0, logit_err_max=0.0),
                      dict(scheme="int8", kv_bytes=1068, bytes_ratio=0.26, tokens=20, tokens_differ=0,
                           prompts_differ=0, step_agreement=1.0, kl_mean=1e-4, kl_max=9e-4, logit_err_max=0.28),
                      dict(scheme="fp8", kv_bytes=1068, bytes_ratio=0.26, tokens=20, tokens_differ=7, prompts_differ=1,
                           step_agreement=0.95, kl_mean=2e-3, kl_max=0.01, logit_err_max=1.4)])
    note = notes.quality_note(q, 2, full_name="float32")
    assert "int8 and fp8 each hold 0.26 of the float32 cache's bytes" in note
    assert "int8 changed none of the 20 tokens" in note and "fp8 changed 7 of the 20 tokens (in 1 prompt:" in note
    assert "fp8's largest logit error is 5x int8's" in note
    assert notes.quality_table(q).loc["tokens that differ", "fp8"] == "7 of 20"
    reuse = pd.DataFrame(dict(prompt_tokens=[100, 104, 98], shared_tokens=[90] * 3, cached_tokens=[0, 80, 80],
                              computed_tokens=[100, 24, 18], cold_s=[0.50, 0.52, 0.48], warm_s=[0.50, 0.20, 0.18],
                              same_token=[True] * 3, logit_err=[0.0, 0.0, 1e-5]))
    chat = notes.chat_note(reuse, 16)
    assert "reused 80 of them" in chat and "190 ms against 500 ms cold" in chat and "62% less" in chat
    assert "slowest warm prefill was faster than the fastest cold one" in chat and "at most 1e-05" in chat
    slower = reuse.assign(warm_s=[0.50, 0.60, 0.58])  # on an H200 the warm prefills were slower: "-17% less" once
    chat = notes.chat_note(slower, 16)
    assert "590 ms against 500 ms cold (medians, 18% more; the fastest warm prefill was slower" in chat and "-" not \
        in chat.split("cold (medians, ")[1][:8]  # 0.58 .. 0.60 s against 0.48 .. 0.52: it said they overlap
    chat = notes.chat_note(reuse.assign(warm_s=[0.50, 0.60, 0.50]), 16)
    assert "the warm and cold times overlap, so no saving is claimed" in chat


def test_the_takeaway_says_a_slower_warm_prefill_saved_nothing():
    """The chapter's rule of thumb once read "saved -17% of the later prefills" (an H200, warm prefills slower)."""
    import pandas as pd
    from splitlab.teach.figures import confusions_real as notes
    q = pd.DataFrame([dict(scheme="full", bytes_ratio=1.0, tokens=20, tokens_differ=0, kl_mean=0.0),
                      dict(scheme="int8", bytes_ratio=0.52, tokens=20, tokens_differ=1, kl_mean=1e-3)])
    spread = pd.DataFrame([dict(prompt=0, k=4, acceptance=0.8, speedup=1.5, verdict="faster")])
    reuse = pd.DataFrame(dict(prompt_tokens=[100, 104, 98], shared_tokens=[90] * 3, cached_tokens=[0, 80, 80],
                              cold_s=[0.50, 0.52, 0.48], warm_s=[0.50, 0.20, 0.18]))
    assert "reused in whole blocks) saved 62% of the later prefills' time." in notes.takeaway_note(
        q, spread, ["repeat"], reuse)
    slower = notes.takeaway_note(q, spread, ["repeat"], reuse.assign(warm_s=[0.50, 0.60, 0.58]))
    assert slower.endswith("saved nothing here: the later prefills took 18% longer.") and "-" not in slower[-60:]
