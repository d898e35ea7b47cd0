"""Chapter 5's tables, shaped to fit a 412 px phone's column: few columns (the wide one transposed), short headers
with their units, 3 significant digits (:func:`.phases.fmt3`), counts as integers."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ... import sizing
from .style import fmt3, signed_pct

__all__ = ["published_kv_table", "bench_table", "sweep_table", "overlap_table", "sweep_note", "handoff_note",
           "link_rate_note", "takeaway_note", "summary"]


def published_kv_table(models: Sequence[str], tokens: int = 2048, dtype: str = "fp16") -> pd.DataFrame:
    """The KV shape and bytes of published configs (``sizing.PUBLISHED_MODELS``), one column per model (transposed:
    four model columns fit a phone, eight quantity columns do not): attention kind, layers, query heads, KV heads,
    head dim, KiB per token and MiB for ``tokens`` tokens in ``dtype``."""
    cols = {}
    for name in models:
        cfg = sizing.PUBLISHED_MODELS[name]
        g = sizing.kv_geometry(cfg)
        cols[name] = {"attention": g.attention, "layers": g.layers, "query heads": g.heads, "KV heads": g.kv_heads,
                      "head dim": g.head_dim,
                      f"KiB per token ({dtype})": fmt3(sizing.kv_bytes_per_token(cfg, dtype) / 2 ** 10),
                      f"MiB for {tokens:,} tokens": fmt3(sizing.kv_bytes(cfg, tokens, dtype=dtype) / 2 ** 20)}
    return pd.DataFrame(cols)


def bench_table(bench: pd.DataFrame) -> pd.DataFrame:
    """``transfer.bench.measure_transfers`` rows as one row per method and one column per cache size (KiB), in ms."""
    table = bench.assign(ms=bench.seconds * 1e3).pivot(index="method", columns="nbytes", values="ms")
    table.columns = [f"{n // 2 ** 10:,} KiB" for n in table.columns]
    return table.map(fmt3)


def sweep_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """The size sweep (``nbytes``, ``raw_s``, ``whole_s``, ``predicted_s``) by MiB: the raw buffer's, the whole
    cache's and the predicted times in ms, and the raw share (raw / whole: the share of a cache transfer's time
    that the bytes alone take)."""
    out = pd.DataFrame({"MiB": [fmt3(n / 2 ** 20) for n in sweep.nbytes]})
    for col, header in (("raw_s", "raw (ms)"), ("whole_s", "whole (ms)"), ("predicted_s", "predicted (ms)")):
        out[header] = [fmt3(v * 1e3) for v in sweep[col]]
    out["raw share"] = [fmt3(r / w) for r, w in zip(sweep.raw_s, sweep.whole_s)]
    return out.set_index("MiB")


def overlap_table(prompt_tokens, whole_s, exposed_s, predicted_exposed_s, hidden) -> pd.DataFrame:
    """Per prompt length: the whole transfer after an ordinary prefill, the part left after a streamed prefill
    (measured and predicted), all in ms, and the hidden share (1 - exposed / whole)."""
    rows = {"whole (ms)": [fmt3(v * 1e3) for v in whole_s], "exposed (ms)": [fmt3(v * 1e3) for v in exposed_s],
            "predicted exposed (ms)": [fmt3(v * 1e3) for v in predicted_exposed_s],
            "hidden share": [fmt3(v) for v in hidden]}
    return pd.DataFrame(rows, index=pd.Index([int(n) for n in prompt_tokens], name="prompt (tokens)"))


def _names(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def sweep_note(sweep: pd.DataFrame, within: float = 0.2) -> str:
    """How the size sweep's caches (``whole_s``) sit against the line fitted to the raw buffer (``predicted_s``),
    as Markdown computed from the table :func:`sweep_table` prints: the largest caches' distance from the line,
    and whether that is within ``within`` (then their time is their bytes over the link's bandwidth) or not (then
    the cache's own fixed cost, or the machine's load during those transfers, is not small beside its bytes)."""
    s = sweep.sort_values("nbytes")
    off = (s.whole_s / s.predicted_s - 1).to_numpy()
    largest = f"{fmt3(s.nbytes.iloc[-1] / 2 ** 20)} MiB"
    text = (f"The dashed line is fitted to the raw buffer only. The whole caches sit {signed_pct(off.min())} to "
            f"{signed_pct(off.max())} from it; the largest ({largest}) {signed_pct(off[-1])}. ")
    if abs(off[-1]) <= within:
        return text + (f"Within {within:.0%}, the large caches land on it: their time is their bytes over the link's "
                       "bandwidth.")
    return text + (f"That is more than {within:.0%}: even the largest cache here is not yet large enough for its "
                   "bytes alone to set its time, and the cache's own fixed cost or the machine's load during "
                   "those transfers shows (the second fit, printed above, is the cache's own latency and "
                   "bandwidth).")


def handoff_note(handoffs: pd.DataFrame, measured: str) -> str:
    """What the DistServe table (``sizing.handoff`` rows by link; ``measured`` names this machine's row) says, as
    Markdown computed from it: the transfer in decode steps over the published links, grouped as under half a
    step, up to two steps, and more, and the largest share of the prefill."""
    pub = handoffs.drop(index=measured).sort_values("decode_steps")
    steps = pub.decode_steps
    groups = [(steps < 0.5, "in a fraction of a decode step"), ((steps >= 0.5) & (steps <= 2), "in"),
              (steps > 2, "in")]
    parts = []
    for mask, words in groups:
        g = steps[mask]
        if len(g):
            span = f"{fmt3(g.min())}" if len(g) == 1 else f"{fmt3(g.min())} to {fmt3(g.max())}"
            parts.append(f"over {_names(g.index)} {words} ({span} steps)" if words != "in" else
                         f"over {_names(g.index)} in {span} decode steps")
    share = pub.prefill_share.max()
    cheaper = (f"every published link is cheaper (the last column stays below 1, at most {fmt3(share)})" if share < 1
               else f"not every published link is cheaper (the last column reaches {fmt3(share)})")
    return ("The whole cache moves " + "; ".join(parts) + f". Against the prefill that produced it {cheaper}; over "
            f"this machine's measured link it would take {fmt3(handoffs.decode_steps[measured])} decode steps.")


def link_rate_note(handoffs: pd.DataFrame, measured: str) -> str:
    """The link sized as throughput, as Markdown computed from the DistServe table: a prefill worker that
    prefills back to back hands over one cache per prefill, ``rate x KV bytes`` = KV bytes / prefill time of
    bytes per second; the table's last column is then the share of each link's time it keeps busy, and
    ``1 / share`` prefill workers saturate a link they share."""
    row = handoffs.iloc[0]
    need = row.kv_bytes / row.prefill_s
    pub = handoffs.drop(index=measured).sort_values("prefill_share")
    slow = pub.iloc[-1]
    return (f"The link also has a throughput to keep up with. A prefill worker that prefills back to back hands "
            f"over one cache per prefill: {1 / row.prefill_s:.3g} requests/s x {fmt3(row.kv_bytes / 2 ** 20)} MiB = "
            f"{need / 1e9:.3g} GB/s of KV. The last column is therefore also the share of a link's time that one such "
            f"worker keeps busy, and a link shared by several prefill workers carries that many times the bytes: the "
            f"{slow.name} is {slow.prefill_share:.0%} busy with one and full at {1 / slow.prefill_share:.3g} "
            f"workers, while {pub.index[0]} would carry {1 / pub.prefill_share.iloc[0]:.3g}. This machine's link "
            f"would need {fmt3(handoffs.prefill_share[measured])}x its bandwidth for one such worker.")


def takeaway_note(handoffs: pd.DataFrame, measured: str, model: str, tokens: int) -> str:
    """The chapter's rule of thumb as Markdown, its numbers those of the DistServe table (``sizing.handoff`` rows
    by link, ``measured`` left out): the KV per token of ``model`` and the decode steps of its ``tokens``-token
    cache over each published link."""
    pub = handoffs.drop(index=measured).sort_values("decode_steps")
    per_token = handoffs.kv_bytes.iloc[0] / tokens
    steps = "; ".join(f"{fmt3(v)} over {k}" for k, v in pub.decode_steps.items())
    return (r"Rule of thumb: **a request's cache is $2LH_{kv}ds$ bytes per prompt token, moved once; divide by the "
            r"link's bandwidth and compare with one decode step.** "
            f"For {model} in fp16 that is {fmt3(per_token / 2 ** 10)} KiB per token, and a {tokens:,}-token prompt "
            f"costs this many decode steps of an H100: {steps} (the DistServe table above). Halve the bytes (fp8, "
            "fewer KV heads) and the steps halve; stream layer by layer over a link that keeps up with the compute "
            "and only about one layer's share is left after the prefill.")


def summary(sweep: pd.DataFrame, latency_s: float, cache_latency_s: float, hidden: pd.Series) -> str:
    """The chapter's summary as Markdown bullets, those about this machine computed from what it printed: the
    two fits' latencies and the raw share of the largest cache transfer (``sweep``), and the hidden shares of
    streaming (``hidden``: prompt tokens -> 1 - exposed / whole)."""
    s = sweep.sort_values("nbytes").iloc[-1]  # a row: its fields by key (``s.nbytes`` is the row's own size)
    share = s["raw_s"] / s["whole_s"]
    fixed = ("larger for a cache (header, several messages) than for a raw buffer" if cache_latency_s > latency_s
             else "no larger for a cache than for a raw buffer within these timings")
    lo, hi = float(hidden.min()), float(hidden.max())
    return "\n".join([
        "* Real caches hold exactly the bytes of the formula, and GQA and MQA shrink them by the ratio of query to "
        "KV heads.",
        f"* Between two processes here, a transfer costs a fixed latency plus bytes over bandwidth; the fixed part "
        f"is {fixed} ({cache_latency_s * 1e3:.3g} against {latency_s * 1e3:.3g} ms); at the largest size, "
        f"{fmt3(s['nbytes'] / 2 ** 20)} MiB, the bytes alone took {share:.0%} of a cache transfer"
        + (" (at or above 100%: the fixed part is lost in the timings' noise)." if share >= 0.95 else "."),
        "* This machine's gloo link is far slower than any link of a GPU cluster; the published links carry the "
        "argument.",
        f"* On this machine's small caches, where the sends share the CPU with the forward, streaming hid {lo:.0%} to "
        f"{hi:.0%} of the whole transfer at the {len(hidden)} prompt lengths"
        + (" (negative: more was left after the streamed forward than a whole transfer takes)" if lo < 0 else "")
        + "; on GPUs, whose copy engines move "
        "bytes while the cores compute, a link that keeps up leaves about one layer's share.",
        "* The cache arrives bit-exact, so the decode side produces exactly the tokens of a single process, and a "
        "header check makes a mismatched receiver fail loudly instead of decoding garbage."])
