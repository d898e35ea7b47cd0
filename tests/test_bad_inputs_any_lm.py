"""Bad and odd inputs to "any causal LM" (issue 10): loading, attention choice, model objects and tokenizers, the
per-layer KV cache (select, merge, to), sizing of odd configs and tampered transfer headers. Each case was a deep
traceback, silent garbage (a negative byte count, a row truncated from 1.5 to 1) or a half-minute wait, and is
now an early error naming the problem."""
from __future__ import annotations

import dataclasses
import json
import math
import struct
import time

import pytest
import torch

import splitlab as sl
from splitlab import sizing
from splitlab.transfer import copy_cache, wire
from splitlab.transfer.header import TransferHeader, check, make_header
from tiny_families import build_model

BASE = dict(model_type="llama", num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, hidden_size=256)
MLA = dict(BASE, kv_lora_rank=512, qk_rope_head_dim=64)


@pytest.fixture(scope="module")
def pre(lm):
    return sl.prefill(lm, [[1, 2, 3], [4, 5]])


@pytest.fixture(scope="module")
def mistral():
    return sl.load_model(build_model("mistral-sw"))


# --- loading -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("attn, message", [
    ("bogus", "cannot load 'tiny' with attn_implementation='bogus' \\(ValueError: .*\\); it supports sdpa, "),
    ("flash_attention_2", "attn_implementation='flash_attention_2' \\(ImportError: .*\\); it supports sdpa"),
])
def test_attention_names_transformers_refuses_are_a_model_load_error(attn, message):
    """A preset raised transformers' own ValueError or ImportError; the message now also lists what works."""
    with pytest.raises(sl.ModelLoadError, match=message):
        sl.load_model("tiny", device="cpu", attn_implementation=attn)


def test_a_model_object_with_an_unknown_attention_name():
    with pytest.raises(sl.ModelLoadError, match="with attn_implementation='bogus' .*it supports sdpa"):
        sl.load_model(build_model("llama"), attn_implementation="bogus")


def test_a_model_object_of_another_head_is_not_a_causal_lm():
    """A masked LM ran a forward first and was refused as 'returned no KV cache'."""
    import transformers
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64)
    with pytest.raises(sl.ModelLoadError, match="BertForMaskedLM is not a causal LM .*is BertLMHeadModel"):
        sl.load_model(transformers.BertForMaskedLM(config))


def test_the_meta_device_is_refused_where_the_model_is_loaded():
    """load_model accepted it; generate then failed with 'META device type not an accelerator'."""
    with pytest.raises(ValueError, match="device 'meta' is not one splitlab runs models on"):
        sl.load_model("tiny", device="meta")
    with pytest.raises(ValueError, match="device 'meta' is not one splitlab runs models on"):
        sl.load_model(build_model("llama").to("meta"))


@pytest.mark.parametrize("tokenizer, message", [
    ("gpt2", "not the name 'gpt2': load it with transformers.AutoTokenizer.from_pretrained\\('gpt2'\\)"),
    (5, "tokenizer must be a tokenizer .*got int"),   # lm.encode later failed: 'int' object is not callable
])
def test_a_tokenizer_that_is_not_a_tokenizer(tokenizer, message):
    with pytest.raises(TypeError, match=message):
        sl.load_model(build_model("llama"), tokenizer=tokenizer)
    with pytest.raises(TypeError, match=message):  # a preset silently ignored it
        sl.load_model("tiny", device="cpu", tokenizer=tokenizer)


def test_a_preset_keeps_the_tokenizer_it_is_given():
    tok = sl.ByteTokenizer()
    assert sl.load_model("tiny", device="cpu", tokenizer=tok).tokenizer is tok


def test_an_unreachable_hub_name_fails_at_once(offline):
    """The hub client retried for ~25 s (printing each retry) before load_model said anything."""
    t0 = time.perf_counter()
    with pytest.raises(sl.ModelLoadError, match="could not load model 'nobody/nothing' .*cannot be reached.*'tiny'"):
        sl.load_model("nobody/nothing", device="cpu")
    assert time.perf_counter() - t0 < 5 and offline == []


def test_generate_refuses_an_on_token_that_is_no_function(lm):
    with pytest.raises(TypeError, match="on_token must be a function"):  # after the prefill had run
        sl.generate(lm, [[1, 2]], 2, on_token="print")


# --- the KV cache --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, message", [
    ([1.5], "select\\(\\) takes integer row indices, got 1.5"),        # silently row 1
    (torch.tensor([True, False]), "got a torch.bool tensor: for a mask use"),  # read as rows 1 and 0
    (["a"], "got 'a'"),                                                 # "too many dimensions 'str'"
    (torch.tensor([0.0]), "got a torch.float32 tensor"),
])
def test_select_takes_integer_rows(pre, rows, message):
    with pytest.raises(TypeError, match=message):
        pre.cache.select(rows)


def test_select_rows_out_of_range_and_empty(pre):
    with pytest.raises(IndexError, match="outside 0..1"):
        pre.cache.select([2])
    with pytest.raises(ValueError, match="at least one row"):
        pre.cache.select([])
    assert pre.cache.select(0).lengths.tolist() == [3] and pre.cache.select([1, 1]).lengths.tolist() == [2, 2]


def test_merge_takes_a_list_of_caches(pre):
    with pytest.raises(TypeError, match="merge\\(\\) takes KVCaches, got a NoneType among them"):  # AttributeError
        sl.KVCache.merge([pre.cache, None])
    with pytest.raises(TypeError, match="merge\\(\\) takes a list of caches"):  # 'KVCache' is not subscriptable
        sl.KVCache.merge(pre.cache)
    merged = sl.KVCache.merge(c for c in pre.cache.split())  # a generator was 'not subscriptable'
    assert merged.lengths.tolist() == [3, 2]


def test_merge_of_caches_of_other_models_or_windows(pre, mistral):
    with pytest.raises(sl.CacheMismatchError, match="different models"):
        sl.KVCache.merge([pre.cache, sl.prefill(mistral, [[1, 2]]).cache])


def test_to_takes_dtype_and_device_names(pre):
    assert pre.cache.to(dtype="bf16").dtype == torch.bfloat16  # a name was a torch TypeError
    with pytest.raises(ValueError, match="unknown device 'bogus'"):  # RuntimeError listing torch's device types
        pre.cache.to(device="bogus")
    with pytest.raises(ValueError, match="floating-point keys and values, not torch.int8"):
        pre.cache.to(dtype=torch.int8)


@pytest.mark.parametrize("windows, message", [
    (None, "a KV cache needs at least one layer"),   # IndexError from repr and dtype
    ((0,), "a sliding window >= 2 per layer, got 0"),  # check() then wanted -1 positions
])
def test_a_cache_that_cannot_exist(pre, windows, message):
    keys, values = ([], []) if windows is None else (pre.cache.keys[:1], pre.cache.values[:1])
    with pytest.raises(sl.CacheMismatchError, match=message):
        sl.KVCache(keys, values, pre.cache.attention_mask, pre.cache.model_id, windows)


def test_decode_after_select_of_a_sliding_cache_equals_generate(mistral):
    """A row shorter than the window, selected out of a batch whose other row is past it, decodes as alone."""
    long, short = [1] * 12, [2, 3, 4]
    out = sl.prefill(mistral, [long, short])
    cache, toks = out.cache.select([1]), [int(out.logits[1].argmax())]
    assert cache.layer_lengths == (3, 3, 3)
    for _ in range(5):
        step = sl.decode_step(mistral, cache, [toks[-1]])
        cache, toks = step.cache, toks + [int(step.logits[0].argmax())]
    assert toks == sl.generate(mistral, [short], 6).tokens[0] and cache.layer_lengths == (7, 7, 7)


# --- sizing --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change", [dict(kv_lora_rank=0), dict(kv_lora_rank=-512), dict(kv_lora_rank=512.5),
                                    dict(kv_lora_rank="512"), dict(kv_lora_rank=True), dict(qk_rope_head_dim=-64),
                                    dict(qk_rope_head_dim=0)])
def test_mla_dims_must_be_positive_integers(change):
    """Negative ranks gave negative byte counts; 512.5 was truncated; '512' was int()-ed."""
    name = next(iter(change))
    with pytest.raises(ValueError, match=f"config field {name} must be a positive integer"):
        sizing.kv_geometry(dict(MLA, **change))


@pytest.mark.parametrize("change, message", [
    (dict(layer_types="full_attention"), "layer_types must be a list of layer kinds"),  # "has 14 entries"
    (dict(layer_types=5), "layer_types must be a list of layer kinds"),                 # 'int' is not iterable
    (dict(layer_types=[None] * 4), "layer_types must be a list of layer kinds"),
    (dict(layer_types=["full_attention"] * 3), "layer_types has 3 entries for 4 layers"),
    (dict(model_type="qwen2", use_sliding_window=True, sliding_window=16, max_window_layers="x"),
     "max_window_layers 'x' is not an integer >= 0"),                                   # int() ValueError
    (dict(model_type="qwen2", use_sliding_window=True, sliding_window=16, max_window_layers=-1),
     "max_window_layers -1 is not an integer >= 0"),                                   # every layer windowed
    (dict(sliding_window=0), "sliding_window that is an integer >= 2, got 0"),
    (dict(sliding_window=4096.0), "sliding_window that is an integer >= 2, got 4096.0"),
])
def test_odd_layer_configs_are_refused_by_name(change, message):
    with pytest.raises(sizing.UnsupportedCacheError, match=message):
        sizing.kv_geometry(dict(BASE, **change))


def test_an_mla_config_without_kv_lora_rank_is_refused():
    """A DeepSeek config missing kv_lora_rank was sized as plain multi-head attention: a wrong number."""
    cfg = dict(BASE, model_type="deepseek_v3", qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128)
    del cfg["num_key_value_heads"]
    with pytest.raises(sizing.UnsupportedCacheError, match="describes MLA .*but has no kv_lora_rank"):
        sizing.kv_geometry(cfg)


def test_a_sliding_window_larger_than_any_context_sizes_as_full():
    g = sizing.kv_geometry(dict(BASE, sliding_window=10 ** 9))
    assert sizing.kv_bytes(g, 4096) == sizing.kv_bytes(sizing.kv_geometry(BASE), 4096)


def test_absurd_layer_counts_fail_at_once():
    """10**12 layers raised a bare MemoryError (after trying to build 10**12 per-layer entries)."""
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="no model has more than 65,536 layers"):
        sizing.kv_geometry(dict(BASE, num_hidden_layers=10 ** 12))
    assert time.perf_counter() - t0 < 1


@pytest.mark.parametrize("args, message", [
    ((1.5,), "tokens must be an integer >= 0, got 1.5"), ((math.nan,), "got nan"), (("4096",), "got '4096'"),
    ((True,), "got True"), ((10, 1.5), "batch must be an integer >= 0, got 1.5"), ((-1,), "got -1"),
])
def test_kv_bytes_counts_are_integers(args, message):
    """NaN, inf and fractions went into the byte count."""
    with pytest.raises(ValueError, match=message):
        sizing.kv_bytes(sizing.kv_geometry(BASE), *args)


def test_geometries_and_names_of_the_wrong_kind():
    with pytest.raises(ValueError, match="KVGeometry.kv_heads must be a positive integer, got -2"):  # -1024 B/token
        sizing.KVGeometry(2, 8, -2, 64)
    with pytest.raises(TypeError, match="give a model name or a config.json path"):  # 'expected str, bytes...'
        sizing.resolve_config(None)
    with pytest.raises(TypeError, match="not the name 'tiny': use kv_geometry\\(resolve_config\\('tiny'\\)\\)"):
        sizing.kv_geometry("tiny")


# --- transfer headers ----------------------------------------------------------------------------------------

def test_a_header_whose_layer_dims_disagree_with_its_layer_count(lm, pre):
    """Checked without the tensors (as a decode worker does before the bytes land), it passed."""
    header = make_header(pre.cache)
    short = dataclasses.replace(header, layer_dims=header.layer_dims[:3])
    with pytest.raises(sl.CacheMismatchError, match="layer_dims: 3 entries for a header of 4 layers"):
        check(short, lm)
    wide = dataclasses.replace(header, layer_dims=header.layer_dims[:3] + ((2, 16, 32, 0),))
    with pytest.raises(sl.CacheMismatchError, match="(?s)layer 3 .*sent \\(2, 16, 32, 0\\).*layer_dims: header says"):
        check(wide, lm, pre.cache)


@pytest.mark.parametrize("change, message", [
    (dict(lengths=None), "header lengths None is not a list of integers"),      # TypeError from len()
    (dict(seq_len="3"), "header seq_len '3' is not an integer"),                # '<' between str and int
    (dict(first_tokens=(1.5, 2)), "header first_tokens \\(1.5, 2\\) is not a list of integers"),  # accepted
    (dict(model_id=None), "header model_id None is not a string"),
    (dict(layer_dims=(("a",),)), "header layer_dims .* is not a list of \\(kv_heads, k_dim, v_dim, window\\)"),
])
def test_header_fields_of_the_wrong_type(pre, change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(make_header(pre.cache, [1, 2], [0, 1]), **change)


@pytest.mark.parametrize("data", [b"\xff\x00", b"[1, 2]", b'{"model_id": "x"}'])
def test_bytes_that_hold_no_header(pre, data):
    """UnicodeDecodeError, AttributeError ('list' has no 'items') and TypeError escaped the wire's check."""
    with pytest.raises(ValueError, match="not a KV transfer header"):
        TransferHeader.from_bytes(data)
    blob = struct.pack("<6q", wire.MAGIC, wire.VERSION, 1, 1, len(data), 0) + data
    msg = torch.frombuffer(bytearray(blob.ljust(wire.HEADER_BYTES, b"\0")), dtype=torch.uint8)
    with pytest.raises(wire.ProtocolError, match="unreadable KV header from rank 1"):
        wire._parse_header(msg, 1)


def test_an_extra_field_in_a_header_is_refused(pre):
    text = json.loads(make_header(pre.cache).to_bytes())
    with pytest.raises(ValueError, match="not a KV transfer header: fields .*'evil'"):
        TransferHeader.from_bytes(json.dumps(dict(text, evil=1)).encode())


def test_check_and_copy_of_the_wrong_things(lm, pre):
    with pytest.raises(TypeError, match="check\\(\\) takes a TransferHeader"):  # AttributeError on None
        check(None, lm)
    with pytest.raises(TypeError, match="copy_cache\\(\\) takes a splitlab.KVCache, got NoneType"):
        copy_cache(None)
    with pytest.raises(ValueError, match="unknown device 'bogus'"):  # torch's RuntimeError
        copy_cache(pre.cache, "bogus")
    with pytest.raises(ValueError, match="device 'meta' is not one splitlab runs models on"):  # a cache of no data
        copy_cache(pre.cache, "meta")
    with pytest.raises(TypeError, match="on_layer must be a function"):  # after the first layer was copied
        copy_cache(pre.cache, mode="layerwise", on_layer="print")


# --- measuring and sizing a loaded model ---------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(repeats=0), "repeats must be an integer >= 1, got 0"),     # 'no median for empty data', after the work
    (dict(rounds=0), "rounds must be an integer >= 1"),
    (dict(statistic="mean"), "statistic must be one of"),            # raised only after every prefill had run
])
def test_measurements_that_would_measure_nothing(lm, kwargs, message):
    with pytest.raises(ValueError, match=message):
        sl.profiling.measure_prefill(lm, [8], **kwargs)


def test_measure_decode_of_an_empty_batch(lm):
    with pytest.raises(ValueError, match="batch size 0 must be an integer >= 1"):
        sl.profiling.measure_decode(lm, [0, 2], context=8)


@pytest.mark.parametrize("args, message", [((-5,), "tokens must be an integer >= 0, got -5"),  # -10,240 bytes
                                           ((1.5,), "got 1.5"), ((8, 0.5), "batch must be an integer >= 0")])
def test_loaded_model_kv_bytes_counts(lm, args, message):
    with pytest.raises(ValueError, match=message):
        lm.kv_bytes(*args)
    assert lm.kv_bytes(8, 2) == sl.prefill(lm, [[1] * 8, [2] * 8]).cache.nbytes
