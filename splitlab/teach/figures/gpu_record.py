"""What a GPU measured when this book had one: a random-weight Llama-3-8B calibrated on an H200 by
``benchmarks/gpu_roofline.py`` (``splitlab/data/gpu_measured.json``, two runs on two machines), each forward beside
the roofline cost model's prediction. Chapter 3 prints it beside its own live runs: recorded, not run by the page,
and the words about it are computed from the recorded numbers."""
from __future__ import annotations

import json
from pathlib import Path

from .style import fmt2, fmt3

__all__ = ["gpu_record", "gpu_record_note"]

RECORD = Path(__file__).resolve().parents[2] / "data" / "gpu_measured.json"
HOLDS = 1.15  # a forward "on the roofline": measured within 15% of the prediction in every run


def gpu_record(path: str | Path | None = None) -> dict:
    """The recorded runs (:data:`RECORD` or ``path``): ``device``, ``model``, ``command``, ``roofline`` (the
    prediction's source) and ``runs``, each with ``date``, ``rows`` (``kind``: prefill, chunk, hybrid or decode;
    sizes; ``measured_s``, ``predicted_s`` in seconds) and ``pairs`` (a fused hybrid forward's ``fused_s`` beside
    ``two_pass_s``, the chunk and the decode step measured apart).

    Raises:
        ValueError: the file is not such a record (no runs, or a row without a positive measured and predicted
            time).
    """
    data = json.loads(Path(path or RECORD).read_text())
    rows = [r for run in data.get("runs", []) for r in run.get("rows", [])]
    if not rows or not all(r.get("measured_s", 0) > 0 and r.get("predicted_s", 0) > 0 for r in rows):
        raise ValueError(f"{path or RECORD} holds no GPU record (runs with positive measured and predicted times)")
    return data


def _span(values, digits=fmt2) -> str:
    lo, hi = min(values), max(values)
    return digits(lo) if digits(lo) == digits(hi) else f"{digits(lo)} to {digits(hi)}"


def gpu_record_note(data: dict | None = None) -> str:
    """Markdown: where the recorded forwards sit against the roofline. The smallest forward size (tokens in one
    prefill) from which every prefill of the record, in every run, lands within :data:`HOLDS` of its prediction;
    the spread of the decode steps' and the smaller prefills' ratios (the host launching kernels one by one); and
    the fused hybrid steps beside their two passes, by decode batch."""
    data = data or gpu_record()
    runs = data["runs"]
    rows = [r for run in runs for r in run["rows"]]
    ratio = lambda r: r["measured_s"] / r["predicted_s"]  # noqa: E731
    prefill = [r for r in rows if r["kind"] == "prefill"]
    size = lambda r: r["batch"] * r["prompt_tokens"]  # noqa: E731
    holds = [t for t in sorted({size(r) for r in prefill}) if all(ratio(r) <= HOLDS for r in prefill if size(r) >= t)]
    decode = [r for r in rows if r["kind"] == "decode"]
    dates = sorted({run["date"][:10] for run in runs})
    text = (f"**Recorded on an {data['gpu']}** ({' and '.join(dates)}, {len(runs)} run{'s' * (len(runs) > 1)}, "
            f"`{data['command']}`; this page does not run it): a random-weight {data['model']} in bf16, each forward "
            f"timed with CUDA events, beside this chapter's roofline with the datasheet's peak and bandwidth at 0.6 "
            f"and 0.8 of them. ")
    if holds:
        big = [r for r in prefill if size(r) >= holds[0]]
        eff = [r["efficiency"] for r in big if "efficiency" in r]
        text += (f"Prefills of {holds[0]:,} tokens and more in one forward took "
                 f"{_span([ratio(r) for r in big], fmt3)}x the prediction"
                 + (f", {_span(eff)} of the dense peak (the roofline assumes 0.6)" if eff else "")
                 + ": compute-bound, on the roof. ")
        small = [r for r in prefill if size(r) < holds[0]]
    else:
        text += "No prefill size landed within 15% of the prediction in every run. "
        small = prefill
    if small:
        text += (f"Smaller prefills took {_span([ratio(r) for r in small])}x it, and decode steps (batch "
                 f"{min(r['batch'] for r in decode)} to {max(r['batch'] for r in decode)}) "
                 f"{_span([ratio(r) for r in decode])}x: "
                 f"{_span([1e3 * r['measured_s'] for r in decode])} ms against a predicted "
                 f"{_span([1e3 * r['predicted_s'] for r in decode])} ms. ")
    hf = [run["hf_generate_per_token_s"] for run in runs if "hf_generate_per_token_s" in run]
    hf = [1e3 * run["hf_generate_per_token_s"] for run in runs if "hf_generate_per_token_s" in run]
    floor = min(r["measured_s"] for r in rows)
    text += (f"Every forward took at least {fmt2(1e3 * floor)} ms, whatever its size: a fixed cost per forward, which "
             "on a GPU is the host launching the forward's kernels one by one from Python (eager PyTorch), not the "
             "GPU's arithmetic or memory traffic"
             + (f"; transformers' own `generate` took {_span(hf)} ms per token on the same model" if hf else "")
             + ". Serving engines capture the decode step as a CUDA graph, launched at once, so the roofline "
             "stands for what such an engine does, and this book's GPU figures are its predictions.")
    pairs = [p for run in runs for p in run.get("pairs", [])]
    for b in sorted({p["decode_batch"] for p in pairs}):
        saving = [p["saving"] for p in pairs if p["decode_batch"] == b]
        predicted = [p["predicted_saving"] for p in pairs if p["decode_batch"] == b]
        pct = lambda v: f"{abs(v):.0%}"  # noqa: E731
        more = [-s for s in saving if s < 0]
        if not more:
            said = f"{_span(saving, pct)} less than its two passes"
        elif len(more) == len(saving):
            said = f"{_span(more, pct)} more than its two passes"
        else:
            said = f"from {pct(max(more))} more to {pct(max(saving))} less than its two passes"
        text += (f"\n\nA fused hybrid step (a chunk of a prompt and {b} decode rows in one forward, chapter 7) took "
                 f"{said}, where the roofline predicts {_span(predicted, pct)} less")
        text += ("." if not more else ": splitlab runs each row's attention as its own call, where a GPU server runs "
                 "one variable-length kernel for all rows, so on a GPU the fused step gains what the roofline says "
                 "only with such a kernel.")
    return text
