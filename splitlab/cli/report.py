"""What a serving command prints: a run's metrics as strict JSON (:func:`metrics`, :func:`clean`) and as text
lines (:func:`lines`, :func:`title`), what ran its steps (:func:`about`), and the exit status of a run in which
requests failed or that served none (:func:`failed_status`). Used by ``serve``, ``compare`` and ``simulate``."""
from __future__ import annotations

import math

from .args import human_bytes, threads_fields

__all__ = ["clean", "header", "metrics", "lines", "title", "about", "failed_status", "all_rejected", "FAILED_REQUESTS",
           "SHOWN_WORKERS"]


def clean(x):
    """NaN/inf -> None, recursively, so the JSON is strict."""
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def header(args) -> dict:
    return dict(workload=args.workload, rate_per_s=args.rate, requests=args.requests, arrival=args.arrival,
                seed=args.seed, policy=args.policy, backend=args.backend,
                model=None if args.backend == "simulated" else args.model, ttft_slo_s=args.ttft_slo,
                tpot_slo_s=args.tpot_slo, chosen=args.chosen)


def _rejections(res) -> list[dict]:
    """``[{"id", "state", "reason"}]`` of every request that did not complete (the JSON's ``rejections``)."""
    return [dict(id=r.id, state=r.state.value, reason=r.reject_reason) for r in res.requests if r.reject_reason]


def metrics(res, args) -> dict:
    """The run's metrics (:meth:`~splitlab.serving.Result.metrics`) plus ``rejections`` and ``slo_misses``: how
    many requests missed each bound the attainment counts (``unfinished``, ``ttft``, ``ttst``: the second token
    later than TTFT SLO + TPOT SLO, ``tpot``; each request under the first it misses); a conditional split adds
    ``conditional`` (its rule) and ``local_prefill_share`` (prefills run on a decode worker); a run with prefix
    caches adds ``routing``, ``prefix_hit_rate`` (prompt tokens found cached), ``prefix_hit_requests`` (requests
    that found any), ``cached_tokens`` and ``prefilled_requests`` (:func:`splitlab.serving.prefix_stats`)."""
    from ..serving.conditional import local_share
    from ..serving.metrics import slo_misses
    from ..serving.prefix_router import prefix_stats
    cfg = res.config
    local = dict(conditional=cfg.name, local_prefill_share=local_share(res)) if cfg.conditional else {}
    if cfg.prefix_cache_tokens is not None:
        local.update(routing=cfg.routing, **prefix_stats(res))
    return clean(dict(res.metrics(args.ttft_slo, args.tpot_slo), rejections=_rejections(res),
                      slo_misses=slo_misses(res.requests, args.ttft_slo, args.tpot_slo), **local))


SHOWN_WORKERS = 8  # worker names the text lists before "... and N more" (--json lists them all)


def _workers(names: list[str]) -> str:
    """The worker names, each pool (W, P, D) cut to its first :data:`SHOWN_WORKERS`: 'W0,...,W7 ... and 9992
    more' (10,000 names on one line told nothing; ``--json`` holds every one)."""
    pools: dict[str, list[str]] = {}
    for n in names:
        pools.setdefault(n.rstrip("0123456789"), []).append(n)
    parts = [",".join(p) if len(p) <= SHOWN_WORKERS else
             f"{','.join(p[:SHOWN_WORKERS])} ... and {len(p) - SHOWN_WORKERS} more" for p in pools.values()]
    return ("; " if any(len(p) > SHOWN_WORKERS for p in pools.values()) else ",").join(parts)


def _misses(m: dict) -> str:
    """' (missed: TTFT 0, TTST 11, TPOT 0)' next to the attainment: the text shows every bound it counts."""
    miss = m.get("slo_misses")
    if not miss:
        return ""
    parts = [f"{name.upper()} {miss[name]}" for name in ("ttft", "ttst", "tpot")]
    if miss.get("unfinished"):
        parts.append(f"not finished {miss['unfinished']}")
    if miss.get("transfer"):  # already counted under TTFT or TTST
        parts.append(f"{miss['transfer']} of them because of the KV transfer")
    return f" (missed: {', '.join(parts)})"


def lines(name: str, m: dict) -> list[str]:
    ms = lambda d, k: "n/a" if d[k] is None else f"{d[k] * 1e3:8.1f}"  # noqa: E731
    t, s, p = m["ttft_s"], m["ttst_s"], m["tpot_s"]
    slo = m.get("ttft_slo_s"), m.get("tpot_slo_s")
    bound = f"  (second token; SLO TTFT + TPOT = {(slo[0] + slo[1]) * 1e3:g} ms)" if None not in slo else ""
    out = [f"{name:<14} workers {_workers(m['workers'])}: completed {m['completed']}/{m['submitted']}, "
           f"rejected {m['rejected']}, failed {m['failed']}, SLO attainment {m['slo_attainment'] or 0:.0%}"
           f"{_misses(m)}, {m['throughput_tokens_per_s'] or 0:.1f} output tokens/s",
           f"{'':<14} TTFT ms  p50 {ms(t, 'p50')}  p90 {ms(t, 'p90')}  p99 {ms(t, 'p99')}",
           f"{'':<14} TTST ms  p50 {ms(s, 'p50')}  p90 {ms(s, 'p90')}  p99 {ms(s, 'p99')}{bound}",
           f"{'':<14} TPOT ms  p50 {ms(p, 'p50')}  p90 {ms(p, 'p90')}  p99 {ms(p, 'p99')}"]
    if "kv_budget_bytes" in m:  # what bounds a worker's batch: its KV budget, and a cap if one was given
        budget = m["kv_budget_bytes"]
        out.append(f"{'':<14} batch: KV budget {'unlimited' if budget is None else human_bytes(budget)} per worker, "
                   f"{'no cap' if m.get('max_batch') is None else 'max_batch ' + str(m['max_batch'])}")
    if "conditional" in m:
        share = m["local_prefill_share"]
        out.append(f"{'':<14} conditional: {m['conditional']}: "
                   + ("no request was prefilled" if share is None else f"{share:.0%} of prefills on a decode worker"))
    if "prefix_hit_rate" in m:
        rate, share = m["prefix_hit_rate"], m["prefix_hit_requests"]
        out.append(f"{'':<14} prefix cache ({m['routing']} routing): " + (
            "no request was prefilled" if rate is None else
            f"{rate:.0%} of prompt tokens found cached, {share:.0%} of requests hit"))
    if all_rejected(m):  # loud: nothing was served, whatever else the lines say
        out.insert(0, f"{name:<14} ERROR: every request ({m['submitted']}) was rejected; nothing was served "
                      f"(exit status {FAILED_REQUESTS}); the reason follows")
    if m["rejections"]:  # say why, not only how many (the first one; --json lists them all)
        first, more = m["rejections"][0], len(m["rejections"]) - 1
        out.append(f"{'':<14} {first['state']}: request {first['id']}: {first['reason']}"
                   + (f" (and {more} more, see --json)" if more else ""))
    out += [f"{'':<14} note: {n}" for n in m.get("notes", [])]
    return out


def title(verb: str, args) -> str:
    return (f"splitlab {verb}: {args.requests} {args.workload} requests at {args.rate:g}/s ({args.backend}, SLOs "
            f"TTFT {args.ttft_slo:g} s, TPOT {args.tpot_slo:g} s)")


def about(backend) -> tuple[dict, list[str]]:
    """What ran the steps, for the JSON and the text: the cost model of the simulated back end (``cost_source``,
    as ``simulate`` and ``plan`` say), the CPU threads of an emulated one (``cpu_threads``, ``cpu_threads_note``)."""
    if hasattr(backend, "cost"):
        return dict(cost_source=backend.cost.source), [f"cost model: {backend.cost.source}"]
    if hasattr(backend, "lm"):
        return threads_fields(backend.lm), [f"threads: {backend.lm.threads_note}"]
    return {}, []


FAILED_REQUESTS = 3  #: the exit status of a serving run in which requests failed or every one was rejected


def all_rejected(m: dict) -> bool:
    """Whether a run's metrics say it rejected every request it was given (none served: a KV budget smaller than
    any request's cache, say)."""
    return bool(m.get("submitted")) and m.get("rejected") == m["submitted"]


def failed_status(m: dict) -> int:
    """:data:`FAILED_REQUESTS` when a run's metrics count failed requests (a worker lost with nobody to take its
    requests, a cache that could not be moved) or every request was rejected (:func:`all_rejected`), else 0: a
    script sees the run went wrong without reading it. Some rejected requests alone leave it 0."""
    return FAILED_REQUESTS if m.get("failed") or all_rejected(m) else 0
