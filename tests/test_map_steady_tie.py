"""A tie of chapter 7's map tested by a ladder of rates (splitlab.teach.figures.map_steady_tie, issue 22 item 3):
the ladder climbs or descends until each layout's goodput is bracketed, serving both layouts in turn; the brackets
and the verdict read the tolerance; the words are computed from the rungs; bad input is refused early; one ladder
served on the tiny model."""
from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest

import splitlab.serving as serving
from splitlab.teach.figures import map_steady_text
from splitlab.teach.figures import map_steady_tie as T
from splitlab.teach.figures import map_steady_tie_words as W
from test_map_steady import _steady
from test_pools_live import NAMES

SPLIT, CHUNKED = NAMES["split"], NAMES["chunked"]


def _tie(seeds=(0, 1, 2), ladder=None):
    c = _steady("tie", SPLIT, CHUNKED, measured=((100, 100),) * 3, predicted=((100, 100),) * 3)
    c.seeds = list(seeds)
    c.goodput_now = {SPLIT: 16.0, CHUNKED: 25.0}  # geometric mean 20
    c.rate_per_worker = 17.0  # 0.85 of it
    c.extra = dict(output_tokens=8, min_requests=8, max_requests=12)
    if ladder is not None:
        c.extra["ladder"] = ladder
    return c


def _ladder(split, chunked, mean=20.0):
    rungs = lambda rows: [dict(share=s, rate_per_worker=s * mean, measured=[float(a) for a in m]) for s, m in rows]
    return dict(step=0.05, geomean_per_worker=mean, served={SPLIT: rungs(split), CHUNKED: rungs(chunked)})


def _fake_live(monkeypatch, knees: dict) -> list:
    """attainment_curve on a ModelExecutor answers 100% below a layout's knee (rate per worker) and 40% at or past
    it; returns the log of (layout, rate, seed) served."""
    served = []

    def fake(spec, cfg, backend, **k):
        rate, name = k["rates_per_worker"][0], CHUNKED if cfg.layout == "colocated" else SPLIT
        assert cfg.layout == "disaggregated" or cfg.policy == "chunked" and cfg.chunk_tokens == 256
        served.append((name, round(rate, 6), k["seed"]))
        assert isinstance(backend, serving.ModelExecutor) and k["max_requests"] == 12 and k["scale"] == 1.0
        return pd.DataFrame([dict(attainment=1.0 if rate < knees[name] else 0.4)])
    monkeypatch.setattr(serving, "attainment_curve", fake)
    return served


def test_the_ladder_climbs_a_layout_that_holds_and_descends_one_that_does_not(lm, monkeypatch):
    served = _fake_live(monkeypatch, {SPLIT: 19.5, CHUNKED: 16.5})  # split fails from 1.0 of 20, chunked at 0.85
    out = T.tie_ladder(_tie(), lm)
    shares = {n: [r["share"] for r in v] for n, v in out["served"].items()}
    assert shares == {SPLIT: [0.85, 0.9, 0.95, 1.0], CHUNKED: [0.85, 0.8]}
    assert out["geomean_per_worker"] == pytest.approx(20.0) and out["step"] == 0.05 and out["cpu_s"] >= 0
    # both layouts in turn per seed, the first alternating (ABBA), while both still climb or descend
    assert [(n, s) for n, _, s in served[:6]] == [(SPLIT, 0), (CHUNKED, 0), (CHUNKED, 1), (SPLIT, 1), (SPLIT, 2),
                                                  (CHUNKED, 2)]
    assert len(served) == 3 * (4 + 2)
    assert T.brackets(out) == {SPLIT: (0.95, 1.0), CHUNKED: (0.8, 0.85)}
    assert T.ladder_outcome(out) == "does not match"  # chunked's goodput at most 0.85 / 0.95 = 89% of the split's


def test_a_layout_never_bracketed_stops_after_its_rungs(lm, monkeypatch):
    _fake_live(monkeypatch, {SPLIT: 1e9, CHUNKED: 18.5})
    out = T.tie_ladder(_tie(), lm, rungs=3)
    assert [r["share"] for r in out["served"][SPLIT]] == [0.85, 0.9, 0.95]
    assert T.brackets(out)[SPLIT] == (0.95, math.inf) and T.ladder_outcome(out) == "undecided"


def _fake_seeds(monkeypatch, knees: dict) -> list:
    """attainment_curve answering 100% below a (layout, seed)'s knee (rate per worker), 40% at or past it."""
    served = []

    def fake(spec, cfg, backend, **k):
        rate, name = k["rates_per_worker"][0], CHUNKED if cfg.layout == "colocated" else SPLIT
        served.append((name, round(rate, 6), k["seed"]))
        return pd.DataFrame([dict(attainment=1.0 if rate < knees[name][k["seed"]] else 0.4)])
    monkeypatch.setattr(serving, "attainment_curve", fake)
    return served


def test_the_ladder_goes_on_until_every_resample_brackets_a_goodput(lm, monkeypatch):
    """A mean under 90% is not enough: the ladder climbs until every seed misses its highest rung and descends until
    every seed holds its lowest, so no bootstrap resample leaves a bracket open."""
    _fake_seeds(monkeypatch, {SPLIT: [18.5, 19.5, 21.5], CHUNKED: [16.5, 18.5, 18.5]})  # shares of 20
    out = T.tie_ladder(_tie(), lm)
    shares = {n: [r["share"] for r in v] for n, v in out["served"].items()}
    # split: the mean misses at 0.95 (60%), seed 2 holds until 1.05; chunked: seed 0 misses 0.85, all hold 0.8
    assert shares == {SPLIT: [0.85, 0.9, 0.95, 1.0, 1.05, 1.1], CHUNKED: [0.85, 0.9, 0.95, 0.8]}
    for sample in itertools.product(range(3), repeat=3):  # every resample's brackets closed at both ends
        assert all(0 < lo < hi < math.inf for lo, hi in T.brackets(out, list(sample)).values())


def test_a_ladder_resumed_keeps_its_rungs_and_serves_only_the_missing(lm, monkeypatch):
    _fake_seeds(monkeypatch, {SPLIT: [18.5, 19.5, 21.5], CHUNKED: [16.5, 18.5, 18.5]})
    first = T.tie_ladder(_tie(), lm, rungs=3)
    assert [r["share"] for r in first["served"][SPLIT]] == [0.85, 0.9, 0.95]
    served = _fake_seeds(monkeypatch, {SPLIT: [18.5, 19.5, 21.5], CHUNKED: [16.5, 18.5, 18.5]})
    out = T.tie_ladder(_tie(), lm, resume=first)
    assert {(n, r) for n, r, _ in served} == {(CHUNKED, 16.0), (SPLIT, 20.0), (SPLIT, 21.0), (SPLIT, 22.0)}
    assert out["served"][SPLIT][:3] == first["served"][SPLIT] and out["cpu_s"] >= first["cpu_s"]
    assert [r["share"] for r in out["served"][CHUNKED]] == [0.85, 0.9, 0.95, 0.8]
    assert T.tie_ladder(_tie(), lm, resume=out)["served"] == out["served"]  # nothing left: nothing served
    with pytest.raises(ValueError, match="give no start or step"):
        T.tie_ladder(_tie(), lm, resume=first, step=0.05)
    with pytest.raises(ValueError, match="a ladder of another cell"):
        T.tie_ladder(_tie(), lm, resume=dict(first, geomean_per_worker=21.0))
    with pytest.raises(ValueError, match="on its 2 seeds"):  # a ladder naming no seeds: the cell's
        T.tie_ladder(_tie(seeds=(0, 1)), lm, resume={k: v for k, v in first.items() if k != "seeds"})
    with pytest.raises(ValueError, match=r"the cell's \[0, 5\] first"):
        T.tie_ladder(_tie(seeds=(0, 5)), lm, resume=first)
    with pytest.raises(ValueError, match="cpu_s"):
        T.tie_ladder(_tie(), lm, resume=dict(first, cpu_s=float("nan")))


def test_seeds_added_to_a_ladder_are_served_on_every_rung_first_then_the_ladder_goes_on(lm, monkeypatch):
    """more_seeds: the new seeds on each rung served, rung by rung in rate order and the layouts in turn, before
    the ladder climbs or descends again over all its seeds; the ladder served before is left as it was."""
    knees = {SPLIT: [18.5, 19.5, 21.5, 19.5, 22.5], CHUNKED: [16.5, 18.5, 18.5, 18.5, 17.5]}
    _fake_seeds(monkeypatch, knees)
    first = T.tie_ladder(_tie(), lm)
    shares = {n: [r["share"] for r in v] for n, v in first["served"].items()}
    assert first["seeds"] == [0, 1, 2] and shares == {SPLIT: [0.85, 0.9, 0.95, 1.0, 1.05, 1.1],
                                                      CHUNKED: [0.85, 0.9, 0.95, 0.8]}
    served = _fake_seeds(monkeypatch, knees)
    out = T.tie_ladder(_tie(), lm, resume=first, more_seeds=[3, 4])
    on_old = [(n, round(s * 20, 6), seed) for s in (0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1)
              for i, seed in ((3, 3), (4, 4)) for n in ([SPLIT, CHUNKED] if i % 2 == 0 else [CHUNKED, SPLIT])
              if s in shares[n]]
    assert served[:len(on_old)] == on_old  # seed 3 is the 4th (index 3): chunked first, then ABBA
    # then split climbs again (seed 4 holds until 1.1 of 20 = 22 < 22.5): 1.15 over all five seeds
    assert served[len(on_old):] == [(SPLIT, 23.0, s) for s in range(5)]
    assert out["seeds"] == [0, 1, 2, 3, 4] and all(len(r["measured"]) == 5 for v in out["served"].values() for r in v)
    assert out["added"] == [dict(seeds=[3, 4], rungs_before={SPLIT: 6, CHUNKED: 4})]  # when they came: seed_sets
    assert all(len(r["measured"]) == 3 for v in first["served"].values() for r in v)  # the resumed one untouched
    assert [r["share"] for r in out["served"][SPLIT]] == [0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15]
    assert T.brackets(out) == {SPLIT: (0.9, 0.95), CHUNKED: (0.8, 0.85)}  # seed 0 alone misses at 0.95 and 0.85: 88%
    words = W.ladder_words(_tie(ladder=out))
    assert "runs over 5 seeds (the cell's 3 seeds in rate order, then 2 more on every rung; 1P+1D alone at " \
           "1.00x" in words  # one parenthesis for both notes
    for more, match in (([2, 5], r"more_seeds \[2\] were served already"), ([], "at least one"), ([5, 5], "distinct"),
                        ([True], "whole numbers"), ("56", "whole numbers")):
        with pytest.raises(ValueError, match=match):
            T.tie_ladder(_tie(), lm, resume=first, more_seeds=more)
    with pytest.raises(ValueError, match="give it as resume"):
        T.tie_ladder(_tie(), lm, more_seeds=[3])
    with pytest.raises(ValueError, match="seeds must be a list"):
        T.cell_ladder(_tie(ladder=dict(out, seeds="01234")))
    with pytest.raises(ValueError, match="distinct whole numbers >= 0, the cell.s"):
        T.cell_ladder(_tie(ladder=dict(out, seeds=[0, 1, 2, 3, 3])))


@pytest.mark.parametrize("split, chunked, verdict, said", [
    ([(0.85, [100] * 3), (0.9, [85, 60, 70])], [(0.85, [100] * 3), (0.9, [80, 85, 60])], "matches: a tie",
     "within 6% of each other"),  # both between 0.85 and 0.90: 0.85 / 0.90 = 94%
    ([(0.85, [100] * 3), (0.9, [50] * 3)], [(0.85, [100] * 3), (0.9, [95] * 3), (0.95, [50] * 3)], "undecided",
     "anywhere from 0% to 11% apart"),  # 0.85 / 0.95 = 89%: it may be a tie or not
    ([(0.85, [100] * 3), (0.9, [95] * 3), (0.95, [92] * 3), (1.0, [40] * 3)], [(0.85, [60] * 3), (0.8, [91] * 3)],
     "does not match", "at most 89% of 1P+1D's"),  # 0.85 / 0.95
    ([(0.85, [100] * 3), (0.9, [99, 99, 40])], [(0.85, [100] * 3), (0.9, [50] * 3)], "undecided",
     "the means say a tie, but fewer than 95% of the resamples agree"),  # mean 79.3, but 8 of 27 resamples hold
])
def test_the_brackets_verdict_and_words(split, chunked, verdict, said):
    ladder = _ladder(split, chunked)
    assert T.ladder_outcome(ladder) == verdict
    c = _tie(ladder=ladder)
    assert c.outcome() == verdict  # the ladder decides a tie that has one; the one rate's runs do not
    assert c.outcome("predicted") == "undecided"  # the simulation has no ladder: the one rate, idle
    words = W.ladder_words(c)
    assert said in words and f"{sum(len(m) for _, m in split + chunked)} runs" in words
    assert map_steady_text.steady_table({"tie": c}).loc["tie", "live"] == verdict
    assert words in map_steady_text.steady_words({"tie": c})


def test_the_words_name_a_rung_held_again_above_a_bracket():
    """The record's 2P+2D kept 78% at 1.10x and 91% at 1.15x: the bracket (1.05, 1.10) alone hid the second."""
    ladder = _ladder([(0.85, [100] * 3), (0.9, [80] * 3), (0.95, [95] * 3), (1.0, [40] * 3)],
                     [(0.85, [100] * 3), (0.9, [50] * 3)])
    words = W.ladder_words(_tie(ladder=ladder))
    assert "1P+1D kept 90% on average up to 0.85x and not at 0.90x (though it kept 95% at 0.95x again" in words
    assert words.count("though it kept") == 1
    # the tie's chunked layout stalls its streams 5 steps per fused step, past the 1.5-step SLO: said on the page
    assert "would count every such stall against chunked prefill" in map_steady_text.steady_words(
        {"tie": _tie(ladder=ladder)})
    # read from its highest rung held (0.95x to 1.00x) against chunked's 0.85x: 0.85 / 1.00 is not within 10%
    assert "Read from the highest rung held instead (1P+1D 0.95x to 1.00x), the means would leave it undecided" in words


def test_the_bootstrap_reads_the_brackets_on_resamples_of_the_seeds():
    ladder = _ladder([(0.85, [100, 100, 100]), (0.9, [99, 99, 40])], [(0.85, [100, 100, 100]), (0.9, [50] * 3)])
    assert T.brackets(ladder) == {SPLIT: (0.85, 0.9), CHUNKED: (0.85, 0.9)}  # the mean at 0.9: 79.3
    assert T.brackets(ladder, [0, 1, 0])[SPLIT] == (0.9, math.inf)  # a resample without the third seed holds
    assert T.brackets(ladder, 2)[SPLIT] == (0.85, 0.9)  # one seed's own
    backed = T.support(ladder)
    # a resample leaves the split's bracket open (undecided) where it holds 0.9: only the draws without the third
    # seed, (2/3)^3 = 8/27 of them (one of it beside two 99s makes a mean of 79.3)
    assert backed["undecided"] == pytest.approx(8 / 27, abs=0.03) and backed["does not match"] == 0
    assert backed == T.support(ladder)  # a fixed seed: repeatable
    assert (f"show a tie in {backed['matches: a tie']:.0%}, part the two in 0% and leave it undecided in "
            f"{backed['undecided']:.0%}") in W.ladder_words(_tie(ladder=ladder))


def test_a_tie_needs_each_layouts_lowest_within_the_others_highest():
    ladder = _ladder([(0.85, [100] * 3), (0.9, [100] * 3), (0.95, [50] * 3)],
                     [(0.8, [100] * 3), (0.85, [60] * 3)])  # split (0.90, 0.95), chunked (0.80, 0.85)
    assert T.ladder_outcome(ladder) == "undecided"  # 0.80 / 0.95 = 84%: not within 10%; 0.85 / 0.90: may be
    assert T.ladder_outcome(ladder, tolerance=0.2) == "matches: a tie"


def test_bad_input_is_refused_early_and_named(lm):
    with pytest.raises(ValueError, match="serves a tie's cell"):
        T.tie_ladder(_steady(), lm)
    bare = _tie()
    bare.extra.pop("max_requests")
    with pytest.raises(ValueError, match=r"no \['max_requests'\]"):
        T.tie_ladder(bare, lm)
    for kw, match in ((dict(start=float("nan")), "start"), (dict(step=0), "step"), (dict(rungs=1), "rungs"),
                      (dict(rungs=True), "rungs"), (dict(rungs=2.0), "rungs")):
        with pytest.raises(ValueError, match=match):
            T.tie_ladder(_tie(), lm, **kw)
    with pytest.raises(TypeError):
        T.tie_ladder(_tie(), lm, progress="yes")
    good = _ladder([(0.85, [100] * 3)], [(0.85, [100] * 3)])
    for bad, match in ((dict(good, served={SPLIT: good["served"][SPLIT]}), "two layouts"),
                       (dict(good, served={SPLIT: [], CHUNKED: good["served"][CHUNKED]}), "served no rung"),
                       (_ladder([(0.85, [100, float("nan"), 100])], [(0.85, [100] * 3)]), "an attainment"),
                       (_ladder([(0.0, [100] * 3)], [(0.85, [100] * 3)]), "a share > 0"),
                       (_ladder([(0.85, [100] * 3)], [(0.85, [100] * 2)]), "different numbers of seeds"),
                       ("ladder", "two layouts")):
        with pytest.raises(ValueError, match=match):
            T.ladder_outcome(bad)
    for sample in (3, -1, True, [], [0, 5]):
        with pytest.raises(ValueError, match="sample must be indices"):
            T.brackets(good, sample)
    with pytest.raises(ValueError, match="resamples must be a whole number"):
        T.support(good, resamples=0)
    for tol in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="tolerance"):
            T.ladder_outcome(good, tolerance=tol)
    with pytest.raises(ValueError, match="has no ladder"):
        W.ladder_words(_tie())


def test_a_ladder_served_on_the_tiny_model(lm):
    """Two rungs at most, runs of a dozen requests on two seeds: every rung holds one attainment per seed."""
    c = _tie(seeds=(0, 1))
    c.prompt_tokens, c.ttft_slo_s, c.tpot_slo_s = 16, 0.5, 0.05
    out = T.tie_ladder(c, lm, rungs=2)
    for rungs in out["served"].values():
        assert 1 <= len(rungs) <= 2 and all(len(r["measured"]) == 2 for r in rungs)
        assert all(0 <= a <= 100 for r in rungs for a in r["measured"])
    assert T.ladder_outcome(out) in ("matches: a tie", "does not match", "undecided")


def test_the_ladder_table_prints_each_rungs_mean_and_range():
    ladder = _ladder([(0.85, [100, 98, 96]), (0.9, [40, 95, 60])], [(0.85, [100] * 3), (0.8, [99, 90, 93])])
    table = W.ladder_table(_tie(ladder=ladder))
    assert table.index.name == "rate (x 20/s per worker)" and list(table.index) == ["0.80x", "0.85x", "0.90x"]
    assert table.loc["0.85x", "1P+1D (%)"] == "98 (96-100)" and table.loc["0.90x", "1P+1D (%)"] == "65 (40-95)"
    assert table.loc["0.80x", "1P+1D (%)"] == "" and table.loc["0.80x", "2 chunked 256 (%)"] == "94 (90-99)"
    assert "alone at 0.90x" in W.ladder_words(_tie(ladder=ladder)) and "alone at 0.80x" in W.ladder_words(
        _tie(ladder=ladder))
    with pytest.raises(ValueError, match="has no ladder"):
        W.ladder_table(_tie())


def test_seeds_added_later_are_read_apart_as_well_as_pooled():
    """sets_words: the added seeds' gap to the cell's on the rungs the cell's were served on before and on the rungs
    served to all at once, per layout, and each set's own brackets and support; nothing where no seed was added."""
    assert W.sets_words(_tie(ladder=_ladder([(0.85, [100] * 3), (0.9, [40] * 3)], [(0.85, [100] * 3),
                                                                                  (0.9, [40] * 3)]))) == ""
    split = [(0.8, [100] * 5), (0.85, [100, 100, 100, 40, 40]), (0.9, [40] * 5)]
    chunked = [(0.8, [100] * 5), (0.85, [100, 100, 100, 40, 40]), (0.9, [95, 95, 95, 40, 40]), (0.95, [40] * 5)]
    ladder = dict(_ladder(split, chunked), seeds=[0, 1, 2, 7, 8],
                  added=[dict(seeds=[7, 8], rungs_before={SPLIT: 2, CHUNKED: 3})])
    said = W.sets_words(_tie(ladder=ladder))
    # before: split 0 and -60 over 2 rungs = -30; chunked 0, -60, -55 over 3 = -38.3; after: 0.9 and 0.95, 0 each
    assert said.startswith(" The 2 seeds added later kept 30 points less for 1P+1D and 38 points less for 2 chunked "
                           "256 than the cell's 3 on the rungs those were served on in earlier sittings, and as much "
                           "for 1P+1D and as much for 2 chunked 256 on the rungs served to all 5 seeds in one "
                           "sitting (0.90x, 0.95x).")
    assert "the cell's 3 seeds bracket the goodputs (1P+1D's above 0.85x and 2 chunked 256's above 0.90x)" in said
    assert "the added 2 seeds bracket the goodputs (1P+1D's at 0.80x to 0.85x and 2 chunked 256's at 0.80x to " \
           "0.85x) and show a tie in 100% of resamples: the sets read differently." in said
    assert said in W.ladder_words(_tie(ladder=ladder))
    fell = dict(ladder, served={n: [dict(r) for r in v] for n, v in ladder["served"].items()})
    fell["served"][SPLIT][2] = dict(fell["served"][SPLIT][2], share=0.75, rate_per_worker=15.0,
                                    measured=[80.0, 100, 100, 100, 100])  # seed 0 below its 0.80 of before
    assert "where 1 of the cell's seeds (counted per layout) kept less than they had kept at a higher rate in their " \
           "earlier sitting" in W.sets_words(_tie(ladder=fell))
    with pytest.raises(ValueError, match="'added' must list the seeds added after the cell's"):
        W.sets_words(_tie(ladder=dict(ladder, added=[dict(seeds=[8, 7], rungs_before={SPLIT: 2, CHUNKED: 3})])))
    with pytest.raises(ValueError, match="'added' must list"):
        W.sets_words(_tie(ladder=dict(ladder, added=[dict(seeds=[7, 8], rungs_before={SPLIT: 9, CHUNKED: 3})])))
