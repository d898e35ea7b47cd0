"""Chapter 5's sentences about its own run, as Markdown: where the size sweep's caches sit against the raw buffer's
line and why, what streaming cost the forward and hid, the DistServe table in words, this machine's link beside the
published ones, the takeaway and the summary. Every number in them comes from what the chapter printed
(:mod:`.transfer_tables`, ``transfer.bench.measure_transfers``, ``sizing.handoff``), and the words follow from those
numbers, so the prose says what this run measured, quiet machine or busy."""
from __future__ import annotations

import pandas as pd

from ... import sizing
from .style import and_list, fmt2, fmt3, signed_pct

__all__ = ["sweep_note", "cache_cost_note", "layerwise_note", "stream_prefill_lines", "stream_cost_note", "link_words",
           "gloo_note", "handoff_note", "link_rate_note", "takeaway_note", "summary"]


def _check_times(table: pd.DataFrame, columns, what: str) -> None:
    """``table`` must have rows, and ``columns`` (seconds, or bytes) finite and > 0: a NaN (a size never timed), a
    zero or a negative time would print as '+nan%' or '-100%' in a sentence about the machine."""
    if not len(table):
        raise ValueError(f"{what} has no rows: nothing to say")
    for col in columns:
        v = table[col].to_numpy(float)
        if not ((v > 0) & (v < float("inf"))).all():
            raise ValueError(f"{what}'s {col!r} must be finite and > 0 in every row, got {v.tolist()}")


def sweep_note(sweep: pd.DataFrame, within: float = 0.2) -> str:
    """How the size sweep's caches (``whole_s``) sit against the line fitted to the raw buffer (``predicted_s``),
    as Markdown computed from the table :func:`sweep_table` prints: the largest cache's distance from the line,
    whether that is within ``within`` (then its time is its bytes over the link's bandwidth), and if not, why, by
    the raw buffer of the same size: when it too sits off the line by more than ``within / 2`` on the same side,
    the link ran slower (or faster) while that size was timed than the fit's average; else a cache above the line
    shows its own fixed cost, and one below it beat the raw buffer of its size, which only the timings' noise
    can do (a fixed cost only adds time).

    Raises:
        ValueError: no rows; a size or time that is not finite and > 0."""
    _check_times(sweep, ("nbytes", "whole_s", "raw_s", "predicted_s"), "sweep")
    s = sweep.sort_values("nbytes")
    off = (s.whole_s / s.predicted_s - 1).to_numpy()
    largest = f"{fmt3(s.nbytes.iloc[-1] / 2 ** 20)} MiB"
    lo, hi = signed_pct(off.min()), signed_pct(off.max())
    span = lo if lo == hi else f"{lo} to {hi}"
    text = (f"The dashed line is fitted to the raw buffer only. The whole caches sit {span} from it; the largest "
            f"({largest}) {signed_pct(off[-1])}. ")
    if abs(off[-1]) <= within:
        return text + (f"Within {within:.0%}, the largest cache lands on it: its time is its bytes over the link's "
                       "bandwidth.")
    side = "above" if off[-1] > 0 else "below"
    raw = s.raw_s.iloc[-1] / s.predicted_s.iloc[-1] - 1
    text += (f"That is more than {within:.0%} {side} it. The line is a fit over every size, and at {largest} the "
             f"raw buffer itself took {signed_pct(raw)} from it")
    if abs(raw) > within / 2 and (raw > 0) == (off[-1] > 0):
        own = signed_pct(s.whole_s.iloc[-1] / s.raw_s.iloc[-1] - 1)
        return text + (f": the link ran {'slower' if raw > 0 else 'faster'} while this size was timed than the fit's "
                       "average (the machine's load), so the line misses this size for the raw buffer too; against "
                       f"the raw buffer of its own size the cache took {own}.")
    if off[-1] > 0:
        return text + (". So the cache took longer than the raw buffer of its own size: even the largest cache here "
                       "is not yet large enough for its bytes alone to set its time, and the cache's own fixed cost "
                       "shows (the second fit, printed above, is the cache's own latency and bandwidth).")
    return text + (". So the cache beat the raw buffer of its own size, which no fixed cost explains (a fixed cost "
                   "only adds time) and which a cache cannot truly do (it carries the same bytes plus a header): "
                   "the timings of a busy machine vary by that much.")


def cache_cost_note(sweep: pd.DataFrame, near: float = 0.05) -> str:
    """Where the size sweep's cache transfers cost more than a raw buffer of the same size, as Markdown computed
    from :func:`sweep_table`'s ``raw share`` (raw / whole): below ``1 - near`` the cache took longer, above ``1 +
    near`` the raw buffer did (a cache carries the same bytes plus a header, so that is the timings' noise), in
    between about the same; and whether that fixed cost weighs most on the small caches, as it should (the
    smallest cache's raw share below ``1 - near`` and below the largest's).

    Raises:
        ValueError: no rows; a size or time that is not finite and > 0."""
    _check_times(sweep, ("nbytes", "whole_s", "raw_s"), "sweep")
    s = sweep.sort_values("nbytes")
    share = (s.raw_s / s.whole_s).to_numpy()
    mib = [f"{fmt3(n / 2 ** 20)}" for n in s.nbytes]
    groups = {"more": [m for m, r in zip(mib, share) if r < 1 - near],
              "same": [m for m, r in zip(mib, share) if abs(r - 1) <= near],
              "less": [m for m, r in zip(mib, share) if r > 1 + near]}
    parts = [f"{words} at {and_list(groups[key])} MiB" + (" (raw share above 1)" if key == "less" else "")
             for key, words in (("more", "longer"), ("same", "about as long"), ("less", "less time"))
             if groups[key]]
    text = ("Against a raw buffer of the same size, the cache transfers here took " + "; ".join(parts) + ". A cache "
            "transfer also sends a header and several messages instead of one, and each message wakes a process up "
            "on a busy machine: a fixed cost, the cache's own latency (the second fit, printed above)"
            + (", which is what the longer ones show. " if groups["more"] else ". "))
    if len(share) > 1 and share[0] < min(1 - near, share[-1]):
        text += (f"It weighs most on small caches: the raw share is {fmt3(share[0])} at {mib[0]} MiB, "
                 f"{fmt3(share[-1])} at {mib[-1]} MiB. ")
    elif len(share) > 1:
        text += (f"By the formula it weighs most on the smallest caches, but here the smallest ({mib[0]} MiB) shows "
                 f"none of it (raw share {fmt3(share[0])}"
                 + (f", {fmt3(share[-1])} at {mib[-1]} MiB" if share[0] < 1 - near else "")
                 + "): on this run the timings' noise is as large as the fixed cost. ")
    if groups["less"] or groups["same"]:
        text += ("A cache transfer moves the raw buffer's bytes plus a header, so it cannot truly be faster: a raw "
                 "share near or above 1 means the fixed cost is lost in the noise of the timings, not that the cache "
                 "beat the link.")
    return text.rstrip()


def layerwise_note(bench: pd.DataFrame, near: float = 0.05) -> str:
    """The layer-wise transfer against the whole one at each prompt length of the benchmark (``bench``: rows of
    ``transfer.bench.measure_transfers``), as Markdown computed from its table: the range of layer-wise / whole,
    and the lengths where the layer-wise one took less (below ``1 - near``), which its extra messages cannot
    explain."""
    t = bench.pivot_table(index="prompt_tokens", columns="method", values="seconds")
    ratio = t["layerwise"] / t["whole"]
    text = ("The layer-wise transfer sends $L$ messages and a trailer instead of one payload, so by its messages it "
            "should cost about as much as the whole transfer or more; its point is not speed but when it can start, "
            f"as the streaming section shows. Here it took {fmt3(ratio.min())}x to {fmt3(ratio.max())}x the whole "
            "transfer's time")
    less = [f"{int(n):,}" for n, r in ratio.items() if r < 1 - near]
    if less:
        return text + (f", less at {and_list(less)} tokens, which its messages cannot explain: the two were timed at "
                       "different moments of a shared machine.")
    return text + "."


def stream_prefill_lines(lw: pd.DataFrame) -> str:
    """The plain and the streamed prefill of each prompt length of the benchmark's ``layerwise`` rows (``lw``,
    indexed by prompt tokens), in ms: the median with the fastest and slowest repeat, one length a line, short
    enough for a phone."""
    ms = lambda v: fmt3(v * 1e3)  # noqa: E731
    return "prefill alone vs streamed prefill, ms:\nmedian (fastest-slowest repeat)\n" + "\n".join(
        f"{int(n):6,}: {ms(lw.prefill_s[n])} ({ms(lw.prefill_lo_s[n])}-{ms(lw.prefill_hi_s[n])}) vs "
        f"{ms(lw.stream_prefill_s[n])} ({ms(lw.stream_prefill_lo_s[n])}-{ms(lw.stream_prefill_hi_s[n])})"
        for n in lw.index)


def stream_cost_note(lw: pd.DataFrame) -> str:
    """What streaming cost the forward on this machine, as Markdown computed from the benchmark's ``layerwise`` rows
    (``lw``, indexed by prompt tokens: ``prefill_s`` and ``stream_prefill_s``, medians, with the repeats' fastest
    and slowest, ``prefill_lo_s``/``_hi_s``, ``stream_prefill_lo_s``/``_hi_s``): at each length the streamed
    prefill was slower than the plain one beyond the repeats' spread (its fastest repeat slower than the plain's
    slowest), faster beyond it, or within it; the words follow from those, so a run whose two prefills differ by
    noise alone says so instead of blaming the sends.

    Raises:
        ValueError: no rows; a time that is not finite and > 0."""
    _check_times(lw, ("prefill_s", "stream_prefill_s", "prefill_lo_s", "prefill_hi_s", "stream_prefill_lo_s",
                      "stream_prefill_hi_s"), "lw")
    ratio = lw.stream_prefill_s / lw.prefill_s
    slower = [n for n in lw.index if lw.stream_prefill_lo_s[n] > lw.prefill_hi_s[n]]
    faster = [n for n in lw.index if lw.stream_prefill_hi_s[n] < lw.prefill_lo_s[n]]
    within = [n for n in lw.index if n not in slower and n not in faster]
    tokens = lambda ns: and_list([f"{int(n):,}" for n in ns]) + " tokens"  # noqa: E731
    def span(ns) -> str:
        lo, hi = signed_pct(min(ratio[ns]) - 1), signed_pct(max(ratio[ns]) - 1)
        return lo if lo == hi else f"{lo} to {hi}"
    text = ("The two processes share this machine's CPU cores, so the sends can compete with the forward. "
            "The prefill times printed above (medians, with the fastest and slowest repeat) say whether they did: ")
    if len(slower) == len(lw):
        return text + (f"yes, the streamed prefills took {span(slower)} longer than the plain ones, beyond the "
                       "repeats' spread at every length. Here streaming has a price of its own.")
    parts = []
    if slower:
        parts.append(f"slower beyond the repeats' spread at {tokens(slower)} ({span(slower)})")
    if within:
        parts.append(f"within the repeats' spread at {tokens(within)} ({span(within)})")
    if faster:
        parts.append(f"faster beyond it at {tokens(faster)} ({span(faster)}), which is no cost of the sends (the "
                     "streamed forward writes its cache straight into the send buffer, and the two forwards ran at "
                     "different moments of a shared machine)")
    text += "the streamed prefill was " + "; ".join(parts) + ". "
    return text + ("Only where it is slower beyond the spread did the sends measurably cost the forward on this run."
                   if slower else "On this run the sends cost the forward nothing measurable.")


def link_words(bandwidth_bytes_per_s: float, near: float = 0.2) -> str:
    """A measured link's bandwidth against the slowest published link of ``sizing.LINKS``, in words that follow
    from the ratio: "9.6x slower than the slowest published link, the 25 Gb/s network", "about as fast as ..."
    (within ``near``), "1.5x faster than ..."."""
    name, link = min(sizing.LINKS.items(), key=lambda kv: kv[1]["bandwidth_bytes_per_s"])
    ratio = link["bandwidth_bytes_per_s"] / bandwidth_bytes_per_s
    where = f"the slowest published link, the {name}"
    if ratio >= 1 + near:
        return f"{fmt2(ratio)}x slower than {where}"
    return f"{fmt2(1 / ratio)}x faster than {where}" if ratio <= 1 / (1 + near) else f"about as fast as {where}"


def gloo_note(bandwidth_bytes_per_s: float) -> str:
    """What the measured raw bandwidth between this machine's two processes is beside the published links, as
    Markdown (:func:`link_words`), and why gloo on one machine is slow."""
    return (f"Gloo between the two processes of this machine moved {fmt3(bandwidth_bytes_per_s / 1e9)} GB/s (the "
            f"raw fit), {link_words(bandwidth_bytes_per_s)}: it copies the bytes through the operating system's TCP "
            "stack on the same CPU cores that run the model.")


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
            parts.append(f"over {and_list(g.index)} {words} ({span} steps)" if words != "in" else
                         f"over {and_list(g.index)} in {span} decode steps")
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


def summary(sweep: pd.DataFrame, latency_s: float, cache_latency_s: float, hidden: pd.Series,
            bandwidth_bytes_per_s: float | None = None) -> str:
    """The chapter's summary as Markdown bullets, those about this machine computed from what it printed: the
    two fits' latencies and the raw share of the largest cache transfer (``sweep``), the hidden shares of
    streaming (``hidden``: prompt tokens -> 1 - exposed / whole) and, given the raw fit's
    ``bandwidth_bytes_per_s``, how it compares with the published links (:func:`link_words`)."""
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
        + (" (near or above 100%: the fixed part is lost in the timings' noise)." if share >= 0.95 else "."),
        "* This machine's gloo link is "
        + (link_words(bandwidth_bytes_per_s) if bandwidth_bytes_per_s else "not a link of a GPU cluster")
        + "; the published links carry the argument.",
        f"* On this machine's small caches, where the sends share the CPU with the forward, streaming hid {lo:.0%} to "
        f"{hi:.0%} of the whole transfer at the {len(hidden)} prompt lengths"
        + (" (negative: more was left after the streamed forward than a whole transfer takes)" if lo < 0 else "")
        + "; on GPUs, whose copy engines move "
        "bytes while the cores compute, a link that keeps up leaves about one layer's share.",
        "* The cache arrives bit-exact, so the decode side produces exactly the tokens of a single process, and a "
        "header check makes a mismatched receiver fail loudly instead of decoding garbage."])
