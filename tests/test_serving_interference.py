"""Chapter 4's interference helpers and checkers on cost-model runs with round numbers (no model): prefill 1 ms
per prompt token, a decode step 10 ms whatever the batch."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from splitlab.teach import check
from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, Request, ServingConfig, run
from splitlab.serving import interference as itf

COST = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-3, decode_base_s=0.01, decode_per_seq_s=0.0,
                 decode_per_token_s=0.0, kv_bytes_per_token=100)


def serve(reqs, **kw):
    return run(reqs, ServingConfig(workers=1, kv_budget_bytes=None, **kw), CostModelExecutor(COST))


def test_streams_and_long_prompts_builds_the_workload():
    reqs = itf.streams_and_long_prompts([300, 500], [0.1, 0.2], n_streams=3, stream_prompt=8, stream_tokens=20)
    assert [r.prompt_len for r in reqs] == [8, 8, 8, 300, 500]
    assert [r.arrival_s for r in reqs] == [0.0, 0.0, 0.0, 0.1, 0.2]
    assert [r.max_new_tokens for r in reqs] == [20, 20, 20, 4, 4]
    assert reqs[0].prompt != reqs[1].prompt  # seeded per request
    with pytest.raises(ValueError):
        itf.streams_and_long_prompts([300], [0.1, 0.2])


@pytest.mark.parametrize("long_prompt", [100, 400])
def test_the_stall_is_the_prefill_plus_one_decode_step(long_prompt):
    res = serve(itf.streams_and_long_prompts([long_prompt], [0.105], 4, 16, 40), policy="prefill-first")
    table = itf.spike_table(res, long_ids=[4])
    row = table.iloc[0]
    assert row.prefill_s == pytest.approx(long_prompt * 1e-3)
    assert row.spike_s == pytest.approx(long_prompt * 1e-3 + 0.01)
    assert row.streams == 4 and row.typical_itl_s == pytest.approx(0.01)
    assert itf.spike_table(res, min_prompt_tokens=50).id.tolist() == [4]
    with pytest.raises(ValueError):
        itf.spike_table(res)


def test_no_stall_under_decode_first():
    res = serve(itf.streams_and_long_prompts([400], [0.105], 4, 16, 40), policy="decode-first")
    assert math.isnan(itf.spike_table(res, long_ids=[4]).spike_s[0])   # prefilled after the streams ended
    assert res.request_table().max_itl_s[:4].max() == pytest.approx(0.01)


def test_queueing_ttft():
    assert itf.queueing_ttft_s(0.0, 0.1) == pytest.approx(0.1)
    assert itf.queueing_ttft_s(5.0, 0.1, 0.02) == pytest.approx(0.1 + 0.5 * 0.1 / (2 * 0.5) + 0.01)
    assert itf.queueing_ttft_s(10.0, 0.1) == math.inf
    out = itf.queueing_ttft_s(np.array([1.0, 20.0]), 0.1)
    assert out[0] == pytest.approx(0.1 + 0.1 * 0.1 / 1.8) and out[1] == math.inf


def test_waves_under_a_kv_budget_match_the_formula():
    prompt, new, n = 20, 5, 7
    budget = 2 * (prompt + new) * COST.kv_bytes_per_token + 50    # room for two at a time
    reqs = [Request(i, 0.0, [1] * prompt, new) for i in range(n)]
    res = run(reqs, ServingConfig(workers=1, kv_budget_bytes=budget), CostModelExecutor(COST))
    assert check.requests_in_kv_budget(2, budget, prompt, new, COST.kv_bytes_per_token)
    predicted = itf.wave_ttft_s(np.arange(n), 2, COST.prefill_s(2 * prompt), 0.01, new)
    # the last wave has one request, whose prefill is shorter than a wave of two
    predicted[-1] -= COST.prefill_s(2 * prompt) - COST.prefill_s(prompt)
    assert res.request_table().ttft_s.to_numpy() == pytest.approx(predicted)
    with pytest.raises(ValueError):
        itf.wave_ttft_s(0, 0, 0.1, 0.01, 5)


def test_chunked_prefill_steps_match_the_checker():
    res = serve(itf.streams_and_long_prompts([1000], [0.105], 4, 16, 60), policy="chunked", chunk_tokens=128)
    pieces = res.timeline.query("kind == 'prefill'")
    pieces = pieces[pieces.request_ids.apply(lambda ids: 4 in ids)]
    assert check.chunked_prefill_steps(len(pieces), 1000, 128, 4)
    assert not check.chunked_prefill_steps(len(pieces) - 1, 1000, 128, 4)


def test_itl_spike_checker_interpolates():
    table = pd.DataFrame(dict(prompt_tokens=[512, 256, 1024], prefill_s=[0.2, 0.1, 0.5]))
    assert check.itl_spike(0.35 + 0.01, table, 768, 0.01)
    assert not check.itl_spike(0.35, table, 768, 0.01)
    assert not check.itl_spike(None, table, 768, 0.01)
