"""The simulator is the same scheduler: on an emulated executor whose step times are made deterministic (the
real model runs every step, but each step is charged what the cost model predicts), the emulated and simulated
back ends make the same decisions token time for token time; and calibrated simulation tracks emulated runs."""
from __future__ import annotations

import pytest

from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, ModelExecutor, ServingConfig, make_workload, run
from splitlab.serving import validation as V
from splitlab.serving.executor import StepOutcome

#: a prefill base above the decode base, as this device's calibration in chapters 6-7 measured (3.17 against 2.65 ms,
#: 2026-12-04): with 2 ms below 3 a hybrid step of a few tokens came out cheaper than its decode rows alone, which the
#: cost model floors at the rows' decode step (CostModel.fused_hybrid_s), so no in-run fit of its forms is exact
COST = CostModel(prefill_base_s=3.5e-3, prefill_per_token_s=1e-4, prefill_per_token2_s=1e-8, decode_base_s=3e-3,
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

    def hybrid(self, batch, slots, n_tokens):
        seconds = self.sim.hybrid_seconds(len(batch.slots), sum(s.context for s in batch.slots), slots, n_tokens)
        out = super().hybrid(batch, slots, n_tokens)
        return StepOutcome.fused_step(seconds, len(batch.slots), sum(n_tokens), out.tokens, out.first_tokens)

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
    for trace in (True, False):  # the fast path's lazy records, and its decode stretches too
        simulated = run(reqs, cfg.with_(kv_budget_bytes=None, trace=trace), CostModelExecutor(cost))
        assert decisions(simulated) == decisions(emulated)


def test_calibrated_simulation_tracks_emulated_runs(lm):
    """The chapter's and the benchmark's validation, small: a loose bound (timings on a shared CPU are noisy; the
    benchmark's goal is 15%)."""
    import torch

    import splitlab as sl
    from splitlab.phases.device import set_cpu_clock
    # the tests run two at a time on two cores: time each step by this thread's CPU time, as the benchmark does
    before = set_cpu_clock("thread") if torch.get_num_threads() == 1 else None
    try:
        cal = sl.profiling.calibrate(lm, prompt_tokens=[16, 48, 128, 256], decode_batches=[1, 2, 4, 8],
                                     contexts=[48, 128], transfer_tokens=[64, 256], repeats=2, rounds=1)
        table = V.validate(lm, cal.cost, workloads={"chat": 6.0}, contenders=V.validation_contenders(2, max_batch=8),
                           n_requests=10, seed=1)
    finally:
        if before is not None:
            set_cpu_clock(before)
    # the calibration measured the step kinds the contenders run: padded batches and chunks after a cached prefix
    # (the masked-attention term), fused hybrid forwards (their per-row terms), decode batches of one and of more
    # (the batched term)
    assert cal.fits["prefill"].terms[3:] == ("masked_pairs", "hybrid_rows", "hybrid_context_tokens")
    assert cal.fits["decode"].terms[-1] == "batched"
    assert any(r.get("cached") for r in cal.fits["prefill"].rows)
    assert len(table) == 3 * 4 and set(table.contender) == {"colocated prefill-first", "colocated chunked", "split"}
    assert table.abs_error.median() < 0.5, table


def test_validate_repeats_and_brackets_on_a_deterministic_executor(lm):
    """With every step charged the cost model's seconds, repeated emulated runs agree exactly (spread 0) and the
    simulator matches them (error 0), before and after calibrations combined; bad arguments fail early."""
    from splitlab import costmodel
    cost = COST.with_(kv_bytes_per_token=ModelExecutor(lm, warm=False).kv_bytes_per_token, max_context=lm.max_context)
    dec = [dict(batch=b, context_tokens=b * c, batched=int(b > 1), step_s=cost.decode_s(b, b * c))
           for b in (1, 2, 4) for c in (32, 96)]
    pre = [dict(tokens=n, squares=n * n, prefill_s=cost.prefill_s(n, n * n)) for n in (16, 64, 160)]
    mov = [dict(nbytes=n, seconds=cost.transfer_s(n)) for n in (1 << 12, 1 << 20)]
    fits = {"prefill": costmodel.fit_prefill(pre), "decode": costmodel.fit_decode(dec),
            "transfer": costmodel.fit_transfer(mov)}
    cal = costmodel.Calibration(cost, fits, dict(model="tiny", device="cpu", date="2026-12-02"))
    calls = []
    again = lambda: calls.append(1) or cal  # noqa: E731 (a new calibration after each workload)
    contenders = {"split": ServingConfig.disaggregated(1, 1, max_batch=4, kv_budget_bytes=None),
                  "colocated": ServingConfig.colocated(2, max_batch=4, kv_budget_bytes=None)}
    table = V.validate(lm, cal, workloads={"chat": 30.0, "code": 30.0}, contenders=contenders, n_requests=6, seed=3,
                       executor=Charged(lm, cost), scale=0.3, repeats=2, recalibrate=again)
    assert len(calls) == 2 and len(table) == 2 * 2 * 4
    assert table.emulated_spread.max() == pytest.approx(0, abs=1e-12)
    assert table.abs_error.max() < 1e-9  # refitted on exact measurements: the same cost model, to rounding
    v = V.verdict(table)
    assert v["within"] == v["values"] == 16 and v["spread_max"] == pytest.approx(0, abs=1e-12)
    assert "spread (%)" in V.summary(table).columns
    with pytest.raises(ValueError, match="repeats"):
        V.validate(lm, cal, workloads={"chat": 30.0}, contenders=contenders, repeats=0)
    with pytest.raises(ValueError, match="pass the Calibration"):
        V.validate(lm, cost, workloads={"chat": 30.0}, contenders=contenders, recalibrate=again)


def test_in_run_fit_takes_the_device_speed_out_of_the_error(lm):
    """A device 1.3x slower during the runs than when it was calibrated: the calibration's simulation is ~23% fast,
    the in-run fit (on the steps the runs recorded) recovers the runs' own speed and its error is ~0."""
    cost = COST.with_(kv_bytes_per_token=ModelExecutor(lm, warm=False).kv_bytes_per_token, max_context=lm.max_context)
    slow = cost.with_(**{f: 1.3 * getattr(cost, f) for f in ("prefill_base_s", "prefill_per_token_s",
                                                             "prefill_per_token2_s", "decode_base_s",
                                                             "decode_per_seq_s", "decode_per_token_s")})
    contenders = {"split": ServingConfig.disaggregated(1, 1, max_batch=4, kv_budget_bytes=None),
                  "chunked": ServingConfig.colocated(2, policy="chunked", chunk_tokens=32, max_batch=4,
                                                     kv_budget_bytes=None)}
    emu = Charged(lm, slow)
    table = V.validate(lm, cost, workloads={"chat": 30.0}, contenders=contenders, n_requests=8, seed=3,
                       executor=emu, scale=0.3, in_run=True)
    assert emu.step_log is None  # the record is the validation's, not left on the executor
    assert table.error.max() < -0.1  # the calibration's speed: too fast
    assert table.in_run_error.abs().max() < 1e-6  # the runs' own speed: exact
    v = V.verdict(table)
    assert v["in_run_within"] == v["values"] == 8 and v["in_run_largest"] < 1e-6
    assert "in-run error (%)" in V.summary(table).columns
    with pytest.raises(ValueError, match="at least 4 prefill"):
        V.in_run_cost(cost, [dict(kind="decode", batch=1, context_tokens=9, batched=0, step_s=1e-3)] * 5)


def test_a_family_that_cannot_fuse_runs_and_is_simulated_in_two_passes():
    """A sliding-window model's engine runs a hybrid step in two passes; a cost model that says so (as its
    calibration does, CostModel.hybrid_path) makes the simulator take the same decisions, token time for token
    time, on the fast path and off it."""
    from tiny_families import loaded
    sw = loaded("mistral-sw")
    cost = COST.with_(kv_bytes_per_token=ModelExecutor(sw, warm=False).kv_bytes_per_token,
                      max_context=sw.max_context, hybrid_path="two-pass")
    reqs = make_workload("chat", 10, 200.0, seed=2, model=sw, scale=0.2)
    cfg = ServingConfig.colocated(2, policy="chunked", chunk_tokens=16, max_batch=4, kv_budget_bytes=None)
    emu = Charged(sw, cost)
    emu.step_log = []
    emulated = run(reqs, cfg, emu)
    assert emulated.hybrid_path == "two-pass" and sum(r["kind"] == "two-pass" for r in emu.step_log) >= 20
    for trace in (True, False):
        simulated = run(reqs, cfg.with_(trace=trace), CostModelExecutor(cost))
        assert simulated.hybrid_path == "two-pass" and decisions(simulated) == decisions(emulated)
