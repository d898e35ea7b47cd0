"""Chapter 9 (from splitlab to production): the worked table's arithmetic, the experiments that diagnose users'
reports, the exercise checkers, and impossible combinations refused with clear errors by `plan` and the API
(issue 23 item 6). Everything on the analytic cost model: no torch, quick."""
from __future__ import annotations

import pytest

import splitlab as sl
from splitlab.cli import main
from splitlab.costmodel import roofline_cost_model
from splitlab.teach.figures import production as prod
from splitlab.teach.figures import production_pains as pains

KV_8B = 2 * 32 * 8 * 128 * 2  # bytes per token of Llama-3-8B in bf16


@pytest.fixture(scope="module")
def cost():
    return roofline_cost_model("Llama-3-8B", "H100", "bf16")


def test_a_worked_case_states_the_hand_off_load_the_planner_s_split_puts_on_a_decode_link():
    row, plan = prod.worked_case("Llama-3-8B", 2048, (1,), 3, max_requests=100, tolerance=0.1)
    assert row["case"] == "8B, 2k" and row["kv_gb"] == pytest.approx(2048 * KV_8B / 1e9)
    assert row["prefill_steps"] == pytest.approx(plan.chosen["t_p_s"] / plan.chosen["t_d_s"])
    assert row["prefill_steps"] > 1
    chunked = next(c for c in plan.candidates if c.name == "3 colocated chunked 512 (H100)")  # the colocated rival
    assert prod.compact(chunked) == "3 chunked TP1" and row["best_short"] == prod.compact(plan.ranked("cost")[0])
    split = next(c for c in plan.candidates if c.name == row["best_split"])
    parts = prod.split_parts(split)
    assert row["need_gb_s"] == pytest.approx(split.goodput_rps * row["kv_gb"] / (parts["y"] * split.handoff["lanes"]))
    table = prod.link_table(prod.worked_table([("Llama-3-8B", 2048, (1,), 3)], max_requests=100, tolerance=0.1)[0])
    pct = float(table.loc["8B, 2k", "% 100G"])  # the share of a 100 Gb/s NIC, 12.5 GB/s
    assert pct == pytest.approx(100 * row["need_gb_s"] / 12.5, rel=0.01)


def test_tp_mismatch_re_shards_the_heads_that_land_on_another_device(cost):
    t = pains.tp_mismatch("Llama-3-8B", 1000, pairs=((1, 1), (1, 4), (4, 1), (2, 4)))
    assert list(t.moved_share) == [0, 0.75, 0, 0.5]
    assert t.loc["TP1 -> TP4", "moved_mb"] == pytest.approx(0.75 * 1000 * KV_8B / 1e6)
    bare_ms = 1000 * KV_8B / 50e9 * 1e3  # over one 400 Gb/s lane
    assert t.loc["TP1 -> TP1", "handoff_ms"] == pytest.approx(bare_ms)
    assert t.loc["TP1 -> TP4", "handoff_ms"] == pytest.approx(bare_ms + 0.75 * 1000 * KV_8B / 450e9 * 1e3)
    with pytest.raises(ValueError, match="TP 3 does not divide"):
        pains.tp_mismatch("Llama-3-8B", 1000, pairs=((3, 1),))


def test_prefill_workers_into_one_decode_nic_queue_there(cost):
    t = pains.nic_queue(cost, 4096, rate_per_prefill=2.0, prefill_workers=(1, 4), n_requests=120)
    bare = 4096 * KV_8B / 12.5e9 * 1e3
    assert t.bare_ms.tolist() == pytest.approx([bare, bare])
    assert t.loc[1, "link_mean_ms"] == pytest.approx(bare, rel=0.01)  # alone: the transfer, no queue
    assert t.loc[4, "link_p90_ms"] > 1.2 * bare and t.loc[4, "nic_load"] == pytest.approx(4 * 2.0 * bare / 1e3)


def test_a_one_to_one_split_of_short_prompts_leaves_its_prefill_gpu_partly_idle(cost):
    idle = pains.idle_prefill(cost, "chat", max_requests=200)
    assert set(idle["utilization"]) == {"P0", "D0"}
    assert 0 < idle["utilization"]["P0"] < idle["utilization"]["D0"] <= 1
    assert idle["goodput"]["1P+1D"] < idle["goodput"]["2 colocated"]
    assert idle["rate"] == pytest.approx(2 * idle["goodput"]["1P+1D"])


def test_chapter_9_checkers(cost, capsys):
    need = 3.0 * 8192 * KV_8B / 2 / 1e9
    assert sl.check.handoff_gb_per_s(need, "Llama-3-8B", 8192, 3.0, decode_links=2)
    assert not sl.check.handoff_gb_per_s(2 * need, "Llama-3-8B", 8192, 3.0, decode_links=2)
    assert sl.check.resharded_share(0.75, "Llama-3-70B", 2, 8)
    assert not sl.check.resharded_share(0.5, "Llama-3-70B", 2, 8)
    assert not sl.check.resharded_share(None, "Llama-3-70B", 2, 8)
    spec = sl.serving.WorkloadSpec("8k", sl.serving.Fixed(4096), sl.serving.Fixed(16))
    ex = sl.serving.CostModelExecutor(cost)
    res = sl.serving.run(sl.serving.workload_requests(spec, 20, 4.0, ex, scale=1.0),
                         sl.serving.ServingConfig.disaggregated(2, 1, trace=False,
                                                                **sl.serving.link_fields("100 Gb/s network")), ex)
    mean_ms = 1e3 * sum(sl.serving.metrics.link_s(r) for r in res.requests) / len(res.requests)
    assert mean_ms > 0 and sl.check.mean_handoff_ms(mean_ms, res)
    capsys.readouterr()


@pytest.mark.parametrize("argv, message", [
    (["--model-config", "Llama-3-70B", "--tp", "1"],
     "no TP degree of [1] serves Llama-3-70B on H100: TP 1: Llama-3-70B in bf16 does not fit one H100"),
    (["--model-config", "Llama-3-8B", "--tp", "3", "--max-workers", "6"], "TP 3 does not divide Llama-3-8B's 32"),
    (["--model-config", "Llama-3-8B", "--tp", "4", "--max-workers", "6"],
     "--max-workers counts devices with pool options: from 2 x the smallest --tp (8: a prefill and a decode worker)"),
    (["--model-config", "Llama-3-8B", "--max-workers", "40"], "to 16, got 40"),
])
def test_plan_refuses_impossible_pools_in_one_line(argv, message, capsys):
    """A TP that does not divide the heads, a GPU without the memory for its shard, more devices than a split's
    two workers can have: a usage error (exit status 2) and one line saying why, naming no argument the command
    line lacks."""
    rc = main(["plan", "--prefill-gpu", "H100", "--decode-gpu", "H100", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err and "max_devices" not in err


def _phone_ok(fig):
    from splitlab.teach.figures import phone
    small = [(round(pt, 1), text) for pt, text in phone.phone_texts(fig) if pt < phone.MIN_PT]
    assert not small, f"texts below {phone.MIN_PT} pt on a phone: {small[:5]}"
    assert phone.panel_columns(fig) <= phone.MAX_COLUMNS
    assert not phone.overlapping_texts(fig), phone.overlapping_texts(fig)[:5]
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel(), "every axis says what it shows"


def test_chapter_9_figures_read_on_a_phone(cost):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    from splitlab.planning.hetero import plan_pools
    from splitlab.teach.notebook import BOOK_STYLE, rc_style

    table = pd.DataFrame({"need_gb_s": [6.5, 7.9, 2.3, 2.2]}, index=["8B, 2k", "8B, 8k", "70B, 2k", "70B, 8k"])
    nic = pd.DataFrame({"bare_ms": [83.0] * 3, "link_mean_ms": [83.0, 93.0, 107.0],
                        "link_p90_ms": [83.0, 136.0, 173.0]},
                       index=pd.Index([1, 2, 4], name="prefill_workers"))
    plan = plan_pools("Llama-3-8B", "H100", "A100-80GB", max_devices=3, ttft_slo_s=0.3, tpot_slo_s=0.05,
                      max_requests=100, tolerance=0.1)  # no cap: the KV budget, as chapter 9 plans
    with rc_style(BOOK_STYLE):
        for ax in (prod.link_need(table), pains.nic_figure(nic), prod.pool_costs(plan)):
            _phone_ok(ax.figure)
            plt.close(ax.figure)
