"""Bad input to the tie's sitting (splitlab.teach.figures.map_steady_tie_sitting, its words and
benchmarks/map_live.py --sitting): refused early with a message naming the problem, before any run or the model's
load; and the words a recorded sitting prints, read off its numbers."""
from __future__ import annotations

import dataclasses
import math
import re

import pytest

from splitlab.teach.figures import map_steady
from splitlab.teach.figures import map_steady_text
from splitlab.teach.figures import map_steady_tie_sitting as S
from splitlab.teach.figures import map_steady_tie_sitting_words as W
from splitlab.teach.figures.map_steady_tie_read import RESAMPLES
from test_bad_inputs_map_steady import _map_live
from test_bad_inputs_map_steady_tie import no_runs  # noqa: F401 (a fixture)
from test_map_steady_tie import CHUNKED, SPLIT, _tie


def _sat(**change) -> dict:
    """A sitting of the tiny tie (geometric mean 20/s): 3 seeds on 3 rungs, both goodputs at 0.95x."""
    rows = [[100.0, 90.0, 40.0]] * 3
    return dict(dict(shares=[0.8, 0.9, 1.0], seeds=[12, 13, 14], plan=[12, 13, 14], geomean_per_worker=20.0,
                     measured={SPLIT: rows, CHUNKED: rows}, load_average=[1.0, 1.2, 1.1],
                     started_utc="2026-12-06 09:18 UTC", ended_utc="2026-12-06 10:20 UTC", cpu_s=3600.0), **change)


@pytest.mark.parametrize("kw, match", [
    (dict(shares=[0.8]), "shares must be at least two rising"),
    (dict(shares=[0.9, 0.8]), "shares must be at least two rising"),
    (dict(shares=[0.8, float("nan")]), "shares must be at least two rising"),
    (dict(shares="0.8,0.9"), "shares must be at least two rising"),
    (dict(seeds=[3]), "seeds must be at least two distinct"),
    (dict(seeds=[3, 3]), "seeds must be at least two distinct"),
    (dict(seeds=[3, -1]), "seeds must be at least two distinct"),
    (dict(seeds=[3, 1.5]), "seeds must be at least two distinct"),
])
def test_serve_sitting_refuses_a_grid_or_seeds_before_any_run(kw, match, lm, no_runs):  # noqa: F811
    with pytest.raises(ValueError, match=match):
        S.serve_sitting(_tie(), lm, **kw)


def test_serve_sitting_refuses_a_cell_not_a_tie_before_any_run(lm, no_runs):  # noqa: F811
    c = _tie()
    c.region = "split"
    with pytest.raises(ValueError, match="serves a tie's cell"):
        S.serve_sitting(c, lm)
    with pytest.raises(TypeError):
        S.serve_sitting(_tie(), "not a model", shares=(0.8, 0.9))


@pytest.mark.parametrize("change, match", [
    (dict(measured={SPLIT: [[100.0, 90.0, 40.0]] * 3}), "two layouts"),
    (dict(measured={SPLIT: [[100.0, 90.0]] * 3, CHUNKED: [[100.0, 90.0, 40.0]] * 3}), "per share \\(3\\) per seed"),
    (dict(measured={SPLIT: [[100.0, 90.0, 140.0]] * 3, CHUNKED: [[100.0, 90.0, 40.0]] * 3}), "in 0..100"),
    (dict(seeds=[12, 13]), "per seed \\(2\\)"),
    (dict(geomean_per_worker=0.0), "geomean_per_worker must be finite > 0"),
    (dict(shares=None), "shares must be"),
    (dict(load_average=[1.0, float("inf"), 1.0]), "load_average must be a finite number >= 0 per seed"),
    (dict(load_average=[1.0]), "load_average must be a finite number >= 0 per seed"),
    (dict(started_utc=None), "must say when it started and ended"),
    (dict(cpu_s=-1.0), "cpu_s must be finite >= 0"),
    (dict(ended_utc="10:20"), "must say when it started and ended"),
    (dict(plan=[12, 13]), "per seed \\(3\\)|seeds must be the first of its plan"),
    (dict(seeds=[13, 14, 12]), "seeds must be the first of its plan"),
    (dict(seeds=[], measured={SPLIT: [], CHUNKED: []}, load_average=[]), "seeds must be at least 1"),
])
def test_a_sitting_of_another_shape_is_refused(change, match):
    with pytest.raises(ValueError, match=match):
        S.check_sitting(_sat(**change))
    with pytest.raises(ValueError, match=match):
        S.sitting_outcome(_sat(**change))


def test_a_records_sitting_not_of_its_tie_is_refused_naming_the_cell():
    c = _tie()
    c.extra["sitting"] = _sat(measured={CHUNKED: _sat()["measured"][CHUNKED], SPLIT: _sat()["measured"][SPLIT]})
    with pytest.raises(ValueError, match="cell's extra\\['sitting'\\] must be a tie's, of its winner and rival"):
        c.outcome()
    c.extra["sitting"] = _sat(geomean_per_worker=21.0)
    with pytest.raises(ValueError, match="a sitting of another cell"):
        W.sitting_words(c)
    with pytest.raises(ValueError, match="the cell has no sitting"):
        W.sitting_table(_tie())
    assert W.sitting_goodput_words(_tie()) == "" and W.pilot_words(_tie()) == ""
    with pytest.raises(ValueError, match="sample must be indices"):
        S.goodputs(_sat(), sample=[3])
    with pytest.raises(ValueError, match="tolerance must be in"):
        S.support(_sat(), tolerance=1.0)


def test_a_cell_without_both_goodputs_is_refused_naming_them():
    c = _tie()
    c.extra["sitting"] = _sat()
    c.goodput_now = {SPLIT: 16.0}
    with pytest.raises(ValueError, match="goodput_now\\['2 colocated .*'\\] must be a finite number > 0"):
        c.outcome()
    c.goodput_now = {SPLIT: -4.0, CHUNKED: 25.0}
    with pytest.raises(ValueError, match="goodput_now\\['1P\\+1D'\\] must be a finite number > 0"):
        W.sitting_words(c)


def test_words_off_the_grid_early_stops_and_shares_near_the_bar():
    c = _tie()
    c.extra["sitting"] = _sat(measured={SPLIT: [[100.0] * 3] * 3, CHUNKED: [[50.0, 40.0, 30.0]] * 3})
    words = W.sitting_words(c)
    assert "lies between 0% and 80% of" in words and "the sitting parts the two" in words  # 0.8x / 1.0x at most
    assert "is at most 80.0% (a goodput off the grid is only a bound) live" in W.sitting_goodput_words(c)
    assert "above 20/s against its simulated 16/s" in W.sitting_goodput_words(c)  # per worker, not a share
    c.extra["sitting"] = _sat(seeds=[12, 13], plan=[12, 13, 14], load_average=[1.0, 1.0],
                              measured={n: v[:2] for n, v in _sat()["measured"].items()})
    assert c.outcome() == "undecided"
    assert "it stopped after 2 of the 3 seeds it planned, so it gives no verdict" in W.sitting_words(c)
    assert W.sitting_words(c).endswith("undecided (a verdict needs 95% of the resamples and every planned seed).")
    assert W._pct(0.949) == "94.9%" and W._pct(0.0004) == "<0.1%" and W._pct(0.004) == "0.4%" and \
        W._pct(0.95) == "95%" and W._pct(0.9996) == ">99.9%"
    c.extra["sitting"] = _sat(shares=[0.8, 0.801, 1.0], ended_utc="2026-12-07 00:20 UTC")
    assert list(W.sitting_table(c).index)[:2] == ["0.8x", "0.801x"]  # labels that keep rungs apart
    assert "2026-12-06 09:18 UTC to 2026-12-07 00:20 UTC" in W.sitting_words(c)  # past midnight: the end's date


def test_a_recorded_sitting_decides_the_ties_outcome_and_its_words_follow_its_numbers():
    c = _tie()
    c.extra["sitting"] = _sat()
    assert c.outcome() == "matches: a tie"
    table = W.sitting_table(c)
    assert list(table.index) == ["0.8x", "0.9x", "1x", "goodput"] and table.iloc[-1].tolist() == ["0.90x"] * 2
    words = W.sitting_words(c)
    assert "at 100.0% of" in words and "interval 100.0% to 100.0%" in words and "100% read a tie" in words
    assert words.endswith("so by the rule fixed before it was served the sitting shows the tie the map draws.")
    assert "18 runs" in words
    assert "is 100.0% (95% bootstrap interval 100.0% to 100.0%) live, 156% simulated (each simulated goodput a " \
        "search" in W.sitting_goodput_words(c)  # chunked's 25 over the split's 16
    assert "18/s against its simulated 16/s" in W.sitting_goodput_words(c)  # 0.9 x 20/s; goodput_now 16 and 25
    c.extra["sitting"] = _sat(measured={SPLIT: [[100.0, 95.0, 92.0]] * 3, CHUNKED: [[100.0, 90.0, 40.0]] * 3})
    assert c.outcome() == "undecided"  # the split above 1.0x: the ratio at most 0.9 / 1.0, at the band's edge
    assert "lies between 0% and 90% of" in W.sitting_words(c)  # 0.9x over the split's 1.0x or more: the band's edge
    assert "is at most 90.0% (a goodput off the grid is only a bound) live" in W.sitting_goodput_words(c)
    assert W.sitting_table(c).iloc[-1].tolist()[0] == "above 1x"
    assert "so the sitting is undecided" in map_steady_text.steady_words({"tie": c})


@pytest.mark.parametrize("argv, match", [
    ("--sitting {tmp}/split.json", "--sitting: the record at .* holds no tie"),
    ("--sitting {tmp}/done.json", "was served in a sitting already \\(2026-12-06 09:18 UTC, 3 seeds\\)"),
    ("--sitting {tmp}/bad.json", "--sitting: the tie .* cannot be served: .*a sitting of another cell"),
    ("--sitting {tmp}/tie.json --seeds 0,1", "--sitting serves the record's tie .*: --seeds not read with it"),
    ("--sitting {tmp}/tie.json --ladder {tmp}/tie.json", "--ladder serves the record's tie .*: --sitting not read"),
    ("--sitting {tmp}/none.json", "--sitting: no record at"),
    ("--sitting {tmp}/done.json --sitting {tmp}/tie.json", "--sitting given more than once: give one record"),
    ("--ladder {tmp}/done.json --ladder={tmp}/tie.json", "--ladder given more than once: give one record"),
    (["--sitting", "  "], "--sitting needs a record's path, got '  '"),  # was "no record at   (not a file)"
    ("--sitting {tmp}/locked.json", "--sitting: .*Permission denied"),  # before the model, not after a seed
    ("--ladder {tmp}/locked.json", "--ladder: .*Permission denied"),  # not after the whole ladder
    ("--sitting {tmp}/resumed.json", "--sitting: the tie .* cannot be served: .*resumed_utc must be a list"),
])
def test_map_live_sitting_refuses_before_loading_the_model(argv, match, monkeypatch, capsys, tmp_path):
    mod = _map_live(monkeypatch)
    split = _tie()
    split.region = "split"
    done, bad = _tie(), _tie()
    done.extra["sitting"], bad.extra["sitting"] = _sat(), _sat(geomean_per_worker=21.0)
    resumed = _tie()  # a partial sitting whose resumed_utc is not a list: was an AttributeError after the load
    resumed.extra["sitting"] = _sat(plan=[12, 13, 14, 15], resumed_utc="2026-12-06 09:30 UTC")
    for name, cells in (("tie", {"tie": _tie()}), ("split", {"split": split}), ("done", {"tie": done}),
                        ("bad", {"tie": bad}), ("locked", {"tie": _tie()}), ("resumed", {"tie": resumed})):
        map_steady.save_record(cells, str(tmp_path / f"{name}.json"), workers=2)
    if "locked" in str(argv):  # a record this run could not write back: was found only after the first seed's serving
        import builtins
        real = builtins.open

        def locked(file, mode="r", *a, **k):  # as a read-only file to a user, an immutable one (chattr +i) to root
            if str(file).endswith("locked.json") and any(m in mode for m in "wa+"):
                raise PermissionError(13, "Permission denied", str(file))
            return real(file, mode, *a, **k)
        monkeypatch.setattr(builtins, "open", locked)
    with pytest.raises(SystemExit) as exit_:
        mod.main(argv.format(tmp=tmp_path).split() if isinstance(argv, str) else argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(match, err), err


def test_map_live_sitting_writes_the_record_after_each_seed(monkeypatch, capsys, tmp_path):
    mod, path = _map_live(monkeypatch), tmp_path / "tie.json"
    map_steady.save_record({"tie": _tie()}, str(path), workers=2)
    monkeypatch.setattr(mod.sl, "load_model", lambda name: "lm")
    monkeypatch.setattr(mod.sl.phases.device, "set_cpu_clock", lambda clock: None)
    seen = []

    def fake(c, lm, on_seed=None, resume=None):
        assert resume is None
        for k in (1, 2, 3):
            part = _sat(seeds=[12, 13, 14][:k], measured={n: v[:k] for n, v in _sat()["measured"].items()})
            on_seed(part)
            seen.append(len(map_steady.load_record(str(path))[1]["tie"].extra["sitting"]["seeds"]))
        return _sat()
    monkeypatch.setattr(mod.map_steady_tie_sitting, "serve_sitting", fake)
    assert mod.main(["--sitting", str(path)]) == 0
    assert seen == [1, 2, 3] and "matches: a tie" in capsys.readouterr().out
    meta, cells = map_steady.load_record(str(path))
    assert cells["tie"].extra["sitting"]["seeds"] == [12, 13, 14] and meta["runs"][-1]["regions"] == ["tie"]
    assert math.isclose(cells["tie"].extra["sitting"]["geomean_per_worker"], 20.0)


def test_pilot_words_read_the_ladder_the_sitting_followed():
    from test_bad_inputs_map_steady_tie import _done
    c = _tie(ladder=_done())
    c.extra["sitting"] = _sat()
    words = W.pilot_words(c)  # split held 0.85, missed 0.9; chunked held 0.85, missed 0.9 on the mean (65%)
    assert "3 seeds in sittings hours apart" in words and "its 3 seeds put both goodputs at 0.85x to 0.90x" in words
    assert "could call two equal goodputs below 0.95x a tie only where both landed in one bracket" in words
    assert "seeds new to the ladder" in W.sitting_words(c)  # 12-14, the ladder's 0-2
    c.extra["sitting"] = _sat(seeds=[0, 1, 2], plan=[0, 1, 2])
    assert "seeds new to the ladder" not in W.sitting_words(c) and "on 3 seeds, at 0.8x, 0.9x, 1x" in W.sitting_words(c)
    text = map_steady_text.steady_words({"tie": c})
    assert text.index("So the tie was served again in one sitting") < text.index("were fixed from a ladder of rates")


def test_reading_words_say_what_the_rungs_alone_allow_and_how_far_the_line_moves_a_ratio():
    from test_bad_inputs_map_steady_tie import _done
    c = _tie(ladder=_done())  # both cross 0.85x-0.9x on its rungs; its grid of 0.05x has no rungs of 0.8, 1.0
    c.extra["sitting"] = _sat(measured={SPLIT: [[100.0, 80.0, 40.0]] * 3, CHUNKED: [[100.0, 50.0, 40.0]] * 3})
    assert S.rung_bounds(c.extra["sitting"]) == {SPLIT: (0.8, 0.9), CHUNKED: (0.8, 0.9)}
    words = W.reading_words(c)
    assert "On the means the rungs alone put both goodputs between 0.8x and 0.9x, which allows" in words
    assert "anywhere from 89% to 112% of" in words and "across the band's edge" in words  # 0.8/0.9, 0.9/0.8
    assert "How far it moves" not in words  # the ladder has no rung of the sitting's 0.8x and 1.0x
    c.extra["ladder"]["served"][SPLIT].append(dict(share=1.0, rate_per_worker=20.0, measured=[20.0] * 3))
    c.extra["ladder"]["served"][CHUNKED].insert(0, dict(share=0.8, rate_per_worker=16.0, measured=[100.0] * 3))
    c.extra["ladder"]["served"][CHUNKED].append(dict(share=1.0, rate_per_worker=20.0, measured=[20.0] * 3))
    c.extra["ladder"]["served"][SPLIT].insert(0, dict(share=0.8, rate_per_worker=16.0, measured=[100.0] * 3))
    words = W.reading_words(c)  # now 0.8, 0.9 and 1.0 are rungs of both: read on those alone, then on all
    assert "how far that line can move a ratio (the second layout's over the first's)" in words
    assert "(its 3 seeds)" in words and "still inside: the line between rungs does not decide the verdict" in words
    i = S.interval(c.extra["sitting"])
    assert f"{100 * min(i['lo'] - 0.9, 1 / 0.9 - i['hi']):.1f} points inside the band's" in words
    c.extra["sitting"] = _sat(measured={SPLIT: [[100.0] * 3] * 3, CHUNKED: [[50.0, 40.0, 30.0]] * 3})
    assert W.reading_words(c) == ""  # a goodput off the grid: only a bound, said by sitting_words
    assert S.rung_bounds(c.extra["sitting"]) == {SPLIT: (1.0, math.inf), CHUNKED: (0.0, 0.8)}


def test_the_shipped_sittings_words_follow_its_numbers():
    _, cells = map_steady.load_record()
    c = cells["tie"]
    s, words = c.extra["sitting"], W.sitting_words(c) + W.reading_words(c)
    backed, i = S.support(s), S.interval(s)
    said = S.sitting_outcome(s)
    assert c.outcome() == said and S.complete(s) and len(s["seeds"]) == len(S.SITTING_SEEDS)
    assert f"{W._pct(backed['matches: a tie'])} read a tie" in words
    assert f"95% bootstrap interval {i['lo']:.1%} to {i['hi']:.1%}" in words
    assert ("narrowly" in words) == (said != "undecided" and backed[said] < 0.975)
    low = i["lo"] - 0.9 <= 1 / 0.9 - i["hi"]
    room = i["lo"] - 0.9 if low else 1 / 0.9 - i["hi"]
    assert f"The sitting's interval ends {100 * room:.1f} points inside the band's {'lower' if low else 'upper'}" \
        in words
    mc = 1.96 * math.sqrt(backed[said] * (1 - backed[said]) / RESAMPLES)  # the share's own Monte Carlo error
    assert f"is itself known to about ±{100 * mc:.1f} points" in words and "its 95% is nominal" in words


def test_the_live_table_and_summary_give_a_sittings_verdict_not_its_one_rate():
    _, cells = map_steady.load_record()
    c, s = cells["tie"], cells["tie"].extra["sitting"]
    row = map_steady_text.steady_table({"tie": c}).loc["tie"]
    assert list(row[["winner (%)", "2nd (%)", "gap (pp)"]]) == ["-"] * 3  # the one rate does not make the verdict
    narrow = W.narrow(s)
    assert row["live"] == S.sitting_outcome(s) + (", narrowly" if narrow else "") + " (sitting)"
    assert ("in one sitting, narrowly" in map_steady_text.record_summary({"tie": c})) == narrow
    plain = dataclasses.replace(c, extra={k: v for k, v in c.extra.items() if k != "sitting"})
    assert map_steady_text.steady_table({"tie": plain}).loc["tie", "gap (pp)"] != "-"  # a ladder's row: its numbers


def test_check_sitting_reads_its_times_and_numpy_shares():
    """A fresh reader's breaks (2026-12-06): an end before the start read a verdict; a resumed_utc that was not a list
    was an AttributeError after the model loaded; numpy's floats as shares were refused as not numbers."""
    import numpy as np
    with pytest.raises(ValueError, match="cannot end \\(2026-12-06 09:00 UTC\\) before it started"):
        S.check_sitting(_sat(ended_utc="2026-12-06 09:00 UTC"))
    for bad in ("2026-12-06 09:30 UTC", 42, ["yesterday"], ["2026-12-06 11:00 UTC"]):  # the last: after its end
        with pytest.raises(ValueError, match="resumed_utc must be a list of times"):
            S.check_sitting(_sat(resumed_utc=bad))
    assert S.check_sitting(_sat(resumed_utc=["2026-12-06 09:40 UTC"])) == 3
    assert S.check_sitting(_sat(shares=np.array([0.8, 0.9, 1.0]))) == 3
    assert S.check_sitting(_sat(shares=[np.float32(0.8), np.float64(0.9), 1])) == 3
    with pytest.raises(ValueError, match="shares must be at least two rising"):
        S.check_sitting(_sat(shares=[True, 2.0, 3.0]))

