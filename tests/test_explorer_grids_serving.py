"""Chapters 5-7: the grid behind each explorer is the one the ipywidgets explorer draws and the one the kernel-free
plotly figure of the rendered book carries, point for point; every row says whether it was measured, predicted or
simulated. Simulated on the built-in cost model with few requests (a second or two in all)."""
from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from splitlab import serving, sizing  # noqa: E402
from splitlab.teach import widgets  # noqa: E402
from splitlab.teach.widgets.ch07 import phone_tick  # noqa: E402
from splitlab.teach.figures import pools, split as split_figures, transfer as transfer_plots  # noqa: E402

SLOS = {"research": (0.5, 0.05)}
SIM = dict(n_requests=40, scale=0.5)


def _shown(monkeypatch) -> list:
    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(plt.gcf()))
    return shown


def _visible(fig, name: str):
    """The one visible trace called ``name`` (the figure as first drawn: default slider and dropdown)."""
    hits = [t for t in fig.data if t.name == name and t.visible]
    assert len(hits) == 1, f"{name}: {len(hits)} visible traces"
    return hits[0]


# --- chapter 5 -------------------------------------------------------------------------------------------------

def test_handoff_grid_is_sizing_and_labels_every_time_predicted():
    g = transfer_plots.handoff_grid(["Llama-3-8B", "StarCoder-15B"], [512, 2048], measured={"here": 2e9})
    assert len(g) == 2 * 2 * (len(sizing.LINKS) + 1)
    assert set(g.label) == {"predicted, published link", "predicted, link measured here"}
    assert list(g.link[(g.model == "Llama-3-8B") & (g.prompt_tokens == 2048)]) == sorted(
        list(sizing.LINKS) + ["here"], key=lambda k: -({"here": 2e9} | {n: v["bandwidth_bytes_per_s"]
                                                                         for n, v in sizing.LINKS.items()})[k])
    row = g[(g.model == "Llama-3-8B") & (g.prompt_tokens == 2048) & (g.link == "here")].iloc[0]
    assert row.transfer_s == sizing.handoff("Llama-3-8B", 2048, 2e9)["transfer_s"]
    assert row.link_source == "measured" and row.decode_steps == pytest.approx(row.transfer_s / row.decode_step_s)


def test_kv_transfer_explorer_and_figure_draw_the_grid(monkeypatch):
    shown = _shown(monkeypatch)
    widgets.kv_transfer_explorer("Llama-3-8B", 2048, "PCIe 4.0 x16", measured={"here": 2e9})
    g = transfer_plots.handoff_grid(["Llama-3-8B"], [2048], measured={"here": 2e9})
    from matplotlib.collections import PathCollection
    dots = [c for c in shown[0].axes[1].collections if isinstance(c, PathCollection)]  # the lower panel's dots
    dots = dots[0].get_offsets()[:, 0]  # one per link, time on the x axis
    np.testing.assert_allclose(dots, g.transfer_s * 1e3)
    fig = widgets.kv_transfer_figure(measured={"here": 2e9})
    assert list(_visible(fig, "published link").y) == list(g.transfer_s[g.link_source == "published"] * 1e3)
    assert list(_visible(fig, "link measured here").y) == list(g.transfer_s[g.link_source == "measured"] * 1e3)
    assert fig.layout.sliders[0].steps[fig.layout.sliders[0].active].label == "2,048 tokens"
    with pytest.raises(ValueError, match="must be among"):
        widgets.kv_transfer_figure(prompt_tokens=3000)
    plt.close("all")


# --- chapter 6 -------------------------------------------------------------------------------------------------

def test_split_grid_labels_simulated_and_measured_rows():
    ex = serving.CostModelExecutor(None)
    live = split_figures.split_runs(ex, "research", 4.0, [(1, 1)], **SIM)  # stands in for the chapter's live runs
    g = split_figures.split_grid(None, SLOS, {"research": [1.0, 2.0]}, [(1, 1), (2, 1)], measured={
        "research": (4.0, live)}, **SIM)
    assert set(g.label) == {"simulated", "measured"}
    sim = g[g.label == "simulated"]
    assert len(sim) == 2 * 4  # per rate: 1P+1D and 2 colocated, 2P+1D and 3 colocated (one run per layout)
    assert sorted(set(sim.name)) == ["1P+1D", "2 colocated (prefill-first)", "2P+1D", "3 colocated (prefill-first)"]
    measured = g[g.label == "measured"].set_index("name")
    assert measured.rate_per_worker.tolist() == [2.0, 2.0]
    assert ((g.slo_attainment >= 0) & (g.slo_attainment <= 1)).all()
    with pytest.raises(ValueError, match="one number of workers"):
        split_figures.split_runs(ex, "research", 4.0, [(1, 1), (2, 1)])


def test_split_explorer_and_figure_draw_the_grid(monkeypatch):
    drawn = []
    monkeypatch.setattr(split_figures, "latency_cdfs", lambda runs, *a, **k: drawn.append(runs))
    _shown(monkeypatch)
    widgets.split_explorer(None, "research", rate_per_s=4.0, prefill_workers=1, decode_workers=1,
                           ttft_slo_s=SLOS["research"][0], tpot_slo_s=SLOS["research"][1], **SIM)
    g = split_figures.split_grid(None, SLOS, {"research": [2.0]}, [(1, 1)], **SIM).set_index("name")
    for name, res in drawn[0].items():  # the explorer's runs at 4 requests/s on 2 workers = the grid's point
        key = name if "P+" in name else f"{name} (prefill-first)"
        assert res.metrics(*SLOS["research"])["slo_attainment"] == g.slo_attainment[key]
    fig = widgets.split_figure(None, SLOS, {"research": 2.0}, ratios=[(2, 1), (1, 1)], factors=(0.5, 1.0),
                               ratio=(1, 1), **SIM)
    full = split_figures.split_grid(None, SLOS, {"research": [1.0, 2.0]}, [(2, 1), (1, 1)], **SIM)
    one = full[(full.name == "1P+1D")].sort_values("rate_per_worker")
    assert list(_visible(fig, "split, simulated").y) == list(100 * one.slo_attainment)
    assert fig.layout.sliders[0].steps[fig.layout.sliders[0].active].label == "1P+1D"
    plt.close("all")


def test_split_figure_of_one_workload_has_no_menu_of_one_entry():
    """ch06 passes one workload when its loss section serves the same workload as its win (CI's browser test
    clicked the second entry of a one-entry menu): the figure then names the workload in its title, no menu."""
    one = {"research": SLOS["research"]}
    fig = widgets.split_figure(None, one, {"research": 2.0}, ratios=[(1, 1)], factors=(1.0,), **SIM)
    assert not fig.layout.updatemenus and "(research)" in fig.layout.title.text
    assert all(t.visible for t in fig.data)
    both = {**one, "code": (0.2, 0.05)}
    two = widgets.split_figure(None, both, {w: 2.0 for w in both}, ratios=[(1, 1)], factors=(1.0,), **SIM)
    assert len(two.layout.updatemenus[0].buttons) == 2


def test_split_figure_draws_one_workload_under_two_slos_as_two_entries():
    """ch06's win and loss can serve the same workload at two TPOT SLOs (a review found its loss dropped from the
    figure, keyed by workload alone): keyed by labels, ``names`` says which workload each serves."""
    tight, loose = "research, TPOT 2.5 steps", "research, TPOT 10 steps"
    slos = {tight: SLOS["research"], loose: (SLOS["research"][0], 4 * SLOS["research"][1])}
    fig = widgets.split_figure(None, slos, {k: 2.0 for k in slos}, ratios=[(1, 1)], factors=(1.0,),
                               names={k: "research" for k in slos}, **SIM)
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == [f"workload: {tight}", f"workload: {loose}"]
    g = split_figures.split_grid(None, slos, {k: [2.0] for k in slos}, [(1, 1)], names={k: "research" for k in slos},
                                 **SIM)
    one = split_figures.split_grid(None, {"research": SLOS["research"]}, {"research": [2.0]}, [(1, 1)], **SIM)
    assert list(g[g.workload == tight].slo_attainment) == list(one.slo_attainment)  # the same runs, same SLOs
    assert (g[g.workload == loose].slo_attainment.values >= g[g.workload == tight].slo_attainment.values).all()
    plt.close("all")


# --- chapter 7 -------------------------------------------------------------------------------------------------

PLAN = dict(max_workers=2, chunk_tokens=())  # 2 colocated and 1P+1D: a plan in a fraction of a second


def test_pools_grid_labels_simulated_and_predicted_rows():
    g = pools.pools_grid(None, "research", 0.5, (0.05, 0.1), (0.5,), **PLAN)
    assert set(g.label) == {"simulated", "predicted (closed form)"}
    assert sorted(set(g.candidate)) == ["1P+1D", "2 coloc."]
    assert len(g) == 2 * 2 * 2
    p = pools.pools_plan(None, "research", 0.5, 0.05, 0.5, **PLAN)
    assert pools.pools_plan(None, "research", 0.5, 0.05, 0.5, **PLAN) is p  # remembered, not searched again
    best = g[(g.tpot_slo_s == 0.05) & (g.label == "simulated")].goodput_rps_per_worker.max()
    assert best == p.best.goodput_rps_per_worker > 0


def test_pools_explorer_and_figure_draw_the_grid(monkeypatch):
    drawn = []
    monkeypatch.setattr(pools, "candidates", lambda plan, **k: drawn.append(plan))
    _shown(monkeypatch)
    widgets.pools_explorer(None, "research", ttft_slo_s=0.5, tpot_slo_s=0.05, scale=0.5, **PLAN)
    g = pools.pools_grid(None, "research", 0.5, (0.05,), (0.5, 1.0), **PLAN)
    sim = g[(g.scale == 0.5) & (g.label == "simulated")].set_index("candidate").goodput_rps_per_worker
    assert {pools.short_name(c): c.goodput_rps_per_worker for c in drawn[0].candidates} == sim.to_dict()
    fig = widgets.pools_figure(None, "research", 0.5, (0.05,), scales=(0.5, 1.0), scale=0.5, **PLAN)
    bars = _visible(fig, "goodput, simulated")
    assert dict(zip(bars.x, bars.y)) == {phone_tick(n): g for n, g in sim.to_dict().items()}
    assert all(len(line) <= 5 for x in bars.x for line in x.split("<br>"))  # eight ticks fit a phone's column
    with pytest.raises(ValueError, match="must be among"):
        widgets.pools_figure(None, "research", 0.5, (0.05,), scales=(0.5,), scale=1.0, **PLAN)
    plt.close("all")


def test_split_figure_draws_each_case_against_its_own_colocated_contender():
    """ch06 (review of 2026-12-05): its loss was served live against colocated chunked prefill, but the explorer
    drew prefill-first for it, and left the chunked live run out (only prefill-first runs were measured dots)."""
    ex = serving.CostModelExecutor(None)
    chunked = dict(policy="chunked", chunk_tokens=256)
    live = split_figures.split_runs(ex, "research", 4.0, [(1, 1)], colocated=chunked, **SIM)
    assert live["2 colocated"].config.policy == "chunked" and live["2 colocated"].config.chunk_tokens == 256
    g = split_figures.split_grid(None, SLOS, {"research": [2.0]}, [(1, 1)], measured={"research": (4.0, live)},
                                 colocated={"research": chunked}, **SIM)
    coloc = g[g.layout == "colocated"]
    assert set(coloc.policy) == {"chunked"} and set(coloc.label) == {"simulated", "measured"}
    plain = split_figures.split_grid(None, SLOS, {"research": [2.0]}, [(1, 1)], measured={"research": (4.0, live)},
                                     **SIM)
    assert set(plain[plain.layout == "colocated"].label) == {"simulated"}  # a chunked live run is no pf-first dot
    both = {**SLOS, "code": (0.2, 0.05)}
    fig = widgets.split_figure(None, both, {w: 2.0 for w in both}, ratios=[(1, 1)], factors=(1.0,),
                               colocated={"code": chunked}, **SIM)
    names = {t.name for t in fig.data}
    assert {"colocated prefill-first, simulated", "colocated chunked, simulated"} <= names
    from splitlab.teach.figures.style import LAYOUT_COLORS
    assert next(t for t in fig.data if t.name == "colocated chunked, simulated").line.color == LAYOUT_COLORS["chunked"]
