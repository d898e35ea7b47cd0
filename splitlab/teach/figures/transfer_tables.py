"""Chapter 5's tables, shaped to fit a 412 px phone's column: few columns (the wide one transposed), short headers
with their units, 3 significant digits (:func:`.phases.fmt3`), counts as integers."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ... import sizing
from .style import fmt3

__all__ = ["published_kv_table", "bench_table", "sweep_table", "overlap_table", "fit_sweep"]


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


def fit_sweep(sweep: pd.DataFrame, column: str) -> tuple[float, float, str]:
    """``sizing.fit_latency_bandwidth`` on the size sweep's medians ``sweep[column]`` (``raw_s`` or ``whole_s``, in
    s, against ``nbytes``), or, where the medians cannot be fitted (they do not grow with the bytes, on a machine so
    busy that the waits between processes drown the bytes' share; or one is not a time: NaN, <= 0), on its fastest
    repeats ``sweep[column.replace("_s", "_min_s")]``, the least disturbed timing of each size. Returns
    ``(latency_s, bandwidth_bytes_per_s, basis)`` with basis ``"medians"`` or ``"fastest repeats"``, for the page to
    say which it fitted.

    Raises:
        ValueError: the fastest repeats do not grow with the bytes either (from ``sizing.fit_latency_bandwidth``,
            naming the column), or the fastest repeats' column is missing.
        KeyError: ``sweep`` has no ``nbytes`` or no ``column``.
    """
    for need in ("nbytes", column):
        if need not in sweep:
            raise KeyError(f"the sweep has no {need!r} column; its columns: {list(sweep.columns)}")
    try:
        return (*sizing.fit_latency_bandwidth(sweep.nbytes, sweep[column]), "medians")
    except ValueError as medians:
        fastest = column.replace("_s", "_min_s")
        if fastest not in sweep:
            raise ValueError(f"{column}: {medians}, and the sweep has no {fastest!r} column to fit instead") from None
        try:
            return (*sizing.fit_latency_bandwidth(sweep.nbytes, sweep[fastest]), "fastest repeats")
        except ValueError as err:
            raise ValueError(f"{column}: {medians}; {fastest}: {err} (time the sweep on a quieter machine)") from None
