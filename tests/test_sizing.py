"""Analytic sizing: published KV-per-token figures, geometry of MHA/GQA/MQA configs, roofline arithmetic."""
from __future__ import annotations

import json

import pytest
import torch

from splitlab import sizing
from splitlab.sizing import (GPUS, PUBLISHED_MODELS, arithmetic_intensity, decode_bytes, decode_flops, dtype_bytes,
                             kv_bytes, kv_bytes_per_token, kv_geometry, min_decode_step_s, prefill_flops,
                             resolve_config, ridge_point, roofline_time_s)


# --- published KV sizes ------------------------------------------------------------------------------------

def test_llama2_7b_half_a_mebibyte_per_token():
    # 2 x 32 layers x 32 KV heads x 128 x 2 bytes: the often-quoted 0.5 MiB per token of Llama-2-7B in fp16
    assert kv_bytes_per_token(PUBLISHED_MODELS["Llama-2-7B"], "fp16") == 524_288
    # a full 4096-token context: 2 GiB per sequence
    assert kv_bytes(PUBLISHED_MODELS["Llama-2-7B"], 4096, dtype="fp16") == 2 * 2**30


def test_llama3_8b_gqa_quarter_of_mha():
    cfg = PUBLISHED_MODELS["Llama-3-8B"]
    assert kv_bytes_per_token(cfg, "fp16") == 131_072
    assert kv_bytes_per_token(cfg, torch.bfloat16) == 131_072
    assert kv_geometry(cfg).attention == "GQA"
    assert kv_geometry(PUBLISHED_MODELS["Llama-2-7B"]).attention == "MHA"


def test_opt13b_800kb_per_token_as_in_vllm_paper():
    # Kwon et al. 2023 (vLLM), sec. 3: 2 x 5120 hidden x 40 layers x 2 bytes = 800 KB per token.
    # OPT's config has neither num_key_value_heads nor head_dim: both come from heads and hidden size.
    assert kv_bytes_per_token(PUBLISHED_MODELS["OPT-13B"], "fp16") == 2 * 5120 * 40 * 2 == 819_200


def test_starcoder_is_mqa():
    g = kv_geometry(PUBLISHED_MODELS["StarCoder-15B"])
    assert g.kv_heads == 1 and g.heads == 48 and g.head_dim == 6144 // 48
    assert g.attention == "MQA"
    assert kv_bytes_per_token(g, "fp16") == 2 * 40 * 1 * 128 * 2


def test_head_dim_taken_from_config_not_hidden_size():
    cfg = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64,
           "head_dim": 32}  # hidden/heads would be 16
    assert kv_geometry(cfg).head_dim == 32
    assert kv_bytes_per_token(cfg, "fp32") == 2 * 2 * 2 * 32 * 4


def test_geometry_needs_layers_and_heads():
    with pytest.raises(ValueError, match="cannot size"):
        kv_geometry({"hidden_size": 64})


def test_kv_bytes_scales_and_rejects_negatives():
    cfg = PUBLISHED_MODELS["Mistral-7B"]
    per = kv_bytes_per_token(cfg, "bf16")
    assert kv_bytes(cfg, 1000, batch=3, dtype="bf16") == per * 3000
    assert kv_bytes(cfg, 1000, dtype="int8") == per / 2 * 1000
    assert kv_bytes(cfg, 0) == 0
    with pytest.raises(ValueError, match=">= 0"):
        kv_bytes(cfg, -1)
    with pytest.raises(ValueError, match=">= 0"):
        kv_bytes(cfg, 10, batch=-2)


def test_dtype_bytes():
    assert dtype_bytes("fp16") == dtype_bytes("bfloat16") == dtype_bytes(torch.float16) == 2
    assert dtype_bytes("float32") == dtype_bytes(torch.float32) == 4
    assert dtype_bytes("int4") == 0.5
    with pytest.raises(ValueError, match="unknown dtype"):
        dtype_bytes("float13")


# --- roofline arithmetic on hand numbers -------------------------------------------------------------------

def test_ridge_point_and_intensity():
    assert ridge_point(100e12, 2e12) == pytest.approx(50.0)
    assert arithmetic_intensity(600, 200) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="positive"):
        ridge_point(0, 1e12)
    with pytest.raises(ValueError, match="positive"):
        arithmetic_intensity(1.0, 0)


def test_min_decode_step_and_roofline_time():
    # 14 GB of weights + 2 GB of KV read once at 2 TB/s: at least 8 ms per step
    assert min_decode_step_s(14e9, 2e9, 2e12) == pytest.approx(8e-3)
    with pytest.raises(ValueError, match="positive"):
        min_decode_step_s(1, 1, 0)
    # compute-bound: 1e15 FLOP at 1e14 FLOP/s = 10 s beats 1e9 B at 1e12 B/s = 1 ms
    assert roofline_time_s(1e15, 1e9, 1e14, 1e12) == pytest.approx(10.0)
    # memory-bound: 1e9 FLOP = 10 us, 1e10 B = 10 ms
    assert roofline_time_s(1e9, 1e10, 1e14, 1e12) == pytest.approx(0.01)


def test_flop_and_byte_counts_on_hand_numbers():
    g = sizing.KVGeometry(layers=2, heads=4, kv_heads=2, head_dim=8)
    # 2*P*t + 2*L*H*D*t^2 with P=1000, t=10: 20000 + 2*2*4*8*100 = 32800, per sequence
    assert prefill_flops(1000, 10, g, batch=3) == 3 * 32_800
    # 2*P + 4*L*H*D*c with c=5: 2000 + 4*2*4*8*5 = 3280, per sequence
    assert decode_flops(1000, 2, 5, g) == 2 * 3_280
    assert decode_bytes(500, batch=2, context=5, kv_bytes_token=10) == 600


def test_decode_at_batch_one_is_memory_bound_on_every_gpu():
    cfg = PUBLISHED_MODELS["Llama-3-8B"]
    g = kv_geometry(cfg)
    flops = decode_flops(cfg["n_params"], 1, 1024, g)
    nbytes = decode_bytes(cfg["n_params"] * 2, 1, 1024, kv_bytes_per_token(cfg, "bf16"))
    intensity = arithmetic_intensity(flops, nbytes)
    assert 0.5 < intensity < 1.5  # about 1 FLOP per byte: 2 FLOPs per 2-byte weight
    for name, gpu in GPUS.items():
        assert intensity < ridge_point(gpu["peak_flops_per_s"], gpu["bandwidth_bytes_per_s"]), name


# --- resolve_config ----------------------------------------------------------------------------------------

def test_resolve_config_published_and_preset():
    assert resolve_config("Llama-3-8B")["num_key_value_heads"] == 8
    tiny = resolve_config("tiny")
    assert tiny["model_type"] == "llama" and tiny["num_key_value_heads"] == 2
    # Llama-3.2-1B's shape (from its config.json): 16 layers x 8 KV heads x 64 -> 32 KiB per token in bf16
    assert kv_bytes_per_token(resolve_config("llama-3.2-1b"), "bf16") == 32_768


def test_resolve_config_path(tmp_path):
    cfg = {"model_type": "llama", "num_hidden_layers": 3, "num_attention_heads": 6, "num_key_value_heads": 3,
           "head_dim": 16}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert resolve_config(str(tmp_path / "config.json")) == cfg
    assert resolve_config(str(tmp_path)) == cfg  # a model directory
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        resolve_config(str(tmp_path / "bad.json"))


def test_resolve_config_unknown():
    with pytest.raises(ValueError, match="unknown model 'no-such-model'.*Llama-2-7B.*tiny"):
        resolve_config("no-such-model")
