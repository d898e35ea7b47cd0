"""Nineteen decoder-only families from tiny configs, loaded by path as a reader's model would be (full attention,
GQA/MQA/MHA, sliding windows on every layer, mixed sliding/global layers, MLA, a class without sdpa): greedy
tokens equal transformers' generate alone and batched, cached decode equals recompute, the cache's bytes equal
its tensors and the sizing formula, batches can be merged, joined and cut, transfers change no token, and the
split serves the same tokens as colocated workers."""
from __future__ import annotations

import pytest
import torch
import transformers

import splitlab as sl
from splitlab import sizing
from splitlab.phases.engine import forward_logits
from splitlab.serving import ModelExecutor, Uniform, WorkloadSpec, compare, contenders, make_workload, \
    reference_tokens
from splitlab.transfer import wire
from splitlab.transfer.copy import receive
from splitlab.transfer.header import make_header, pack

from conftest import greedy_chain
from tiny_families import FAMILIES, PROMPTS, WINDOW, build_model, loaded, saved_path

N_NEW = 8
MLA = "latent" if int(transformers.__version__.split(".")[0]) >= 5 else "expanded"  # what transformers caches


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def alone(family) -> list[list[int]]:
    """Each prompt generated alone by splitlab's loop."""
    return [sl.generate(loaded(family), p, N_NEW).tokens[0] for p in PROMPTS]


def test_greedy_equals_transformers_alone_and_batched(family, alone):
    lm = loaded(family)
    assert [sl.reference_generate(lm, p, N_NEW) for p in PROMPTS] == alone
    batched = sl.generate(lm, PROMPTS, N_NEW)
    assert batched.tokens == alone  # rows of 13, 9 and 4 tokens, left-padded together
    assert len({tuple(t) for t in alone}) == len(alone)  # the rows really differ


def test_cached_decode_equals_recompute(family):
    lm = loaded(family)
    prompt = PROMPTS[0]  # longer than the window: sliding layers drop positions while decoding
    tokens, cached = greedy_chain(lm, prompt, N_NEW)
    for k in range(N_NEW):
        ids = torch.tensor([prompt + tokens[:k]])
        full, _, _ = forward_logits(lm, ids, torch.ones_like(ids), None)
        torch.testing.assert_close(cached[k], full[0], atol=1e-4, rtol=1e-4)
        assert int(full[0].argmax()) == tokens[k]


def test_nbytes_equal_tensors_and_the_sizing_formula(family):
    lm = loaded(family)
    config = sizing.resolve_config(saved_path(family))  # the saved config.json, as kv-size reads it
    geometry = sizing.kv_geometry(config, mla=MLA)
    assert geometry == lm.geometry and lm.geometry_note is None
    for prompts in (PROMPTS, PROMPTS[2:]):  # a batch longer than the window, and one row shorter than it
        cache = sl.generate(lm, prompts, N_NEW).cache
        seq, batch = cache.seq_len, cache.batch_size
        assert cache.nbytes == sum(t.numel() * t.element_size() for t in (*cache.keys, *cache.values))
        assert cache.nbytes == sizing.kv_bytes(geometry, seq, batch, "fp32") == lm.kv_bytes(seq, batch)
        assert cache.layer_lengths == tuple(seq if w is None else min(seq, w - 1) for w in geometry.windows)
    assert set(geometry.windows) <= {None, WINDOW}


def test_merge_join_and_select_keep_every_row_exact(family, alone):
    """Continuous batching: rows prefilled alone are merged, decoded, joined by another, and the longest leaves."""
    lm = loaded(family)
    pre = {b: sl.prefill(lm, [PROMPTS[b]]) for b in range(3)}
    toks = {b: [int(pre[b].logits[0].argmax())] for b in range(3)}
    order, cache = [0, 2], sl.KVCache.merge([pre[0].cache, pre[2].cache])

    def steps(n):
        nonlocal cache
        for _ in range(n):
            out = sl.decode_step(lm, cache, [toks[b][-1] for b in order])
            cache = out.cache
            for b, t in zip(order, out.logits.argmax(-1).tolist()):
                toks[b].append(t)

    steps(3)
    cache, order = sl.KVCache.merge([cache, pre[1].cache]), order + [1]
    steps(2)
    cache, order = cache.select([1, 2]), [2, 1]  # row 0 (the longest) leaves: padding columns go
    steps(2)
    assert all(toks[b] == alone[b][:len(toks[b])] for b in range(3))
    assert cache.seq_len == max(len(PROMPTS[b]) + len(toks[b]) - 1 for b in order)


@pytest.mark.parametrize("mode", ["whole", "layerwise"])
def test_tokens_equal_after_an_in_process_transfer(family, alone, mode):
    lm = loaded(family)
    pre = sl.prefill(lm, PROMPTS)
    firsts = pre.logits.argmax(-1).tolist()
    packet = pack(pre.cache, firsts)
    assert packet.header.nbytes == pre.cache.nbytes
    got, stats = receive(packet, lm, mode=mode)
    assert stats.nbytes == pre.cache.nbytes and got.layer_lengths == pre.cache.layer_lengths
    flat = wire.pack_flat(pre.cache)  # the byte layout between processes, without the processes
    off_wire = wire.unpack_flat(flat.clone(), make_header(pre.cache))
    for cache in (got, off_wire):
        tokens = [[t] for t in firsts]
        for _ in range(N_NEW - 1):
            out = sl.decode_step(lm, cache, [row[-1] for row in tokens])
            cache = out.cache
            for row, t in zip(tokens, out.logits.argmax(-1).tolist()):
                row.append(t)
        assert tokens == alone


def test_split_serves_the_tokens_of_colocated_workers(family):
    lm = loaded(family)
    reqs = make_workload(WorkloadSpec("families", Uniform(3, 20), Uniform(2, 6)), 4, rate_per_s=50.0, seed=3,
                         model=lm)
    cmp = compare(reqs, contenders(prefill_workers=1, decode_workers=1, kv_budget_bytes=None),
                  ModelExecutor(lm, warm=False))
    assert cmp.tokens_identical and cmp.tokens_compared == len(reqs)
    assert cmp.disaggregated.tokens() == reference_tokens(lm, reqs)


def test_a_model_object_serves_as_its_saved_copy(family, alone):
    obj = sl.load_model(build_model(family))  # what a reader already holds in memory
    assert obj.geometry == loaded(family).geometry and obj.dtype == torch.float32
    assert obj.attn_implementation == loaded(family).attn_implementation
    assert sl.generate(obj, PROMPTS, N_NEW).tokens == alone
