"""The simulator is the same scheduler: on an emulated executor whose step times are made deterministic (the
real model runs every step, but each step is charged what the cost model predicts), the emulated and simulated
back ends make the same decisions token time for token time; and calibrated simulation tracks emulated runs."""
from __future__ import annotations

import pytest

from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, ModelExecutor, ServingConfig, make_workload, run
from splitlab.serving import validation as V

COST = CostModel(prefill_base_s=2e-3, prefill_per_token_s=1e-4, prefill_per_token2_s=1e-8, decode_base_s=3e-3,
                 decode_per_seq_s=2e-4, decode_per_token_s=1e-7, transfer_base_s=1e-4, transfer_bytes_per_s=1e9,
                 padded_prefill=True)


class Charged(ModelExecutor):
    """The emulated back end (the model runs every step), each step charged the cost model's seconds."""

    def __init__(self, lm, cost):
        super().__init__(lm, warm=False)
        self.sim = CostModelExecutor(cost)

    def prefill(self, slots, n_tokens):
        seconds = self.sim.prefill_seconds(slots, n_tokens)
        out = super().prefill(slots, n_tokens)
        out.seconds = seconds
        return out

    def decode(self, batch):
        out = super().decode(batch)
        out.seconds = self.sim.decode_seconds(len(batch.slots), sum(s.context for s in batch.slots))
        return out

    def transfer(self, slot, mode="whole"):
        out = super().transfer(slot, mode)
        out.seconds = self.sim.cost.transfer_s(out.nbytes)
        return out


def decisions(res):
    return ([(r.id, r.state.value, len(r.output), r.token_times_s, r.prefill_worker, r.decode_worker)
             for r in res.requests], res.admissions)


@pytest.mark.parametrize("cfg", [ServingConfig.colocated(2, max_batch=4), ServingConfig.colocated(
    2, policy="chunked", chunk_tokens=48, max_batch=4), ServingConfig.disaggregated(1, 2, max_batch=4)], ids=str)
def test_emulated_and_simulated_make_the_same_decisions(lm, cfg):
    cost = COST.with_(kv_bytes_per_token=ModelExecutor(lm, warm=False).kv_bytes_per_token,
                      max_context=lm.max_context)
    reqs = make_workload("chat", 10, 40.0, seed=2, model=lm, scale=0.3)
    emulated = run(reqs, cfg.with_(kv_budget_bytes=None), Charged(lm, cost))
    for trace in (True, False):  # step by step, and the fast path
        simulated = run(reqs, cfg.with_(kv_budget_bytes=None, trace=trace), CostModelExecutor(cost))
        assert decisions(simulated) == decisions(emulated)


def test_calibrated_simulation_tracks_emulated_runs(lm):
    """The chapter's and the benchmark's validation, small: a loose bound (timings on a shared CPU are noisy; the
    benchmark's goal is 15%)."""
    import splitlab as sl
    cal = sl.profiling.calibrate(lm, prompt_tokens=[16, 48, 128, 256], decode_batches=[1, 2, 4, 8],
                                 contexts=[48, 128], transfer_tokens=[64, 256], repeats=2, rounds=1)
    table = V.validate(lm, cal.cost, workloads={"chat": 6.0}, contenders=V.validation_contenders(2, max_batch=8),
                       n_requests=10, seed=1)
    # the calibration measured the step kinds the contenders run: padded batches and chunks after a cached prefix
    # (the masked-attention term), decode batches of one and of more (the batched term)
    assert cal.fits["prefill"].terms[-1] == "masked_pairs" and cal.fits["decode"].terms[-1] == "batched"
    assert any(r.get("cached") for r in cal.fits["prefill"].rows)
    assert len(table) == 3 * 4 and set(table.contender) == {"colocated prefill-first", "colocated chunked", "split"}
    assert table.abs_error.median() < 0.5, table
