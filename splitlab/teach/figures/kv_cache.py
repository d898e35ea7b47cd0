"""Chapter 2's figures and tables: the cache's growth, MHA/GQA/MQA side by side, published configurations.

Every figure function draws on a given matplotlib Axes (or makes one of the book's size), labels both axes with
units, sets a short title and returns the Axes; table functions return DataFrames with units in the headers."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ... import sizing
from ...phases import profiling
from ...phases.engine import generate
from ...phases.models import load_model
from .phases import DECODE, PREDICTED, fmt3, new_ax
from .phone import styled

__all__ = ["kv_growth", "cache_by_attention", "measure_attention_variants", "attention_note", "published_shapes",
           "published_sizes", "mla_comparison"]


@styled
def kv_growth(growth: pd.DataFrame, ax=None):
    """Cache bytes measured after the prefill and after each decode step (``profiling.measure_kv_growth``)
    against the formula tokens x KV bytes per token."""
    ax = new_ax(ax)
    ax.plot(growth["tokens_in_cache"], growth["nbytes"] / 2 ** 10, "o", ms=3, color=DECODE, label="measured")
    ax.plot(growth["tokens_in_cache"], growth["predicted_nbytes"] / 2 ** 10, "-", color=PREDICTED, lw=1,
            label="formula")
    ax.set_xlabel("tokens in the cache")
    ax.set_ylabel("KV cache size (KiB)")
    ax.set_title("The cache grows by the same bytes every token")
    ax.legend()
    return ax


@styled
def cache_by_attention(variants: pd.DataFrame, tokens: int, ax=None):
    """Measured and formula cache sizes of models that differ only in their KV heads: one pair of bars per row of
    ``variants`` (columns ``attention``, ``KV heads``, ``cache (KiB)``, ``formula (KiB)``), each cache holding
    ``tokens`` tokens."""
    ax = new_ax(ax)
    x = np.arange(len(variants))
    ax.bar(x - 0.2, variants["cache (KiB)"], width=0.4, color=DECODE, label="measured")
    ax.bar(x + 0.2, variants["formula (KiB)"], width=0.4, color=PREDICTED, alpha=0.6, label="formula")
    ax.set_xticks(x, [f"{a}\n{k} KV heads" for a, k in zip(variants["attention"], variants["KV heads"])])
    ax.set_ylabel(f"cache of {tokens} tokens (KiB)")
    ax.set_title("Same query heads, fewer KV heads: a smaller cache")
    ax.grid(axis="x", visible=False)
    ax.legend()
    return ax


def measure_attention_variants(names: list[str], prompt_tokens: int = 256, new_tokens: int = 32,
                               rounds: int = 3) -> pd.DataFrame:
    """Load each preset of ``names`` (same model but for its KV heads), generate ``new_tokens`` after the same
    ``prompt_tokens``-token prompt, and record its final cache: attention kind, KV heads, measured and formula
    cache (KiB), and the decode step (ms): the median step of a request, the fastest of ``rounds`` requests,
    the models taking turns (a busy moment of a shared machine then slows every model, not one). The cache holds
    prompt + new - 1 tokens (the last token chosen is not fed back). Columns as named; indexed by model.

    Raises:
        ValueError: ``rounds`` < 1.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    models = {name: load_model(name) for name in names}
    for lm in models.values():
        profiling.warm_up(lm, prompt_tokens)
    steps = {name: [] for name in names}
    gens = {}
    for _ in range(rounds):
        for name, lm in models.items():
            gens[name] = generate(lm, [profiling.random_prompt(lm, prompt_tokens)], max_new_tokens=new_tokens)
            steps[name].append(float(np.median(gens[name].decode_step_s)))
    rows = []
    for name, lm in models.items():
        gen = gens[name]
        formula = gen.cache.seq_len * sizing.kv_bytes_per_token(lm.config, lm.dtype)
        rows.append({"model": name, "attention": lm.geometry.attention, "KV heads": lm.geometry.kv_heads,
                     "tokens": gen.cache.seq_len, "cache (KiB)": gen.kv_bytes_final / 2 ** 10,
                     "formula (KiB)": formula / 2 ** 10, "decode step (ms)": 1e3 * min(steps[name])})
    return pd.DataFrame(rows).set_index("model")


def attention_note(variants: pd.DataFrame) -> str:
    """What the decode-step column of :func:`measure_attention_variants` says beside the cache column, as
    Markdown computed from both: how many times larger the largest cache is than the smallest and how the step
    of the one compares with that of the other (longer by more than 10%, within 10%, or shorter)."""
    v = variants.sort_values("cache (KiB)")
    small, large = v.iloc[0], v.iloc[-1]
    cache_x = large["cache (KiB)"] / small["cache (KiB)"]
    step_x = large["decode step (ms)"] / small["decode step (ms)"]
    text = (f"The cache of {large.name} is {cache_x:.3g}x that of {small.name}; its decode step is {fmt3(step_x)}x as "
            f"long ({fmt3(large['decode step (ms)'])} against {fmt3(small['decode step (ms)'])} ms). ")
    why = ("with a model this small, fixed per-step costs (chapter 3 measures them) are most of every step, and "
           "the cache is a small part of what a step reads")
    if step_x > 1.1:
        return text + f"Reading the larger cache costs time, but far less than in proportion to it: {why}."
    if step_x >= 0.9:
        return text + (f"The steps barely differ while the caches differ {cache_x:.3g}x: {why}, lost in how much a "
                       "step's time varies on this machine.")
    return text + (f"The largest cache took the shortest step here: {why}, and the difference is how much a step's "
                   "time varies on this machine, not the cache.")


def published_shapes(models: list[str]) -> pd.DataFrame:
    """Attention shape of published configs (``sizing.PUBLISHED_MODELS``): attention kind, layers, query heads,
    KV heads, head dim (counts as integers; short headers that wrap, so the table fits a phone's column)."""
    rows = []
    for name in models:
        g = sizing.kv_geometry(sizing.resolve_config(name))
        rows.append({"model": name, "attention": g.attention, "layers": g.layers, "query heads": g.heads,
                     "KV heads": g.kv_heads, "head dim": g.head_dim})
    return pd.DataFrame(rows).set_index("model")


def published_sizes(models: list[str], gpu: str = "H100", context: int = 4096, dtype: str = "fp16") -> pd.DataFrame:
    """KV bytes of published configs in ``dtype``: KiB per token, GiB per request of ``context`` tokens, and how
    many such requests fit in ``gpu``'s memory beside the weights (0 when the weights alone do not fit)."""
    memory = sizing.GPUS[gpu]["memory_bytes"]
    rows = []
    for name in models:
        cfg = sizing.resolve_config(name)
        per_token = sizing.kv_bytes_per_token(cfg, dtype)
        free = memory - cfg["n_params"] * sizing.dtype_bytes(dtype)
        rows.append({"model": name, "KiB per token": fmt3(per_token / 2 ** 10),
                     f"GiB at {context:,} tokens": fmt3(per_token * context / 2 ** 30),
                     f"requests per {gpu}": int(max(free, 0) // (per_token * context))})
    return pd.DataFrame(rows).set_index("model")


def mla_comparison(model: str = "DeepSeek-V3", dtype: str = "bf16", gqa_kv_heads: int = 8) -> pd.DataFrame:
    """KV bytes per token of an MLA model from ``sizing.PUBLISHED_MODELS`` (DeepSeek-V3 by default) three ways:
    what MLA caches, layers x (kv_lora_rank + qk_rope_head_dim) elements (``sizing.kv_bytes_per_token``; the
    DeepSeek-V2 paper's Table 1); MHA over all its heads (keys of qk_nope + qk_rope elements, values of
    v_head_dim, per head); GQA with ``gqa_kv_heads`` KV heads of head_dim 128 (Llama-3-70B's layout).
    Columns: elements per layer and token, KiB per token, x MLA. Raises KeyError for a config without MLA."""
    cfg = sizing.resolve_config(model)
    b, layers = sizing.dtype_bytes(dtype), cfg["num_hidden_layers"]
    k_dim = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    per_layer = {"MLA: latent + RoPE key": cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"],
                 f"MHA, {cfg['num_attention_heads']} heads": cfg["num_attention_heads"] * (k_dim + cfg["v_head_dim"]),
                 f"GQA, {gqa_kv_heads} KV heads of 128": gqa_kv_heads * 2 * 128}
    mla = sizing.kv_bytes_per_token(cfg, dtype)
    if mla != layers * per_layer["MLA: latent + RoPE key"] * b:
        raise RuntimeError(f"sizing.kv_bytes_per_token gives {mla} bytes for {model}, not the MLA formula's")
    rows = [{"cache layout": name, "elements per layer": f"{int(n):,}", "KiB per token": fmt3(layers * n * b / 2 ** 10),
             "x MLA": fmt3(layers * n * b / mla)} for name, n in per_layer.items()]
    return pd.DataFrame(rows).set_index("cache layout")
