"""Every serving figure builds from a cost-model run (no model) and labels its axes and title."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from splitlab import serving
from splitlab.teach.figures import interference as ip
from splitlab.teach.figures import serving as sp  # noqa: E402
from splitlab.serving import CostModelExecutor, Request  # noqa: E402


def streams_and_long_prompt() -> list[Request]:
    """Three short-prompt streams, then a long prompt arriving while they decode."""
    return [Request(i, 0.01 * i, [1] * 32, 40) for i in range(3)] + [Request(3, 0.05, [1] * 1000, 4)]


@pytest.fixture(scope="module")
def colocated():
    return serving.run(streams_and_long_prompt(), serving.ServingConfig(workers=1, kv_budget_bytes=2048 * 1200),
                       CostModelExecutor())


@pytest.fixture(scope="module")
def split():
    return serving.run(streams_and_long_prompt(), serving.ServingConfig.disaggregated(), CostModelExecutor())


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def labelled(ax) -> bool:
    return bool(ax.get_xlabel()) and bool(ax.get_ylabel()) and bool(ax.get_title())


def test_worker_timeline_has_one_row_per_worker_and_link(split):
    ax = sp.worker_timeline(split)
    assert labelled(ax) and "(s)" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["P0", "D0", "P0->D0"]
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {"prefill", "decode", "transfer", "idle"}


def test_kv_memory_draws_the_budget(colocated):
    ax = sp.kv_memory(colocated)
    assert labelled(ax) and ("KiB" in ax.get_ylabel() or "MiB" in ax.get_ylabel())
    assert "KV budget per worker" in [t.get_text() for t in ax.get_legend().get_texts()]


@pytest.mark.parametrize("metric", ["ttft", "itl", "tpot"])
def test_latency_cdf_one_curve_per_run(colocated, split, metric):
    ax = sp.latency_cdf({"colocated": colocated, "split": split}, metric, slo_s=0.1)
    assert labelled(ax) and "(ms)" in ax.get_xlabel()
    assert len(ax.get_lines()) == 3  # two CDFs and the SLO line
    assert ax.get_lines()[0].get_ydata()[-1] == pytest.approx(1.0)
    assert labelled(sp.ttft_cdf(colocated)) and labelled(sp.itl_cdf([colocated, split]))


def test_request_tokens_marks_arrival_and_tokens(split):
    ax = sp.request_tokens(split, 3)
    assert labelled(ax)
    texts = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "arrival" in texts and "KV transfer" in texts and "TTFT" in texts
    with pytest.raises(KeyError):
        sp.request_tokens(split, 99)


def test_itl_over_time_marks_the_long_prompt(colocated):
    ax = sp.itl_over_time(colocated, min_prompt_tokens=500)
    assert labelled(ax)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "ITL of the 3 running streams" in texts and "long prompt arrives" in texts
    gaps = ax.get_lines()[0].get_ydata()
    assert max(gaps) > 50  # the 1000-token prefill (about 72 ms on the default cost model) lands in one gap


def test_bytes_unit():
    assert sp.bytes_unit(100) == (1.0, "B")
    assert sp.bytes_unit(3 * 2 ** 20) == (2.0 ** 20, "MiB")


def test_measured_vs_predicted_plots(colocated, split):
    import pandas as pd

    from splitlab.serving import interference

    spikes = interference.spike_table(colocated, long_ids=[3])
    ax = ip.itl_spikes(spikes, {"predicted": ([1000], [0.08])})
    assert labelled(ax) and "(ms)" in ax.get_ylabel()
    legend = ax.get_legend() or ax.figure.legends[0]  # the phone style puts it under the figure
    assert "predicted" in [t.get_text() for t in legend.get_texts()]
    table = pd.DataFrame(dict(rate_per_s=[1.0, 2.0], ttft_mean_s=[0.1, 0.2], ttft_p90_s=[0.2, 0.3]))
    ax = ip.ttft_sweep(table, "rate_per_s", {"floor": ([1.0, 2.0], [0.05, 0.05])})
    assert labelled(ax) and ax.get_xlabel() == "request rate (requests/s)"
    ax = ip.ttft_by_request({"colocated": colocated, "split": split}, predicted_s=[0.1] * 4)
    assert labelled(ax) and len(ax.patches) == 8
