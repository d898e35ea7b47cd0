"""Chapter 8 on the trained model: tables that fit a phone's column and notes computed from them, for quantized KV
(:func:`splitlab.phases.kv_quality.kv_quant_quality`), prompt-lookup speculative decoding repeated to show its
spread (:func:`splitlab.phases.prompt_lookup.prompt_lookup_runs`) and a chat template's shared system prompt
through the prefix cache (:func:`splitlab.serving.prefix_chat.chat_prefix_reuse`). Every sentence of a note is
made from the numbers its table shows."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from .confusions_tables import TOLERANCE  # a prediction within 25% of the measurement counts as met
from .phases import fmt3
from .style import fmt2, fmt3

__all__ = ["quality_table", "quality_note", "lookup_spread", "lookup_table", "lookup_note", "chat_table",
           "chat_note", "summary_notes", "takeaway_note"]

VERDICTS = {"faster": "every repeat faster than every plain one", "slower": "every repeat slower than every plain one",
            "within the spread": "within the spread: no speed-up claimed"}


def quality_table(q: pd.DataFrame, full_name: str = "full") -> pd.DataFrame:
    """:func:`kv_quant_quality`'s rows as one column per scheme (the full-precision one named ``full_name``)."""
    cols = {}
    for r in q.itertuples():
        cols[full_name if r.scheme == "full" else r.scheme] = {
            "KV of the prompts (KiB)": fmt3(r.kv_bytes / 2 ** 10), "bytes vs full": fmt3(r.bytes_ratio),
            "tokens that differ": f"{int(r.tokens_differ)} of {int(r.tokens)}",
            "prompts that differ": str(int(r.prompts_differ)), "same next token (%)": fmt3(r.step_agreement * 100),
            "KL mean (nats)": fmt3(r.kl_mean), "KL max (nats)": fmt3(r.kl_max),
            "largest logit error": fmt3(r.logit_err_max)}
    return pd.DataFrame(cols)


def _changed(r) -> str:
    if r.tokens_differ == 0:
        return f"{r.scheme} changed none of the {int(r.tokens)} tokens"
    return (f"{r.scheme} changed {int(r.tokens_differ)} of the {int(r.tokens)} tokens (in {int(r.prompts_differ)} "
            f"prompt{'s' * (r.prompts_differ != 1)}: after a first different token the texts part ways)")


def quality_note(q: pd.DataFrame, n_prompts: int, full_name: str = "full") -> str:
    """Markdown from :func:`kv_quant_quality`'s rows (``n_prompts`` prompts): bytes saved, tokens changed, and the
    teacher-forced distributions, each scheme against the full-precision cache and fp8 against int8 where both
    ran."""
    rows = [r for r in q.itertuples() if r.scheme != "full"]
    ratios = {fmt3(r.bytes_ratio) for r in rows}
    size = (f"{' and '.join(r.scheme for r in rows)} each hold {ratios.pop()} of the {full_name} cache's bytes"
            if len(ratios) == 1 else "; ".join(f"{r.scheme} holds {fmt3(r.bytes_ratio)} of the {full_name} cache's "
                                                f"bytes" for r in rows))
    same = [r for r in rows if r.tokens_differ == 0]
    names = [r.scheme for r in same]
    who = f"neither {names[0]} nor {names[1]}" if len(names) == 2 else f"none of {', '.join(names)}"
    changed = ([f"{who} changed any of the {int(same[0].tokens)} tokens"]
               if len(same) > 1 and len({r.tokens for r in same}) == 1 else [_changed(r) for r in same])
    changed += [_changed(r) for r in rows if r.tokens_differ]
    text = (f"{size}. Decoding greedily over {n_prompts} prompts, " + "; ".join(changed) + ". "
            + "Fed the same tokens step by step, " + "; ".join(
                f"{r.scheme} chose the {full_name} cache's next token at {r.step_agreement:.0%} of the steps, with "
                f"a mean KL divergence of {r.kl_mean:.2g} nats (largest {r.kl_max:.2g}) and logits off by at "
                f"most {r.logit_err_max:.3g}" for r in rows) + ".")
    by = {r.scheme: r for r in rows}
    if "int8" in by and "fp8" in by and by["int8"].logit_err_max > 0:
        ratio = by["fp8"].logit_err_max / by["int8"].logit_err_max
        text += (f" fp8's largest logit error is {fmt2(ratio)}x int8's: its 3 mantissa bits round the larger "
                 f"values more coarsely than int8's 255 even steps" if ratio > 1 else
                 f" fp8's largest logit error is {fmt2(ratio)}x int8's")
        text += "."
    return text


def lookup_spread(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (``prompt``, ``k``) over the ``repeat`` column of concatenated :func:`prompt_lookup_runs` tables: the
    acceptance and tokens per step (the same in every repeat: greedy tokens), TPOT median, min and max (s), the
    speed-up's median, min and max (each repeat's plain TPOT over its own), the median verify forward (s), and
    ``verdict``: "faster" where every repeat's TPOT is below every plain one's, "slower" the reverse, else
    "within the spread"."""
    rows = []
    for (p, k), g in runs.groupby(["prompt", "k"], sort=True):
        plain = runs[(runs.prompt == p) & (runs.k == 0)].tpot_s
        verdict = ("faster" if g.tpot_s.max() < plain.min() else "slower" if g.tpot_s.min() > plain.max()
                   else "within the spread")
        rows.append(dict(prompt=p, k=k, repeats=len(g), acceptance=g.acceptance.iloc[0],
                         tokens_per_step=g.tokens_per_step.iloc[0],
                         predicted_tokens_per_step=g.predicted_tokens_per_step.iloc[0],
                         tpot_s=g.tpot_s.median(), tpot_min_s=g.tpot_s.min(), tpot_max_s=g.tpot_s.max(),
                         speedup=g.speedup.median(), speedup_min=g.speedup.min(), speedup_max=g.speedup.max(),
                         verify_s=g.verify_s.median(), same_tokens=bool(g.same_tokens.all()),
                         verdict="-" if k == 0 else verdict))
    return pd.DataFrame(rows)


def _range(lo: float, hi: float, scale: float = 1.0) -> str:
    return f"{fmt3(lo * scale)}–{fmt3(hi * scale)}"


def lookup_table(spread: pd.DataFrame, labels: Sequence[str]) -> pd.DataFrame:
    """:func:`lookup_spread` as a table: one row per prompt (``labels``) and k; acceptance, tokens per verify step
    measured and predicted, TPOT median (ms) with its range, and the speed-up's median and range."""
    out = pd.DataFrame({
        "prompt": [labels[p] for p in spread.prompt], "k": spread.k,
        "accepted": ["-" if k == 0 else f"{a:.0%}" for k, a in zip(spread.k, spread.acceptance)],
        "tokens/step": [f"{fmt3(m)} ({fmt3(p)})"
                        for m, p in zip(spread.tokens_per_step, spread.predicted_tokens_per_step)],
        "TPOT (ms)": [f"{fmt3(r.tpot_s * 1e3)} ({_range(r.tpot_min_s, r.tpot_max_s, 1e3)})"
                      for r in spread.itertuples()],
        "speed-up": ["1" if r.k == 0 else f"{fmt3(r.speedup)} ({fmt3(r.speedup_min)}–{fmt3(r.speedup_max)})"
                     for r in spread.itertuples()]})
    return out.set_index(["prompt", "k"])


def lookup_note(spread: pd.DataFrame, labels: Sequence[str]) -> str:
    """Markdown from :func:`lookup_spread`: per prompt and k, what the target kept, tokens per step against the
    formula, what a verify forward cost against a plain step, and the speed-up claimed only outside the spread."""
    parts = []
    for r in spread[spread.k > 0].itertuples():
        plain = spread[(spread.prompt == r.prompt) & (spread.k == 0)].iloc[0]
        miss = r.tokens_per_step / r.predicted_tokens_per_step - 1
        fit = "within" if abs(miss) <= TOLERANCE else "outside"
        claim = {"faster": f"a speed-up of {fmt3(r.speedup)}x (median), outside the spread: every speculative run "
                           f"was faster than every plain one",
                 "slower": f"a slow-down ({fmt3(r.speedup)}x, median), outside the spread",
                 "within the spread": f"the TPOT ranges overlap, so neither a speed-up nor a slow-down is claimed "
                                      f"(per repeat {fmt3(r.speedup_min)}x to {fmt3(r.speedup_max)}x)"}
        parts.append(f"*{labels[r.prompt]}*, k = {r.k}: the target kept {r.acceptance:.0%} of the proposals, "
                     f"{fmt3(r.tokens_per_step)} tokens per verify step against {fmt3(r.predicted_tokens_per_step)} "
                     f"predicted at that acceptance ({miss:+.0%}, {fit} {TOLERANCE:.0%}); a verify forward of up to "
                     f"{r.k + 1} tokens took {fmt3(r.verify_s / plain.verify_s)}x a plain step; TPOT "
                     f"{fmt3(r.tpot_s * 1e3)} ms ({_range(r.tpot_min_s, r.tpot_max_s, 1e3)}) against "
                     f"{fmt3(plain.tpot_s * 1e3)} ms ({_range(plain.tpot_min_s, plain.tpot_max_s, 1e3)}) plain over "
                     f"{r.repeats} repeats: {claim[r.verdict]}.")
    same = "every run gave plain decoding's tokens" if spread.same_tokens.all() else \
        "some runs gave other tokens than plain decoding (a bug: the target chooses every token)"
    return "\n\n".join(parts + [f"In all, {same}."])


def chat_table(reuse: pd.DataFrame) -> pd.DataFrame:
    """:func:`chat_prefix_reuse`'s rows as one column per question (Q1, Q2, ...)."""
    cols = {}
    for i, r in enumerate(reuse.itertuples(), start=1):
        cols[f"Q{i}"] = {"prompt (tokens)": str(int(r.prompt_tokens)), "cached (tokens)": str(int(r.cached_tokens)),
                         "computed (tokens)": str(int(r.computed_tokens)), "cold (ms)": fmt3(r.cold_s * 1e3),
                         "warm (ms)": fmt3(r.warm_s * 1e3), "same first token": str(bool(r.same_token)),
                         "logit error": fmt3(r.logit_err)}
    return pd.DataFrame(cols)


def chat_note(reuse: pd.DataFrame, block_tokens: int) -> str:
    """Markdown from :func:`chat_prefix_reuse`'s rows: the shared prefix and the whole blocks of it reused, the
    warm prefills against the cold ones and against the share of tokens they computed, and the same first token."""
    later = reuse.iloc[1:]
    shared, cached = int(reuse.shared_tokens.iloc[0]), int(later.cached_tokens.min())
    computed = later.computed_tokens / later.prompt_tokens
    cold, warm = float(later.cold_s.median()), float(later.warm_s.median())
    predicted = float((later.cold_s * computed).median())
    miss = warm / predicted - 1
    apart = ("the slowest warm prefill was faster than the fastest cold one" if later.warm_s.max() <
             later.cold_s.min() else "the fastest warm prefill was slower than the slowest cold one" if
             later.warm_s.min() > later.cold_s.max() else "the warm and cold times overlap, so no saving is claimed")
    same = "Every warm prefill chose the cold one's first token" if reuse.same_token.all() else \
        "Some warm prefills chose another first token than the cold ones"
    return (f"All {len(reuse)} prompts begin with the same {shared} tokens (the system turn and the start of the "
            f"user's turn); the cache keeps whole {block_tokens}-token blocks, so the other {len(reuse) - 1} questions "
            f"reused {cached} of them and computed {computed.min():.0%} to {computed.max():.0%} of their prompts. "
            "Their "
            f"prefills took {fmt3(warm * 1e3)} ms against {fmt3(cold * 1e3)} ms cold (medians, "
            + (f"{1 - warm / cold:.0%} less" if warm <= cold else f"{warm / cold - 1:.0%} more")
            + f"; {apart}). Scaling each cold prefill by the share of tokens computed "
            f"predicts {fmt3(predicted * 1e3)} ms ({miss:+.0%}: " + (
                "the new tokens still attend to every cached position, and a forward has a fixed cost)"
                if miss > TOLERANCE else f"within {TOLERANCE:.0%})")
            + f". {same}, " + ("with identical logits." if reuse.logit_err.max() == 0 else
                                  f"with logits off by at most {reuse.logit_err.max():.2g}."))


def summary_notes(quality: pd.DataFrame, spread: pd.DataFrame, labels: Sequence[str],
                  reuse: pd.DataFrame) -> dict:
    """One line per technique measured on the trained model, for :func:`.confusions_tables.summary_table`."""
    q = {r.scheme: r for r in quality.itertuples()}
    quant = "; ".join(f"{s}: {int(r.tokens_differ)} of {int(r.tokens)} tokens differ" for s, r in q.items()
                      if s != "full")
    best = spread[spread.k > 0].sort_values("speedup").iloc[-1]
    later = reuse.iloc[1:]
    return {"KV quantization": f"trained model: {quant}",
            "speculative decoding": (f"trained model, prompt lookup ({labels[int(best.prompt)]}, k = {int(best.k)}):"
                                     f" {fmt3(best.speedup)}x ({fmt3(best.speedup_min)}–{fmt3(best.speedup_max)}), "
                                     f"{VERDICTS[best.verdict]}"),
            "prefix caching": (f"chat system prompt: {int(later.cached_tokens.min())} tokens cached, prefill "
                               f"{fmt3(later.cold_s.median() * 1e3)} → {fmt3(later.warm_s.median() * 1e3)} ms")}


def takeaway_note(quality: pd.DataFrame, spread: pd.DataFrame, labels: Sequence[str], reuse: pd.DataFrame,
                  full_name: str = "full") -> str:
    """Markdown: the chapter's rule of thumb for what only trained weights decide, with this page's numbers."""
    q = {r.scheme: r for r in quality.itertuples() if r.scheme != "full"}
    changed = sum(r.tokens_differ for r in q.values())
    n = min(int(r.tokens) for r in q.values())
    quant = (f"an 8-bit cache ({' or '.join(q)}) holds {fmt3(max(r.bytes_ratio for r in q.values()))} of the "
             f"{full_name} cache's bytes and changed " + " and ".join(
                 f"{int(r.tokens_differ)} of {int(r.tokens)} ({name})" for name, r in q.items())
             + " greedy tokens (mean KL " + ", ".join(f"{r.kl_mean:.2g}" for r in q.values()) + " nats): "
             + (f"{n} tokens cannot show a rate of change below about {3 / n:.0%} (the rule of three), so the KL "
                f"is the finer measure; long contexts and many prompts are what a quality claim needs"
                if changed == 0 else "check the text before trusting it"))
    lookup = "; ".join(f"{labels[int(r.prompt)]}, {r.acceptance:.0%} accepted: {fmt3(r.speedup)}x, "
                       f"{VERDICTS[r.verdict]}" for r in spread[spread.k > 0].itertuples())
    later = reuse.iloc[1:]
    saved = 1 - later.warm_s.median() / later.cold_s.median()
    prompt = later.prompt_tokens.median()
    return (f"On the trained model, {quant}. A draft pays only where it is accepted: {lookup}. A shared system "
            f"prompt ({reuse.shared_tokens.iloc[0] / prompt:.0%} of each prompt, "
            f"{later.cached_tokens.min() / prompt:.0%} reused in whole blocks) " + (
                f"saved {saved:.0%} of the later prefills' time." if saved >= 0 else
                f"saved nothing here: the later prefills took {-saved:.0%} longer."))
