"""calibrate_or_reuse: one calibration of a model on this device, reused within its age by the calls that follow
(chapters 6 and 7 calibrated the same model twice in one book build)."""
import datetime
import json

import pytest

import splitlab as sl
from splitlab.phases import calibrate_shared

pytestmark = pytest.mark.filterwarnings("ignore::splitlab.phases.fit_quality.NoisyCalibrationWarning")  # a busy machine
SMALL = dict(prompt_tokens=[16, 32, 64, 128], prefill_batch=1, decode_batches=[1, 2], contexts=[32, 64],
             transfer_tokens=[16, 64], repeats=1, chunk_tokens=[])


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("SPLITLAB_CACHE", str(tmp_path))
    return tmp_path


def test_the_second_call_reuses_the_first_calibration(cache, monkeypatch):
    lm = sl.load_model("tiny")
    first = sl.profiling.calibrate_or_reuse(lm, **SMALL)
    assert first.meta["shared"] == "calibrated now (kept 60 min in splitlab's cache folder for the runs that follow)"
    path = calibrate_shared.shared_path(lm, **SMALL)
    assert path.parent == cache / "calibrations" and path.name.startswith("tiny-") and path.is_file()

    def fail(*args, **kwargs):
        raise AssertionError("calibrated again within max_age_s")
    monkeypatch.setattr(calibrate_shared, "calibrate", fail)
    again = sl.profiling.calibrate_or_reuse(lm, **SMALL)
    assert again.cost == first.cost and again.meta["date"] == first.meta["date"]
    said = again.meta["shared"]
    assert said.startswith("reused the calibration made ") and " s ago on this device (kept 60 min" in said
    assert again.fits["decode"].rows == first.fits["decode"].rows
    with pytest.raises(AssertionError, match="calibrated again"):  # other arguments: another file, measured
        sl.profiling.calibrate_or_reuse(lm, **dict(SMALL, repeats=2))
    with pytest.raises(AssertionError, match="calibrated again"):  # max_age_s 0: always measured
        sl.profiling.calibrate_or_reuse(lm, max_age_s=0, **SMALL)


def test_an_old_damaged_or_future_file_is_measured_again(cache):
    lm = sl.load_model("tiny")
    sl.profiling.calibrate_or_reuse(lm, **SMALL)
    path = calibrate_shared.shared_path(lm, **SMALL)
    data = json.loads(path.read_text())
    for date in [datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=2),
                 datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=2)]:
        path.write_text(json.dumps(dict(data, date=date.isoformat(timespec="seconds"))))
        fresh = sl.profiling.calibrate_or_reuse(lm, **SMALL)
        assert fresh.meta["shared"].startswith("calibrated now") and fresh.meta["date"] != date.isoformat()
    path.write_text("{truncated")
    assert sl.profiling.calibrate_or_reuse(lm, **SMALL).meta["shared"].startswith("calibrated now")
    assert json.loads(path.read_text())["format"] == "splitlab-calibration/1"  # written whole again


def test_an_unwritable_cache_leaves_the_calibration_unsaved_and_says_so(cache, monkeypatch):
    blocker = cache / "file"
    blocker.write_text("")
    monkeypatch.setenv("SPLITLAB_CACHE", str(blocker))  # a file: no folder can be made under it
    cal = sl.profiling.calibrate_or_reuse(sl.load_model("tiny"), **SMALL)
    assert cal.meta["shared"].startswith("calibrated now (not kept: ")
    assert set(cal.fits) == {"prefill", "decode", "transfer"}


@pytest.mark.parametrize("bad", [-1, float("nan"), "1h", True, None])
def test_a_bad_age_is_refused_before_measuring(cache, bad):
    with pytest.raises(ValueError, match="max_age_s must be a number of seconds >= 0"):
        sl.profiling.calibrate_or_reuse(sl.load_model("tiny"), max_age_s=bad)


def test_not_a_model_is_refused():
    with pytest.raises(TypeError, match="needs a splitlab LoadedModel"):
        sl.profiling.calibrate_or_reuse("tiny")
