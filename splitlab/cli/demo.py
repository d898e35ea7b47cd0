"""``python -m splitlab demo``: one real request (prefill, then greedy decode), timed and checked against
transformers' ``generate``. ``check_loadable`` (the fast check that a model name can be loaded at all) lives in
:mod:`splitlab.phases.locate`; the other subcommands import it from here."""
from __future__ import annotations

import math

from .. import sizing
from ..common.presets import list_presets
from ..phases.locate import ModelNotFound, check_loadable
from ..common.progress import progress_bar
from .args import (THREADS, device_name, human_bytes, number, positive_int, progress, seed_int, threads_fields,
                   weight_dtype)
from .registry import arg, command

__all__ = ["demo", "check_loadable", "check_context", "ModelNotFound", "quiet_hub"]


def check_context(model: str, prompt_tokens: int, new_tokens: int, context: int | None = None) -> None:
    """Refuse ``--prompt-tokens`` + ``--new-tokens`` beyond the model's context: ``context`` once the model is
    loaded, or before (no torch, no load) a preset's from its config."""
    if context is None:
        if model not in list_presets():
            return
        config = sizing.resolve_config(model)
        context = config.get("max_position_embeddings") or config.get("n_positions") or 2048
    if prompt_tokens + new_tokens > context:
        raise ValueError(f"--prompt-tokens {prompt_tokens} + --new-tokens {new_tokens} = {prompt_tokens + new_tokens}"
                         f" tokens, beyond the context of {model} ({context} tokens)")


def quiet_hub() -> None:
    """Keep stderr for splitlab's own one-line errors (transformers and the hub client log warnings there)."""
    for name in ("transformers", "huggingface_hub"):
        __import__(f"{name}.utils", fromlist=["logging"]).logging.set_verbosity_error()


@command("demo", "run one real request (prefill, then greedy decode) and report its timings and KV cache",
         arg("--model", default="tiny", help="preset, Hugging Face name or local path (default: tiny)"),
         arg("--prompt-tokens", type=positive_int, default=128, metavar="N", help="prompt length (default 128)"),
         arg("--new-tokens", type=positive_int, default=32, metavar="N", help="tokens to generate (default 32)"),
         arg("--device", type=device_name, default=None, help="cpu, cuda, cuda:N or mps (default: best available)"),
         arg("--dtype", type=weight_dtype, default=None,
             help="weight dtype, e.g. float32, bfloat16 (default: fp32 CPU, bf16 GPU)"),
         arg("--seed", type=seed_int, default=0, help="seeds the random weights and the prompt (default 0)"),
         arg("--no-reference", action="store_true", help="skip the check against transformers' generate"), THREADS)
def demo(args) -> tuple[dict, list[str]]:
    check_loadable(args.model)  # before importing torch: bad names fail in a fraction of a second
    check_context(args.model, args.prompt_tokens, args.new_tokens)  # a preset's context is known without torch
    from ..phases.device import describe_device
    from ..phases.engine import as_token_batch, generate, reference_generate
    from ..phases.models import load_model
    quiet_hub()
    stages = ["load", "warm up", "generate"] + ["transformers generate"] * (not args.no_reference)
    with progress_bar(len(stages), "demo", progress(args), "stage") as bar:
        def stage(i: int) -> None:
            bar.set_postfix_str(stages[i])
            bar.update(i > 0)
        stage(0)
        lm = load_model(args.model, device=args.device, dtype=args.dtype, seed=args.seed, threads=args.threads)
        check_context(args.model, args.prompt_tokens, args.new_tokens, lm.max_context)
        from ..phases.profiling import text_prompt, warm_up
        ids = text_prompt(lm, args.prompt_tokens, args.seed)
        as_token_batch(lm, [ids], args.new_tokens)  # raises ContextLengthError before any work
        stage(1)
        warm_up(lm, args.prompt_tokens, min(32, args.new_tokens))  # first calls pay one-off costs
        stage(2)
        g = generate(lm, [ids], max_new_tokens=args.new_tokens)
        tokens = g.tokens[0]
        if not args.no_reference:
            stage(3)
        matches = None if args.no_reference else reference_generate(lm, ids, args.new_tokens) == tokens
    per_token = sizing.kv_bytes_per_token(lm.geometry, lm.dtype)
    from ..serving.metrics import percentiles  # NaN when there are no decode steps -> None (JSON null)
    step_p = {k: None if math.isnan(v) else v for k, v in percentiles(g.decode_step_s, (50, 90)).items()}
    text = lm.decode(tokens)
    data = dict(
        model=lm.name, model_description=repr(lm), random_weights=lm.random_weights, device=str(lm.device),
        device_description=describe_device(lm.device), dtype=str(lm.dtype).replace("torch.", ""), seed=args.seed,
        prompt_tokens=len(ids), new_tokens=len(tokens), prefill_s=g.prefill_s, ttft_s=g.ttft_s,
        decode_steps=len(g.decode_step_s), decode_s_per_token_median=step_p["p50"],
        decode_s_per_token_p90=step_p["p90"], kv_bytes_per_token=number(per_token),
        kv_bytes_after_prefill=g.kv_bytes_after_prefill, kv_bytes_final=g.kv_bytes_final,
        kv_tokens_final=g.cache.seq_len, tokens=tokens, text=text, matches_reference=matches, **threads_fields(lm))
    ms = lambda s: "n/a" if s is None else f"{s * 1e3:.2f} ms"  # noqa: E731
    check = {None: "skipped (--no-reference)", True: "yes, identical tokens",
             False: "NO, the tokens differ (please report this)"}[matches]
    lines = [
        "splitlab demo: one request, prefill then greedy decode (after one warm-up call)",
        f"model        {data['model_description']}",
        f"device       {lm.device}: {data['device_description']}",
        f"threads      {lm.threads_note}",
        f"prompt       {len(ids)} tokens; generated {len(tokens)} tokens",
        f"prefill      {ms(g.prefill_s)}   TTFT {ms(g.ttft_s)} (prefill + choosing the first token)",
        f"decode       {ms(data['decode_s_per_token_median'])}/token median, "
        f"{ms(data['decode_s_per_token_p90'])} P90 over {len(g.decode_step_s)} steps" if g.decode_step_s else
        "decode       no decode step (one new token: it comes from the prefill)",
        f"KV cache     {human_bytes(g.kv_bytes_after_prefill)} after prefill ({len(ids)} tokens), "
        f"{human_bytes(g.kv_bytes_final)} at the end ({g.cache.seq_len} tokens; the last token is not cached yet)"
        f" = {number(per_token):,} B/token",
        f"text         {text!r}" + ("   (gibberish: random weights)" if lm.random_weights else ""),
        f"reference    same as transformers generate: {check}",
    ]
    return data, lines


