"""The tables of chapters 2, 4, 5 and 8 as a 412 px phone shows them: few columns (wide ones transposed or split),
headers with their units, numbers as text of 3 significant digits, counts as integers. Synthetic inputs: no model,
no timing."""
from __future__ import annotations

import numpy as np
import pandas as pd

from splitlab import sizing
from splitlab.teach.figures import confusions, interference, kv_cache, transfer
from splitlab.teach.figures.phases import fmt3

#: Most columns (index included) a table of short numbers shows within a 380 px column at 13 px.
MAX_COLUMNS = 6


def _columns(table: pd.DataFrame) -> int:
    return table.shape[1] + table.index.nlevels


def test_chapter_4_tables_fit_and_round():
    alone = pd.DataFrame({"prompt_tokens": [128, 1024], "prefill_s": [0.017734, 0.18093]})
    shown = interference.prefill_alone_table(alone)
    assert list(shown["prefill alone (ms)"]) == ["17.7", "181"] and list(shown.index) == [128, 1024]
    spikes = pd.DataFrame({"prompt_tokens": [128], "prefill_s": [0.0191], "spike_s": [0.02744],
                           "typical_itl_s": [0.00612], "ttft_s": [0.3373]})
    stalls = interference.stall_table(spikes)
    assert stalls.loc[128].tolist() == ["19.1", "27.4", "6.12", "337"] and _columns(stalls) <= MAX_COLUMNS
    points = pd.DataFrame({"prompt_tokens": [512], "rate_per_s": [8.1], "ttft_mean_s": [0.444203],
                           "ttft_p90_s": [0.730955], "in_run_prefill_s": [0.156045], "load": [0.60123], "runs": [2]})
    ttft = interference.ttft_table(points)
    assert ttft.loc[512].tolist() == ["8.1", "0.601", "444", "731", "156"] and _columns(ttft) <= MAX_COLUMNS
    remedies = pd.DataFrame({"chunked": {"longest stream gap (ms)": 112.14},
                             "decode-first": {"longest stream gap (ms)": 1676.5}})
    assert interference.remedies_table(remedies).iloc[0].tolist() == ["112", "1,680"]


def test_chapter_5_tables_fit_and_round():
    published = transfer.published_kv_table(["Llama-2-7B", "Llama-3-8B", "Llama-3-70B", "StarCoder-15B"])
    assert list(published.columns) == ["Llama-2-7B", "Llama-3-8B", "Llama-3-70B", "StarCoder-15B"]  # transposed
    assert published.loc["KV heads", "Llama-3-8B"] == 8 and published.loc["KiB per token (fp16)", "Llama-3-8B"] == "128"
    assert published.loc["MiB for 2,048 tokens", "Llama-2-7B"] == fmt3(
        sizing.kv_bytes(sizing.PUBLISHED_MODELS["Llama-2-7B"], 2048, dtype="fp16") / 2 ** 20)
    bench = pd.DataFrame({"method": ["raw", "whole", "raw", "whole"], "nbytes": [2 ** 18, 2 ** 18, 2 ** 20, 2 ** 20],
                          "seconds": [0.000467, 0.0015432, 0.000908, 0.0017291]})
    table = transfer.bench_table(bench)
    assert list(table.columns) == ["256 KiB", "1,024 KiB"] and table.loc["whole"].tolist() == ["1.54", "1.73"]
    sweep = pd.DataFrame({"nbytes": [2 ** 18, 2 ** 24], "raw_s": [0.000467, 0.006571], "whole_s": [0.001543, 0.008544],
                          "predicted_s": [0.00051, 0.008985]})
    shown = transfer.sweep_table(sweep)
    assert list(shown.columns) == ["raw (ms)", "whole (ms)", "predicted (ms)", "raw share"]
    assert shown.loc["16"].tolist() == ["6.57", "8.54", "8.98", "0.769"] and _columns(shown) <= MAX_COLUMNS
    overlap = transfer.overlap_table([128, 1024], [0.00154, 0.00548], [0.00192, 0.00222], [0.00151, 0.00174],
                                     [-0.245, 0.595])
    assert overlap.loc[1024].tolist() == ["5.48", "2.22", "1.74", "0.595"] and _columns(overlap) <= MAX_COLUMNS


def test_chapter_8_tables_fit_and_round():
    rows = [dict(draft=d, k=k, acceptance=a, tokens_per_step=1 + a, predicted_tokens_per_step=1 + a, tpot_ms=t,
                 verify_ms=9.3123, draft_ms=0.0213) for d, a in (("first layer", 0.0), ("n-gram", 0.9744))
            for k, t in ((1, 8.3812), (4, 3.9))]
    accepted, cost = confusions.speculative_tables(pd.DataFrame(rows + rows))  # two prompts: their mean per k
    assert accepted.loc[("n-gram", 1)].tolist() == ["0.974", "1.97", "1.97"] and _columns(accepted) <= MAX_COLUMNS
    assert cost.loc[("first layer", 1)].tolist() == ["8.38", "9.31", "0.0213"] and _columns(cost) <= MAX_COLUMNS
    reuse = pd.DataFrame({"prefix_tokens": [256, 1024], "cached_tokens": [256, 1024], "computed_tokens": [64, 64],
                          "cold_s": [0.0767, 0.24612], "warm_s": [0.0225, 0.0285], "same_logits": [True, True],
                          "suffix_alone_s": [0.0146, 0.0146], "saved": [0.7072, 0.8842]})
    shown = confusions.reuse_table(reuse)
    assert list(shown.columns) == ["256-token prefix", "1,024-token prefix"]  # transposed
    assert shown.loc["prefill, cold (ms)", "1,024-token prefix"] == "246" and shown.loc["saved (%)"].tolist() == \
        ["70.7", "88.4"] and shown.loc["cached (tokens)"].tolist() == ["256", "1,024"]
    routing = pd.DataFrame({"computed_tokens": [19072, 36864], "per_worker": [[9088, 9984], []]},
                           index=["round-robin", "cache on the decode side"])
    table = confusions.routing_table(routing, 36864)
    assert table.loc["round-robin"].tolist() == ["19,072", "9,088 / 9,984", "0.517"]
    assert table.loc["cache on the decode side", "per worker (tokens)"] == "-"


def test_chapter_2_shapes_have_short_headers():
    shapes = kv_cache.published_shapes(["Llama-3-8B", "StarCoder-15B"])
    assert list(shapes.columns) == ["attention", "layers", "query heads", "KV heads", "head dim"]
    assert shapes.loc["StarCoder-15B", "KV heads"] == 1 and np.issubdtype(shapes["head dim"].dtype, np.integer)


def test_a_link_bandwidth_prints_alike_on_every_page():
    """One phrasing of a link's bandwidth (style.gb_per_s) for the map's title, its words, its slider and chapter
    7's live table (four phrasings before: ':g' wrote 1e+06, fmt3 rounded 12.345 to 12.3 where the slider kept it)."""
    from splitlab.teach.figures import split_map_words
    from splitlab.teach.figures.style import gb_per_s
    from splitlab.teach.widgets.split_map import link_label

    assert [gb_per_s(g) for g in (12.5, 0.01, 1e6, 12.345)] == ["12.5 GB/s", "0.01 GB/s", "1,000,000 GB/s",
                                                                 "12.345 GB/s"]
    assert link_label(12.345) == gb_per_s(12.345) and split_map_words._at(12.345) == "at 12.345 GB/s"
    assert link_label(None) == "cost model's"
