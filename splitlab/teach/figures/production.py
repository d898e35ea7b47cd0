"""Chapter 9 (from splitlab to production): the worked table of a split on datasheet GPUs and its figures.

- :data:`CASES`, :func:`worked_table`: Llama-3-8B and Llama-3-70B on H100 at a 2k and an 8k prompt, each planned by
  :func:`splitlab.planning.hetero.plan_pools` (every split of every TP pair, and colocated clusters, on the analytic
  cost model: everything predicted): the prefill's cost in decode steps, the cluster the planner ranks first, the
  best split, and the link its hand-offs need (rate x KV bytes per request) against NVLink, 400 and 100 Gb/s.
- :func:`handoff_note`: the table in a paragraph: where a split is cheapest, TP per pool, the largest hand-off
  load against the links (:func:`link_share_pct`, :func:`room_words`), how the load grows with the prompt.
- :func:`link_need`: that link load as bars, one per case, the links' bandwidths as lines.
- :func:`pool_costs`: a two-GPU plan's clusters, cost per million tokens against tokens per joule.

The experiments that diagnose users' reports live in :mod:`.production_pains`. Figures follow chapter 7's phone
rule (:mod:`.pools`: 5 inches wide, 12-13 pt).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ...sizing import LINKS
from .pools import _ax, _styled
from .style import LAYOUT_COLORS, TRANSFER, fmt3, fmt_table

__all__ = ["CASES", "OUTPUT_TOKENS", "COMPARED_LINKS", "worked_case", "worked_table", "planner_table", "link_table",
           "link_need", "pool_costs", "pool_table", "split_parts", "compact", "handoff_note", "link_share_pct",
           "room_words"]

#: (model, prompt tokens, TP degrees tried, most devices): the worked table's cases. 7,936 prompt tokens + 256 of
#: answer fill Llama-3's 8,192-token context; Llama-3-70B in bf16 (141 GB) needs TP 2 or more on an 80 GB H100.
CASES = (("Llama-3-8B", 2048, (1, 2), 4), ("Llama-3-8B", 7936, (1, 2), 4),
         ("Llama-3-70B", 2048, (2, 4), 8), ("Llama-3-70B", 7936, (2, 4), 8))
#: answer length of every case's requests (tokens)
OUTPUT_TOKENS = 256
#: the links the hand-off load is set against (names of :data:`splitlab.sizing.LINKS`)
COMPARED_LINKS = ("NVLink 4 (H100)", "400 Gb/s network", "100 Gb/s network")
SHORT = {"NVLink 4 (H100)": "NVLink", "400 Gb/s network": "400G", "100 Gb/s network": "100G"}


def compact(candidate) -> str:
    """A cluster of one GPU type in a few characters for a phone's table: "2 colo. TP2", "4 chunked TP1" (chunked
    prefill), "2P TP1+1D TP2"."""
    if candidate.layout == "colocated":
        (_, pool, n), = candidate.pools
        return f"{n} {'chunked' if ' chunked ' in candidate.name else 'colo.'} TP{pool.tp}"
    p = split_parts(candidate)
    return f"{p['x']}P TP{p['tp_p']}+{p['y']}D TP{p['tp_d']}"


def split_parts(candidate) -> dict:
    """A split candidate's pools as numbers: ``x``, ``y`` (workers), ``tp_p``, ``tp_d`` (devices per worker)."""
    (_, pp, x), (_, dp, y) = candidate.pools
    return dict(x=x, y=y, tp_p=pp.tp, tp_d=dp.tp)


def worked_case(model: str, prompt_tokens: int, tps, max_devices: int, gpu: str = "H100",
                max_requests: int = 200, tolerance: float = 0.05,
                link: str = "400 Gb/s network") -> tuple[dict, object]:
    """One case of the worked table: ``plan_pools(model, gpu, gpu, tps, max_devices)`` on requests of
    ``prompt_tokens`` prompt and :data:`OUTPUT_TOKENS` answer tokens, SLOs by chapter 6's rule (5 prefills, 2.5
    decode steps of the smallest TP), decode batches bounded by KV memory (no cap), KV over ``link``.

    Returns:
        ``(row, plan)``: row has ``case``, ``prefill_steps`` (t_p / t_d of one request), the SLOs, ``best`` (the
        cluster cheapest per million tokens) and ``best_split`` (``best_short``, ``split_short``: their
        :func:`compact` names) with its ``split_rps`` (goodput, requests/s of the
        cluster), ``x``, ``y``, ``tp_p``, ``tp_d``, ``lanes``; ``kv_gb`` (one request's cache) and ``need_gb_s``
        (the hand-off load on one decode worker's device link: rate x KV bytes / (y x lanes)).

    Raises:
        the errors of :func:`~splitlab.planning.hetero.plan_pools`.
    """
    from ...planning.hetero import plan_pools
    from ...serving import Fixed, WorkloadSpec
    spec = WorkloadSpec(f"{prompt_tokens}-token prompts", Fixed(prompt_tokens), Fixed(OUTPUT_TOKENS))
    plan = plan_pools(model, gpu, gpu, tps=tps, max_devices=max_devices, workload=spec, max_batch=None,
                      max_requests=max_requests, tolerance=tolerance, scale=1.0, link=link, progress=False)
    splits = [c for c in plan.ranked("cost") if c.layout == "disaggregated" and c.goodput_rps > 0]
    best, split = plan.ranked("cost")[0], splits[0] if splits else None
    kv_gb = prompt_tokens * _kv_bytes_per_token(model) / 1e9
    row = dict(case=f"{model.removeprefix('Llama-3-')}, {prompt_tokens / 1024:.0f}k",
               prefill_steps=plan.chosen["t_p_s"] / plan.chosen["t_d_s"], ttft_slo_s=plan.ttft_slo_s,
               tpot_slo_s=plan.tpot_slo_s, best=best.name, best_short=compact(best),
               best_rps_per_device=best.costs["rps_per_device"], kv_gb=kv_gb,
               best_split=None if split is None else split.name, split_short=None if split is None else compact(split))
    if split is not None:
        parts, lanes = split_parts(split), split.handoff["lanes"]
        row.update(parts, split_rps=split.goodput_rps, split_rps_per_device=split.costs["rps_per_device"],
                   lanes=lanes, need_gb_s=split.goodput_rps * kv_gb / (parts["y"] * lanes))
    return row, plan


def _kv_bytes_per_token(model: str) -> float:
    from ... import sizing
    return sizing.kv_bytes_per_token(sizing.resolve_config(model), "bf16")


def worked_table(cases=CASES, **options) -> tuple[pd.DataFrame, dict]:
    """:func:`worked_case` for each of ``cases``: ``(rows as a DataFrame indexed by case, {case: plan})``."""
    rows, plans = [], {}
    for model, prompt, tps, devices in cases:
        row, plan = worked_case(model, prompt, tps, devices, **options)
        rows.append(row)
        plans[row["case"]] = plan
    return pd.DataFrame(rows).set_index("case"), plans


def planner_table(table: pd.DataFrame) -> pd.DataFrame:
    """The planner's side of the worked table, phone-sized: prefill in decode steps, the cheapest cluster, the best
    split (:func:`compact` names) and its goodput per device (all predicted)."""
    return fmt_table(table.reset_index(), {"case": "case", "prefill_steps": "prefill (steps)", "best_short": "cheapest",
                                           "split_short": "best split", "split_rps_per_device": "split req/s/GPU"},
                     index="case")


def link_table(table: pd.DataFrame, links=COMPARED_LINKS) -> pd.DataFrame:
    """The link side: one cache (GB), the hand-off load on a decode worker's device link (GB/s) and the share of
    each of ``links`` it takes (%), all predicted."""
    t = table.reset_index()
    cols = {"case": "case", "kv_gb": "KV (GB)", "need_gb_s": "need (GB/s)"}
    for link in links:
        t[link] = 100 * t["need_gb_s"] * 1e9 / LINKS[link]["bandwidth_bytes_per_s"]
        cols[link] = f"% {SHORT.get(link, link)}"
    return fmt_table(t, cols, index="case")


def link_share_pct(table: pd.DataFrame, link: str) -> float:
    """The largest hand-off load of the worked ``table`` as a share of ``link``'s bandwidth (%, a name of
    :data:`splitlab.sizing.LINKS`; KeyError for another)."""
    return 100 * float(table["need_gb_s"].max()) * 1e9 / LINKS[link]["bandwidth_bytes_per_s"]


def room_words(pct: float) -> str:
    """How full a link at ``pct`` % of its bandwidth is, in words: room to spare below 25%, little room above 50%,
    about half full between."""
    return "with room to spare" if pct < 25 else "with little room" if pct > 50 else "about half full"


def handoff_note(table: pd.DataFrame) -> str:
    """The worked ``table`` (:func:`worked_table`) in a paragraph: the prefill's range in decode steps, the cases
    where the planner ranks a split cheapest, those whose best split gives decode a higher TP than prefill, the
    largest hand-off load against :data:`COMPARED_LINKS`, and how Llama-3-8B's cache and load grow from 2k to 8k
    (all predicted)."""
    r = table.reset_index()
    wins, top = r[r.best == r.best_split], r.loc[r.need_gb_s.idxmax()]
    e8 = r.set_index("case").loc[["8B, 2k", "8B, 8k"]]
    more_d = int((r.tp_d > r.tp_p).sum())
    share = {link: link_share_pct(table, link) for link in COMPARED_LINKS}
    return (f"The prefill costs {r.prefill_steps.min():.2g} to {r.prefill_steps.max():.2g} decode steps; the planner "
            f"ranks a split cheapest in {len(wins)} of {len(r)} cases "
            f"({', '.join(wins.case) if len(wins) else 'none'}), a colocated cluster in "
            f"{'the others' if len(wins) else 'every case'}. In {more_d} of {len(r)} cases the best split gives each "
            "decode worker a higher TP than each prefill worker (a decode worker of more devices holds more caches "
            "and reads its weights faster: llm-d's advice above). The hand-offs load a decode link with at most "
            f"{top.need_gb_s:.3g} GB/s ({top.case}): {share['100 Gb/s network']:.0f}% of a 100 Gb/s NIC, "
            f"{share['400 Gb/s network']:.0f}% of a 400 Gb/s one and {share['NVLink 4 (H100)']:.3g}% of NVLink. From "
            f"2k to 8k Llama-3-8B's cache grows {e8.kv_gb.iloc[1] / e8.kv_gb.iloc[0]:.2g}x but the load only "
            f"{e8.need_gb_s.iloc[1] / e8.need_gb_s.iloc[0]:.2g}x: a longer prompt takes longer to prefill, so the "
            "split serves fewer of them per second.")


def pool_table(plan, by: str = "cost") -> pd.DataFrame:
    """A two-GPU plan's clusters best first ``by`` "cost" or "power", phone-sized: goodput per device, cost per
    million output tokens (in the prices' currency) and output tokens per joule."""
    t = plan.table(by).reset_index()
    return fmt_table(t, {"cluster": "cluster", "goodput per device": "req/s per GPU",
                         "cost per 1M tokens": "per 1M tokens", "tokens per J": "tokens / J"}, index="cluster")


@_styled
def link_need(table: pd.DataFrame, links=COMPARED_LINKS, ax=None):
    """Bars of the hand-off load per decode device link (GB/s, log scale), one per case, beside horizontal lines at
    each of ``links``' bandwidths; returns the Axes."""
    ax = _ax(ax, 4.6)
    need = table["need_gb_s"].to_numpy(float)
    # the transfer phase's colour, as in chapters 1 to 5 (the split's layout colour was on these bars)
    ax.bar(range(len(need)), need, color=TRANSFER, label="hand-offs need")
    for link, style in zip(links, ("-", "--", ":")):
        ax.axhline(LINKS[link]["bandwidth_bytes_per_s"] / 1e9, color="0.3", ls=style, lw=1.2,
                   label=f"{SHORT.get(link, link)}: {fmt3(LINKS[link]['bandwidth_bytes_per_s'] / 1e9)} GB/s")
    ax.set_yscale("log")
    ax.set_xticks(range(len(need)), table.index, rotation=20)
    ax.set_ylabel("GB/s per decode link")
    ax.set_xlabel("model, prompt (predicted)")
    ax.set_title("KV hand-off load at the split's goodput")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.42), ncol=2)
    return ax


@_styled
def pool_costs(plan, ax=None):
    """A two-GPU plan's clusters (:func:`~splitlab.planning.hetero.plan_pools`): cost per million output tokens
    against output tokens per joule, splits in the split colour, colocated clusters in prefill-first's or chunked's,
    each (decode) GPU its own marker; the cheapest and the most frugal ringed and named in the legend. Returns the
    Axes."""
    if ax is None:  # narrower than the book's width: the legend below it stretches the shown figure past a phone's
        ax = plt.subplots(figsize=(4.6, 4.6), layout="constrained")[1]  # column, shrinking the tick labels
    served = [c for c in plan.candidates if c.goodput_rps > 0]
    gpus = sorted({p.gpu for c in served for _, p, _ in c.pools})
    markers = dict(zip(gpus, "o^sD"))
    kinds = {"split": "split", "colocated": "prefill-first", "chunked": "chunked"}  # -> LAYOUT_COLORS' key
    for c in served:
        gpu = c.pools[-1][1].gpu  # a split by its decode GPU
        ax.scatter(c.costs["tokens_per_joule"], c.costs["cost_per_million_tokens"], s=40, marker=markers[gpu],
                   color=LAYOUT_COLORS[kinds[_kind(c)]], alpha=0.85)
    cheap, frugal = plan.ranked("cost")[0], plan.ranked("power")[0]
    marks = ([("cheapest, most per J", cheap, "o")] if frugal is cheap else
             [("cheapest", cheap, "o"), ("most per J", frugal, "s")])
    for word, c, m in marks:  # named in the legend (names beside the points would collide), a pool a line
        pools = c.name.replace("+", "\n+ ")  # "2P(H100)+1D(A100-80GB)" on one line widens a phone's figure
        ax.scatter(c.costs["tokens_per_joule"], c.costs["cost_per_million_tokens"], s=160, marker=m,
                   facecolors="none", edgecolors="black", label=f"{word}:\n{pools}")
    words = {"split": "split", "colocated": "colocated, prefill-first", "chunked": "colocated, chunked"}
    for kind in sorted({_kind(c) for c in served}, key=list(kinds).index):
        ax.scatter([], [], color=LAYOUT_COLORS[kinds[kind]], label=words[kind])
    for gpu in gpus:
        ax.scatter([], [], color="0.4", marker=markers[gpu], label=f"decode on {gpu}")
    ax.set_xlabel("output tokens per joule (at TDP)")
    ax.set_ylabel("cost per 1M output tokens\n(price units, assumed)")
    ax.set_title("each cluster, predicted: lower right is better")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=1)
    return ax



def _kind(candidate) -> str:
    """"split", "chunked" (a colocated cluster with chunked prefill) or "colocated" (prefill-first)."""
    if candidate.layout == "disaggregated":
        return "split"
    return "chunked" if " chunked " in candidate.name else "colocated"
