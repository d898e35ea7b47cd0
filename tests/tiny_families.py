"""Tiny random-weight configs of decoder-only families, as a reader's own model would arrive: built from config
dicts, saved with ``save_pretrained`` and loaded by path (the hub-path route), each built once per session.

Every config has 3 layers, hidden 32, 4 query heads and (where the family has GQA) 2 KV heads, and windowed
layers have a window of ``WINDOW`` = 8 tokens, so a sliding layer keeps 7 positions: the prompts below are
longer and shorter than that, and decoding crosses it.
"""
from __future__ import annotations

import functools
import os
import tempfile

import torch
import transformers

import splitlab as sl

WINDOW = 8
BASE = dict(vocab_size=259, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128, bos_token_id=256, eos_token_id=257, pad_token_id=258,
            tie_word_embeddings=False, initializer_range=0.2)
GPT = dict(vocab_size=259, n_embd=32, n_layer=3, n_head=4, n_positions=128, bos_token_id=256, eos_token_id=257,
           initializer_range=0.2)
SFS = ["sliding_attention", "full_attention", "sliding_attention"]


def _b(**kw) -> dict:
    return dict(BASE, **kw)


#: family -> (model_type, config fields, what it exercises)
FAMILIES: dict[str, tuple[str, dict, str]] = {
    "llama": ("llama", _b(), "GQA"),
    "mistral-sw": ("mistral", _b(sliding_window=WINDOW), "every layer windowed"),
    "qwen2": ("qwen2", _b(), "GQA, biased QKV"),
    "qwen3": ("qwen3", _b(head_dim=8), "QK norm"),
    "gemma": ("gemma", _b(head_dim=8), "GeGLU, scaled embeddings"),
    "phi": ("phi", _b(), "partial rotary, parallel block"),
    "gpt2": ("gpt2", GPT, "MHA, learned positions"),
    "gptj": ("gptj", dict(GPT, rotary_dim=4), "MHA, rotary on part of a head"),
    "gpt-bigcode-mqa": ("gpt_bigcode", dict(GPT, multi_query=True), "MQA"),
    "stablelm": ("stablelm", _b(), "partial rotary, LayerNorm"),
    "olmo2": ("olmo2", _b(), "QK norm, post-norm"),
    "cohere": ("cohere", _b(), "parallel block, logit scale"),
    "starcoder2": ("starcoder2", _b(sliding_window=WINDOW), "every layer windowed, biases"),
    "granite": ("granite", _b(), "muP multipliers"),
    "deepseek-v3": ("deepseek_v3", _b(num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=4,
                                      qk_nope_head_dim=8, v_head_dim=8, n_routed_experts=4, num_experts_per_tok=2,
                                      n_shared_experts=1, moe_intermediate_size=16, n_group=1, topk_group=1,
                                      first_k_dense_replace=1), "MLA latent cache, MoE"),
    "gemma3": ("gemma3_text", _b(head_dim=8, query_pre_attn_scalar=8, sliding_window=WINDOW,
                                 layer_types=["sliding_attention", "sliding_attention", "full_attention"]),
               "mixed: 2 sliding, 1 global"),
    "ministral": ("ministral", _b(head_dim=8, sliding_window=WINDOW, layer_types=SFS), "mixed: sliding, global"),
    "qwen3-mixed": ("qwen3", _b(head_dim=8, use_sliding_window=True, sliding_window=WINDOW, layer_types=SFS),
                    "mixed via layer_types"),
    "gemma2": ("gemma2", _b(head_dim=8, query_pre_attn_scalar=8, sliding_window=WINDOW),
               "no sdpa (eager), alternating sliding/global, soft-capping"),
}
SLIDING = ["mistral-sw", "starcoder2"]
MIXED = ["gemma3", "ministral", "qwen3-mixed", "gemma2"]

#: Prompts of 13, 9 and 4 tokens (longer and shorter than the window), ids below 256 (the byte-level tokenizer the
#: saved models fall back to).
PROMPTS = [[3 + (7 * i) % 90 for i in range(13)], [5 + (11 * i) % 88 for i in range(9)], [60, 61, 62, 63]]

_ROOT = tempfile.mkdtemp(prefix="splitlab-families-")


def build_model(family: str) -> transformers.PreTrainedModel:
    """A fresh random-weight model of ``family`` (seed 0), built from its config dict."""
    model_type, fields, _ = FAMILIES[family]
    config = transformers.AutoConfig.for_model(model_type, **fields)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return transformers.AutoModelForCausalLM.from_config(config).eval()


@functools.lru_cache(maxsize=None)
def saved_path(family: str) -> str:
    """The directory ``family``'s model was saved to with ``save_pretrained`` (once per session)."""
    path = os.path.join(_ROOT, family)
    build_model(family).save_pretrained(path)
    return path


@functools.lru_cache(maxsize=None)
def loaded(family: str) -> sl.LoadedModel:
    """``family`` loaded by path, float32 on CPU, once per session (tests must not modify it)."""
    transformers.logging.set_verbosity_error()
    return sl.load_model(saved_path(family), device="cpu", dtype="float32")
