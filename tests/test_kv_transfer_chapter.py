"""Chapter 5 (moving the KV cache): the published link table, the transfer formulas in splitlab.sizing, the
chapter's checkers, and smoke runs of its figures and explorer (model-free: no process is started here)."""
from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from splitlab import sizing
from splitlab.teach import check
from splitlab.teach.figures import transfer as transfer_plots  # noqa: E402


# --- the link table -----------------------------------------------------------------------------------------

def test_links_one_direction_with_sources():
    gbps = {k: v["bandwidth_bytes_per_s"] / 1e9 for k, v in sizing.LINKS.items()}
    assert gbps == {"PCIe 4.0 x16": 32, "PCIe 5.0 x16": 64, "NVLink 3 (A100)": 300,
                    "NVLink 4 (H100)": 450, "25 Gb/s network": 3.125, "100 Gb/s network": 12.5,
                    "400 Gb/s network": 50}
    for name, link in sizing.LINKS.items():
        assert link["source"] and link["note"] and link["kind"], name
    assert "900" in sizing.LINKS["NVLink 4 (H100)"]["note"]  # the datasheet's total of both directions
    assert "600" in sizing.LINKS["NVLink 3 (A100)"]["note"]
    assert sizing.LINKS["100 Gb/s network"]["bandwidth_bytes_per_s"] == 100e9 / 8  # bits -> bytes


# --- formulas ---------------------------------------------------------------------------------------------

def test_transfer_time_and_fit_recover_latency_and_bandwidth():
    assert sizing.transfer_time_s(2e9, 1e9, 0.5) == 2.5
    with pytest.raises(ValueError):
        sizing.transfer_time_s(1, 0)
    n = np.array([1, 2, 4, 8, 16, 32]) * 2**20
    latency, bandwidth = sizing.fit_latency_bandwidth(n, 3e-4 + n / 2.5e9)
    assert latency == pytest.approx(3e-4) and bandwidth == pytest.approx(2.5e9)
    latency, bandwidth = sizing.fit_latency_bandwidth(n, n / 2e9 * (1 + 0.01 * np.cos(np.arange(6))) - 1e-5)
    assert latency >= 0 and bandwidth == pytest.approx(2e9, rel=0.03)  # negative intercept clipped
    with pytest.raises(ValueError):
        sizing.fit_latency_bandwidth([1, 1], [1, 2])


def test_streamed_exposed_one_layer_when_the_link_keeps_up_else_the_backlog():
    # 4 layers, prefill 40 ms (10 ms per layer); 4 MB at 1 GB/s = 1 ms per layer: only the last layer is left
    assert sizing.streamed_exposed_s(0.040, 4e6, 4, 1e9) == pytest.approx(0.001)
    assert sizing.streamed_exposed_s(0.040, 4e6, 4, 1e9, latency_s=1e-4) == pytest.approx(0.0011)
    # 400 MB: 100 ms per layer, the link is the bottleneck: ready at 10 ms, then 4 x 100 ms, minus the 40 ms prefill
    assert sizing.streamed_exposed_s(0.040, 4e8, 4, 1e9) == pytest.approx(0.010 + 0.400 - 0.040)
    assert sizing.streamed_exposed_s(0.040, 4e8, 1, 1e9) == pytest.approx(0.400)  # one layer: nothing hidden


def test_handoff_llama3_8b_over_pcie4():
    h = sizing.handoff("Llama-3-8B", 2048, "PCIe 4.0 x16", "H100")
    assert h["kv_bytes"] == 2048 * 131_072
    assert h["transfer_s"] == pytest.approx(2048 * 131_072 / 32e9)
    step = (8.03e9 * 2 + 2048 * 131_072) / 3.35e12
    assert h["decode_step_s"] == pytest.approx(step)
    assert h["decode_steps"] == pytest.approx(h["transfer_s"] / step)
    assert 0 < h["prefill_share"] < 1  # every published link moves it faster than the prefill computed it
    assert sizing.handoff("Llama-3-8B", 2048, 32e9)["transfer_s"] == h["transfer_s"]  # bytes/s instead of a name


# --- checkers ---------------------------------------------------------------------------------------------

def test_kv_transfer_bytes_checker():
    assert check.kv_transfer_bytes(2048 * 131_072, "Llama-3-8B", 2048)
    assert not check.kv_transfer_bytes(2048 * 524_288, "Llama-3-8B", 2048)  # query heads instead of KV heads
    assert not check.kv_transfer_bytes(None, "Llama-3-8B", 2048)
    assert check.kv_transfer_bytes(2 * 2048 * 2048, "tiny", 2048, dtype="float32", batch=2)


def test_link_and_decode_step_checkers():
    seconds = 2048 * 131_072 / 12.5e9
    assert check.link_transfer_seconds(seconds, "Llama-3-8B", 2048, "100 Gb/s network")
    assert not check.link_transfer_seconds(seconds / 8, "Llama-3-8B", 2048, "100 Gb/s network")  # bits vs bytes
    step = sizing.min_decode_step_s(8.03e9 * 2, 2048 * 131_072, 3.35e12)
    assert check.transfer_decode_steps(seconds / step, "Llama-3-8B", 2048, "100 Gb/s network", "H100")
    assert not check.transfer_decode_steps(1.0, "Llama-3-8B", 2048, "100 Gb/s network", "H100")


def test_streamed_exposed_checker():
    assert check.streamed_exposed(0.001, 0.040, 4e6, 4, 1e9)
    assert not check.streamed_exposed(0.004, 0.040, 4e6, 4, 1e9)  # the whole transfer: nothing hidden
    assert not check.streamed_exposed("soon", 0.040, 4e6, 4, 1e9)


# --- figures and the explorer ---------------------------------------------------------------------------------

def _labelled(ax) -> None:
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()


def test_transfer_figures_draw_with_labels():
    _labelled(transfer_plots.kv_bytes_vs_prompt(["Llama-2-7B", "Llama-3-8B", "StarCoder-15B"]))
    _labelled(transfer_plots.kv_bytes_vs_prompt({"tiny": "float32", "tiny-mqa": "float32"}, max_tokens=2048,
                                                measured={"tiny": ([128, 512], [128 * 2048, 512 * 2048])},
                                                unit=2**20))
    _labelled(transfer_plots.bandwidth_bars({"here": 2e9}))
    n = np.array([1, 4, 16]) * 2**20
    _labelled(transfer_plots.transfer_vs_bytes({"raw": (n, 1e-4 + n / 2e9)}, 1e-4, 2e9))
    _labelled(transfer_plots.handoff_bars("Llama-3-8B", 2048, extra={"here": 2e9}))
    plt.close("all")


def test_kv_transfer_explorer_draws_its_static_figure(monkeypatch):
    from splitlab.teach import widgets
    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(plt.gcf()))
    box = widgets.kv_transfer_explorer("Llama-3-8B", 2048, "PCIe 4.0 x16", measured={"here": 2e9})
    assert shown and len(shown[0].axes) == 2
    assert [w.description for w in box.children[0].children] == ["model", "prompt", "link"]
    assert "here" in box.children[0].children[2].options
    plt.close("all")
