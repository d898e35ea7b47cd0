"""``python -m splitlab kv-size``: KV-cache bytes of a model from its config (no model loaded, no torch)."""
from __future__ import annotations

import os
from pathlib import Path

from .. import sizing
from .args import human_bytes, number, positive_int
from .registry import arg, command

__all__ = ["kv_size"]


@command("kv-size", "KV-cache bytes of a model from its config (no model is loaded)",
         arg("model", help="a splitlab preset, a published model (e.g. Llama-3-8B) or a config.json path"),
         arg("--tokens", type=positive_int, default=4096, help="tokens per sequence (default 4096)"),
         arg("--batch", type=positive_int, default=1, help="sequences (default 1)"),
         arg("--dtype", default="fp16", help="KV element type: fp32, fp16, bf16, fp8, int8, int4 (default fp16)"))
def kv_size(args) -> tuple[dict, list[str]]:
    element = sizing.dtype_bytes(args.dtype)
    looks_like_path = args.model.endswith(".json") or os.sep in args.model or "/" in args.model
    if looks_like_path and args.model not in sizing.PUBLISHED_MODELS and not Path(args.model).exists():
        raise ValueError(f"config file {args.model!r} does not exist")
    config = sizing.resolve_config(args.model)
    if not isinstance(config, dict):
        raise ValueError(f"{args.model!r} does not hold a config object (a JSON dict)")
    g = sizing.kv_geometry(config)
    per_token = sizing.kv_bytes_per_token(g, args.dtype)
    total = sizing.kv_bytes(g, args.tokens, args.batch, args.dtype)
    context = config.get("max_position_embeddings") or config.get("n_positions")
    data = dict(model=args.model, tokens=args.tokens, batch=args.batch, dtype=args.dtype,
                layers=g.layers, heads=g.heads, kv_heads=g.kv_heads, head_dim=g.head_dim, attention=g.attention,
                dtype_bytes=number(element), kv_bytes_per_token=number(per_token), kv_bytes_total=number(total),
                max_context=context)
    lines = [
        f"{args.model}: {g.layers} layers, {g.heads} heads, {g.kv_heads} KV heads ({g.attention}), "
        f"head_dim {g.head_dim}, KV in {args.dtype}",
        f"per token  {number(per_token):,} B ({human_bytes(per_token)}) = 2 (K,V) x {g.layers} layers x "
        f"{g.kv_heads} KV heads x {g.head_dim} head_dim x {number(element)} B",
        f"total      {args.tokens:,} tokens x batch {args.batch} = {number(total):,} B ({human_bytes(total)})",
    ]
    if context and args.tokens > context:
        lines.append(f"note       {args.tokens:,} tokens exceed this model's context of {context:,}")
    return data, lines
