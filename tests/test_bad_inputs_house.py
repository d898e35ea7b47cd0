"""Bad and odd inputs to the serving house (issue 7), tried as a careless user would: each was a deep traceback, a
silent no-op, a lost request or a hang, and is now an early error naming the problem (or a correct run).

Distributed cases here fail before any process starts (they must: a bad name or hook is known up front), so they
cost nothing; the one run that starts workers is marked as such and kept to two tiny workers.
"""
from __future__ import annotations

import json
import math
import time

import pytest
import torch

import splitlab as sl
from splitlab import serving
from splitlab.cli import main
from splitlab.costmodel import CostModel
from splitlab.serving import CostModelExecutor, KillWorker, Request, ServingConfig, make_workload

SIM = make_workload("chat", 6, 4.0)


def _counts(res) -> tuple[int, int, int, int]:
    m = res.metrics(None, None)
    return m["submitted"], m["completed"], m["rejected"], m["failed"]


# --- the configuration ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(chunk_tokens=0), "chunk_tokens must be >= 1, got 0"),           # accepted (unused) by prefill-first
    (dict(max_retries=-1), "max_retries must be >= 0, got -1"),
    (dict(trace="no"), "trace must be True or False, got 'no'"),          # a truthy string kept the trace on
])
def test_config_fields_out_of_range_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ServingConfig(**kwargs)


# --- requests ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, message", [
    (dict(id="a"), TypeError, "request id must be an integer, got 'a'"),   # ids mixed str/int broke sorting
    (dict(id=1.5), TypeError, "request id must be an integer"),
    (dict(arrival_s="1"), TypeError, "request 0: arrival_s must be a time in seconds, got '1'"),  # TypeError
    (dict(sampling="greedy"), TypeError, "request 0: sampling must be None \\(greedy\\) or a splitlab.SamplingParams"),
])
def test_bad_request_fields_are_refused_when_made(kwargs, error, message):
    fields = {**dict(id=0, arrival_s=0.0, prompt=[1, 2, 3], max_new_tokens=2), **kwargs}
    with pytest.raises(error, match=message):
        Request(**fields)


def test_a_negative_token_id_is_rejected_at_arrival_even_by_the_simulator():
    """A cost model has no vocabulary, so the simulated back end served prompt id -5 as if it were a token."""
    res = serving.run([Request(0, 0.0, [3, -5], 2), Request(1, 0.0, [3, 5], 2)])
    assert [r.state.value for r in res.requests] == ["rejected", "finished"]
    assert res.requests[0].reject_reason == "prompt token id -5 is outside the model's vocabulary (ids are >= 0)"


def test_a_generator_of_requests_is_served_whole():
    """It was read once by the type check and then served as nothing: 0 submitted, no error."""
    res = serving.run(r for r in SIM)
    assert _counts(res) == (6, 6, 0, 0)
    cmp = serving.compare((r for r in SIM), serving.contenders())
    assert [len(r.requests) for r in cmp.results.values()] == [6, 6]


@pytest.mark.parametrize("requests, message", [
    (None, "requests must be a list of splitlab.serving.Request .*got NoneType"),   # 'NoneType' is not iterable
    ([SIM[0], None], "requests must be splitlab.serving.Request objects .*got a NoneType"),
    ([{"id": 0}], "got a dict"),
])
def test_requests_that_are_not_requests(requests, message):
    with pytest.raises(TypeError, match=message):
        serving.run(requests)


def test_run_does_not_mutate_its_inputs_on_any_layout():
    before = [(r.state, list(r.output), r.finish_s) for r in SIM]
    for cfg in (ServingConfig(), ServingConfig.disaggregated(1, 2), ServingConfig(policy="chunked", chunk_tokens=64)):
        assert _counts(serving.run(SIM, cfg)) == (6, 6, 0, 0)
    assert [(r.state, list(r.output), r.finish_s) for r in SIM] == before


# --- what a run is given -------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, kwargs, error, message", [
    ((dict(workers=2),), {}, TypeError, "config must be a splitlab.serving.ServingConfig .*got dict"),  # AttributeError
    (("colocated",), {}, TypeError, "config must be a splitlab.serving.ServingConfig .*got str"),
    ((None, "simulated"), {}, TypeError, "backend must be a serving executor .*got str"),  # AttributeError
    ((None, CostModel()), {}, TypeError, "got CostModel: wrap it with serving.CostModelExecutor\\(cost\\)"),
    ((), dict(faults="boom"), TypeError, "faults must be a fault hook"),            # 'str' object is not callable
    ((), dict(faults=KillWorker("D0")), ValueError, "KillWorker names worker 'D0', which this run does not have "
                                                    "\\(its workers: W0\\)"),        # silently never fired
    ((), dict(faults=KillWorker("W0", "join")), ValueError, "KillWorker event 'join' never happens in a serving run"),
])
def test_run_refuses_what_it_cannot_use(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        serving.run(SIM, *args, **kwargs)


def test_model_and_backend_together_are_refused(lm):
    """The backend silently won; the model was ignored."""
    with pytest.raises(ValueError, match="give model= .* or backend=, not both"):
        serving.run(SIM, ServingConfig(), CostModelExecutor(), model=lm)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(after=1.5), ValueError, "after must be an integer >= 1"),   # never equal to a count: never fired
    (dict(after="2"), ValueError, "after must be an integer >= 1"),   # '<' not supported between str and int
    (dict(worker=0), TypeError, "worker must be a worker's name"),
    (dict(request="7"), TypeError, "request must be a request id"),
])
def test_kill_worker_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        KillWorker(**{"worker": "W0", **kwargs})


def test_one_kill_worker_fires_in_every_run_it_is_given_to():
    """Its event count carried over, so the second run with the same hook was served without the fault."""
    hook = KillWorker("D0", "step", after=2)
    for _ in range(2):
        res = serving.run(SIM, ServingConfig.disaggregated(1, 2), faults=hook)
        assert any("D0" in note for note in res.notes) and _counts(res) == (6, 6, 0, 0)


# --- compare and contenders ----------------------------------------------------------------------------------

def test_compare_refuses_duplicate_names_and_non_configs_before_running():
    with pytest.raises(ValueError, match="appear more than once"):  # one of the two was dropped silently
        serving.compare(SIM, [ServingConfig(), ServingConfig()])
    with pytest.raises(TypeError, match="configs must be a dict name -> ServingConfig"):  # not iterable
        serving.compare(SIM, None)
    with pytest.raises(TypeError, match="config must be a splitlab.serving.ServingConfig"):
        serving.compare(SIM, {"a": ServingConfig(), "b": "disaggregated"})
    with pytest.raises(ValueError, match="at least one configuration"):
        serving.compare(SIM, {})


def test_contenders_with_zero_workers_is_refused():
    """workers=0 was read as 'not given' and became 2 workers."""
    with pytest.raises(ValueError, match="every pool needs at least one worker"):
        serving.contenders(workers=0)
    assert serving.contenders(workers=3)["colocated"].workers == 3


# --- workloads -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, message", [
    (dict(n_requests=2.5), TypeError, "number of requests must be an integer, got 2.5"),  # numpy's message
    (dict(n_requests=True), TypeError, "number of requests must be an integer"),
    (dict(rate_per_s=math.inf), ValueError, "rate_per_s must be a finite rate > 0"),       # every arrival at 0
    (dict(rate_per_s="2"), TypeError, "rate_per_s must be a number of requests/s"),
    (dict(name=None), TypeError, "name must be a workload name"),                          # AttributeError
    (dict(sampling="x"), TypeError, "sampling must be None \\(greedy\\) or a splitlab.SamplingParams"),
    (dict(model="tiny"), TypeError, "model must be a splitlab LoadedModel \\(lm = splitlab.load_model\\('tiny'\\)\\)"),
    (dict(arrival="gamma", cv=math.nan), ValueError, "cv must be in \\[0.001, 100\\]"),
])
def test_make_workload_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        make_workload(**{"name": "chat", "n_requests": 4, "rate_per_s": 2.0, **kwargs})


# --- the simulated back end's cost model ---------------------------------------------------------------------

ZERO = dict(prefill_base_s=0, prefill_per_token_s=0, decode_base_s=0, decode_per_seq_s=0, decode_per_token_s=0)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(decode_base_s=math.nan), ValueError, "CostModel.decode_base_s must be a finite number >= 0, got nan"),  # hung
    (dict(prefill_base_s=-1.0), ValueError, "CostModel.prefill_base_s must be a finite number >= 0"),  # served anyway
    (dict(decode_per_seq_s=-1e-3), ValueError, "decode_per_seq_s"),
    (dict(transfer_bytes_per_s=0), ValueError, "CostModel.transfer_bytes_per_s must be > 0"),  # ZeroDivisionError
    (dict(transfer_bytes_per_s=-math.inf), ValueError, "transfer_bytes_per_s must be a finite number"),
    (dict(prefill_per_token_s="1"), TypeError, "CostModel.prefill_per_token_s must be a number"),
    (dict(kv_bytes_per_token=0), ValueError, "CostModel.kv_bytes_per_token must be > 0"),
    (dict(max_context=0), ValueError, "CostModel.max_context must be > 0"),
    (ZERO, ValueError, "predicts a prefill and a decode step of 0 s"),  # every latency 0, throughput infinite
])
def test_cost_models_a_simulator_cannot_run_on_are_refused(kwargs, error, message):
    t0 = time.perf_counter()
    with pytest.raises(error, match=message):
        serving.run(SIM, ServingConfig.disaggregated(), CostModelExecutor(CostModel(**kwargs)))
    assert time.perf_counter() - t0 < 5


def test_cost_model_executor_of_something_else():
    with pytest.raises(TypeError, match="needs a splitlab.costmodel.CostModel, got str"):  # AttributeError
        CostModelExecutor("fast")


def test_a_context_smaller_than_the_prompts_rejects_each_with_its_reason():
    res = serving.run(SIM, ServingConfig.disaggregated(), CostModelExecutor(CostModel(max_context=8)))
    assert _counts(res) == (6, 0, 6, 0)
    assert all("exceed the model's context of 8" in r.reject_reason for r in res.requests)


# --- every back end accounts for every request ---------------------------------------------------------------

def _mixed(lm) -> list[Request]:
    ok = sl.profiling.random_prompt(lm, 12, seed=1)
    return [Request(0, 0.0, ok, 3), Request(1, 0.0, [lm.vocab_size + 5], 2),  # out of the vocabulary
            Request(2, 0.001, ok, lm.max_context),                              # beyond the context
            Request(3, 0.002, ok[:5], 1), Request(4, 0.002, ok[:7], 2)]         # one-token request


@pytest.mark.parametrize("cfg", [ServingConfig(kv_budget_bytes=None), ServingConfig.disaggregated(1, 2),
                                 ServingConfig(policy="chunked", chunk_tokens=20, max_batch=4)],
                         ids=["colocated", "1P2D", "chunked"])
def test_emulated_and_simulated_account_for_every_request(lm, cfg):
    reqs = _mixed(lm)
    emulated = serving.run(reqs, cfg, model=lm)
    simulated = serving.run(reqs, cfg, CostModelExecutor(CostModel(max_context=lm.max_context)))
    assert _counts(emulated) == (5, 3, 2, 0)
    assert _counts(simulated) == (5, 4, 1, 0)  # a cost model has no vocabulary: only the context rejects
    reference = serving.reference_tokens(lm, [r for r in reqs if r.id in (0, 3, 4)])
    assert {r.id: r.output for r in emulated.completed} == reference
    assert all(r.reject_reason for r in emulated.rejected + simulated.rejected)


# --- the distributed back end: refused before any process starts ---------------------------------------------

def test_distributed_with_a_model_no_worker_can_load_fails_at_once(offline):
    """Each worker spent ~30 s in the hub client's retries before the run said 'worker exited'."""
    t0 = time.perf_counter()
    with pytest.raises(sl.ModelLoadError, match="'no-such-org/no-such-model' is not a preset, not a local directory"):
        serving.DistributedBackend("no-such-org/no-such-model")
    with pytest.raises(sl.ModelLoadError, match="model path './no/such/dir' does not exist"):
        serving.DistributedBackend("./no/such/dir")
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize("kwargs, message", [
    (dict(threads=0), "threads must be an integer in 1 .. "),      # every worker died in torch.set_num_threads
    (dict(threads=10 ** 5), r"this machine has \d+ CPUs\), got 100000"),  # each of the workers would start them
    (dict(dtype="fp7"), "unknown dtype 'fp7'"),                     # every worker died loading the model
    (dict(timeout_s=0), "timeout_s must be a time > 0 s"),
])
def test_distributed_backend_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        serving.DistributedBackend("tiny", **kwargs)


def test_distributed_backend_without_workers_says_so():
    """max_context raised 'min() arg is an empty sequence'."""
    backend = serving.DistributedBackend("tiny")
    with pytest.raises(sl.transfer.group.DistributedError, match="has no workers \\(not started yet, or closed\\)"):
        backend.max_context
    backend.close()
    with pytest.raises(sl.transfer.group.DistributedError, match="has no workers"):
        backend.auto_kv_budget()


@pytest.mark.parametrize("faults, error, message", [
    (lambda event, worker, ids: None, TypeError, "must be picklable"),   # AttributeError from pickle, mid-run
    (KillWorker("W0"), ValueError, "KillWorker names worker 'W0'.*its workers: P0, D0"),
])
def test_distributed_fault_hooks_that_could_never_act(faults, error, message):
    backend = serving.DistributedBackend("tiny")
    with pytest.raises(error, match=message):
        serving.run(SIM, ServingConfig.disaggregated(1, 1), backend, faults=faults)
    assert backend.group is None  # refused before any worker process was started


# --- the command line --------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["kv-size", "tiny", "--dtype", "fp7"],           # exit 1 ('what it names cannot be used'): a malformed value
    ["demo", "--dtype", "int8"],
    ["transfer", "--dtype", "fp7"],
    ["compare", "--backend", "simulated", "--torchrun"],  # --torchrun was ignored without a word
])
def test_malformed_command_lines_exit_2_in_one_line(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as done:
        code = done.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "error" in err[0], err


def test_kv_size_of_a_latent_only_mla_config(tmp_path, capsys):
    """An MLA config without qk_nope_head_dim/v_head_dim failed (exit 1) while computing an optional note."""
    cfg = dict(num_hidden_layers=4, num_attention_heads=8, kv_lora_rank=512, qk_rope_head_dim=64)
    (tmp_path / "mla.json").write_text(json.dumps(cfg))
    assert main(["kv-size", str(tmp_path / "mla.json"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kv_bytes_per_token"] == 4 * (512 + 64) * 2 and "kv_bytes_per_token_expanded" not in data
    (tmp_path / "bad.json").write_text(json.dumps(dict(cfg, kv_lora_rank=-5)))
    assert main(["kv-size", str(tmp_path / "bad.json")]) == 1  # was 'expanded MLA sizing needs ...'
    assert "kv_lora_rank must be a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(timeout_s=0), ValueError, "timeout_s must be a time > 0 s, got 0"),   # every exchange 'did not answer'
    (dict(timeout_s=math.nan), ValueError, "timeout_s must be a time > 0 s, got nan"),
    (dict(timeout_s="3"), ValueError, "timeout_s must be a time > 0 s"),         # TypeError from max()
    (dict(join_timeout_s=0), ValueError, "join_timeout_s must be a time > 0 s"),
    (dict(threads=0), ValueError, "threads must be an integer in 1 \\.\\. "),          # the child died on it
    (dict(threads=10 ** 5), ValueError, "threads must be an integer in 1 \\.\\. .*CPUs\\), got 100000"),  # segfault
    (dict(device="meta"), ValueError, "device must be 'cpu', 'cuda' or 'cuda:N'"),
    (dict(fault="x"), TypeError, "fault must be a fault hook"),
])
def test_peer_options_are_checked_before_a_process_starts(kwargs, error, message):
    from splitlab.transfer.peer import Peer
    with pytest.raises(error, match=message):
        Peer(**kwargs)


@pytest.mark.parametrize("data, error, message", [
    (torch.zeros(4, 4, dtype=torch.uint8).t(), ValueError, "raw sends a contiguous tensor"),
    (0, ValueError, "raw needs at least one byte, got 0"),
    (True, TypeError, "raw takes a byte count or a tensor, got bool"),
    (torch.zeros(2, 0, 3), ValueError, "raw needs at least one byte, got a tensor of 0"),  # break30: timed 0 bytes
    (torch.zeros(3, device="meta"), ValueError, "a meta tensor holds no data"),  # broke the peer from inside
    (torch.zeros(3).to_sparse(), ValueError, "raw sends a strided tensor, got torch.sparse_coo"),  # '.contiguous()'
])
def test_peer_raw_refuses_what_it_cannot_send_before_any_exchange(data, error, message):
    from splitlab.transfer.peer import Peer
    with pytest.raises(error, match=message):
        Peer().raw(data)  # never started: the check comes first


def test_goodput_per_zero_workers():
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):  # ZeroDivisionError
        serving.metrics.goodput([(1.0, 1.0)], workers=0)


def test_the_same_odd_requests_on_the_distributed_back_end(lm):
    """Out-of-vocabulary, beyond-the-context and one-token requests beside normal ones: every one accounted for,
    with the emulated back end's tokens, on a split and (the same two processes) colocated with chunking."""
    reqs = _mixed(lm)
    emulated = serving.run(reqs, ServingConfig.disaggregated(1, 1), model=lm)
    with serving.DistributedBackend("tiny", timeout_s=30) as backend:
        for cfg in (ServingConfig.disaggregated(1, 1), ServingConfig(workers=2, policy="chunked", chunk_tokens=8,
                                                                     max_batch=2)):
            res = serving.run(reqs, cfg, backend)
            assert _counts(res) == (5, 3, 2, 0), res.notes
            assert [r.reject_reason for r in res.rejected] == [r.reject_reason for r in emulated.rejected]
            assert res.tokens() == emulated.tokens()
