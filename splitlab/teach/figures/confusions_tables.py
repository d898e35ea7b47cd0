"""Chapter 8's tables and printed verdicts (re-exported by :mod:`.confusions`). Every table has one column per
configuration or scheme and units in its row names (or, where rows are runs, few columns with short headers), so
that it fits a phone's column; numbers are shown as text of three significant digits (:func:`.phases.fmt3`: no
padding such as 2050.000000), counts as integers."""
from __future__ import annotations

from typing import Mapping

import textwrap

import pandas as pd

from .style import fmt3, sig3, fmt2

__all__ = ["headline", "chunked_verdict", "waste_table", "quant_table", "quant_note", "summary_table",
           "speculative_tables", "reuse_table", "routing_table", "sig3", "fmt3"]

TOLERANCE = 0.25  # a prediction within 25% of the measurement counts as met


def _max_itl_s(res) -> float:
    gaps = res.token_table().gap_s.dropna()
    return float(gaps.max()) if len(gaps) else float("nan")


def _step_text(s) -> str:
    if s.kind == "hybrid":
        return f"(chunk {int(s.tokens)} + decode x{int(s.batch)} in one forward)"
    return f"prefill {int(s.tokens)}" if s.kind == "prefill" else f"decode x{int(s.batch)}" if s.kind == "decode" \
        else f"{s.kind}"


def _steps_text(steps: pd.DataFrame) -> str:
    """'prefill 765 + prefill 411 + decode x3' for the steps inside a gap (prefill: prompt tokens; decode: batch;
    a fused hybrid step: its chunk's tokens and its decode rows in one forward)."""
    return " + ".join(_step_text(s) for s in steps.itertuples()) or "-"


def _step_s(s, prefill_s, decode_s) -> float:
    """One step predicted from its size: a fused hybrid step as one prefill forward of its chunk and decode
    tokens, ``prefill_s(tokens + batch)``."""
    if s.kind == "hybrid":
        return prefill_s(s.tokens + s.batch)
    return prefill_s(s.tokens) if s.kind == "prefill" else decode_s(s.batch) if s.kind == "decode" else 0.0


def _predicted_s(steps: pd.DataFrame, prefill_s, decode_s) -> float:
    """The steps inside a gap, each predicted from its size with the times measured alone."""
    return float(sum(_step_s(s, prefill_s, decode_s) for s in steps.itertuples()))


def headline(runs: Mapping[str, object], simulated: Mapping[str, object], prefill_s, decode_s,
             ttft_slo_s: float, tpot_slo_s: float) -> pd.DataFrame:
    """Per layout (columns): the longest gap between two tokens, the steps its worker ran inside it
    predicted from ``prefill_s(tokens)`` and ``decode_s(batch)`` (seconds measured alone), ITL P99 measured and
    simulated, mean TTFT measured and simulated, mean TPOT, SLO attainment and output tokens/s per worker.
    ``runs`` and ``simulated`` map a name to a ServingResult of the same requests."""
    from ...serving.interference import longest_gap

    rows = {}
    for name, res in runs.items():
        m, s = res.metrics(ttft_slo_s, tpot_slo_s), simulated[name].metrics(ttft_slo_s, tpot_slo_s)
        worst = longest_gap(res)
        rows[name] = {"longest gap (ms)": fmt3(worst["gap_s"] * 1e3),
                      "its steps, timed alone (ms)": fmt3(_predicted_s(worst["steps"], prefill_s, decode_s) * 1e3),
                      "ITL P99 (ms)": fmt3(m["itl_s"]["p99"] * 1e3),
                      "ITL P99, simulated (ms)": fmt3(s["itl_s"]["p99"] * 1e3),
                      "TTFT mean (ms)": fmt3(m["ttft_s"]["mean"] * 1e3),
                      "TTFT mean, simulated (ms)": fmt3(s["ttft_s"]["mean"] * 1e3),
                      "TPOT mean (ms)": fmt3(m["tpot_s"]["mean"] * 1e3),
                      "SLO attainment (%)": fmt3(m["slo_attainment"] * 100),
                      "tokens/s per worker": fmt3(m["throughput_tokens_per_s_per_worker"])}
    return pd.DataFrame(rows)


def chunked_verdict(runs: Mapping[str, object], prefill_s, decode_s, goodput: Mapping[str, float],
                    base: str = "prefill-first", chunked: str = "chunked", split: str = "split 1P+1D") -> None:
    """Print what the table and figure of section 1 say, from their numbers: each layout's longest gap against
    the steps inside it timed alone (and where that misses by more than 25%, by how much), what chunking and the
    split did to the longest gap and to TTFT, and the highest goodput per worker."""
    from ...serving.interference import longest_gap

    gap = {n: _max_itl_s(r) for n, r in runs.items()}
    ttft = {n: r.metrics()["ttft_s"]["mean"] for n, r in runs.items()}
    for n, res in runs.items():
        steps = longest_gap(res)["steps"]
        pred = _predicted_s(steps, prefill_s, decode_s)
        ran = float(steps.seconds.sum())
        miss = gap[n] / pred - 1 if pred > 0 else float("nan")
        note = "" if round(abs(miss) * 100) <= round(TOLERANCE * 100) else (  # as printed: +25% is within
            f"; {miss:+.0%}, beyond the {TOLERANCE:.0%} tolerance: inside the run those steps took "
            f"{fmt3(ran * 1e3)} ms, {fmt3(ran / pred)}x their time alone"
            + (" (a chunk attends to the chunks cached before it; a fresh prefill does not)" if n == chunked else "")
            + (f"; {fmt3((gap[n] - ran) * 1e3)} ms of the gap had no step of this worker (a transfer, a wait)"
               if gap[n] - ran > TOLERANCE * gap[n] else ""))
        _say(f"{n}: longest gap {fmt3(gap[n] * 1e3)} ms = {_steps_text(steps)}; timed alone {fmt3(pred * 1e3)} ms"
             f"{note}")
    _say(f"chunking cut the longest gap to {gap[chunked] / gap[base]:.0%} of {base}'s and changed the mean TTFT "
         f"by {ttft[chunked] / ttft[base] - 1:+.0%}; the split cut it to {gap[split] / gap[base]:.0%} and "
         f"changed the mean TTFT by {ttft[split] / ttft[base] - 1:+.0%}")
    best = max(goodput, key=goodput.get)
    _say("highest goodput per worker at these SLOs: " + (f"{best} ({fmt3(goodput[best])} requests/s per worker)"
                                                         if goodput[best] > 0 else "none reached 90%"))


def _say(text: str) -> None:
    """Print one finding, wrapped to a phone's width (continuation lines indented)."""
    print(textwrap.fill(text, 64, subsequent_indent="    "))


def waste_table(waste: pd.DataFrame) -> pd.DataFrame:
    """:func:`splitlab.serving.paged.waste_summary` as a table: one column per scheme, memory in MiB."""
    labels = {"used": "used", "paged": "paged", "reserved": "reserved", "padded": "padded",
              "max_context": "whole context"}
    out = pd.DataFrame({labels[s]: {"mean held (MiB)": w.mean_bytes / 2 ** 20,
                                    "peak held (MiB)": w.peak_bytes / 2 ** 20,
                                    "waste (% of held)": w.waste_share * 100}
                        for s, w in waste.iterrows()})
    return out.map(fmt3)


def quant_table(variants: Mapping[str, object], moved_s: Mapping[str, float]) -> pd.DataFrame:
    """One column per cache variant (name -> KVCache or QuantizedKV of the same request): bytes, bytes relative to
    fp16, relative error of the dequantized cache, and the measured transfer (``moved_s``, seconds)."""
    from ...kvcache.quant import QuantizedKV, relative_error

    reference = next(iter(variants.values()))
    fp16 = variants["fp16"].nbytes if "fp16" in variants else None
    cols = {}
    for name, v in variants.items():
        back = v.dequantize() if isinstance(v, QuantizedKV) else v.to(dtype=reference.dtype)
        cols[name] = {"KiB per request": v.nbytes / 2 ** 10,
                      "bytes vs fp16": v.nbytes / fp16 if fp16 else float("nan"),
                      "relative error": relative_error(reference, back),
                      "transfer (ms)": moved_s[name] * 1e3,
                      "transfer vs fp16": moved_s[name] / moved_s["fp16"] if "fp16" in moved_s else float("nan")}
    return pd.DataFrame(cols).map(fmt3)


def _transfer_how(t: float, b: float) -> str:
    """What a transfer that took ``t`` x fp16's time for ``b`` x its bytes did, in words that follow from both."""
    return ("fell about in proportion to the bytes" if abs(t / b - 1) <= TOLERANCE else
            "fell further than the bytes, which bytes over bandwidth cannot do: the rest is the spread of "
            "this machine's timings" if t < b else  # was "about in proportion" for 0.39x time, 0.52x bytes
            "fell less than in proportion to the bytes: a transfer costs a fixed latency plus bytes over "
            "bandwidth (chapter 5), and only the second part shrinks" if t < 1 else
            "did not fall at all: at these sizes the fixed latency of a transfer and the machine's other work "
            "outweigh the bytes saved (chapter 5)" if t <= 1 + TOLERANCE else
            "took longer for fewer bytes, which the bytes cannot cause: the machine's other work during those "
            "transfers set their time, not the bytes (chapter 5)")


def _eight_bit(variants: Mapping[str, object], moved_s: Mapping[str, float]) -> tuple[float, float, bool]:
    """int8's bytes and transfer time as fractions of fp16's, and whether int8 and fp8 are the same size: then the
    time is the mean of both transfers, which moved the same bytes (one explanation for both, not two)."""
    fp16 = variants["fp16"].nbytes
    same = variants["int8"].nbytes == variants["fp8"].nbytes
    t = (moved_s["int8"] + moved_s["fp8"]) / 2 if same else moved_s["int8"]
    return variants["int8"].nbytes / fp16, t / moved_s["fp16"], same


def quant_note(variants: Mapping[str, object], moved_s: Mapping[str, float]) -> str:
    """Markdown from :func:`quant_table`'s numbers (``variants`` with "fp16", "int8", "fp8" and the model's own
    dtype first): the bytes against fp16 and the model's dtype, and whether the 8-bit transfers fell with them.
    int8 and fp8 buffers of the same size get one explanation (their mean time against the bytes), with the
    difference between their two times said to be noise where it exceeds the tolerance: the same bytes cannot
    move at two speeds (the page explained 0.57x and 0.45x of fp16's time for the same 1,058 KiB apart). Byte
    ratios with 3 significant digits, ratios of single transfers' times with 2 (:func:`.style.fmt2`).

    Raises:
        KeyError: "fp16", "int8" or "fp8" missing from ``variants`` or ``moved_s``.
        ValueError: bytes or a time that is not finite and > 0."""
    for name, where in (("variants", variants), ("moved_s", moved_s)):
        missing = [k for k in ("fp16", "int8", "fp8") if k not in where]
        if missing:
            raise KeyError(f"{name} needs fp16, int8 and fp8; missing {missing}")
    bad = {k: (v.nbytes, moved_s.get(k, 1.0)) for k, v in variants.items()
           if not (0 < v.nbytes < float("inf") and 0 < moved_s.get(k, 1.0) < float("inf"))}
    if bad:
        raise ValueError(f"each variant's bytes and moved_s (seconds) must be finite and > 0, got {bad}")
    first = next(iter(variants))
    fp16 = variants["fp16"].nbytes
    text = (f"The bytes follow the formula: 8-bit caches hold {fmt3(variants['int8'].nbytes / fp16)} of fp16's"
            + (f" ({fmt3(variants['int8'].nbytes / variants[first].nbytes)} of {first}'s, this model's dtype)"
               if first != "fp16" else "") + ".")
    b, t, same = _eight_bit(variants, moved_s)
    if not same:
        for s in ("int8", "fp8"):
            bs, ts = variants[s].nbytes / fp16, moved_s[s] / moved_s["fp16"]
            text += (f" The {s} transfer took {fmt2(ts)}x fp16's time for {fmt3(bs)}x its bytes: it "
                     f"{_transfer_how(ts, bs)}.")
        return text
    ti, tf = moved_s["int8"] / moved_s["fp16"], moved_s["fp8"] / moved_s["fp16"]
    slow, fast = max(ti, tf), min(ti, tf)
    text += (f" The int8 and fp8 buffers are the same size, {fmt3(b)}x fp16's bytes; their transfers took {fmt2(ti)}x "
             f"and {fmt2(tf)}x fp16's time")
    if slow > fast * (1 + TOLERANCE):
        text += (f": one took {fmt2(slow / fast)}x the other's time for the same bytes, which the bytes cannot "
                 f"cause, so differences that large are this machine's noise. Taken together (their mean, {fmt2(t)}x),"
                 f" they {_transfer_how(t, b)}.")
    else:
        text += f", together (their mean) {fmt2(t)}x: they {_transfer_how(t, b)}."
    return text


def summary_table(runs, waste, variants, moved_s, spec, plain_tpot_s, reuse, routing, total_tokens,
                  real: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The chapter's result in one table (displayed with its text in full, and returned): per technique, what
    changed (measured here) and the split's concern that it left as it was. ``real`` adds, per technique, what the
    trained model showed (:func:`.confusions_real.summary_notes`)."""
    from IPython.display import display

    gap = {n: _max_itl_s(r) for n, r in runs.items()}
    ttft = {n: r.metrics()["ttft_s"]["mean"] for n, r in runs.items()}
    names = list(runs)
    base, chunked, split = names[0], names[1], names[2]
    best = spec.groupby(["draft", "k"], sort=False).mean(numeric_only=True).tpot_ms.idxmin()
    spec_best = spec.groupby(["draft", "k"], sort=False).mean(numeric_only=True).loc[best]
    deepest = reuse.iloc[-1]
    q_bytes, q_time, q_same = _eight_bit(variants, moved_s)
    rows = {
        "chunked prefill": (f"longest gap {gap[base] * 1e3:.0f} → {gap[chunked] * 1e3:.0f} ms; mean TTFT "
                            f"{ttft[base] * 1e3:.0f} → {ttft[chunked] * 1e3:.0f} ms",
                            f"a chunk still between two tokens: the split's longest gap {gap[split] * 1e3:.0f} ms"),
        "paged KV memory": (f"mean KV held on D0: padded {fmt3(waste.loc['padded', 'mean_bytes'] / 2**20)}, reserved "
                            f"{fmt3(waste.loc['reserved', 'mean_bytes'] / 2**20)} → paged "
                            f"{fmt3(waste.loc['paged', 'mean_bytes'] / 2**20)} MiB (used "
                            f"{fmt3(waste.loc['used', 'mean_bytes'] / 2**20)})",
                            "the bytes of each cache and its transfer (a block's tail at most)"),
        "KV quantization": (f"bytes per request x{fmt3(q_bytes)} of fp16; transfer x{fmt2(q_time)}"
                            + (" (int8 and fp8, mean)" if q_same else "")
                            + ("" if abs(q_time / q_bytes - 1) <= TOLERANCE else " (not the bytes: latency and noise)"),
                            "tokens cached, interference, who prefills"),
        "speculative decoding": (f"best TPOT {fmt3(spec_best.tpot_ms)} ms ({best[0]}, k = {best[1]}) vs "
                                 f"{fmt3(plain_tpot_s * 1e3)} ms plain",
                                 "the same tokens, the same prompt cache to transfer"),
        "prefix caching": (f"{int(deepest.prefix_tokens)}-token prefix: prefill {deepest.cold_s * 1e3:.0f} → "
                           f"{deepest.warm_s * 1e3:.0f} ms; prefix-aware routing prefills "
                           f"{routing.loc['prefix-aware', 'computed_tokens'] / total_tokens:.0%} of the prompt tokens",
                           "the decode side still receives every position's KV"),
    }
    for name, line in (real or {}).items():
        rows[name] = (f"{rows[name][0]}; {line}", rows[name][1])
    table = pd.DataFrame(rows, index=["changed (measured here)", "left alone"]).T
    with pd.option_context("display.max_colwidth", None):
        display(table)
    return table


def speculative_tables(spec: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The speculative runs (rows of ``draft``, ``k``, ``acceptance``, ``tokens_per_step``,
    ``predicted_tokens_per_step``, ``tpot_ms``, ``verify_ms``, ``draft_ms``), averaged per draft and k, as two
    phone-wide tables: what was accepted (acceptance rate, tokens per verify step measured and predicted) and what
    it cost (TPOT, one verify forward, one draft's proposals, in ms)."""
    mean = spec.groupby(["draft", "k"], sort=False).mean(numeric_only=True)
    accepted = pd.DataFrame({"acceptance": mean.acceptance, "tokens per step": mean.tokens_per_step,
                             "predicted": mean.predicted_tokens_per_step}).map(fmt3)
    cost = pd.DataFrame({"TPOT (ms)": mean.tpot_ms, "verify (ms)": mean.verify_ms,
                         "draft (ms)": mean.draft_ms}).map(fmt3)
    return accepted, cost


def reuse_table(reuse: pd.DataFrame) -> pd.DataFrame:
    """Prefix reuse (rows of ``prefix_tokens``, ``cached_tokens``, ``computed_tokens``, ``cold_s``, ``warm_s``,
    ``suffix_alone_s``, ``saved``, ``same_logits``), one column per prefix length (transposed: three columns fit a
    phone, eight do not)."""
    cols = {}
    for r in reuse.itertuples():
        cols[f"{int(r.prefix_tokens):,}-token prefix"] = {
            "cached (tokens)": f"{int(r.cached_tokens):,}", "computed (tokens)": f"{int(r.computed_tokens):,}",
            "prefill, cold (ms)": fmt3(r.cold_s * 1e3), "prefill, warm (ms)": fmt3(r.warm_s * 1e3),
            "new tokens alone (ms)": fmt3(r.suffix_alone_s * 1e3), "saved (%)": fmt3(r.saved * 100),
            "same logits": str(bool(r.same_logits))}
    return pd.DataFrame(cols)


def routing_counts(routed: Mapping[str, pd.DataFrame], total_tokens: int) -> pd.DataFrame:
    """Per routing policy (``routed``: policy -> :func:`splitlab.serving.prefix.simulate_routing`'s rows, with
    ``worker`` and ``computed_tokens``) the prompt tokens its prefill pool computed, in all (``computed_tokens``)
    and per worker (``per_worker``, a list), and a last row, "cache on the decode side", that computes all
    ``total_tokens``: a prefix cache where the decode runs saves no prefill. The input of :func:`routing_table`."""
    table = pd.DataFrame({p: dict(computed_tokens=int(d.computed_tokens.sum()),
                                  per_worker=d.groupby("worker").computed_tokens.sum().tolist())
                          for p, d in routed.items()}).T
    table.loc["cache on the decode side"] = dict(computed_tokens=int(total_tokens), per_worker=[])
    return table


def routing_table(routing: pd.DataFrame, total_tokens: int) -> pd.DataFrame:
    """Prompt tokens the prefill pool computed under each routing policy (rows: ``computed_tokens`` and the list
    ``per_worker``), with the share of all ``total_tokens`` prompt tokens."""
    per_worker = [" / ".join(f"{int(n):,}" for n in w) or "-" for w in routing.per_worker]
    return pd.DataFrame({"computed (tokens)": [f"{int(n):,}" for n in routing.computed_tokens],
                         "per worker (tokens)": per_worker,
                         "share computed": [fmt3(n / total_tokens) for n in routing.computed_tokens]},
                        index=routing.index)
