"""Every figure of the book says what its scales measure and in what unit (issue 22, the quality bar): each axis
whose ticks are numbers has a label naming its unit, in brackets ("time to first token (ms)") or as the things it
counts ("output tokens", "prefill workers", "share of requests"). Chapters 1-5 and 8 through tests/phone_cases.py,
chapters 6, 7 and 9 here, matplotlib and the rendered book's plotly explorers; model-free (simulated runs, datasheet
numbers)."""
from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import splitlab as sl  # noqa: E402
from phone_cases import CASES, as_figure, is_number as _number  # noqa: E402
from splitlab.costmodel import CostModel  # noqa: E402
from splitlab.serving import CostModelExecutor, Fixed, ServingConfig, WorkloadSpec, make_workload, run  # noqa: E402
from splitlab.teach import widgets  # noqa: E402
from splitlab.teach.figures import pools, production as prod, production_pains as pains  # noqa: E402
from splitlab.teach.figures import split as split_figures  # noqa: E402

#: what a label without brackets may count or measure: a unit ("GB/s", "FLOP") or the things counted
COUNTED = re.compile(r"\b(tokens?|requests?|workers?|steps?|sequences?|share|GB/s|FLOP|tokens/s|joule)\b")
COST = CostModel(prefill_base_s=0.0, prefill_per_token_s=1e-3, decode_base_s=0.01, decode_per_seq_s=0.0,
                 kv_bytes_per_token=1024, transfer_base_s=0.0, transfer_bytes_per_s=1e9)
SPEC = WorkloadSpec("fixed", Fixed(100), Fixed(40))


def has_unit(label: str) -> bool:
    """``label`` names a unit: a bracket with something in it, or a count or unit of :data:`COUNTED`."""
    return bool(re.search(r"\(\s*\S[^)]*\)", label) or COUNTED.search(label))


def unlabelled(fig) -> list[str]:
    """Axes of ``fig`` with numbers on their ticks and no unit in their label: "axes i x: 'label'"."""
    fig.canvas.draw()
    out = []
    for i, ax in enumerate(a for a in fig.axes if a.get_visible() and a.axison):
        for axis, label in ((ax.xaxis, ax.get_xlabel()), (ax.yaxis, ax.get_ylabel())):
            if any(_number(t.get_text()) for t in axis.get_ticklabels() if t.get_visible()) and not has_unit(label):
                out.append(f"axes {i} {axis.axis_name}: {label!r}")
    return out


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_the_rule_tells_a_unit_from_a_bare_name():
    assert has_unit("time to first token (ms)") and has_unit("output tokens") and has_unit("GB/s per decode link")
    assert has_unit("share of requests") and has_unit("prefill workers into one decode NIC")
    assert not has_unit("gap") and not has_unit("latency") and not has_unit("") and not has_unit("TTFT ()")
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("gap")
    assert unlabelled(fig) == ["axes 0 y: 'gap'"]


@pytest.mark.parametrize("name", list(CASES))
def test_chapters_1_to_5_and_8_label_their_scales_with_units(name):
    fig = as_figure(CASES[name]())
    assert not unlabelled(fig), (name, unlabelled(fig))


def test_chapter_6_labels_its_scales_with_units():
    reqs = make_workload(SPEC, 20, 8.0, seed=0)
    runs = {"1P+1D": run(reqs, ServingConfig.disaggregated(1, 1), CostModelExecutor(COST)),
            "2 colocated": run(reqs, ServingConfig.colocated(2), CostModelExecutor(COST))}
    for fig in (split_figures.latency_cdfs(runs, 0.5, 0.05, title="a title"),
                split_figures.timelines(runs, (0.0, 1.0))):
        assert not unlabelled(as_figure(fig)), unlabelled(as_figure(fig))
    explorer = widgets.split_figure(None, {"research": (0.5, 0.05)}, {"research": 2.0}, ratios=[(1, 1)],
                                    factors=(1.0,), ratio=(1, 1), n_requests=20, scale=0.5)
    titles = (explorer.layout.xaxis.title.text, explorer.layout.yaxis.title.text)
    assert all(has_unit(t) for t in titles), titles


def test_chapter_7_labels_its_scales_with_units():
    curve = pd.DataFrame({"rate_per_worker": [1.0, 2.0, 3.0], "attainment": [1.0, 0.95, 0.5]})
    plan = sl.planner.plan(COST, SPEC, ttft_slo_s=0.5, tpot_slo_s=0.05, max_workers=3, chunk_tokens=(64,),
                           progress=False, max_requests=200)
    for ax in (pools.attainment_curves({"2P+2D": curve}, goodputs={"2P+2D": 2.0}), pools.ratio_sweep(plan),
               pools.candidates(plan)):
        assert not unlabelled(ax.figure), unlabelled(ax.figure)
    explorer = widgets.pools_figure(None, "research", 0.5, (0.05,), (0.5,), scale=0.5, tpot_slo_s=0.05,
                                    max_workers=2, chunk_tokens=(64,))
    assert has_unit(explorer.layout.yaxis.title.text), explorer.layout.yaxis.title.text


def test_chapter_9_labels_its_scales_with_units():
    from splitlab.planning.hetero import plan_pools

    table = pd.DataFrame({"need_gb_s": [6.5, 7.9, 2.3, 2.2]}, index=["8B, 2k", "8B, 8k", "70B, 2k", "70B, 8k"])
    nic = pd.DataFrame({"bare_ms": [83.0] * 3, "link_mean_ms": [83.0, 93.0, 107.0],
                        "link_p90_ms": [83.0, 136.0, 173.0]}, index=pd.Index([1, 2, 4], name="prefill_workers"))
    plan = plan_pools("Llama-3-8B", "H100", "A100-80GB", max_devices=3, ttft_slo_s=0.3, tpot_slo_s=0.05,
                      max_requests=100, tolerance=0.1)
    for ax in (prod.link_need(table), pains.nic_figure(nic), prod.pool_costs(plan)):
        assert not unlabelled(ax.figure), unlabelled(ax.figure)
