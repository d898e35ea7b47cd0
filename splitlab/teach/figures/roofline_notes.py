"""Chapter 3's sentences about its own run, as Markdown: which side of the ridge each measured pass sits on, how
far the measured decode steps are from their roofline bound and why, where a profiled step's time goes, and how
the datasheet GPUs' ridge points compare with this device's. Every number in them comes from the tables the
chapter prints (``roofline.with_prefill_roofline``, ``with_decode_roofline``, ``profiling.decode_op_shares``),
so the prose says what this run measured, whatever the machine."""
from __future__ import annotations


import pandas as pd

from ... import sizing
from .style import and_list, fmt2, fmt3

__all__ = ["prefill_note", "prediction_note", "ridge_note", "ops_note", "batching_note", "gpu_ridge_note", "listing",
           "trained_note"]


def listing(values) -> str:
    """``[1, 2, 4]`` -> "1, 2 and 4" (integers)."""
    return and_list(f"{int(v):,}" for v in values)


def prefill_note(pf: pd.DataFrame, ridge: float) -> tuple[str, float]:
    """Which prompts of ``pf`` (:func:`roofline.with_prefill_roofline`) sit right of the ``ridge`` and the
    efficiency e the longest one reached; returns (Markdown, the e that decode's compute roof should use: the
    longest prompt's, or 1 where it exceeds 1, which the text then says and explains)."""
    right = pf.loc[pf["intensity"] > ridge, "prompt_tokens"]
    where = f"the ridge ({ridge:.3g} FLOP/B)"
    if len(right) == len(pf):
        text = (f"Every prompt here ({listing(pf['prompt_tokens'])} tokens) sits right of {where}: compute-bound, "
                r"so its time is about $F/(e\,\pi)$. ")
    elif len(right):
        text = (f"Prompts of {int(right.min())} tokens and longer sit right of {where}: compute-bound, so their "
                r"time is about $F/(e\,\pi)$; shorter ones sit left of it, where the weights' bytes set the floor. ")
    else:
        text = f"No prompt here clears {where}. "
    e, tokens = float(pf["efficiency"].iloc[-1]), int(pf["prompt_tokens"].iloc[-1])
    if e > 1:
        return text + (f"The longest ({tokens} tokens) ran at $e$ = {e:.0%}, faster than the peak measured above: "
                       "that measurement was slowed by another program (rerun the device cell). Decode's compute "
                       "roof below uses $e$ = 100%."), 1.0
    return text + (f"The longest ({tokens} tokens) reaches $e$ = {e:.0%} of the measured peak, below the flat roof: "
                   "the rest goes to the work between its matmuls (norms, rotary embeddings, attention, Python) and "
                   "to matmul shapes smaller than the peak's squares. Decode's compute roof below uses this "
                   "$e$."), e


def prediction_note(dc: pd.DataFrame, tolerance: float = 0.35, device: str = "cpu") -> str:
    """What the measured decode steps of :func:`roofline.with_decode_roofline` (with ``matmul_s`` from
    ``profiling.measure_weight_matmuls``, and ``bandwidth`` the copy bandwidth used there) say about the roofline
    prediction, as Markdown: measured / bound per batch against ``tolerance`` (said plainly where it misses), and
    why at batch 1: how much of the step the weight matmuls alone take and at what rate, and the rest of the
    step, which no byte count predicts; then whether the matmuls keep their rate at the next batch. ``device``: the
    device type the steps ran on ("cpu", "cuda"...), which names who runs the matrix kernels."""
    ratio = dc["step_s"] / dc["predicted_s"]
    within = int(((ratio <= 1 + tolerance) & (ratio >= 1 / (1 + tolerance))).sum())
    if ratio.min() < 0.95:
        text = (f"A step beat its roofline bound (measured / bound {fmt3(ratio.min())}): the bandwidth measurement was "
                "slowed by another program; rerun the device cell. ")
    elif within == len(dc):
        text = (f"Every step takes {fmt3(ratio.min())} to {fmt3(ratio.max())} times its roofline bound: the prediction "
                f"holds within its {tolerance:.0%} tolerance at every batch. ")
    else:
        text = (f"**The roofline bound misses here**: steps take {fmt3(ratio.min())} to {fmt3(ratio.max())} times it, "
                f"outside its {tolerance:.0%} tolerance at {len(dc) - within} of {len(dc)} batches. ")
    if "matmul_s" not in dc or len(dc) < 2:
        return text
    copy = float(dc["bandwidth"].iloc[0])
    one, two = dc.iloc[0], dc.iloc[1]
    rate = lambda r: r["weight_bytes"] / r["matmul_s"]  # noqa: E731  the matmuls read the weights only
    ms = lambda s: f"{s * 1e3:.3g} ms"  # noqa: E731
    text += (f"At batch {int(one['batch'])} the bound is {ms(one['predicted_s'])}. The weight matmuls alone take "
             f"{ms(one['matmul_s'])} and stream the weights at {rate(one) / 1e9:.3g} GB/s, {rate(one) / copy:.0%} "
             "of the copy bandwidth")
    kernel = "one core's matrix kernel" if device == "cpu" else "a matrix kernel given one decode row"
    text += (f": {kernel} reads these weights more slowly than a plain copy does" if
             rate(one) < 0.9 * copy else ": about as fast as memory allows")
    rest = float(one["step_s"] - one["matmul_s"])
    text += (f"; the other {ms(rest)} of the {ms(one['step_s'])} step is work that moves few bytes: norms, rotary "
             "embeddings, attention over the cache and Python around every layer, a fixed cost per forward pass "
             "that no byte count predicts (the tiny model below shows it alone). " if rest > 0.05 * one["step_s"]
             else f", about the whole {ms(one['step_s'])} step. ")
    if rate(two) < 0.8 * rate(one):
        text += (f"At batch {int(two['batch'])} the matmuls alone slow to {rate(two) / 1e9:.3g} GB/s: with more "
                 "than one row the BLAS library leaves its matrix-vector kernel for a matrix-matrix one, which on "
                 "this processor reads the weights more slowly, so the step is not flat here.")
    else:
        text += f"At batch {int(two['batch'])} they keep their rate ({rate(two) / 1e9:.3g} GB/s)."
    return text


def ridge_note(dc: pd.DataFrame, pf: pd.DataFrame, ridge: float) -> str:
    """Where the roofline chart puts the measured passes: the decode batches of ``dc`` left and right of the
    ``ridge``, and the prefills of ``pf`` with the share of the peak they reached."""
    left, right = dc[dc["intensity"] <= ridge], dc[dc["intensity"] > ridge]
    text = "Both phases move right as they grow: prefill with the prompt, decode with the batch. "
    if len(left):
        text += (f"Decode at batch {listing(left['batch'])} sits left of the ridge ({ridge:.3g} FLOP/B), under the "
                 "sloped memory roof, below it by the share of the bandwidth it reaches")
        at = ", ".join(f"{v:.3g}" for v in right["intensity"])
        text += (f"; at batch {listing(right['batch'])} ({at} FLOP/B) it has "
                 "crossed to the compute side. " if len(right) else ". ")
    else:
        text += f"Every decode batch here sits right of the ridge ({ridge:.3g} FLOP/B). "
    pright = pf[pf["intensity"] > ridge]
    if len(pright):
        e = pright["efficiency"]
        text += (f"The prefills of {listing(pright['prompt_tokens'])} tokens sit right of it, at {e.min():.0%} to "
                 f"{e.max():.0%} of the measured peak" if len(pright) > 1 else
                 f"The prefill of {int(pright['prompt_tokens'].iloc[0])} tokens sits right of it, at {e.iloc[0]:.0%} "
                 "of the measured peak")
        text += "." if len(pright) == len(pf) else "; shorter prompts sit left of it."
    else:
        text += "No prefill here reaches the ridge."
    return text


def ops_note(shares: pd.DataFrame, timed_step_s: float | None = None, device: str = "cpu") -> str:
    """What the profiled operators of ``shares`` (``profiling.decode_op_shares``) are, naming only those printed,
    and what the profiler itself cost: the step's wall-clock time with and without it (``shares.attrs``); with
    ``timed_step_s`` (the same step as live run 2 timed it: by the thread's CPU time where ``device`` is "cpu", by
    CUDA events on "cuda"), how the two times of one step relate."""
    names, share = list(shares["operator"]), dict(zip(shares["operator"], shares["share"]))
    parts = []
    if "aten::mm" in names:
        parts.append(f"`aten::mm`, {share['aten::mm']:.0%} of the operators' time, is the weight matmuls: the "
                     "reading of weights that the memory floor counts.")
    attention = [n for n in names if "scaled_dot_product" in n]
    if attention:
        parts.append(f"Attention over the cache is `{attention[0]}` ({share[attention[0]]:.0%}).")
    rest = [n for n in names if n != "aten::mm" and n not in attention[:1]]
    if rest:
        top = max(share[n] for n in rest)
        parts.append(f"The others listed ({', '.join(f'`{n}`' for n in rest)}) take "
                     + (f"{top:.0%} or less each." if top >= 0.005 else "under 1% each."))
    a = shares.attrs
    if {"step_s", "profiled_step_s", "ops_s"} <= set(a):
        extra = a["profiled_step_s"] / a["step_s"] - 1
        parts.append(f"Under the profiler the step took {a['profiled_step_s'] * 1e3:.3g} ms, without it "
                     f"{a['step_s'] * 1e3:.3g} ms ({extra:+.0%}): the profiler's recording of every operator is "
                     "time of its own, inside the operators' times"
                     + (", so each time listed is somewhat inflated. " if extra > 0.05 else ", small here. ")
                     + f"The operators' self times add up to {a['ops_s'] * 1e3:.3g} ms; the rest of the profiled "
                     "step is Python and dispatch between them.")
        if timed_step_s:
            off = a["step_s"] / timed_step_s - 1
            parts.append(f"Live run 2 timed the same step at {timed_step_s * 1e3:.3g} ms"
                         + (", about the same. " if abs(off) <= 0.1 else
                            f": the {a['step_s'] * 1e3:.3g} ms here is {off:+.0%} from it because the profiler can "
                            "only use the wall clock, which also counts the moments another program held the "
                            + {"cpu": "core or its caches, while live run 2 counted this thread's CPU time",
                               "cuda": "device, while live run 2 timed the GPU's own work with CUDA events"}.get(
                                device, "device, while live run 2 was timed by its own clock")
                            + " (and kept the fastest of its rounds). "))
    return " ".join(parts)


def batching_note(dc: pd.DataFrame, ridge: float) -> str:
    """What doubling the batch did in live run 2 (``dc``, :func:`roofline.with_decode_roofline`, batches
    doubling), as Markdown computed from its steps: how much longer each doubling made the step and how much it
    raised tokens/s, and which batches sit past the ``ridge``; where none does, what the roofline predicts past it
    (a step that doubles with the batch: the same tokens/s for twice the TPOT), said as a prediction."""
    dc = dc.sort_values("batch")
    step = dc["step_s"].to_numpy()
    batch = dc["batch"].to_numpy()
    grow = step[1:] / step[:-1]
    gain = (batch[1:] / step[1:]) / (batch[:-1] / step[:-1])
    text = (f"Here each doubling of the batch, from {int(batch[0])} to {int(batch[-1])}, made the step "
            f"{fmt3(grow.min())}x to {fmt3(grow.max())}x as long and multiplied tokens/s by {fmt3(gain.min())}x to "
            f"{fmt3(gain.max())}x. ")
    past = dc[dc["intensity"] > ridge]
    if len(past) == 0:
        return text + (f"Every batch measured here sits left of the ridge ({ridge:.3g} FLOP/B): memory-bound by the "
                       "roofline. Past the ridge the roofline predicts a step that doubles with the batch, the same "
                       "tokens/s for twice the TPOT: the batch size then trades latency for nothing, and below it, "
                       "throughput against the TPOT SLO of chapter 1.")
    first = int(past["batch"].iloc[0])
    late = grow[batch[1:] >= first]
    return text + (f"Batch {listing(past['batch'])} sit{'s' if len(past) == 1 else ''} past the ridge "
                   f"({ridge:.3g} FLOP/B), where the roofline predicts a step that doubles with the batch; the "
                   f"doubling{'s' if len(late) > 1 else ''} into {'them' if len(past) > 1 else 'it'} made the step "
                   f"{fmt3(late.min())}x{'' if len(late) == 1 else f' to {fmt3(late.max())}x'} as long. The batch size "
                   "trades throughput against the TPOT SLO of chapter 1.")


def gpu_ridge_note(cpu_ridge: float, here: str = "this CPU core") -> str:
    """How the datasheet GPUs' ridge points (``sizing.GPUS``) compare with ``cpu_ridge``, the ridge of ``here``:
    the quotients of the ridges as printed (3 significant digits), those of 10 and more as whole numbers (403 / 3.46
    is 116x; 2 significant digits wrote 120x), smaller ones to 2 significant digits."""
    ridges = [sizing.ridge_point(g["peak_flops_per_s"], g["bandwidth_bytes_per_s"]) for g in sizing.GPUS.values()]
    shown = lambda v: float(f"{v:.3g}")  # noqa: E731  the ridges as printed
    lo, hi = shown(min(ridges)) / shown(cpu_ridge), shown(max(ridges)) / shown(cpu_ridge)
    times = lambda r: f"{r:,.0f}" if r >= 10 else fmt2(r)  # noqa: E731  403 / 3.46 is 116x, not fmt2's 120x
    return (f"Their ridge points, {min(ridges):.3g} to {max(ridges):.3g} FLOP/B, are "
            f"{times(lo)}x to {times(hi)}x {here}'s ({cpu_ridge:.3g} FLOP/B); "
            "the table's `mem.` columns are the memory bandwidth and size.")


def trained_note(trained: pd.DataFrame, dc: pd.DataFrame, name: str, big: str, big_random: bool = True) -> str:
    """Markdown on the decode steps of a trained model (``trained``, :func:`roofline.with_decode_roofline`) beside
    those of ``big`` (``dc``; ``big_random``: its weights are random): the share of the copy bandwidth its batch-1 step
    achieved against big's (within 25%: about the same), its step against its memory floor, and how much longer its
    largest batch's step is than batch 1's against the batch's growth (under half of it: memory-bound)."""
    one, last, ref = trained.iloc[0], trained.iloc[-1], dc.iloc[0]
    share, ref_share = float(one["share_of_bandwidth"]), float(ref["share_of_bandwidth"])
    grow, batch = float(last["step_s"] / one["step_s"]), int(last["batch"])
    text = (f"At batch 1 {name}'s step reads {one['bytes'] / 1e6:.0f} MB in {one['step_s'] * 1e3:.3g} ms "
            f"({fmt3(one['step_s'] / one['floor_s'])}x its memory floor): "
            f"{one['achieved_bytes_per_s'] / 1e9:.3g} GB/s, "
            f"{share:.0%} of the copy bandwidth, against {ref_share:.0%} for {big}'s {'random ' * big_random}weights "
            f"at batch 1")
    if abs(share / ref_share - 1) <= 0.25:
        text += ": about the same share" + (". The bytes, not what they hold, set a decode step's time. " if big_random
                                            else ". ")
    else:
        text += (": another share. Besides the bytes, the number of layers and the shapes of the matrices set how "
                 "fast a step streams them (the decode note above). ")
    if grow < batch / 2:
        return text + (f"Batch {batch} takes {fmt3(grow)}x batch 1's step for {batch}x the tokens: the weights read "
                       f"once serve every sequence of the batch, as a step below the ridge (memory-bound by the "
                       f"roofline) should.")
    return text + (f"Batch {batch} takes {fmt3(grow)}x batch 1's step for {batch}x the tokens: the step grew nearly "
                   f"with the batch here, so the work per sequence, not the weights read once, set its time.")
