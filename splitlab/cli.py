"""``python -m splitlab SUBCOMMAND`` (or the ``splitlab`` console script).

Each subcommand is one function registered with :func:`command`; it returns ``(data, lines)``: a JSON-ready
dict (printed as one JSON object with ``--json``, which every subcommand gets) and the human-readable lines.
Adding ``serve``, ``transfer``, ``simulate`` or ``plan`` later means writing one more such function.

Bad input exits non-zero with one line on stderr and no traceback: 2 for usage errors (argparse), 1 for
errors splitlab raises (``ModelLoadError``, ``ContextLengthError``, ``EmptyPromptError``, ``CacheMismatchError``
and other ``ValueError``/``RuntimeError``/``OSError``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
from pathlib import Path
from typing import Callable

from . import sizing

__all__ = ["main", "command", "arg", "COMMANDS"]

#: name -> (function, one-line help, argument specs); filled by :func:`command`.
COMMANDS: dict[str, tuple[Callable, str, tuple]] = {}

class CLIError(Exception):
    """A usage error found after parsing; printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr (no usage block), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {_one_line(message)}\n")


def arg(*flags: str, **kwargs) -> tuple:
    """An argument spec for :func:`command`: the same arguments as ``ArgumentParser.add_argument``."""
    return flags, kwargs


def command(name: str, help: str, *arguments: tuple) -> Callable:
    """Register ``fn(args) -> (data: dict, lines: list[str])`` as the subcommand ``name``."""
    def register(fn: Callable) -> Callable:
        COMMANDS[name] = (fn, help, arguments)
        return fn
    return register


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def seed_int(text: str) -> int:
    """A seed for numpy and torch alike: an integer in 0 .. 2**63 - 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value < 2 ** 63:
        raise argparse.ArgumentTypeError(f"must be an integer in 0 .. 2**63 - 1, got {value}")
    return value


def _one_line(message: object) -> str:
    text = " ".join(str(message).split())
    return text if len(text) <= 1000 else text[:997] + "..."


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB' (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


# --- demo ------------------------------------------------------------------------------------------------

def _presets() -> list[str]:
    """Preset names, without importing torch (same list as :func:`splitlab.list_presets`)."""
    return sorted(p.stem for p in (Path(sizing.__file__).parent / "configs").glob("*.json"))


def _check_loadable(name: str) -> None:
    """Fail fast, in one line, for a model that is not a preset and cannot be found, instead of letting the
    Hugging Face client retry an unreachable hub for half a minute."""
    if name in _presets() or Path(name).expanduser().is_dir():
        return
    if Path(name).expanduser().exists():
        raise CLIError(f"model path {name!r} is a file, not a directory saved with save_pretrained (presets: "
                       f"{', '.join(_presets())})")
    if name in sizing.PUBLISHED_MODELS:
        raise CLIError(f"{name!r} is an entry of the sizing table, not a loadable model: try "
                       f"'splitlab kv-size {name}', or demo a preset ({', '.join(_presets())})")
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name:
        raise CLIError(f"model path {name!r} does not exist (presets: {', '.join(_presets())})")
    from huggingface_hub import constants, try_to_load_from_cache
    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return  # in the local Hugging Face cache
    except ValueError:  # not a valid repo id
        raise CLIError(f"model {name!r} is not a preset, a local directory or a Hugging Face name "
                       f"(presets: {', '.join(_presets())})") from None
    host = constants.ENDPOINT.split("://")[-1].split("/")[0].split(":")[0]
    if constants.HF_HUB_OFFLINE or not _resolves(host):
        raise CLIError(f"model {name!r} is not a preset, not a local directory and not in the Hugging Face "
                       f"cache, and {host} cannot be reached; use a preset: {', '.join(_presets())}")


def _resolves(host: str, timeout: float = 3.0) -> bool:
    import socket
    found: list[bool] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, 443)
            found.append(True)
        except OSError:
            pass
    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(found)


@command("demo", "run one real request (prefill, then greedy decode) and report its timings and KV cache",
         arg("--model", default="tiny", help="preset, Hugging Face name or local path (default: tiny)"),
         arg("--prompt-tokens", type=positive_int, default=128, metavar="N", help="prompt length (default 128)"),
         arg("--new-tokens", type=positive_int, default=32, metavar="N", help="tokens to generate (default 32)"),
         arg("--device", default=None, help="cpu, cuda, cuda:N or mps (default: best available)"),
         arg("--dtype", default=None, help="weight dtype, e.g. float32, bfloat16 (default: fp32 CPU, bf16 GPU)"),
         arg("--seed", type=seed_int, default=0, help="seeds the random weights and the prompt (default 0)"),
         arg("--no-reference", action="store_true", help="skip the check against transformers' generate"))
def demo(args) -> tuple[dict, list[str]]:
    _check_loadable(args.model)  # before importing torch: bad names fail in a fraction of a second
    import torch
    from .device import describe_device
    from .engine import as_token_batch, generate, reference_generate
    from .models import load_model
    if args.device is not None:
        try:
            torch.device(args.device)
        except RuntimeError:
            raise CLIError(f"unknown device {args.device!r}: use cpu, cuda, cuda:N or mps") from None
    for name in ("transformers", "huggingface_hub"):  # keep stderr for our own one-line errors
        __import__(f"{name}.utils", fromlist=["logging"]).logging.set_verbosity_error()
    lm = load_model(args.model, device=args.device, dtype=args.dtype, seed=args.seed)
    from .profiling import text_prompt, warm_up
    ids = text_prompt(lm, args.prompt_tokens, args.seed)
    as_token_batch(lm, [ids], args.new_tokens)  # raises ContextLengthError before any work
    warm_up(lm, args.prompt_tokens, min(32, args.new_tokens))  # first calls pay one-off costs
    g = generate(lm, [ids], max_new_tokens=args.new_tokens)
    tokens = g.tokens[0]
    matches = None if args.no_reference else reference_generate(lm, ids, args.new_tokens) == tokens
    per_token = sizing.kv_bytes_per_token(lm.geometry, lm.dtype)
    from .serving.metrics import percentiles  # NaN when there are no decode steps -> None (JSON null)
    step_p = {k: None if math.isnan(v) else v for k, v in percentiles(g.decode_step_s, (50, 90)).items()}
    text = lm.decode(tokens)
    data = dict(
        model=lm.name, model_description=repr(lm), random_weights=lm.random_weights, device=str(lm.device),
        device_description=describe_device(lm.device), dtype=str(lm.dtype).replace("torch.", ""), seed=args.seed,
        prompt_tokens=len(ids), new_tokens=len(tokens), prefill_s=g.prefill_s, ttft_s=g.ttft_s,
        decode_steps=len(g.decode_step_s), decode_s_per_token_median=step_p["p50"],
        decode_s_per_token_p90=step_p["p90"], kv_bytes_per_token=_number(per_token),
        kv_bytes_after_prefill=g.kv_bytes_after_prefill, kv_bytes_final=g.kv_bytes_final,
        kv_tokens_final=g.cache.seq_len, tokens=tokens, text=text, matches_reference=matches)
    ms = lambda s: "n/a" if s is None else f"{s * 1e3:.2f} ms"  # noqa: E731
    check = {None: "skipped (--no-reference)", True: "yes, identical tokens",
             False: "NO, the tokens differ (please report this)"}[matches]
    lines = [
        "splitlab demo: one request, prefill then greedy decode (after one warm-up call)",
        f"model        {data['model_description']}",
        f"device       {lm.device}: {data['device_description']}",
        f"prompt       {len(ids)} tokens; generated {len(tokens)} tokens",
        f"prefill      {ms(g.prefill_s)}   TTFT {ms(g.ttft_s)} (prefill + choosing the first token)",
        f"decode       {ms(data['decode_s_per_token_median'])}/token median, "
        f"{ms(data['decode_s_per_token_p90'])} P90 over {len(g.decode_step_s)} steps" if g.decode_step_s else
        "decode       no decode step (one new token: it comes from the prefill)",
        f"KV cache     {human_bytes(g.kv_bytes_after_prefill)} after prefill ({len(ids)} tokens), "
        f"{human_bytes(g.kv_bytes_final)} at the end ({g.cache.seq_len} tokens; the last token is not cached yet)"
        f" = {_number(per_token):,} B/token",
        f"text         {text!r}" + ("   (gibberish: random weights)" if lm.random_weights else ""),
        f"reference    same as transformers generate: {check}",
    ]
    return data, lines


# --- kv-size ---------------------------------------------------------------------------------------------

@command("kv-size", "KV-cache bytes of a model from its config (no model is loaded)",
         arg("model", help="a splitlab preset, a published model (e.g. Llama-3-8B) or a config.json path"),
         arg("--tokens", type=positive_int, default=4096, help="tokens per sequence (default 4096)"),
         arg("--batch", type=positive_int, default=1, help="sequences (default 1)"),
         arg("--dtype", default="fp16", help="KV element type: fp32, fp16, bf16, fp8, int8, int4 (default fp16)"))
def kv_size(args) -> tuple[dict, list[str]]:
    element = sizing.dtype_bytes(args.dtype)
    looks_like_path = args.model.endswith(".json") or os.sep in args.model or "/" in args.model
    if looks_like_path and args.model not in sizing.PUBLISHED_MODELS and not Path(args.model).exists():
        raise CLIError(f"config file {args.model!r} does not exist")
    config = sizing.resolve_config(args.model)
    if not isinstance(config, dict):
        raise CLIError(f"{args.model!r} does not hold a config object (a JSON dict)")
    g = sizing.kv_geometry(config)
    per_token = sizing.kv_bytes_per_token(g, args.dtype)
    total = sizing.kv_bytes(g, args.tokens, args.batch, args.dtype)
    context = config.get("max_position_embeddings") or config.get("n_positions")
    data = dict(model=args.model, tokens=args.tokens, batch=args.batch, dtype=args.dtype,
                layers=g.layers, heads=g.heads, kv_heads=g.kv_heads, head_dim=g.head_dim, attention=g.attention,
                dtype_bytes=_number(element), kv_bytes_per_token=_number(per_token), kv_bytes_total=_number(total),
                max_context=context)
    lines = [
        f"{args.model}: {g.layers} layers, {g.heads} heads, {g.kv_heads} KV heads ({g.attention}), "
        f"head_dim {g.head_dim}, KV in {args.dtype}",
        f"per token  {_number(per_token):,} B ({human_bytes(per_token)}) = 2 (K,V) x {g.layers} layers x "
        f"{g.kv_heads} KV heads x {g.head_dim} head_dim x {_number(element)} B",
        f"total      {args.tokens:,} tokens x batch {args.batch} = {_number(total):,} B ({human_bytes(total)})",
    ]
    if context and args.tokens > context:
        lines.append(f"note       {args.tokens:,} tokens exceed this model's context of {context:,}")
    return data, lines


from . import cli_serving  # noqa: E402,F401  (registers serve and compare)
from . import cli_transfer  # noqa: E402,F401  (registers transfer)


# --- entry point -----------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="splitlab", description="See, measure and teach the prefill/decode split.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (fn, help_text, arguments) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        for flags, kwargs in arguments:
            p.add_argument(*flags, **kwargs)
        p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
        p.set_defaults(run=fn)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 error, 2 usage error, 130 interrupted, 141 the
    reader of stdout went away, as in ``splitlab kv-size tiny | head -1``)."""
    args = build_parser().parse_args(argv)
    try:
        data, lines = args.run(args)
    except CLIError as err:
        print(f"splitlab {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except (ValueError, RuntimeError, OSError) as err:  # splitlab's errors subclass ValueError / RuntimeError
        print(f"splitlab {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"splitlab {args.command}: interrupted", file=sys.stderr)
        return 130
    try:
        print(json.dumps(data) if args.json else "\n".join(lines))
        sys.stdout.flush()
    except BrokenPipeError:  # the reader closed the pipe: no traceback, and none when Python flushes at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 0
