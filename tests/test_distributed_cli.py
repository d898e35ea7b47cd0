"""``python -m splitlab transfer``: one JSON row per (prompt length, method), one-line errors (in-process: the
command starts its own second process)."""
from __future__ import annotations

import json

import pytest

from splitlab.cli import main


def test_transfer_cli_json_rows(capsys):
    assert main(["transfer", "--json", "--prompt-tokens", "16,48", "--repeats", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["prompt_tokens"], r["method"]) for r in rows] == [
        (n, m) for n in (16, 48) for m in ("in-process", "whole", "layerwise", "raw")]
    for r in rows:
        assert r["nbytes"] == r["prompt_tokens"] * 2048 and r["seconds"] > 0
        assert r["gb_per_s"] == pytest.approx(r["nbytes"] / r["seconds"] / 1e9)  # GB/s, not gigabits
    lw = [r for r in rows if r["method"] == "layerwise"]
    assert all({"prefill_s", "exposed_s", "hidden_fraction"} <= set(r) for r in lw)
    for r in lw:  # the repeats' spread of both prefills, for chapter 5's "within the spread" (one repeat: a point)
        assert r["prefill_lo_s"] <= r["prefill_s"] <= r["prefill_hi_s"]
        assert r["stream_prefill_lo_s"] <= r["stream_prefill_s"] <= r["stream_prefill_hi_s"]


@pytest.mark.parametrize("args, code", [(("transfer", "--prompt-tokens", "0"), 2),
                                        (("transfer", "--model", "no-such-model"), 1),
                                        (("transfer", "--prompt-tokens", "12,x"), 2)])
def test_transfer_cli_bad_arguments_fail_in_one_line(capsys, args, code):
    try:
        status = main(list(args))
    except SystemExit as exit_:
        status = exit_.code
    out = capsys.readouterr()
    assert status == code and out.out == "" and len(out.err.strip().splitlines()) == 1
