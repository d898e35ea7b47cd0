"""Defaults that show the phenomenon (issue 18, item 5): where the user gives no SLO or rate, ``serve``, ``compare``,
``simulate`` and ``plan`` (and ``sl.planner.plan``) choose them from the device's cost model by chapter 6's rule,
say what they chose and why, and a run at those defaults meets its SLOs (the README's examples gave 0-2%
attainment on a busy 2-core CPU: fixed SLOs of 1 s and 0.1 s, 2 requests/s)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import splitlab as sl
from conftest import cli
from splitlab import costmodel
from splitlab.costmodel import CostModel
from splitlab.planning.defaults import RATE_SHARE, TPOT_STEPS, TTFT_PREFILLS, choose_defaults
from splitlab.serving import CostModelExecutor, ServingConfig, goodput, workload_requests

#: a device 5x slower than the built-in cost model (a busy CPU): fixed SLOs of 1 s and 0.1 s would mean nothing
SLOW = CostModel(prefill_base_s=0.01, prefill_per_token_s=3.5e-4, decode_base_s=0.015, decode_per_seq_s=1e-3,
                 decode_per_token_s=2.5e-7, source="a slow CPU")


def _json(*args):
    status, out, err = cli(*args, "--json")
    assert status == 0, err
    return json.loads(out)


def test_the_slos_are_chapter_6s_five_mean_prefills_and_two_and_a_half_decode_steps():
    chosen = choose_defaults(SLOW, "research")
    reqs = workload_requests("research", 400, 1.0, CostModelExecutor(SLOW))
    prompts = np.array([r.prompt_len for r in reqs])
    t_p = np.mean([SLOW.prefill_s(int(n)) for n in prompts])
    assert chosen.ttft_slo_s == pytest.approx(TTFT_PREFILLS * t_p, rel=5e-3)   # 3 significant digits
    assert chosen.tpot_slo_s == pytest.approx(TPOT_STEPS * SLOW.decode_s(1, prompts.mean()), rel=5e-3)
    assert chosen.rate_per_s is None and chosen.derived == ["ttft_slo_s", "tpot_slo_s"]
    assert sl.planning.choose_defaults is choose_defaults  # as the README's quick tour calls it
    kept = choose_defaults(SLOW, "research", ttft_slo_s=2.0)
    assert kept.ttft_slo_s == 2.0 and kept.derived == ["tpot_slo_s"] and len(kept.why) == 1


def test_the_rate_is_70_percent_of_the_lowest_goodput():
    one = {"4 colocated": ServingConfig.colocated(4)}
    chosen = choose_defaults(SLOW, "chat", one, rate=True)
    g = goodput(workload_requests("chat", 400, 1.0, CostModelExecutor(SLOW)), one["4 colocated"],
                CostModelExecutor(SLOW), ttft_slo_s=chosen.ttft_slo_s, tpot_slo_s=chosen.tpot_slo_s,
                min_requests=100, max_requests=400, prefixes=True)
    assert chosen.rate_per_s == pytest.approx(RATE_SHARE * g.goodput_rps, rel=5e-3)  # 3 significant digits
    two = sl.serving.contenders(None, 1, 1)
    pair = choose_defaults(SLOW, "research", two, rate=True)
    reqs = workload_requests("research", 400, 1.0, CostModelExecutor(SLOW))
    lowest = min(goodput(reqs, cfg, CostModelExecutor(SLOW), ttft_slo_s=pair.ttft_slo_s, tpot_slo_s=pair.tpot_slo_s,
                         min_requests=100, max_requests=400, prefixes=True).goodput_rps for cfg in two.values())
    assert pair.rate_per_s == pytest.approx(RATE_SHARE * lowest, rel=5e-3) and "; the lowest)" in pair.why[-1]
    with pytest.raises(ValueError, match="needs the layouts"):
        choose_defaults(SLOW, "chat", rate=True)


def test_simulate_on_a_slow_calibration_meets_its_slos_at_the_defaults(tmp_path):
    # the README's `simulate --cost tiny.json --workers 4` gave 2% attainment, TTFT P50 52 s
    path = tmp_path / "slow.json"
    cal = costmodel.Calibration(SLOW, {}, dict(model="tiny", device="cpu", dtype="float32", torch="x",
                                               date="2026-12-03"))
    pre = [dict(tokens=n, squares=n * n, prefill_s=SLOW.prefill_s(n)) for n in (16, 64, 160, 400)]
    dec = [dict(batch=b, context_tokens=b * c, batched=int(b > 1), step_s=SLOW.decode_s(b, b * c))
           for b in (1, 2, 4) for c in (32, 96)]
    cal.fits = {"prefill": costmodel.fit_prefill(pre), "decode": costmodel.fit_decode(dec),
                "transfer": costmodel.fit_transfer([dict(nbytes=n, seconds=SLOW.transfer_s(n))
                                                    for n in (1 << 16, 1 << 20)])}
    costmodel.save(cal, path)
    data = _json("simulate", "--cost", str(path), "--workers", "4", "--requests", "1000")
    chosen = data["chosen"]
    assert chosen["derived"] == ["ttft_slo_s", "tpot_slo_s", "rate_per_s"]
    assert data["rate_per_s"] == chosen["rate_per_s"] and data["ttft_slo_s"] == chosen["ttft_slo_s"]
    assert data["colocated"]["slo_attainment"] >= 0.9
    status, out, _ = cli("simulate", "--cost", str(path), "--workers", "4", "--requests", "1000")
    assert "chosen: TTFT SLO" in out and "chosen: set them with --ttft-slo, --tpot-slo, --rate" in out


def test_given_slos_and_rate_are_kept_and_nothing_is_said():
    data = _json("simulate", "--requests", "50", "--rate", "3", "--ttft-slo", "1", "--tpot-slo", "0.1")
    assert data["chosen"] is None and (data["rate_per_s"], data["ttft_slo_s"], data["tpot_slo_s"]) == (3, 1, 0.1)
    status, out, _ = cli("simulate", "--requests", "50", "--rate", "3", "--ttft-slo", "1", "--tpot-slo", "0.1")
    assert status == 0 and "chosen:" not in out


def test_compare_at_the_defaults_meets_the_slos_in_both_layouts_and_shows_how():
    data = _json("compare", "--backend", "simulated", "--workload", "research", "--requests", "400")
    assert "every layout should meet them" in data["chosen"]["why"][2]
    assert data["colocated"]["slo_attainment"] >= 0.9 and data["disaggregated"]["slo_attainment"] >= 0.9
    assert data["disaggregated"]["tpot_s"]["p90"] < data["colocated"]["tpot_s"]["p90"]  # no prefill stalls decode
    assert data["colocated"]["ttft_s"]["p50"] < data["disaggregated"]["ttft_s"]["p50"]  # prefills on both workers


def test_plan_chooses_its_slos_and_says_so():
    p = sl.planner.plan(SLOW, "research", max_workers=2, chunk_tokens=(), progress=False)
    again = choose_defaults(SLOW, "research")
    assert (p.ttft_slo_s, p.tpot_slo_s) == (again.ttft_slo_s, again.tpot_slo_s)
    assert p.chosen["why"] == again.why and p.to_json()["chosen"] == p.chosen
    assert sl.planner.plan(SLOW, "research", 1.0, 0.1, max_workers=2, chunk_tokens=(), progress=False).chosen is None
    data = _json("plan", "--workload", "research", "--max-workers", "2", "--chunk-tokens", "128")
    assert data["chosen"]["derived"] == ["ttft_slo_s", "tpot_slo_s"] and data["best"]["goodput_rps_per_worker"] > 0


def test_serve_of_the_real_model_measures_this_device_for_its_defaults():
    data = _json("serve", "--requests", "4", "--workload", "code", "--max-batch", "4")
    chosen = data["chosen"]
    assert chosen["why"][-1].startswith("from a quick measurement of tiny on this device")
    assert 0 < chosen["t_p_s"] < chosen["ttft_slo_s"] and 0 < chosen["t_d_s"] < chosen["tpot_slo_s"]
    assert data["rate_per_s"] == chosen["rate_per_s"] > 0 and data["colocated"]["completed"] == 4
