"""``calibrate`` says when its fits miss their own measurements by more than half (issue 18, item 6): a
calibration taken while other work loaded the machine had residuals of 90-95% and no word about it."""
from __future__ import annotations

import json
import warnings

from conftest import cli
from splitlab import costmodel
from splitlab.costmodel import CostModel
from splitlab.phases import calibrate as calibrate_module
from splitlab.phases import fit_quality
from splitlab.phases.calibrate import NOISY_RESIDUAL, NoisyCalibrationWarning, fit_warnings


def _calibration(busy: float) -> costmodel.Calibration:
    """A calibration of the built-in cost model's own times, one decode measurement ``busy`` x slower."""
    cost = CostModel()
    pre = [dict(tokens=n, squares=n * n, prefill_s=cost.prefill_s(n, n * n)) for n in (16, 64, 160, 400)]
    dec = [dict(batch=b, context_tokens=b * c, batched=int(b > 1), step_s=cost.decode_s(b, b * c))
           for b in (1, 2, 4) for c in (32, 96)]
    dec[3]["step_s"] *= busy
    tra = [dict(nbytes=n, seconds=cost.transfer_s(n)) for n in (1 << 16, 1 << 20)]
    return costmodel.Calibration(cost, {"prefill": costmodel.fit_prefill(pre), "decode": costmodel.fit_decode(dec),
                                        "transfer": costmodel.fit_transfer(tra)},
                                 dict(model="tiny", device="cpu", dtype="float32", torch="x", date="2026-12-03"))


def test_a_fit_missing_by_more_than_half_is_named_with_what_to_do():
    assert NOISY_RESIDUAL == 0.5
    assert fit_warnings(_calibration(1.0)) == []
    noisy = _calibration(8.0)
    assert noisy.fits["decode"].max_abs_residual > 0.5 and noisy.fits["prefill"].max_abs_residual < 0.01
    (message,) = fit_warnings(noisy)
    assert message.startswith("the decode fit misses one of its own measurements by ")
    assert "more than 50%" in message and "busy" in message and "one thread" in message and "idle" in message
    assert fit_warnings(noisy, threshold=10.0) == []


def test_calibrate_warns_in_python(monkeypatch):
    import splitlab as sl
    lm = sl.load_model("tiny")
    small = dict(prompt_tokens=[16, 32, 64, 128], prefill_batch=1, decode_batches=(1, 2), contexts=[32, 64],
                 transfer_tokens=[16, 64], repeats=1, chunk_tokens=())
    monkeypatch.setattr(fit_quality, "NOISY_RESIDUAL", -1.0)  # every fit "misses": each one warns
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        cal = sl.profiling.calibrate(lm, **small)
    said = [str(w.message) for w in record if w.category is NoisyCalibrationWarning]
    assert len(said) == len(cal.fits) == 3 and said[0].startswith("the prefill fit misses")
    monkeypatch.setattr(fit_quality, "NOISY_RESIDUAL", 1e9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoisyCalibrationWarning)
        sl.profiling.calibrate(lm, **small)  # within the threshold: no warning


def test_the_cli_says_it_on_stderr_in_one_line_and_in_json(monkeypatch, tmp_path):
    monkeypatch.setattr(calibrate_module, "calibrate", lambda lm, **kw: _calibration(8.0))
    status, out, err = cli("calibrate", "--model", "tiny", "--out", str(tmp_path / "c.json"), "--json")
    assert status == 0 and (tmp_path / "c.json").exists()
    lines = [line for line in err.splitlines() if "warning" in line]
    assert lines == [f"splitlab calibrate: warning: {fit_warnings(_calibration(8.0))[0]}"]
    assert json.loads(out)["warnings"] == fit_warnings(_calibration(8.0))
    monkeypatch.setattr(calibrate_module, "calibrate", lambda lm, **kw: _calibration(1.0))
    status, out, err = cli("calibrate", "--model", "tiny", "--out", str(tmp_path / "d.json"))
    assert status == 0 and "warning" not in err
