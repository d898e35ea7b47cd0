"""A tie of chapter 7's map served in one sitting (splitlab.teach.figures.map_steady_tie_sitting, issue 22 item 3):
the grid is served seed by seed, both layouts in turn; a goodput is read where the mean attainment crosses 90%; the
ratio's verdict calls equal goodputs a tie and goodputs a fifth apart no tie, on seeds that scatter; bad input is
refused before any run."""
from __future__ import annotations

import math
import random

import pandas as pd
import pytest

import splitlab.serving as serving
from splitlab.teach.figures import map_steady_tie_sitting as S
from test_map_steady_tie import CHUNKED, SPLIT, _tie


def _fake(monkeypatch, knee_of) -> list:
    """attainment_curve on the tiny cell answering 100% below knee_of(layout, seed) (a rate per worker), 40% past
    it; returns the log of (layout, share of 20/s, seed) served."""
    served = []

    def fake(spec, cfg, backend, **k):
        rate, name = k["rates_per_worker"][0], CHUNKED if cfg.layout == "colocated" else SPLIT
        assert isinstance(backend, serving.ModelExecutor) and k["max_requests"] == 12
        served.append((name, round(rate / 20.0, 6), k["seed"]))
        return pd.DataFrame([dict(attainment=1.0 if rate < knee_of(name, k["seed"]) else 0.4)])
    monkeypatch.setattr(serving, "attainment_curve", fake)
    return served


def test_a_sitting_serves_every_rung_seed_by_seed_both_layouts_in_turn(lm, monkeypatch):
    served = _fake(monkeypatch, lambda n, s: 19.0)
    kept = []
    out = S.serve_sitting(_tie(), lm, shares=(0.8, 1.0), seeds=(5, 6), on_seed=lambda x: kept.append(len(x["seeds"])))
    # at every rung each layout goes first on every other seed, on an even grid too
    assert served == [(SPLIT, 0.8, 5), (CHUNKED, 0.8, 5), (CHUNKED, 1.0, 5), (SPLIT, 1.0, 5),
                      (CHUNKED, 0.8, 6), (SPLIT, 0.8, 6), (SPLIT, 1.0, 6), (CHUNKED, 1.0, 6)]
    assert kept == [1, 2] and out["seeds"] == out["plan"] == [5, 6] and out["shares"] == [0.8, 1.0]
    assert out["measured"] == {SPLIT: [[100.0, 40.0]] * 2, CHUNKED: [[100.0, 40.0]] * 2}
    assert out["geomean_per_worker"] == pytest.approx(20.0) and len(out["load_average"]) == 2 and out["cpu_s"] >= 0
    # 90% crossed a sixth of the way from 0.8 (100%) to 1.0 (40%)
    assert S.goodputs(out)[SPLIT] == pytest.approx(0.8 + 10 / 60 * 0.2)
    assert S.sitting_outcome(out) == "matches: a tie"  # the same knee on every seed: every resample reads a ratio of 1


def test_crossing_reads_the_first_rung_missed():
    assert S.crossing([0.8, 0.9, 1.0], [100, 80, 95]) == pytest.approx(0.85)  # held again at 1.0: not counted
    assert S.crossing([0.8, 0.9], [85, 20]) == 0.0 and S.crossing([0.8, 0.9], [95, 90]) == math.inf
    with pytest.raises(ValueError, match="one attainment per share"):
        S.crossing([0.8, 0.9], [95])


def _sitting(knees: dict, seeds=8, shares=S.SITTING_SHARES, rng=None) -> dict:
    """A sitting of a noisy knee per (layout, seed): attainment 100% below it, falling 15 points per 0.01 of share
    past it, a few points of noise everywhere (the ladder's runs scatter so)."""
    rng = rng or random.Random(1)
    measured = {}
    for n, knee in knees.items():
        rows = []
        for _ in range(seeds):
            k = knee * math.exp(rng.gauss(0, 0.04))  # a seed's own knee
            rows.append([max(0.0, min(100.0, 100 - max(0.0, s - k) * 1500 + rng.gauss(0, 3))) for s in shares])
        measured[n] = rows
    return dict(shares=list(shares), seeds=list(range(12, 12 + seeds)), plan=list(range(12, 12 + seeds)),
                geomean_per_worker=20.0, measured=measured,
                load_average=[1.0] * seeds, started_utc="2026-12-06 09:18 UTC", ended_utc="2026-12-06 10:20 UTC",
                cpu_s=0.0)


@pytest.mark.parametrize("knees, said", [
    ({SPLIT: 0.92, CHUNKED: 0.92}, "matches: a tie"),
    ({SPLIT: 0.85, CHUNKED: 0.88}, "matches: a tie"),  # 3.5% apart
    ({SPLIT: 1.05, CHUNKED: 0.84}, "does not match"),  # a fifth apart
    ({SPLIT: 1.30, CHUNKED: 0.84}, "does not match"),  # above the grid: at least 1.2, a ratio at most 0.7
    ({SPLIT: 1.30, CHUNKED: 1.15}, "undecided"),  # above the grid, 1.15 at least 0.9 of 1.2 but not of 1.3
])
def test_the_ratio_calls_equal_goodputs_a_tie_and_a_fifth_apart_no_tie(knees, said):
    """Unlike the ladder's brackets a rung wide, equal goodputs are called a tie (the design's power, on seeds
    scattering as the ladder's did)."""
    calls = [S.sitting_outcome(_sitting(knees, rng=random.Random(r))) for r in range(5)]
    assert calls.count(said) >= 4, calls


def test_the_interval_holds_the_ratio_and_the_support_sums_to_one():
    sitting = _sitting({SPLIT: 0.92, CHUNKED: 0.92})
    i = S.interval(sitting)
    assert i["lo"] <= S.ratio(S.goodputs(sitting)) <= i["hi"] and 0.9 <= i["lo"] and i["hi"] <= 1 / 0.9
    assert i["off_grid"] == 0
    assert sum(S.support(sitting, resamples=50).values()) == pytest.approx(1.0)


def test_a_goodput_off_the_grid_is_only_a_bound():
    grid = (0.7, 1.2)
    assert math.isnan(S.ratio({SPLIT: 0.0, CHUNKED: 0.9}))
    assert S.ratio({SPLIT: 0.8, CHUNKED: 0.9}) == pytest.approx(1.125)
    assert S.ratio_range({SPLIT: 0.0, CHUNKED: 0.9}, grid) == (pytest.approx(0.9 / 0.7), math.inf)
    assert S.ratio_range({SPLIT: math.inf, CHUNKED: 0.9}, grid) == (0.0, pytest.approx(0.75))
    assert S.ratio_range({SPLIT: 0.0, CHUNKED: math.inf}, grid) == (pytest.approx(1.2 / 0.7), math.inf)


def test_a_sitting_stopped_early_gives_no_verdict_and_goes_on_from_its_seeds(lm, monkeypatch):
    served = _fake(monkeypatch, lambda n, s: 19.0)
    kept = []
    with pytest.raises(KeyboardInterrupt):
        def stop(x):
            kept.append({**x, "seeds": list(x["seeds"]), "measured": {k: list(v) for k, v in x["measured"].items()},
                         "load_average": list(x["load_average"])})
            if len(x["seeds"]) == 2:
                raise KeyboardInterrupt
        S.serve_sitting(_tie(), lm, shares=(0.8, 1.0), seeds=(5, 6, 7), on_seed=stop)
    part = kept[-1]
    assert part["seeds"] == [5, 6] and part["plan"] == [5, 6, 7] and not S.complete(part)
    assert S.sitting_outcome(part) == "undecided"  # a tie on its two seeds, but a third was planned
    del served[:]
    out = S.serve_sitting(_tie(), lm, resume=part)
    assert [s for _, _, s in served] == [7] * 4 and served[0][0] == SPLIT  # seed index 2, rung 0: the winner first
    assert out["seeds"] == [5, 6, 7] and S.complete(out) and len(out["resumed_utc"]) == 1
    assert S.sitting_outcome(out) == "matches: a tie" and out["cpu_s"] >= part["cpu_s"]
    with pytest.raises(ValueError, match="served all its 3 seeds"):
        S.serve_sitting(_tie(), lm, resume=out)
    with pytest.raises(ValueError, match="give no shares or seeds"):
        S.serve_sitting(_tie(), lm, resume=part, seeds=(5, 6, 7))
    with pytest.raises(TypeError, match="on_seed must be callable"):
        S.serve_sitting(_tie(), lm, on_seed="keep")


def test_chapter_7s_method_says_the_sittings_own_grid_and_rule():
    """The method paragraph's numbers are typed: they must be the module's constants."""
    import json
    from pathlib import Path
    from splitlab.teach.figures import map_steady_tie_read as R
    nb = json.loads((Path(__file__).resolve().parents[1] / "book" / "07_sizing_pools.ipynb").read_text())
    text = " ".join("".join(c["source"]) for c in nb["cells"] if "in one sitting" in "".join(c["source"]))
    text = " ".join(text.split())
    shares = S.SITTING_SHARES
    steps = {round(b - a, 6) for a, b in zip(shares, shares[1:])}
    assert f"{shares[0]:.2f}x to {shares[-1]:.2f}x" in text and f"in steps of {steps.pop():.2f}x" in text and not steps
    assert f"the map's {R.TOLERANCE:.0%} of the winner's" in text
    assert f"runner-up's {1 - R.TOLERANCE:.0%} to {1 / (1 - R.TOLERANCE):.0%} of it" in text
    assert f"only where {R.CONFIDENCE:.0%} of {R.RESAMPLES:,} bootstrap resamples" in text
