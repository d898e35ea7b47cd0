"""Chapter 8's experiment loops whose lines would not fit a phone's column on the page (re-exported by
:mod:`.confusions`): the rate sweep on the simulator, a row of the speculative table and the prefix-reuse
measurement. Each does what the chapter's cell did, in the same order; the page says what it measures. Also
:func:`draft_note`: what the speculative table's acceptance and TPOT say about each draft, in words computed from
them."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ...phases import profiling
from ...phases.engine import prefill
from ...serving import CostModelExecutor, goodput, make_workload, prefix, run
from .style import and_list, fmt3

__all__ = ["rate_sweep", "goodput_searches", "speculative_row", "draft_note", "prefix_reuse_rows"]


def rate_sweep(spec, configs: Mapping, cost, rates_per_s: Sequence[float], ttft_slo_s: float, tpot_slo_s: float,
               model, n_requests: int = 100, seed: int = 1) -> pd.DataFrame:
    """Each of ``configs`` (``{name: ServingConfig}``) serving ``n_requests`` of workload ``spec`` on the simulator
    (``cost``) at each rate of ``rates_per_s`` (requests/s, the same seeded request set rescaled): one row per rate
    and layout with ``config``, ``rate_per_s`` (3 significant digits), ``slo_attainment`` (a share),
    ``itl_p99_ms`` and ``ttft_mean_ms`` (ms). Raises what :func:`splitlab.serving.run` raises."""
    rows = []
    for rate in rates_per_s:
        reqs = make_workload(spec, n_requests, rate, seed=seed, model=model)
        for name, cfg in configs.items():
            m = run(reqs, cfg.with_(trace=False), CostModelExecutor(cost)).metrics(ttft_slo_s, tpot_slo_s)
            rows.append(dict(config=name, rate_per_s=float(f"{rate:.3g}"), slo_attainment=m["slo_attainment"],
                             itl_p99_ms=m["itl_s"]["p99"] * 1e3, ttft_mean_ms=m["ttft_s"]["mean"] * 1e3))
    return pd.DataFrame(rows)


def goodput_searches(spec, configs: Mapping, cost, ttft_slo_s: float, tpot_slo_s: float) -> dict:
    """Each of ``configs`` (``{name: ServingConfig}``) searched for its goodput on the simulator (``cost``) with
    :func:`splitlab.serving.goodput`'s defaults: ``{name: GoodputResult}``, its runs kept for
    :func:`.confusions_sim.goodput_note`. Raises what :func:`splitlab.serving.goodput` raises."""
    return {name: goodput(spec, cfg, CostModelExecutor(cost), ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s)
            for name, cfg in configs.items()}


def speculative_row(draft: str, k: int, r) -> dict:
    """One row of the speculative table from a :class:`splitlab.phases.speculative` result ``r`` of draft ``draft``
    proposing ``k`` tokens: acceptance, tokens per verify step (measured and predicted), TPOT and the mean verify
    and draft time per step (ms)."""
    return dict(draft=draft, k=k, acceptance=r.acceptance_rate, tokens_per_step=r.tokens_per_step,
                predicted_tokens_per_step=r.predicted_tokens_per_step, tpot_ms=r.tpot_s * 1e3,
                verify_ms=np.mean(r.verify_s) * 1e3, draft_ms=np.mean(r.draft_s) * 1e3)


def _kept(acceptance: np.ndarray) -> str:
    """How many of a draft's proposals the target kept, from its acceptance rate at each k (shares), with the
    numbers as the table prints them; NaN at every k: no proposal was tried (a run of one token)."""
    acceptance = acceptance[~np.isnan(acceptance)]
    if not len(acceptance):
        return "tried none of its proposals (no acceptance to measure at any k)"
    lo, hi = fmt3(float(acceptance.min())), fmt3(float(acceptance.max()))
    if float(acceptance.max()) == 0:
        return "kept none of its proposals (acceptance 0 at every k)"
    span = lo if lo == hi else f"{lo} to {hi}"
    word = "few" if acceptance.max() < 0.2 else "most" if acceptance.min() >= 0.7 else "some"
    return f"kept {word} of its proposals (acceptance {span})"


def draft_note(spec: pd.DataFrame, plain_tpot_s: float, random_weights: bool) -> str:
    """What the speculative table says about each draft (``spec``: rows of :func:`speculative_row`, several prompts
    per draft and k averaged), in words computed from its numbers: how many proposals the target kept ("none" at
    an acceptance of 0 at every k, where the page said "agrees rarely"), and whether the draft's TPOT beat plain
    decoding's (``plain_tpot_s``, seconds) at every k, at none or at some. ``random_weights``: the target's weights
    are random (a draft made of its first layer then has no training behind its guesses).

    Raises:
        ValueError: no rows, a TPOT or ``plain_tpot_s`` that is not finite and > 0, an acceptance outside [0, 1]
            (NaN, a run that tried no proposal, is read as such)."""
    if not len(spec):
        raise ValueError("spec has no rows: no draft to speak of")
    tpot, acc = spec.tpot_ms.to_numpy(float), spec.acceptance.to_numpy(float)
    if not (np.isfinite(tpot).all() and (tpot > 0).all() and 0 < plain_tpot_s < float("inf")):
        raise ValueError(f"spec's tpot_ms and plain_tpot_s must be finite and > 0, got {tpot.tolist()} and "
                         f"{plain_tpot_s}")
    if not ((acc >= 0) & (acc <= 1) | np.isnan(acc)).all():  # NaN: a run that tried no proposal
        raise ValueError(f"spec's acceptance must be shares in [0, 1], got {acc.tolist()}")
    mean = spec.groupby(["draft", "k"], sort=False).mean(numeric_only=True)
    plain_ms = plain_tpot_s * 1e3
    out = []
    for draft, g in mean.groupby(level="draft", sort=False):
        ks = [int(k) for k in g.index.get_level_values("k")]
        faster = [k for k, t in zip(ks, g.tpot_ms) if t < plain_ms]
        lo, hi = fmt3(g.tpot_ms.min()), fmt3(g.tpot_ms.max())
        tpot = f"TPOT {lo if lo == hi else f'{lo} to {hi}'} ms against {fmt3(plain_ms)} ms plain"
        pays = (f"it saves time at every k ({tpot})" if len(faster) == len(ks) else
                f"it costs more than it saves at every k ({tpot})" if not faster else
                f"it saves time only at k = {and_list(faster)} ({tpot})")
        why = ""
        if draft == "first layer" and random_weights and g.acceptance.max() < 0.2:
            why = ": with random weights no training made the first layer predict what the later ones add"
        elif draft == "n-gram" and random_weights and g.acceptance.min() >= 0.7:
            why = ": this model's greedy output repeats itself, and the n-gram draft proposes repeats"
        out.append(f"Of the {draft} draft, the target {_kept(g.acceptance.to_numpy())}{why}; {pays}.")
    return " ".join(out)


def prefix_reuse_rows(lm, prefix_tokens: Sequence[int], user_tokens: int, block_tokens: int = 16,
                      atol: float = 1e-4) -> list[dict]:
    """For each shared prefix length S of ``prefix_tokens``: a random S-token system prompt (seed S) cached by a
    first request (its ``user_tokens`` new tokens of seed 0), then three requests with new tokens of seeds 1-3
    prefilled cold (:func:`splitlab.prefill`) and on the cached prefix (``serving.prefix.prefill_cached``,
    ``block_tokens``-token blocks). A row per S: ``prefix_tokens``, the tokens ``cached`` and ``computed`` of the
    first warm prefill, the median ``cold_s`` and ``warm_s`` (seconds) and ``same_logits`` (every warm prefill's
    logits within ``atol`` of the cold ones)."""
    import torch

    rows = []
    for s in prefix_tokens:
        system = profiling.random_prompt(lm, s, seed=s)
        pc = prefix.PrefixCache(block_tokens=block_tokens)
        prefix.prefill_cached(lm, pc, system + profiling.random_prompt(lm, user_tokens, seed=0))  # fills it
        prompts = [system + profiling.random_prompt(lm, user_tokens, seed=u) for u in (1, 2, 3)]
        cold = [prefill(lm, [p]) for p in prompts]
        warm = [prefix.prefill_cached(lm, pc, p) for p in prompts]
        same = all(torch.allclose(c.logits, w.logits, atol=atol) for c, w in zip(cold, warm))
        rows.append(dict(prefix_tokens=s, cached_tokens=warm[0].cached_tokens, computed_tokens=warm[0].computed_tokens,
                         cold_s=np.median([c.seconds for c in cold]), warm_s=np.median([w.seconds for w in warm]),
                         same_logits=same))
    return rows
