"""Cost models: fits recover known coefficients, calibration files round-trip and refuse what they cannot use,
the roofline model is a roofline, and calibrate() measures a real model."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from splitlab import costmodel
from splitlab.costmodel import CalibrationError, CostModel, fit_decode, fit_prefill, fit_transfer


def test_prefill_fit_recovers_known_coefficients_with_small_residuals():
    rng = np.random.default_rng(0)
    rows = []
    for batch in (1, 4):
        for n in (16, 64, 128, 256, 512, 1024):
            tokens, squares = batch * n, batch * n * n
            true = 2e-3 + 1e-4 * tokens + 3e-8 * squares
            rows.append(dict(tokens=tokens, squares=squares, prefill_s=true * (1 + 0.002 * rng.standard_normal())))
    fit = fit_prefill(rows)
    assert fit.coef == pytest.approx((2e-3, 1e-4, 3e-8), rel=0.05)
    assert fit.max_abs_residual < 0.01 and fit.r2 > 0.999
    assert len(fit.rows) == 12 and {"measured_s", "predicted_s", "residual"} <= set(fit.rows[0])


def test_decode_and_transfer_fits_recover_known_coefficients():
    rows = [dict(batch=b, context_tokens=b * c, step_s=3e-3 + 2e-4 * b + 5e-8 * b * c)
            for b in (1, 2, 4, 8, 16) for c in (64, 512, 1024)]
    assert fit_decode(rows).coef == pytest.approx((3e-3, 2e-4, 5e-8), rel=1e-6)
    moves = [dict(nbytes=n, seconds=1e-5 + n / 4e9) for n in (2 ** 16, 2 ** 20, 2 ** 24)]
    fit = fit_transfer(moves)
    cost = CostModel().fit([dict(tokens=n, squares=n * n, prefill_s=1e-3 + 1e-5 * n) for n in (8, 64, 512)],
                           rows, moves)
    assert cost.transfer_bytes_per_s == pytest.approx(4e9, rel=1e-6) and cost.transfer_base_s == pytest.approx(1e-5)
    assert cost.decode_per_seq_s == pytest.approx(2e-4) and fit.max_abs_residual < 1e-9


def test_fit_never_returns_a_negative_coefficient_and_refuses_bad_tables():
    rows = [dict(tokens=n, squares=n * n, prefill_s=0.01 - 1e-9 * n * n) for n in (10, 100, 1000, 2000)]
    assert min(fit_prefill(rows).coef) >= 0
    with pytest.raises(ValueError, match="at least 3"):
        fit_prefill(rows[:2])
    with pytest.raises(ValueError, match="lack the column"):
        fit_decode(rows)
    with pytest.raises(ValueError, match="not > 0"):
        fit_transfer([dict(nbytes=1, seconds=0.0), dict(nbytes=2, seconds=1.0)])


def _calibration():
    fits = {"prefill": fit_prefill([dict(tokens=n, squares=n * n, prefill_s=1e-3 + 1e-5 * n) for n in (8, 64, 512)])}
    cost = CostModel(**costmodel.fit.coefficients(fits.values()), padded_prefill=True)
    meta = dict(device="cpu", model="tiny", dtype="float32", torch="2.x", date="2026-01-01T00:00:00+00:00",
                splitlab="0.1.0")
    return costmodel.Calibration(cost, fits, meta)


def test_calibration_round_trips_and_refuses_what_it_cannot_use(tmp_path):
    cal = _calibration()
    path = costmodel.save(cal, tmp_path / "cal.json")
    back = costmodel.load(path, model="tiny")
    assert back.cost == cal.cost and back.meta == cal.meta and back.fits["prefill"].coef == cal.fits["prefill"].coef
    with pytest.raises(CalibrationError, match="measured on model 'tiny'.*not 'smollm2-135m'"):
        costmodel.load(path, model="smollm2-135m")
    (tmp_path / "cut.json").write_text(path.read_text()[:50])
    with pytest.raises(CalibrationError, match="not valid JSON"):
        costmodel.load(tmp_path / "cut.json")
    (tmp_path / "other.json").write_text(json.dumps({"models": {}}))
    with pytest.raises(CalibrationError, match="not a splitlab calibration"):
        costmodel.load(tmp_path / "other.json")
    data = json.loads(path.read_text())
    del data["torch"], data["cost_model"]["decode_base_s"]
    (tmp_path / "lacking.json").write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="torch, cost_model.decode_base_s"):
        costmodel.load(tmp_path / "lacking.json")
    data = json.loads(path.read_text())
    data["cost_model"]["prefill_base_s"] = -1
    (tmp_path / "negative.json").write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="prefill_base_s must be a finite number >= 0"):
        costmodel.load(tmp_path / "negative.json")
    with pytest.raises(CalibrationError, match="cannot read"):
        costmodel.load(tmp_path / "missing.json")


def test_roofline_cost_model_is_a_roofline_and_labelled_predicted():
    m = costmodel.roofline_cost_model("Llama-3-8B", "H100", "bf16", compute_efficiency=0.5, memory_efficiency=1.0)
    assert m.source.startswith("predicted: roofline of Llama-3-8B")
    weights = 8.03e9 * 2
    assert m.decode_s(1, 0) == pytest.approx(weights / 3.35e12)           # batch 1: the weights read once
    assert m.prefill_s(4096) == pytest.approx((2 * 8.03e9 * 4096 + 2 * 32 * 32 * 128 * 4096 ** 2) / (0.5 * 989e12))
    run = m.decode_run_s(7, 1000, 40)
    assert all(run[i] == m.decode_s(7, 1000 + 7 * i) for i in range(40))  # the simulator's fast path relies on it
    assert m.decode_s(512, 0) > m.decode_s(1, 0)                           # compute-bound at a large batch
    for bad in (dict(gpu="B300"), dict(link="carrier pigeon"), dict(compute_efficiency=1.5),
                dict(model="Llama-3-70B", dtype="fp32")):
        with pytest.raises(ValueError):
            costmodel.roofline_cost_model(**bad)


def test_calibrate_measures_the_model_and_fits_every_term(lm, tmp_path):
    import splitlab as sl
    cal = sl.profiling.calibrate(lm, prompt_tokens=[16, 64, 256], decode_batches=[1, 4], contexts=[32, 96],
                                 transfer_tokens=[16, 256], repeats=1, rounds=1)
    assert set(cal.fits) == {"prefill", "decode", "transfer"} and cal.meta["model"] == "tiny"
    assert {"device", "dtype", "torch", "date"} <= set(cal.meta) and cal.cost.padded_prefill
    assert cal.cost.kv_bytes_per_token == 2 * 4 * 2 * 32 * 4 and cal.cost.max_context == lm.max_context
    assert all(math.isfinite(f.max_abs_residual) for f in cal.fits.values())
    assert cal.cost.prefill_s(256) > cal.cost.prefill_s(16) > 0
    back = costmodel.load(costmodel.save(cal, tmp_path / "tiny.json"), model="tiny")
    assert back.cost == cal.cost
    with pytest.raises(ValueError, match="prompt_tokens"):
        sl.profiling.calibrate(lm, prompt_tokens=[10 ** 6])


def test_fit_takes_the_profiling_tables():
    """measure_prefill's rows (batch x prompt_tokens) and measure_decode's (batch x context) fit as the sums the
    cost model's terms are: tokens = batch x prompt_tokens, squares = batch x prompt_tokens^2, context_tokens =
    batch x context."""
    prefill = [dict(prompt_tokens=n, batch=b, prefill_s=1e-3 + 1e-5 * b * n + 1e-8 * b * n * n)
               for n in (16, 128, 512) for b in (1, 2)]
    decode = [dict(batch=b, context=c, step_s=2e-3 + 1e-4 * b + 1e-7 * b * c) for b in (1, 4, 8) for c in (64, 512)]
    cost = CostModel().fit(prefill, decode)
    assert cost.prefill_s(512) == pytest.approx(1e-3 + 512e-5 + 1e-8 * 512 ** 2, rel=1e-6)
    assert cost.decode_s(4, 4 * 512) == pytest.approx(2e-3 + 4e-4 + 1e-7 * 4 * 512, rel=1e-6)


def test_masked_prefill_and_batched_decode_terms_are_recovered_and_charged():
    """The second kernel paths: attention through a mask (padded batches, chunks after a cached prefix) and the
    fixed cost of a decode batch of more than one; fitted where the measurements have their columns."""
    from splitlab.serving import CostModelExecutor
    from splitlab.serving.executor import Slot
    from splitlab.serving.request import Request
    rows = [dict(tokens=b * n, squares=b * n * n, masked_pairs=b * n * n if b > 1 else 0,
                 prefill_s=2e-3 + 1e-4 * b * n + 3e-8 * b * n * n + (2e-8 * b * n * n if b > 1 else 0))
            for b in (1, 2, 4) for n in (16, 64, 256, 512)]
    assert fit_prefill(rows).coef == pytest.approx((2e-3, 1e-4, 3e-8, 2e-8), rel=1e-6)
    steps = [dict(batch=b, context_tokens=b * c, batched=int(b > 1),
                  step_s=3e-3 + 2e-4 * b + 5e-8 * b * c + (1.5e-3 if b > 1 else 0))
             for b in (1, 2, 3, 8) for c in (64, 512)]
    fit = fit_decode(steps)
    assert fit.terms[-1] == "batched" and fit.coef == pytest.approx((3e-3, 2e-4, 5e-8, 1.5e-3), rel=1e-6)
    cost = CostModel().fit(rows, steps)
    assert cost.decode_s(2, 10) - cost.decode_s(1, 10) == pytest.approx(2e-4 + 1.5e-3, rel=1e-6)
    assert cost.decode_run_s(3, 100, 4).tolist() == [cost.decode_s(3, 100 + 3 * i) for i in range(4)]
    sim = CostModelExecutor(cost.with_(padded_prefill=True))
    ragged = [Slot(Request(i, 0.0, [1] * n, 4)) for i, n in enumerate((100, 60))]
    assert sim.prefill_seconds(ragged, [100, 60]) == pytest.approx(cost.prefill_s(200, 20000, 20000))
    even = [Slot(Request(i, 0.0, [1] * 80, 4)) for i in range(2)]
    assert sim.prefill_seconds(even, [80, 80]) == pytest.approx(cost.prefill_s(160, 12800))
    chunk = Slot(Request(9, 0.0, [1] * 300, 4), prefilled=200)
    assert sim.prefill_seconds([chunk], [100]) == pytest.approx(cost.prefill_s(100, 300 ** 2 - 200 ** 2, 100 * 300))


def _measured(scale: float, model: str = "tiny") -> costmodel.Calibration:
    """A calibration of a machine running ``scale`` x slower than the known coefficients."""
    pre = [dict(tokens=n, squares=n * n, prefill_s=scale * (1e-3 + 1e-5 * n + 1e-8 * n * n)) for n in (8, 64, 512)]
    dec = [dict(batch=b, context_tokens=b * c, step_s=scale * (3e-3 + 2e-4 * b + 5e-8 * b * c))
           for b in (1, 4, 16) for c in (64, 512)]
    mov = [dict(nbytes=n, seconds=scale * (1e-5 + n / 4e9)) for n in (2 ** 16, 2 ** 24)]
    fits = {"prefill": fit_prefill(pre), "decode": fit_decode(dec), "transfer": fit_transfer(mov)}
    meta = dict(device="cpu", model=model, dtype="float32", torch="2.x", date=f"2026-01-0{int(scale * 2)}",
                splitlab="x")
    return costmodel.Calibration(CostModel(**costmodel.fit.coefficients(fits.values()), max_context=777), fits, meta)


def test_combine_fits_calibrations_again_as_one_and_refuses_mixed_models():
    slow, fast = _measured(1.5), _measured(1.0)
    both = costmodel.combine([fast, slow])
    # the machine ran at 1x and 1.5x: the combined fit lies between, every measurement of both counted
    for name in ("decode_base_s", "prefill_per_token_s"):
        assert getattr(fast.cost, name) < getattr(both.cost, name) < getattr(slow.cost, name)
    assert len(both.fits["decode"].rows) == 2 * len(fast.fits["decode"].rows)
    assert both.cost.max_context == 777 and both.meta["combined"] == 2 and ".." in both.meta["date"]
    assert costmodel.combine([fast]).cost.decode_base_s == pytest.approx(fast.cost.decode_base_s)
    with pytest.raises(ValueError, match="different models"):
        costmodel.combine([fast, _measured(1.0, model="gpt2")])
    with pytest.raises(ValueError, match="one or more"):
        costmodel.combine([])
    with pytest.raises(ValueError, match="holds no measurements"):
        costmodel.combine([_calibration()])


def test_plain_fit_predicts_the_mean_of_noisy_steps_where_a_relative_fit_predicts_low():
    """Single decode steps with right-skewed noise (lognormal, sigma 0.4) around a known cost: the plain fit's
    predictions sum to the measured total (what a queue adds up); the relative fit's fall short of it."""
    rng = np.random.default_rng(0)
    rows = []
    for b in (1, 2, 4, 8):
        for c in (64, 256, 512):
            for noise in rng.lognormal(0.0, 0.4, 40):
                rows.append(dict(batch=b, context_tokens=b * c, step_s=(4e-3 + 2e-4 * b + 1e-6 * b * c) * noise))
    total = sum(r["step_s"] for r in rows)
    for relative, low, high in ((False, 0.99, 1.01), (True, 0.6, 0.9)):
        fit = fit_decode(rows, relative=relative)
        predicted = sum(fit.predict(batch=r["batch"], context_tokens=r["context_tokens"]) for r in rows)
        assert low < predicted / total < high, (relative, predicted / total)
