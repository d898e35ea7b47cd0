"""Chapter 1 (two phases): its exercise checkers."""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..figures.style import change_words, signed_pct
from .verdict import say, verdict

__all__ = ['forward_passes', 'recompute_tokens', 'tpot', 'prompt_doubling', 'doubling_ratios', 'doubling_note']


def forward_passes(answer: Any, new_tokens: int) -> bool:
    """Ch. 1: forward passes to generate ``new_tokens`` tokens with a KV cache (1 prefill + new_tokens-1 decodes)."""
    return verdict(answer, new_tokens, 0, f"the forward passes for {new_tokens} new tokens",
                   "prefill makes the first token; each decode step makes one more.")


def recompute_tokens(answer: Any, prompt_tokens: int, new_tokens: int) -> bool:
    """Ch. 1: tokens pushed through the model to generate ``new_tokens`` tokens WITHOUT a KV cache.

    Token k (k = 1..N) needs a forward pass over the prompt plus the k-1 tokens already generated:
    sum_{k=1..N} (T + k - 1) = N*T + N*(N-1)/2.
    """
    n, t = new_tokens, prompt_tokens
    return verdict(answer, n * t + n * (n - 1) // 2, 0, "the tokens processed without a cache",
                   "each new token re-reads the prompt and every token generated before it.")


def tpot(answer: Any, ttft_s: float, e2e_s: float, output_tokens: int) -> bool:
    """Ch. 1: the TPOT (s) of one request, (E2E - TTFT) / (n - 1) (the definition of serving/metrics.py).

    Raises:
        ValueError: fewer than two output tokens, or E2E before TTFT.
    """
    if output_tokens < 2 or e2e_s < ttft_s:
        raise ValueError(f"TPOT needs >= 2 output tokens and E2E >= TTFT, got n={output_tokens}, "
                         f"TTFT={ttft_s}, E2E={e2e_s}")
    return verdict(answer, (e2e_s - ttft_s) / (output_tokens - 1), 0.01, "the request's TPOT in seconds",
                   "the time after the first token, shared by the n - 1 gaps that follow it.")


def _phase_times(gen: Any) -> tuple[float, float]:
    """(TTFT, TPOT) of one request in seconds: its prefill's forward time and its median decode step, as the
    engine's Timer measured them (on a CPU after ``set_cpu_clock("thread")``: this thread's CPU time, which another
    program on the machine cannot stretch by taking the core; the median, so that one step slowed by a neighbour's
    use of the shared caches does not move it); from its token times when it has no step times."""
    steps = list(getattr(gen, "decode_step_s", None) or [])
    if steps:
        return float(gen.prefill_s), float(np.median(steps))
    t = list(gen.token_time_s)
    if len(t) < 2:
        raise ValueError("each run needs at least two output tokens")
    return t[0], (t[-1] - t[0]) / (len(t) - 1)


def doubling_ratios(before: Any, after: Any, floor: float = 0.35, cap: float = 0.4) -> dict:
    """What :func:`prompt_doubling` measures from runs of two prompt lengths: ``before`` and ``after`` are one
    :func:`splitlab.generate` result each, or equally long lists of them run in interleaved pairs.

    Returns a dict: ``ttft_ratio`` and ``tpot_ratio`` (the fastest ``after`` run over the fastest ``before`` run:
    contention on a shared machine only ever adds time), ``ttft_s`` and ``tpot_s`` (the fastest of each length,
    (before, after)), ``pairs`` (how many), ``spread`` (per ratio: the largest distance of a pair's own ratio from
    the median pair ratio, relative to it; 0 for one pair), ``tolerance`` (per ratio: that spread, but at least
    ``floor``: a check never tighter than the runs agree with each other) and ``judged`` (per ratio: whether that
    tolerance is at most ``cap``; beyond it a wrong answer, such as a quadratic 4x for TTFT or a doubled TPOT,
    could pass, so the runs are too noisy to judge a prediction).

    Raises:
        ValueError: the two lists differ in length or are empty; a run has fewer than two output tokens, or a
            TTFT or TPOT measured as 0 s.
    """
    before = list(before) if isinstance(before, (list, tuple)) else [before]
    after = list(after) if isinstance(after, (list, tuple)) else [after]
    if not before or len(before) != len(after):
        raise ValueError(f"need as many runs before as after (>= 1), got {len(before)} and {len(after)}")
    b, a = np.array([_phase_times(g) for g in before]), np.array([_phase_times(g) for g in after])
    for i, name in enumerate(("TTFT", "TPOT")):  # a ratio over 0 s printed inf, its spread nan%
        if not (b[:, i] > 0).all() or not (a[:, i] > 0).all():
            raise ValueError(f"a run's {name} was measured as 0 s (a clock too coarse for it): no ratio to judge")
    out = {"pairs": len(before), "ttft_s": (b[:, 0].min(), a[:, 0].min()), "tpot_s": (b[:, 1].min(), a[:, 1].min()),
           "spread": {}, "tolerance": {}, "judged": {}}
    for i, name in enumerate(("ttft", "tpot")):
        out[f"{name}_ratio"] = float(a[:, i].min() / b[:, i].min())
        pair = a[:, i] / b[:, i]
        spread = float(np.max(np.abs(pair / np.median(pair) - 1)))
        out["spread"][name], out["tolerance"][name] = spread, float(max(spread, floor))
        out["judged"][name] = out["tolerance"][name] <= cap
    return out


def _ratio_verdict(answer: Any, measured: float, tol: float, judged: bool, what: str, hint: str) -> bool:
    try:
        value = float(answer)
    except (TypeError, ValueError):
        say(f"Not a number: {answer!r}. {what} is a number.")
        return False
    if not judged:
        say(f"Not judged: {what} is {measured:.3g} (yours {value:.3g}), but the pairs of this run disagree by "
            f"{tol:.0%}, more than a check can allow before a wrong answer passes. Rerun the cell when the machine "
            "is quieter.")
        return False
    if abs(value / measured - 1) <= tol:
        say(f"Correct: {what} = {measured:.3g} (yours {value:.3g}, within {tol:.0%}).")
        return True
    say(f"Not yet: {value:.3g} is not {what}, {measured:.3g} (tolerance {tol:.0%}). Hint: {hint}")
    return False


def prompt_doubling(ttft_ratio: Any, tpot_ratio: Any, before: Any, after: Any) -> bool:
    """Ch. 1 experiment: the reader's predicted ratios TTFT(after)/TTFT(before) and TPOT(after)/TPOT(before),
    checked against the ratios measured in the reader's own runs (:func:`doubling_ratios`: the fastest run of
    each length, a tolerance of 35% or the pairs' own spread if that is more; runs whose pairs disagree by more
    than 40% are too noisy to judge, and the checker says so). ``before`` / ``after``: one
    :func:`splitlab.generate` result each, or lists of them run in interleaved pairs. The measured values are
    printed once both predictions are given."""
    if ttft_ratio is None or tpot_ratio is None:
        say("Not answered yet: set both predicted ratios, then run the cell again.")
        return False
    m = doubling_ratios(before, after)
    ttft_hint = ("the prefill's FLOPs, about 2 x parameters x prompt tokens, set TTFT." if m["ttft_ratio"] >= 1.4
                 else "twice the prompt barely moved TTFT here: a forward's fixed cost (launching its kernels, "
                 "Python) outweighs its FLOPs at these lengths, so predict from the measured prefill times."
                 if m["ttft_ratio"] >= 0.9 else "the longer prompt's prefill came out faster, which more work "
                 "cannot do: this machine's noise (another program took the core); run the cell again.")
    ok = [_ratio_verdict(ttft_ratio, m["ttft_ratio"], m["tolerance"]["ttft"], m["judged"]["ttft"],
                         "the measured TTFT ratio", ttft_hint),
          _ratio_verdict(tpot_ratio, m["tpot_ratio"], m["tolerance"]["tpot"], m["judged"]["tpot"],
                         "the measured TPOT ratio", "a decode step reads every weight once, whatever the prompt; the "
                         "cache it reads is a small part.")]
    (t0, t1), (d0, d1) = m["ttft_s"], m["tpot_s"]
    say(f"measured (fastest of {m['pairs']} each): TTFT {t0 * 1e3:.3g} -> {t1 * 1e3:.3g} ms, "
        f"TPOT {d0 * 1e3:.3g} -> {d1 * 1e3:.3g} ms; the pairs' own ratios spread by "
        f"{m['spread']['ttft']:.0%} (TTFT) and {m['spread']['tpot']:.0%} (TPOT)")
    return all(ok)


def doubling_note(flops_ratio: float, bytes_ratio: float, m: dict) -> str:
    """The experiment's solution as Markdown, its words computed from its numbers: how TTFT and TPOT changed
    (:func:`~splitlab.teach.figures.style.change_words` of the measured ratios in ``m``, from
    :func:`doubling_ratios`) against what the FLOPs (``flops_ratio``) and the bytes a step reads (``bytes_ratio``)
    predict, and whether each measured ratio lies within the checker's tolerance of its prediction."""
    def part(name: str, measured: float, predicted: float, why: str) -> str:
        key, off = name.lower(), measured / predicted - 1
        tol = m["tolerance"][key]
        where = ("within" if abs(off) <= tol else "outside") + f" the checker's {tol:.0%}"
        fixed = (" A forward's fixed cost (launching its kernels, Python) outweighs its FLOPs at these lengths on "
                 "this device, so twice the tokens cost far less than twice the time; chapter 3 measures where the "
                 "FLOPs take over." if name == "TTFT" and off < -tol and measured >= 0.9 else
                 " The longer prompt is more work and cannot prefill faster: that is the machine's noise."
                 if name == "TTFT" and measured < 0.9 else "")
        return (f"{name} {change_words(measured)} (measured {measured:.2f}x; {why} {predicted:.2f}x, "
                f"{signed_pct(off)}: {where}).{fixed}")
    if not all(isinstance(v, numbers.Real) and v > 0 for v in (flops_ratio, bytes_ratio)):  # 0: ZeroDivisionError
        raise ValueError(f"flops_ratio and bytes_ratio must be ratios > 0, got {flops_ratio!r} and {bytes_ratio!r}")
    spread = max(m["spread"].values())
    return (part("TTFT", m["ttft_ratio"], flops_ratio, "the prefill's $2PT$ FLOPs double with $T$ and attention "
                 "adds a term in $T^2$, so the FLOP count says")
            + " " + part("TPOT", m["tpot_ratio"], bytes_ratio, "a decode step reads every weight once whatever the "
                         "prompt and the longer cache adds little, so the bytes say")
            + f" Run the cell above again: how far the measured ratios move from run to run is this machine's noise "
            f"(your pairs disagreed by up to {spread:.0%}, and the checker's tolerance is never below that).")
