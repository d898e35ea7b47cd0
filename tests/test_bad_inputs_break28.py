"""break28: hostile input to the command line and the public API. Each test reproduces a failure found by trying
it (an error naming an argument the caller does not have, a traceback, a claim the numbers do not hold)."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import splitlab as sl
from conftest import cli
from splitlab import serving
from splitlab.planning.split_map import split_map
from splitlab.serving.workload import LogNormal
from splitlab.teach.figures import split_loss, split_seeds


@pytest.mark.parametrize("args, names", [
    (["--prompt-tokens", "5000", "5000000"], "--prompt-tokens HIGH (5000000) and --output-tokens (64)"),
    (["--output-tokens", "5000"], "the default range's shortest prompt (16 tokens) and --output-tokens (5000)"),
    (["--columns", "2", "--output-tokens", "2040"], "and --output-tokens (2040)"),
])
def test_map_past_the_context_names_the_callers_flags_and_the_limit(args, names):
    """``map --prompt-tokens 5000 5000000`` said "output_tokens (64)", split_map's argument, not the flag."""
    status, out, err = cli("map", *args)
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1  # exit 2: a usage error
    assert names in err and "context of 2048 tokens: keep their sum at most 2048" in err
    assert "output_tokens" not in err.replace("--output-tokens", "")


@pytest.mark.parametrize("chunks", ["abc", 256, [1.5], [True], [0]])
def test_plan_chunk_tokens_not_a_list_of_sizes_names_the_argument(chunks):
    """``plan(chunk_tokens="abc")`` said "chunk sizes must be integers above 1, got ['a', 'b', 'c']"."""
    with pytest.raises(ValueError, match=r"^chunk_tokens must be .*(chunk sizes|integers)") as err:
        sl.planner.plan(chunk_tokens=chunks)
    assert "['a', 'b', 'c']" not in str(err.value)


@pytest.mark.parametrize("search", ["plan", "split_map"])
@pytest.mark.parametrize("option, why", [("bogus", "not a ServingConfig field"), ("policy", "sets it for each layout"),
                                         ("layout", "sets it for each layout")])
def test_an_unknown_option_is_refused_before_any_run_naming_it_and_the_valid_ones(search, option, why):
    """``plan(bogus=3)`` surfaced as ``ServingConfig.__init__() got an unexpected keyword argument``; ``policy=``
    as ``colocated() got multiple values for keyword argument 'policy'``."""
    call = sl.planner.plan if search == "plan" else lambda **kw: split_map(None, 4, [64], [2.0], **kw)
    with pytest.raises(TypeError, match=f"^{search}\\(\\) got an unknown option: '{option}' \\(.*{why}") as err:
        call(**{option: 3})
    assert "the options it takes: max_batch, max_prefill_tokens, kv_budget_bytes" in str(err.value)
    assert "__init__" not in str(err.value) and "policy," not in str(err.value)


def test_a_valid_option_still_reaches_every_layout():
    m = split_map(None, 2, [64], [2.5], max_requests=100, transfer_mode="layerwise", progress=False)
    assert len(m.cells) == 1 and m.cells[0].winner in ("split", "prefill-first", "chunked", "tie", "none")


def _one_seed(a: float, b: float) -> pd.DataFrame:
    return pd.DataFrame({"3P+1D": [a], "4 colocated (prefill-first)": [b]}, index=pd.Index([0], name="seed"))


def test_one_seed_is_never_decisive_it_has_no_spread():
    """paired_gaps called a single seed's gap "decisive", "outside the runs' own spread": one seed has none."""
    a, b = "3P+1D", "4 colocated (prefill-first)"
    g = split_seeds.paired_gaps(_one_seed(100, 69), a, b)
    assert g["seeds"] == 1 and g["spread"] == 0 and not g["decisive"] and g["leader"] == a
    words = split_seeds.paired_verdict(_one_seed(100, 69), a, b, 32)
    assert "a gap of +31 points from one seed, which has no spread to judge it against" in words
    assert "outside" not in words and "cannot tell the two layouts apart" in words
    two = pd.DataFrame({a: [100, 97], b: [69, 72]}, index=pd.Index([0, 1], name="seed"))
    assert not split_seeds.paired_gaps(two, a, b)["decisive"]  # gaps 31 and 25: t(1) = 12.7 spans -10 to +66
    close = pd.DataFrame({a: [100, 99], b: [69, 69]}, index=pd.Index([0, 1], name="seed"))
    assert split_seeds.paired_gaps(close, a, b)["decisive"]  # gaps 31 and 30: +24 to +37
    cell = SimpleNamespace(tpot_steps=2.5)
    words = split_loss.takeaway([], cell, "research", 11.3, SimpleNamespace(name=a, goodput_rps_per_worker=8.0),
                                SimpleNamespace(name=b, goodput_rps_per_worker=8.3), _one_seed(100, 69))
    assert "one seed: no spread to judge its gap against" in words and "ahead in every seed" not in words


# --- task B: the command line ------------------------------------------------------------------------------------

def test_cv_is_checked_at_parse_time_and_refused_without_gamma_arrivals():
    """``--cv 1e-9`` failed after parsing, naming ``cv``, exit 1; ``--cv 5`` with Poisson arrivals was ignored."""
    status, _, err = cli("simulate", "--arrival", "gamma", "--cv", "1e-9", "--rate", "1")
    assert status == 2 and "argument --cv: must be a coefficient of variation in 0.001 .. 100" in err
    status, _, err = cli("simulate", "--cv", "5", "--rate", "1", "--ttft-slo", "1", "--tpot-slo", "0.1")
    assert status == 2 and "--cv shapes gamma arrivals, but --arrival is poisson" in err
    status, out, _ = cli("simulate", "--arrival", "gamma", "--cv", "5", "--rate", "1", "--ttft-slo", "1",
                         "--tpot-slo", "0.1", "--requests", "4", "--json")
    assert status == 0 and json.loads(out)["arrival"] == "gamma" and json.loads(out)["colocated"]["completed"] == 4


def test_an_empty_chunk_list_does_not_ask_for_a_prompt_length():
    status, _, err = cli("plan", "--chunk-tokens", "")
    assert status == 2 and "--chunk-tokens: give at least one number of tokens" in err and "prompt" not in err


def test_kv_size_of_absurd_token_counts_is_refused_not_printed_as_float_digits():
    """``kv-size tiny --tokens 1e30`` (written out) printed 2,047,999,...,997,952 B (1862645149230957068288.0 TiB)."""
    status, out, err = cli("kv-size", "tiny", "--tokens", "9" * 30)
    assert status == 2 and out == "" and "--tokens x --batch must be at most 1,000,000,000,000 tokens" in err
    from splitlab.cli.args import human_bytes
    assert human_bytes(2.048e33) == "1.78e+15 EiB" and human_bytes(3 * 2 ** 50) == "3.0 PiB"
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(100) == "100 B"


# --- task B: sizing, the public API -------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [lambda: sl.sizing.predicted_prefill_s("Llama-3-8B", 100, "nosuch"),
                                  lambda: sl.sizing.handoff("Llama-3-8B", 100, "100 Gb/s network", "nosuch")])
def test_an_unknown_gpu_is_named_with_the_known_ones(call):
    """Both raised a bare KeyError: 'nosuch'."""
    with pytest.raises(ValueError, match="unknown GPU 'nosuch'; choose one of .*H100"):
        call()


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("call, names", [
    (lambda: sl.sizing.transfer_time_s(1e6, NAN), "bandwidth_bytes_per_s"),  # returned nan
    (lambda: sl.sizing.transfer_time_s(1e6, 1e9, NAN), "latency_s"),  # returned nan
    (lambda: sl.sizing.transfer_time_s(1e6, INF), "bandwidth_bytes_per_s"),  # returned 0.0
    (lambda: sl.sizing.ridge_point(NAN, 1e12), "peak_flops_per_s"),  # returned nan
    (lambda: sl.sizing.arithmetic_intensity(-1, 5), "flops"),  # returned -0.2
    (lambda: sl.sizing.min_decode_step_s(-1, 1, 1e9), "weight_bytes"),  # returned 0.0
    (lambda: sl.sizing.min_decode_step_s(1e9, 1, NAN), "bandwidth_bytes_per_s"),  # returned nan
    (lambda: sl.sizing.roofline_time_s(1, 1, 0, 1), "peak_flops_per_s"),  # ZeroDivisionError
    (lambda: sl.sizing.roofline_time_s(NAN, 1, 1, 1), "flops"),  # returned nan
    (lambda: sl.sizing.max_decode_batch(80e9, 16e9, 4096, NAN), "kv_bytes_token"),  # cannot convert float NaN
    (lambda: sl.sizing.max_decode_batch(NAN, 1, 1, 1), "memory_bytes"),
    (lambda: sl.sizing.streamed_exposed_s(1.0, 1e6, 2.5, 1e9), "layers"),  # 'float' ... as an integer
    (lambda: sl.sizing.streamed_exposed_s(NAN, 1e6, 10, 1e9), "prefill_s"),  # returned nan
    (lambda: sl.sizing.predicted_prefill_s("Llama-3-8B", NAN), "prompt_tokens"),  # returned nan
])
def test_sizing_refuses_nan_inf_and_negatives_naming_the_argument(call, names):
    with pytest.raises(ValueError, match=f"^{names} must be"):
        call()


def test_sizing_still_answers_on_good_numbers():
    assert sl.sizing.transfer_time_s(1e9, 1e9, 1e-3) == pytest.approx(1.001)
    assert sl.sizing.streamed_exposed_s(1.0, 1e6, 10, 1e9) > 0
    assert sl.sizing.max_decode_batch(80e9, 16e9, 4096, 131072) == 119
    assert sl.sizing.roofline_time_s(0, 0, 1, 1) == 0


# --- task B: workloads, goodput, the pools planner, the rule of thumb ---------------------------------------------

@pytest.mark.parametrize("make, what", [
    (lambda: serving.Fixed(0), "Fixed length n must be a finite token count >= 1, got 0"),  # served as 1 token
    (lambda: serving.Fixed(-5), "got -5"),  # served as 1 token
    (lambda: serving.Fixed(float("nan")), "got nan"),  # 'cannot convert float NaN to integer' at the first draw
    (lambda: serving.Uniform(5, 2), "1 <= low <= high, got low=5, high=2"),  # accepted, numpy failed later
    (lambda: LogNormal(100, float("nan"), 1, 5), "sigma=nan"),
    (lambda: LogNormal(0, 0.5, 1, 5), "LogNormal median must be > 0"),
])
def test_length_distributions_refuse_lengths_no_request_can_have(make, what):
    with pytest.raises(ValueError, match=re.escape(what)):
        make()


def test_make_workload_takes_the_simulated_executor_as_its_model():
    """``make_workload(..., model=CostModelExecutor())`` raised int(None): the executor has no vocabulary."""
    reqs = serving.make_workload("chat", 3, 1.0, model=serving.CostModelExecutor())
    assert len(reqs) == 3 and all(0 <= t < 256 for r in reqs for t in r.prompt)


def test_goodput_of_a_list_of_configs_names_the_argument():
    """A list of configs raised AttributeError: 'list' object has no attribute 'with_' from inside a run."""
    with pytest.raises(TypeError, match="config must be one ServingConfig"):
        serving.goodput("chat", [serving.ServingConfig.colocated(1)], ttft_slo_s=1, tpot_slo_s=0.1)


def test_the_rule_of_thumb_of_something_else_than_a_map_is_a_type_error():
    from splitlab.planning import rule_of_thumb
    for call in (rule_of_thumb.split_threshold, rule_of_thumb.apply_rule):
        with pytest.raises(TypeError, match="m must be a SplitMap .* got NoneType"):  # AttributeError: tpot_steps
            call(None)


@pytest.mark.parametrize("options, error, what", [
    (dict(bogus=1), TypeError, "unknown option 'bogus': the analytic cost model's options are compute_efficiency"),
    (dict(compute_efficiency=float("nan")), ValueError, "^compute_efficiency must be in"),
    (dict(link="nosuch"), ValueError, "^unknown link 'nosuch'"),
    (dict(dtype="fp7"), ValueError, "^unknown dtype 'fp7'"),
])
def test_plan_pools_refuses_a_bad_option_once_not_as_every_tp_degrees_reason(options, error, what):
    """``bogus=1`` named roofline_cost_model(), which the caller never called; a NaN efficiency, an unknown link or
    dtype came as ``NoPool: no TP degree of [1] serves Llama-3-8B on H100: TP 1: ...``."""
    from splitlab.planning.hetero import plan_pools
    from splitlab.planning.pools import NoPool
    with pytest.raises(error, match=what) as err:
        plan_pools("Llama-3-8B", "H100", "H100", max_devices=2, **options)
    assert not isinstance(err.value, NoPool) and "roofline_cost_model" not in str(err.value)


def test_decoding_text_or_floats_says_decode_takes_ids():
    """``lm.decode("x")`` raised "'<=' not supported between instances of 'int' and 'str'"."""
    from splitlab.phases.tokenizer import ByteTokenizer
    tok = ByteTokenizer()
    with pytest.raises(TypeError, match="decode takes token ids .*got the text 'x'"):
        tok.decode("x")
    with pytest.raises(TypeError, match="decode takes integer token ids, got 1.5"):
        tok.decode([72, 1.5])
    assert tok.decode([72, 105]) == "Hi" and tok.decode(list(np.array([72, 105]))) == "Hi"


@pytest.mark.parametrize("content, what", [
    ("[1, 2]", "does not hold a config object (a JSON dict), but a list"),  # AttributeError traceback: 'get'
    ('"abc"', "does not hold a config object (a JSON dict), but a str"),
    ('{"n_params": "abc", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}',
     "has n_params 'abc': a parameter count must be a number > 0"),  # could not convert string to float: 'abc'
    ('{"n_params": -8e9, "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}',
     "has n_params -8000000000.0"),  # named CostModel.prefill_per_token_s
    ('{"n_params": NaN, "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}',
     "has n_params nan"),  # "a device's shard is nan GB of weights"
    ('{"n_params": 1e300, "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}',
     "has n_params 1e+300"),  # a 300-digit shard in GB
    ('{"n_params": 8e9, "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, '
     '"max_position_embeddings": "x"}', "has max_position_embeddings 'x'"),  # invalid literal for int()
])
def test_a_model_config_that_is_no_config_is_named_on_every_command(tmp_path, content, what):
    path = tmp_path / "config.json"
    path.write_text(content)
    for command in (["plan", "--gpu", "H100", "--model-config", str(path)],
                    ["simulate", "--gpu", "H100", "--model-config", str(path), "--rate", "1"]):
        status, out, err = cli(*command)
        assert status == 1 and out == "" and what in err and len(err.strip().splitlines()) == 1, err
    if "config object" in what:
        assert what in cli("kv-size", str(path))[2]


def test_the_checkers_name_an_unknown_gpu():
    """``sl.check.ridge_point(300, gpu="nosuch")`` and its like raised a bare KeyError: 'nosuch'."""
    for call in (lambda: sl.check.ridge_point(300, gpu="nosuch"),
                 lambda: sl.check.decode_floor(0.01, "Llama-3-8B", "nosuch", 1, 100),
                 lambda: sl.check.max_tokens_in_memory(1000, "Llama-3-8B", "nosuch")):
        with pytest.raises(ValueError, match="unknown GPU 'nosuch'; choose one of"):
            call()


def test_transfer_refuses_a_cache_too_large_to_measure_before_starting_a_process():
    """``transfer --batch 100000 --prompt-tokens 16`` (3.1 GiB of tiny's cache) ran past 200 s before its first row."""
    status, out, err = cli("transfer", "--batch", "100000", "--prompt-tokens", "16", "--repeats", "1")
    assert status == 1 and out == "" and "starting the second process" not in err
    assert "a batch of 100,000 rows of 16 tokens is a 3.1 GiB cache of tiny" in err
    assert "transfer measures caches of at most 2 GiB" in err
