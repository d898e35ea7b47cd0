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
    with pytest.raises(ValueError, match="_slo_s must be a finite time > 0 s"):  # was about duration_s
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


def _prefill():
    import pandas as pd
    return pd.DataFrame({"prompt_tokens": [16, 64, 256], "prefill_s": [0.01, 0.03, 0.1]})


@pytest.mark.parametrize("args, match", [((0.01, [], [4]), "at least one value"),
                                         ((0.01, [32], []), "at least one value")])
def test_timeline_grid_empty_lists(args, match):
    from splitlab import widgets
    with pytest.raises(ValueError, match=match):
        widgets.timeline_grid(_prefill(), *args)


def test_timeline_grid_nan_prefill_time():
    from splitlab import widgets
    with pytest.raises(ValueError, match="finite"):
        widgets.timeline_grid(_prefill().assign(prefill_s=[0.01, math.nan, 0.1]), 0.01, [32], [4])


@pytest.mark.parametrize("step, prompts, rates", [(0.01, [32], [math.nan]), (math.nan, [32], [1.0]),
                                                  (0.01, [], [1.0]), (0.01, [32], [])])
def test_ttft_load_grid_nan_or_empty(step, prompts, rates):
    from splitlab import widgets
    with pytest.raises(ValueError, match="finite|at least one value"):
        widgets.ttft_load_grid(_prefill(), step, prompts, rates)


def test_kv_transfer_figure_unknown_gpu():
    from splitlab import widgets
    with pytest.raises(ValueError, match="unknown gpu 'H900'"):
        widgets.kv_transfer_figure(gpu="H900")


def test_pools_figure_no_tpot_slos():
    from splitlab import widgets
    with pytest.raises(ValueError, match="at least one value"):
        widgets.pools_figure(costmodel.CostModel(), tpot_slos_s=())


@pytest.mark.parametrize("kw", [dict(workloads={}, reference_rate_per_worker={}),
                                dict(workloads={"chat": (1.0, 0.1)}, reference_rate_per_worker=2.0),
                                dict(workloads={"chat": (1.0, 0.1)}, reference_rate_per_worker={"chat": 0}),
                                dict(workloads={"chat": (1.0, 0.1)}, reference_rate_per_worker={"chat": 1.0},
                                     factors=(-1.0, 1.0))])
def test_split_figure_bad_rates(kw):
    from splitlab import widgets
    with pytest.raises(ValueError, match="reference_rate_per_worker|at least one workload"):
        widgets.split_figure(costmodel.CostModel(), **kw)


@pytest.mark.parametrize("args", [(["Llama-3-8B"], [1.5], [1]), (["Llama-3-8B"], [16], [2.5]), ([], [16], [1]),
                                  (["Llama-3-8B"], [], [1])])
def test_kv_grid_fractional_or_empty(args):
    """A fractional token count was truncated (1.5 -> 1 token) and an empty model list gave an empty table."""
    from splitlab import widgets
    with pytest.raises(ValueError, match="integer >= 0|at least one model"):
        widgets.kv_grid(*args)
