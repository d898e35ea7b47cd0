"""A reader's own model: the attention implementation load_model picks or is told, a model object instead of a
name, clear errors for a raw model and for kinds splitlab does not serve, every cache kind in sizing and
kv-size, and the serving KV budget with the real per-layer sizes."""
from __future__ import annotations

import json

import pytest
import torch
import transformers

import splitlab as sl
from splitlab import sizing
from splitlab.cli import main as cli_main
from splitlab.serving import ModelExecutor, ServingConfig, run
from splitlab.serving.distributed import messages as M
from splitlab.serving.distributed.backend import DistributedBackend
from splitlab.serving.request import Request

from tiny_families import PROMPTS, WINDOW, build_model, loaded, saved_path


# --- attention implementations -------------------------------------------------------------------------------

def test_sdpa_where_the_class_supports_it_else_eager():
    assert loaded("llama").attn_implementation == "sdpa"
    assert loaded("gemma2").attn_implementation == "eager"  # Gemma2ForCausalLM has no sdpa


def test_a_named_implementation_is_used_or_refused_with_what_the_class_supports():
    eager = sl.load_model(saved_path("llama"), device="cpu", attn_implementation="eager")
    assert eager.attn_implementation == "eager"
    assert sl.generate(eager, PROMPTS, 6).tokens == sl.generate(loaded("llama"), PROMPTS, 6).tokens
    with pytest.raises(sl.ModelLoadError, match="Gemma2ForCausalLM does not support attn_implementation='sdpa'; "
                                                "it supports .*eager"):
        sl.load_model(saved_path("gemma2"), device="cpu", attn_implementation="sdpa")


# --- a model object ------------------------------------------------------------------------------------------

def test_a_model_object_keeps_its_dtype_unless_asked():
    model = build_model("qwen2").to(torch.bfloat16)
    lm = sl.load_model(model)
    assert lm.dtype == torch.bfloat16 and lm.device == torch.device("cpu") and not lm.model.training
    assert isinstance(lm.tokenizer, sl.ByteTokenizer)  # no tokenizer saved with it, bytes fit its vocabulary
    assert sl.load_model(model, dtype="float32").dtype == torch.float32
    word = object()
    assert sl.load_model(build_model("qwen2"), tokenizer=word).tokenizer is word


def test_a_model_without_a_language_model_head_is_refused():
    body = transformers.AutoModel.from_config(build_model("llama").config)
    with pytest.raises(sl.ModelLoadError, match="LlamaModel has no language-model head"):
        sl.load_model(body)


@pytest.mark.parametrize("call", [
    lambda m: sl.prefill(m, [[1, 2, 3]]), lambda m: sl.generate(m, [[1, 2, 3]], 2),
    lambda m: sl.decode_step(m, sl.prefill(loaded("llama"), [[1, 2]]).cache, [3]),
    lambda m: sl.reference_generate(m, [1, 2], 2),
    lambda m: sl.profiling.random_prompt(m, 4),
])
def test_a_raw_model_where_a_loaded_model_belongs_says_how_to_wrap_it(call):
    with pytest.raises(TypeError, match=r"takes a splitlab LoadedModel, not a raw LlamaForCausalLM: wrap it once "
                                        r"with lm = splitlab.load_model\(model"):
        call(loaded("llama").model)


# --- kinds splitlab does not serve, and whole error messages ------------------------------------------------

@pytest.mark.parametrize("config, message", [
    (dict(model_type="llama", layer_types=["chunked_attention"] * 2), "'chunked_attention': chunked attention"),
    (dict(model_type="llama", layer_types=["linear_attention"] * 2), "'linear_attention': linear-attention"),
    (dict(model_type="t5"), "t5 is an encoder-decoder model"),
])
def test_unsupported_kinds_are_refused_with_the_reason_before_loading_weights(tmp_path, config, message):
    fields = dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=16, vocab_size=300)
    (tmp_path / "config.json").write_text(json.dumps(dict(fields, **config)))
    with pytest.raises(sl.ModelLoadError, match=f"splitlab cannot serve .*{message}"):
        sl.load_model(str(tmp_path), device="cpu")


def test_a_load_error_keeps_the_whole_cause(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    with pytest.raises(sl.ModelLoadError) as err:
        sl.load_model(str(tmp_path), device="cpu")
    text = str(err.value)
    assert "no-such-architecture" in text and "Without network access" not in text and "\n" not in text


# --- sizing of every cache kind --------------------------------------------------------------------------------

def test_a_sliding_window_caps_the_layer_and_mixed_layers_count_one_by_one():
    mistral, gemma2 = sizing.PUBLISHED_MODELS["Mistral-7B"], sizing.PUBLISHED_MODELS["Gemma-2-9B"]
    per_layer = 2 * 8 * 128 * 2  # K and V, 8 KV heads x 128, fp16
    assert sizing.kv_bytes(mistral, 8192) == 32 * 4095 * per_layer  # every layer: the window minus the new token
    assert sizing.kv_bytes(mistral, 1000) == 32 * 1000 * per_layer
    g = sizing.kv_geometry(gemma2)
    assert g.windows == (4096, None) * 21 and g.sliding_layers == 21
    assert sizing.kv_bytes(g, 8192) == 21 * (4095 + 8192) * 2 * 8 * 256 * 2


def test_mla_is_sized_as_its_latent():
    cfg = sizing.PUBLISHED_MODELS["DeepSeek-V3"]
    assert sizing.kv_geometry(cfg).attention == "MLA"
    assert sizing.kv_bytes_per_token(cfg, "fp16") == 61 * (512 + 64) * 2 == 70_272
    assert sizing.kv_bytes_per_token(sizing.kv_geometry(cfg, mla="expanded"), "fp16") == 61 * 128 * 320 * 2
    assert "source" in cfg and "source" in sizing.PUBLISHED_MODELS["Gemma-2-9B"]


@pytest.mark.parametrize("extra, windows", [
    (dict(model_type="qwen2", use_sliding_window=True, sliding_window=8, max_window_layers=1), (None, 8, 8)),
    (dict(model_type="qwen2", use_sliding_window=False, sliding_window=8), (None, None, None)),
    (dict(model_type="gemma3_text", sliding_window=8, sliding_window_pattern=3), (8, 8, None)),
    (dict(model_type="mistral", sliding_window=8), (8, 8, 8)),
])
def test_which_layers_are_windowed_follows_the_family_rule(extra, windows):
    cfg = dict(num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=8, **extra)
    assert sizing.kv_geometry(cfg).windows == windows


@pytest.mark.parametrize("extra, name", [
    (dict(model_type="llama4_text", attention_chunk_size=64), "chunked_attention"),
    (dict(model_type="x", layer_types=["mamba"] * 3), "mamba"),
    (dict(model_type="smollm3", use_sliding_window=True, sliding_window=8), "smollm3"),
])
def test_a_kind_sizing_does_not_model_is_refused_by_name(extra, name):
    cfg = dict(num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=8, **extra)
    with pytest.raises(sizing.UnsupportedCacheError, match=name):
        sizing.kv_geometry(cfg)


def test_kv_size_says_what_the_window_caps(capsys):
    assert cli_main(["kv-size", "Mistral-7B", "--tokens", "8192"]) == 0
    out = capsys.readouterr().out
    assert "32 of 32 layers have a sliding window of 4,096 tokens: each keeps at most 4,095 positions" in out
    assert cli_main(["kv-size", "Gemma-2-9B", "--tokens", "8192", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sliding_layers"] == 21 and data["sliding_windows"] == [4096]
    assert data["kv_bytes_total"] == sizing.kv_bytes(sizing.PUBLISHED_MODELS["Gemma-2-9B"], 8192)
    assert data["kv_bytes_total"] < data["kv_bytes_without_windows"]
    assert cli_main(["kv-size", "DeepSeek-V3"]) == 0
    assert "512 kv_lora_rank + 64 qk_rope_head_dim" in capsys.readouterr().out


def test_kv_size_refuses_a_kind_it_cannot_size(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(model_type="llama4_text", num_hidden_layers=2, num_attention_heads=2,
                                    head_dim=8, attention_chunk_size=64)))
    assert cli_main(["kv-size", str(path)]) == 1
    assert "'chunked_attention' layers" in capsys.readouterr().err


# --- the serving KV budget -------------------------------------------------------------------------------------

def test_admission_counts_a_windowed_cache_at_its_window():
    """A budget of 12 positions: a 30-token request never fits a full-attention model, and fits one whose every
    layer keeps at most 7 positions (the bytes admission reserves are the bytes of the real cache)."""
    sliding, full = ModelExecutor(loaded("mistral-sw"), warm=False), ModelExecutor(loaded("llama"), warm=False)
    for t in (3, WINDOW - 1, 30):
        assert sliding.kv_bytes(t) == sl.prefill(sliding.lm, [list(range(3, 3 + t))]).cache.nbytes
    assert full.kv_bytes_fn is None and full.kv_bytes(30) == 30 * full.kv_bytes_per_token
    budget = 12 * sliding.kv_bytes_per_token
    reqs = [Request(0, 0.0, list(range(3, 28)), 5)]
    assert [r.state.value for r in run(reqs, ServingConfig.colocated(1, kv_budget_bytes=budget), sliding).requests] \
        == ["finished"]
    assert [r.state.value for r in run(reqs, ServingConfig.colocated(1, kv_budget_bytes=budget), full).requests] \
        == ["rejected"]


def test_distributed_workers_announce_their_per_layer_sizes():
    ex = ModelExecutor(loaded("gemma3"), warm=False)
    hello = M.Hello(1, 0, "m", 128, 259, ex.kv_bytes_per_token, 1 << 30, 0, [list(p) for p in ex.kv_bytes_fn.layers])
    backend = DistributedBackend("tiny")
    backend.hello = {1: M.decode(json.loads(json.dumps(hello.to_dict())))}
    assert [backend.kv_bytes_fn(t) for t in (3, 30)] == [ex.kv_bytes(3), ex.kv_bytes(30)]


@pytest.mark.parametrize("family", ["gemma3", "mistral-sw"])
def test_chunked_prefill_continues_a_windowed_cache_exactly(family):
    """Chunks of 5 tokens on top of a cache whose sliding layers already hold their 7 positions."""
    from splitlab.serving import Uniform, WorkloadSpec, make_workload, reference_tokens
    lm = loaded(family)
    reqs = make_workload(WorkloadSpec("chunks", Uniform(12, 30), Uniform(3, 6)), 3, rate_per_s=50.0, seed=4, model=lm)
    cfg = ServingConfig(layout="colocated", workers=1, policy="chunked", chunk_tokens=5, max_batch=4,
                        kv_budget_bytes=None)
    assert run(reqs, cfg, ModelExecutor(lm, warm=False)).tokens() == reference_tokens(lm, reqs)


def test_a_model_object_without_a_tokenizer_takes_token_ids():
    cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    lm = sl.load_model(transformers.LlamaForCausalLM(cfg))
    assert lm.tokenizer is None and len(sl.generate(lm, [[5, 6, 7]], 3).tokens[0]) == 3
    with pytest.raises(ValueError, match="has no tokenizer: give prompts as token ids, or pass tokenizer="):
        sl.generate(lm, "text", 3)


def test_a_cache_of_layers_that_differ_names_its_layer_shapes():
    cache = sl.prefill(loaded("gemma3"), PROMPTS).cache
    assert cache.layer_lengths == (WINDOW - 1, WINDOW - 1, 13) and cache.windows == (WINDOW, WINDOW, None)
    with pytest.raises(ValueError, match="layers differ in shape"):
        cache.shape
    assert "layers hold [7, 7, 13]" in repr(cache)
