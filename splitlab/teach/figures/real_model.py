"""Chapter 1's trained model beside the tiny one: one real question answered token by token, and the two models'
TTFT and TPOT on the same question, with a note computed from them."""
from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

import pandas as pd

from ...phases.engine import Generation
from ...phases.models import LoadedModel, load_model
from ...phases.profiling import weight_bytes_read
from .phases import fmt3, fmt_table, ttft_tpot_s

__all__ = ["load_trained", "weights_source", "token_stream", "side_by_side", "side_by_side_table", "side_by_side_note"]


#: the trained chat model of chapters 1, 3 and 8
TRAINED = "smollm2-135m-instruct"


def weights_source(lm: LoadedModel) -> str:
    """Where ``lm``'s weights came from, in words short enough for a phone's column: the GGUF file they were
    dequantized from (its name, not the folder), the hub's own trained weights, or random weights."""
    if lm.dequantized_from:
        return f"dequantized from {Path(lm.dequantized_from).name}"
    return "random weights" if lm.random_weights else "the hub's own weights (not dequantized)"


def load_trained(like: LoadedModel, dtype=None) -> LoadedModel:
    """The trained model (:data:`TRAINED`) on ``like``'s device in ``dtype`` (None: its own; ``like`` itself when it
    is that model), with one line printed on where its weights came from. A first load converts the GGUF file; the
    converter's message on stderr names splitlab's cache folder, which a command-line user wants and a chapter's reader
    does not: it is replaced by "converted once from the GGUF (N s)". Any other stderr of the load is passed on
    unchanged. Raises what :func:`splitlab.load_model` raises (``ModelLoadError`` when no offline source exists, saying
    how to get one)."""
    if like.name == TRAINED:
        lm, note = like, ""
    else:
        err, start = io.StringIO(), time.perf_counter()
        with contextlib.redirect_stderr(err):
            lm = load_model(TRAINED, device=like.device, dtype=dtype)
        lines = err.getvalue().splitlines()
        converted = [l for l in lines if l.startswith("splitlab: dequantizing ")]
        if rest := [l for l in lines if l not in converted]:
            print("\n".join(rest), file=sys.stderr)
        note = f", converted once from the GGUF ({time.perf_counter() - start:.0f} s)" if converted else ""
    print(f"{lm.name}: {weights_source(lm)}{note}")
    return lm


def token_stream(lm: LoadedModel, gen: Generation) -> pd.DataFrame:
    """Each output token of ``gen``'s first request: its text (``repr``, so spaces show; special tokens such as
    the end of the turn show their own name) and when it arrived, in ms from the call's start."""
    rows = []
    for i, (t, at) in enumerate(zip(gen.tokens[0], gen.token_time_s), start=1):
        text = lm.decode([t]) or lm.tokenizer.convert_ids_to_tokens(t)  # a special token decodes to ''
        rows.append({"#": i, "token": repr(text), "arrived (ms)": fmt3(at * 1e3)})
    return pd.DataFrame(rows).set_index("#")


def _row(lm: LoadedModel, gen: Generation) -> dict:
    ttft, tpot = ttft_tpot_s(gen)
    return {"model": lm.name, "weights": "random" if lm.random_weights else "trained",
            "params_m": lm.n_params / 1e6, "weight_mb": weight_bytes_read(lm) / 1e6,
            "prompt_tokens": gen.prompt_lengths[0], "new_tokens": len(gen.tokens[0]), "ttft_s": ttft, "tpot_s": tpot}


def side_by_side(runs: list[tuple[LoadedModel, Generation]]) -> pd.DataFrame:
    """One row per (model, its answer to the same question): model, weights, parameters (millions), weight bytes a
    decode step reads (MB), prompt and output tokens, TTFT and TPOT (s). Raises ValueError for an answer of one
    token."""
    return pd.DataFrame([_row(lm, gen) for lm, gen in runs])


def side_by_side_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`side_by_side` as the chapter shows it: model, weights, MB a decode step reads, prompt tokens, TTFT
    and TPOT in ms, 3 significant digits."""
    return fmt_table(table, {"model": "model", "weights": "weights", "weight_mb": "MB read per step",
                             "prompt_tokens": "prompt tokens", "ttft_s": ("TTFT (ms)", 1e3),
                             "tpot_s": ("TPOT (ms)", 1e3)}, index="model")


def side_by_side_note(table: pd.DataFrame) -> str:
    """Markdown computed from :func:`side_by_side` of two models (the first the trained one): how much longer its
    decode step is, beside how many more weight bytes it reads, and its TTFT against the other's."""
    real, tiny = table.iloc[0], table.iloc[1]
    names = list(table["model"])
    step, nbytes = real["tpot_s"] / tiny["tpot_s"], real["weight_mb"] / tiny["weight_mb"]
    first = real["ttft_s"] / tiny["ttft_s"]
    tracks = ("about in proportion to them" if 0.67 <= step / nbytes <= 1.5 else
              "far less than the bytes: most of tiny's step is the fixed cost of a forward pass, not reading "
              "(chapter 3)" if step < nbytes else "more than the bytes")
    return (f"{names[0]} takes {fmt3(real['tpot_s'] * 1e3)} ms per output token, {step:.3g}x "
            f"{names[1]}'s {fmt3(tiny['tpot_s'] * 1e3)} ms, while a decode step reads {nbytes:.3g}x the weight "
            f"bytes ({fmt3(real['weight_mb'])} MB against {fmt3(tiny['weight_mb'])} MB): the step grows {tracks}. "
            f"Its first token took {fmt3(real['ttft_s'] * 1e3)} ms, {first:.3g}x {names[1]}'s, "
            f"for a prompt of {int(real['prompt_tokens'])} tokens ({names[1]}'s byte tokenizer makes "
            f"{int(tiny['prompt_tokens'])} of the same text).")
