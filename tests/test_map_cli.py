"""``python -m splitlab map``: the JSON contract (every cell with its coordinates, winner, goodputs and binding SLO),
the text map, the cost sources of ``plan``, and one-line errors for bad input."""
from __future__ import annotations

import json

import pytest

from splitlab.cli import main

SMALL = ["--prompt-tokens", "32", "1024", "--columns", "2", "--tpot-steps", "1.5", "4", "--rows", "2"]


def test_map_json_has_every_cell(capsys):
    assert main(["map", "--workers", "2", *SMALL, "--json"]) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out and "Infinity" not in out
    data = json.loads(out)
    assert data["prompt_tokens"] == [32, 1024] and data["tpot_steps"] == [1.5, 4.0] and data["workers"] == 2
    assert len(data["cells"]) == 4 and sum(data["counts"].values()) == 4
    for c in data["cells"]:
        assert c["winner"] in ("split", "prefill-first", "chunked", "tie", "none")
        assert c["goodput_rps_per_worker"] >= c["runner_up_goodput_rps_per_worker"] >= 0
        assert c["binding_slo"] in ("ttft", "ttst", "tpot", "unfinished", "none") and c["prefill_steps"] > 0
        assert set(c["layouts"]) == {"split", "prefill-first", "chunked"} and c["layouts"]["split"]["layout"] == "1P+1D"
    assert data["cost_source"].startswith("built-in")


def test_map_text_and_an_analytic_cost_model(capsys):
    assert main(["map", "--workers", "2", "--gpu", "H100", "--model-config", "Llama-3-8B", "--prompt-tokens", "512",
                 "4096", "--columns", "2", "--tpot-steps", "2", "2", "--rows", "1", "--link-gbps", "1"]) == 0
    text = capsys.readouterr().out
    assert "cost model: predicted: roofline of Llama-3-8B" in text and "KV link 1 GB/s" in text
    assert "prefill cost in decode steps" in text and "cells won:" in text


@pytest.mark.parametrize("args, message", [
    (["--workers", "0"], "--workers must be 2 to 16"),
    (["--workers", "17"], "--workers must be 2 to 16"),
    (["--prompt-tokens", "512", "64"], "--prompt-tokens: an empty range, LOW 512 is above HIGH 64"),
    (["--tpot-steps", "4", "2"], "--tpot-steps: an empty range"),
    (["--tpot-steps", "nan", "4"], "must be a finite positive number, got nan"),
    (["--tpot-steps", "0.5", "4"], "a TPOT SLO below one lone decode step"),
    (["--columns", "0"], "--columns must be at least 1"),
    (["--rows", "2"], "--rows needs --tpot-steps LOW HIGH"),  # break27: was ignored, the map drew 4 rows
    (["--tpot-steps", "2", "4", "--rows", "1"], "--rows 1 needs a range of one value, --tpot-steps N N, got 2 to 4"),
    (["--prompt-tokens", "64", "512", "--columns", "1"], "--columns 1 needs a range of one value"),  # was 64 alone
    (["--prompt-tokens", "64", "64", "--columns", "3"], "--columns 3 needs LOW below HIGH, got 64 to 64"),  # was 1
    (["--tpot-steps", "2", "2", "--rows", "3"], "--rows 3 needs LOW below HIGH, got 2 to 2"),  # 'tpot_steps ... twice'
    (["--link-gbps", "nan"], "must be a finite positive number"),
    (["--chunk-tokens", "8", "--max-batch", "16"], "every --chunk-tokens must exceed --max-batch (16)"),
    (["--chunk-tokens", "1"], "every --chunk-tokens must exceed 1"),
    (["--tie-tolerance", "1"], "--tie-tolerance must be below 1"),
    (["--gpu", "H100"], "needs both --gpu NAME and --model-config NAME"),
])
def test_bad_input_is_a_usage_error_on_one_line(capsys, args, message):
    try:
        status = main(["map", *args])
    except SystemExit as done:  # argparse refuses a value itself
        status = done.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_prompt_past_the_context_is_said(capsys):
    assert main(["map", "--prompt-tokens", "64", "4096"]) == 2  # the built-in model's context: 2048 (a usage error)
    err = capsys.readouterr().err
    assert "exceed the cost model's context of 2048 tokens" in err and len(err.strip().splitlines()) == 1


def test_columns_without_a_prompt_range_spread_over_the_default_range(capsys):
    """break27: ``--columns 2`` without ``--prompt-tokens`` was ignored (the map drew its default 6 columns)."""
    assert main(["map", "--workers", "2", "--columns", "2", "--tpot-steps", "2.5", "2.5", "--rows", "1",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["prompt_tokens"]) == 2 and data["prompt_tokens"][0] == 16 and len(data["cells"]) == 2


def test_link_gbps_beside_a_named_link_says_which_the_map_crosses(capsys):
    """A fresh reader (2026-12-05) gave --link and --link-gbps together: the header named both links, not which."""
    assert main(["map", "--link", "25 Gb/s network", "--link-gbps", "400", "--columns", "2", "--rows", "2",
                 "--tpot-steps", "2", "4"]) == 0
    out = capsys.readouterr().out
    assert "KV link 400 GB/s (--link-gbps, in place of the cost model's 25 Gb/s network)" in out
