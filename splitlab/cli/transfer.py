"""``python -m splitlab transfer``: what moving the KV cache costs here (:mod:`splitlab.transfer.bench`).

For each prompt length: bytes moved, seconds and GB/s of the in-process copy, the cross-process whole-request
and layer-wise transfers (a second process started with torch.distributed, gloo on CPU), and the raw baseline
(one contiguous tensor of the same bytes over the same backend); plus how much of the transfer layer-wise
streaming hides behind the prefill. ``--json`` prints a list of rows with ``prompt_tokens``, ``nbytes``,
``method``, ``seconds``, ``gb_per_s`` (gigabytes, 1e9 bytes, per second; the API's rows call it ``gbps``) and
more (see :func:`splitlab.transfer.bench.measure_transfers`); each ``layerwise`` row adds ``hidden_fraction`` (1 -
exposed_s / the whole transfer's seconds: the share of a whole transfer that streaming during the prefill took
off the critical path; negative when the time left after the forward exceeded a whole transfer, i.e. streaming
cost more than it hid) and ``hidden_note`` saying which in words.
Registered into :mod:`splitlab.cli`.
"""
from __future__ import annotations

from ..common.presets import list_presets
from .args import human_bytes, positive_int, thread_count, timeout_seconds, token_list, weight_dtype
from .demo import check_loadable, quiet_hub
from .registry import CLIError, arg, command, stage_printer

__all__ = ["transfer"]


@command("transfer", "KV transfer cost: in-process copy, cross-process whole and layer-wise, raw backend baseline",
         arg("--model", default="tiny", help="a preset (random weights; default tiny)"),
         arg("--prompt-tokens", type=token_list, nargs="+", default=[[128, 512, 2048]], metavar="N",
             help="prompt lengths, e.g. 128,512,2048 (default) or 128 512"),
         arg("--batch", type=positive_int, default=1, help="rows per cache (default 1)"),
         arg("--repeats", type=positive_int, default=7, help="timed repeats per method; the median is shown (7)"),
         arg("--dtype", type=weight_dtype, default=None, help="float32 (default), bfloat16 or float16"),
         arg("--timeout", type=timeout_seconds, default=60, metavar="S",
             help="timeout of every exchange (60 s; at most a week)"),
         arg("--threads", type=thread_count, default=1, help="torch threads in each process (default 1)"))
def transfer(args) -> tuple[list[dict], list[str]]:
    if args.model not in list_presets():
        check_loadable(args.model)
        raise CLIError(f"transfer measures presets only (both processes build the same random weights); "
                       f"choose one of {', '.join(list_presets())}")
    lengths = [n for group in args.prompt_tokens for n in group]
    quiet_hub()
    from ..phases.cpu_threads import pin_threads
    from ..transfer.bench import measure_transfers
    pin_threads(args.threads)  # the same as the other process: spinning OpenMP threads starve the sends
    rows = measure_transfers(args.model, lengths, batch=args.batch, repeats=args.repeats, dtype=args.dtype,
                             timeout_s=args.timeout, threads=args.threads,
                             say=None if args.json else stage_printer("transfer"))
    lines = [f"splitlab transfer: {args.model}, {rows[0]['dtype']}, batch {args.batch}, backend {rows[0]['backend']}"
             f" (2 local processes), median of {args.repeats}",
             f"{'prompt':>7} {'bytes':>10} {'method':<11} {'ms':>9} {'GB/s':>7}  note"]
    for r in rows:
        note = ""
        if r["method"] == "layerwise":
            hidden = (f"{r['hidden_fraction']:.0%} of whole hidden" if r["hidden_fraction"] > 0 else
                      "nothing hidden: more than a whole transfer")  # not a negative share
            note = (f"streamed during prefill: {r['exposed_s'] * 1e3:.2f} ms left after the forward = "
                    f"{hidden} (prefill {r['prefill_s'] * 1e3:.1f} ms, "
                    f"{r['stream_prefill_s'] * 1e3:.1f} ms while streaming)")
        elif r["method"] == "whole":
            raw = next(x for x in rows if x["prompt_tokens"] == r["prompt_tokens"] and x["method"] == "raw")
            note = f"{r['gbps'] / raw['gbps']:.0%} of raw"
        lines.append(f"{r['prompt_tokens']:>7} {human_bytes(r['nbytes']):>10} {r['method']:<11} "
                     f"{r['seconds'] * 1e3:>9.3f} {r['gbps']:>7.2f}  {note}")
    return [_json_row(r, rows) for r in rows], lines


def _json_row(r: dict, rows: list[dict]) -> dict:
    """``r`` for ``--json``: ``gb_per_s`` for the API's ``gbps`` (which reads as gigabits), and on a layerwise row
    ``hidden_note``: what its ``hidden_fraction`` means, negative ones above all."""
    out = {("gb_per_s" if k == "gbps" else k): v for k, v in r.items()}
    if r["method"] == "layerwise":
        whole = next(x for x in rows if x["prompt_tokens"] == r["prompt_tokens"] and x["method"] == "whole")
        h = r["hidden_fraction"]
        out["hidden_note"] = (
            f"streaming during the prefill hid {h:.0%} of a whole transfer ({r['exposed_s'] * 1e3:.3g} ms left "
            f"after the forward, {whole['seconds'] * 1e3:.3g} ms for a whole one)" if h >= 0 else
            f"negative: streaming layer by layer cost more than it hid ({r['exposed_s'] * 1e3:.3g} ms left after the "
            f"forward, more than the {whole['seconds'] * 1e3:.3g} ms of a whole transfer)")
    return out
