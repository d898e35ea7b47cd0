"""``python -m splitlab kv-size``: KV-cache bytes of a model from its config (no model loaded, no torch).

Every cache kind :mod:`splitlab.sizing.layers` models: full attention, sliding-window layers (capped at the
window, and said so), mixed layer types counted layer by layer, and MLA (the latent an MLA engine caches, with a
note of what transformers 4.x cached instead). A kind it does not model is refused with its name.
"""
from __future__ import annotations

import os
from pathlib import Path

from .. import sizing
from ..common.presets import list_presets
from ..phases.trained import offline_model
from .args import human_bytes, kv_dtype, number, positive_int
from .registry import CLIError, arg, command

#: most tokens (--tokens x --batch) kv-size sizes: far past any context, and below the bytes where a float's
#: integers end (2**53, 8 PiB; 1e30 tokens printed 2,047,999,999,999,999,999,999,999,999,997,952 B for 2.048e33)
MAX_TOKENS = 10 ** 12

__all__ = ["kv_size"]


def _per_token_line(g, config: dict, dtype: str, element: float, per_token: float) -> str:
    if g.attention == "MLA":
        rank, rope = config["kv_lora_rank"], config["qk_rope_head_dim"]
        return (f"per token  {number(per_token):,} B ({human_bytes(per_token)}) = {g.layers} layers x ({rank} "
                f"kv_lora_rank + {rope} qk_rope_head_dim) x {number(element)} B: the latent an MLA engine caches")
    if len({(layer.kv_heads, layer.k_dim, layer.v_dim) for layer in g.per_layer}) == 1:
        return (f"per token  {number(per_token):,} B ({human_bytes(per_token)}) = 2 (K,V) x {g.layers} layers x "
                f"{g.kv_heads} KV heads x {g.head_dim} head_dim x {number(element)} B")
    return f"per token  {number(per_token):,} B ({human_bytes(per_token)}): the sum over layers of K and V widths"


def _window_lines(g, tokens: int) -> list[str]:
    lines = []
    for window in sorted({w for w in g.windows if w is not None}):
        n = sum(w == window for w in g.windows)
        held = min(tokens, window - 1)
        rest = g.layers - g.sliding_layers
        lines.append(
            f"window     {n} of {g.layers} layers have a sliding window of {window:,} tokens: each keeps at most "
            f"{window - 1:,} positions (the token being decoded is the window's {window:,}th), so at {tokens:,} "
            f"tokens they hold {held:,}" + (f"; the other {rest} layers keep all {tokens:,}" if rest else ""))
    return lines


def _default_dtype(args) -> str:
    """Set ``args.dtype`` when not given: the dtype ``demo`` and ``serve`` run a preset or the trained model in
    (fp32: the ``tiny*`` presets everywhere, the others on a CPU), else fp16; return a note saying
    so ('' when given)."""
    if args.dtype is not None:
        return ""
    if args.model in list_presets() or offline_model(args.model) is not None:
        args.dtype = "fp32"
        where = "everywhere" if args.model.startswith("tiny") else "on a CPU, bf16 on a GPU"
        whose = "the preset's dtype" if args.model in list_presets() else "the trained model's dtype"
        return f" ({whose}: load_model gives it fp32 {where}; --dtype to change)"
    args.dtype = "fp16"
    return " (the default for a model that is not a preset; --dtype to change)"


@command("kv-size", "KV-cache bytes of a model from its config (no model is loaded)",
         arg("model", help="a splitlab preset, a published model (e.g. Llama-3-8B) or a config.json path"),
         arg("--tokens", type=positive_int, default=4096, help="tokens per sequence (default 4096)"),
         arg("--batch", type=positive_int, default=1, help="sequences (default 1)"),
         arg("--dtype", type=kv_dtype, default=None,
             help="KV element type: fp32, fp16, bf16, fp8, int8, int4 (default: a preset's fp32, what load_model "
                  "gives it on a CPU; fp16 for other models)"))
def kv_size(args) -> tuple[dict, list[str]]:
    if args.tokens * args.batch > MAX_TOKENS:
        raise CLIError(f"--tokens x --batch must be at most {MAX_TOKENS:,} tokens, got {args.tokens:,} x "
                       f"{args.batch:,}")
    dtype_note = _default_dtype(args)
    element = sizing.dtype_bytes(args.dtype)
    trained = offline_model(args.model)  # smollm2-135m-instruct: the shape of a preset, trained weights
    looks_like_path = args.model.endswith(".json") or os.sep in args.model or "/" in args.model
    if looks_like_path and not trained and args.model not in sizing.PUBLISHED_MODELS and not Path(args.model).exists():
        raise ValueError(f"config file {args.model!r} does not exist")
    config = sizing.resolve_config(trained.shape_preset if trained else args.model)  # a JSON dict, else ValueError
    g = sizing.kv_geometry(config)
    per_token = sizing.kv_bytes_per_token(g, args.dtype)
    total = sizing.kv_bytes(g, args.tokens, args.batch, args.dtype)
    linear = per_token * args.tokens * args.batch
    context = config.get("max_position_embeddings") or config.get("n_positions")
    windows = sorted({w for w in g.windows if w is not None})
    data = dict(model=args.model, tokens=args.tokens, batch=args.batch, dtype=args.dtype,
                layers=g.layers, heads=g.heads, kv_heads=g.kv_heads, head_dim=g.head_dim, attention=g.attention,
                dtype_bytes=number(element), kv_bytes_per_token=number(per_token), kv_bytes_total=number(total),
                max_context=context, sliding_layers=g.sliding_layers, sliding_windows=windows,
                kv_bytes_without_windows=number(linear), dtype_source=dtype_note.strip(" ()") or "--dtype")
    kind = "MLA (one latent per token, shared by every head)" if g.attention == "MLA" else \
        f"{g.kv_heads} KV heads ({g.attention}), head_dim {g.head_dim}"
    per_line = _per_token_line(g, config, args.dtype, element, per_token)
    lines = [f"{args.model}: {g.layers} layers, {g.heads} heads, {kind}, KV in {args.dtype}{dtype_note}",
             per_line + (" (while within every window)" if windows else ""), *_window_lines(g, args.tokens)]
    if g.attention == "MLA":
        data.update(kv_lora_rank=config["kv_lora_rank"], qk_rope_head_dim=config["qk_rope_head_dim"])
        try:  # the per-head size needs qk_nope_head_dim and v_head_dim, which a latent-only config may lack
            expanded = sizing.kv_bytes_per_token(sizing.kv_geometry(config, mla="expanded"), args.dtype)
        except sizing.UnsupportedCacheError:
            expanded = None
        if expanded is not None:
            data.update(kv_bytes_per_token_expanded=number(expanded))
            lines.append(f"note       transformers 4.x cached per-head keys and values instead: {number(expanded):,} "
                         f"B per token ({expanded / per_token:.0f}x); transformers 5 caches the latent")
    lines.append(f"total      {args.tokens:,} tokens x batch {args.batch} = {number(total):,} B ({human_bytes(total)})"
                 + (f", not {number(linear):,} B as if every layer kept every token" if total != linear else ""))
    if context and args.tokens > context:
        lines.append(f"note       {args.tokens:,} tokens exceed this model's context of {context:,}")
    return data, lines
