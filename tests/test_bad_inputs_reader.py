"""Bad input found by a reader's pass: explorer figures and the goodput search refuse it early, naming it."""
import math

import pytest

from splitlab import costmodel, serving
from splitlab.teach.interactive import Trace, explorer_figure


def _line(v):
    return [Trace("measured", [1, 2], [v, v])]


def _fig(traces_for, **kw):
    return explorer_figure(traces_for, ("n", [1, 2, 3]), "t", "x (s)", "y (s)", **kw)


def test_explorer_accepts_a_good_grid():
    fig = _fig(_line)
    assert len(fig.data) == 1 and list(fig.data[0].y) == [1, 1]


@pytest.mark.parametrize("kw", [dict(slider_default=3), dict(slider_default=-1), dict(slider_default=True),
                                dict(dropdown=("g", ["a"]), dropdown_default=1)])
def test_explorer_default_position_out_of_range(kw):
    traces_for = (lambda g, v: _line(v)) if "dropdown" in kw else _line
    with pytest.raises(ValueError, match="_default must be a position"):
        _fig(traces_for, **kw)


def test_explorer_empty_dropdown():
    with pytest.raises(ValueError, match="dropdown needs at least one value"):
        _fig(lambda g, v: _line(v), dropdown=("g", []))


def test_explorer_traces_that_change_name_or_kind():
    with pytest.raises(ValueError, match="names or kinds"):
        _fig(lambda v: [Trace(f"run {v}", [1], [v])])
    with pytest.raises(ValueError, match="names or kinds"):
        _fig(lambda v: [Trace("m", [1], [v], kind="bar" if v == 2 else "lines")])


def test_explorer_traces_for_not_a_list_of_traces():
    with pytest.raises(TypeError, match="list of Trace"):
        _fig(lambda v: None)


def test_explorer_traces_for_error_names_the_grid_point():
    def broken(v):
        if v == 2:
            raise ZeroDivisionError("boom")
        return _line(v)
    with pytest.raises(ZeroDivisionError) as info:
        _fig(broken)
    assert any("slider 2" in note for note in info.value.__notes__)


@pytest.mark.parametrize("slo", [dict(ttft_slo_s=math.inf, tpot_slo_s=0.1), dict(ttft_slo_s=1.0, tpot_slo_s=math.inf)])
def test_goodput_infinite_slo_is_refused_early(slo):
    ex = serving.CostModelExecutor(costmodel.CostModel())
    with pytest.raises(ValueError, match="duration_s must be a finite time"):
        serving.goodput("chat", serving.ServingConfig.colocated(1), ex, max_requests=50, **slo)


@pytest.fixture(scope="module")
def tiny():
    import splitlab as sl
    return sl.load_model("tiny")


@pytest.mark.parametrize("kw", [dict(prompt_tokens=[16.5, 32]), dict(prompt_tokens=[]), dict(contexts=[]),
                                dict(transfer_tokens=[True]), dict(decode_batches=[1, 2.5])])
def test_calibrate_refuses_fractional_or_empty_lengths(tiny, kw):
    """A fractional length was truncated and an empty list silently replaced by the defaults."""
    import splitlab as sl
    with pytest.raises(ValueError, match="whole numbers|must be integers in"):
        sl.profiling.calibrate(tiny, repeats=1, **kw)
