"""Loading: the random-weight presets, and the Hugging Face path (a local directory saved with save_pretrained,
with its own tokenizer or without one) exercised without any download."""
from __future__ import annotations

import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

import splitlab as sl
from splitlab import ByteTokenizer, ModelLoadError
from splitlab.phases.engine import forward_logits

from conftest import ARCH_PRESETS, cached_model

SENTENCES = ["the cat sat on the mat", "a dog ran to the cat", "the prefill reads the prompt once",
             "decode adds one token at a time"]


def word_tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A real (tiny) word-level tokenizer trained in memory, adding BOS like Llama's."""
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]", "[BOS]", "[EOS]"]))
    tok.post_processor = processors.TemplateProcessing(single="[BOS] $A",
                                                       special_tokens=[("[BOS]", tok.token_to_id("[BOS]"))])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                                bos_token="[BOS]", eos_token="[EOS]")


@pytest.fixture(scope="module")
def saved_dir(tmp_path_factory):
    """'tiny' saved with save_pretrained, plus a word-level tokenizer in the same directory."""
    d = tmp_path_factory.mktemp("tiny_with_tokenizer")
    cached_model("tiny").model.save_pretrained(d)
    word_tokenizer().save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def loaded(saved_dir):
    return sl.load_model(str(saved_dir), device="cpu")


def test_local_dir_loads_trained_weights_and_its_tokenizer(loaded, saved_dir, offline):
    lm = cached_model("tiny")
    assert loaded.random_weights is False
    assert not isinstance(loaded.tokenizer, ByteTokenizer)
    assert isinstance(loaded.tokenizer, transformers.PreTrainedTokenizerBase)
    reference = word_tokenizer()
    ids = loaded.encode("the cat sat on the mat")
    assert ids == reference("the cat sat on the mat")["input_ids"]
    assert ids[0] == reference.bos_token_id and reference.unk_token_id not in ids
    assert loaded.decode(ids) == "the cat sat on the mat"
    assert loaded.geometry == lm.geometry and loaded.n_params == lm.n_params
    assert loaded.model_id.startswith(str(saved_dir) + "|llama|L4|H8|KV2|D32|")
    # no network was needed for any of it
    assert sl.load_model(str(saved_dir), device="cpu").random_weights is False
    assert offline == []


def test_local_dir_gives_identical_logits(loaded):
    lm = cached_model("tiny")
    ids = torch.tensor([[256, 3, 17, 99, 200, 5]])
    mask = torch.ones_like(ids)
    ours, _, _ = forward_logits(loaded, ids, mask, None)
    theirs, _, _ = forward_logits(lm, ids, mask, None)
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-6)


def test_local_dir_generates_from_text(loaded):
    lm = cached_model("tiny")
    prompts = ["the cat sat", "a dog ran on the mat"]
    gen = sl.generate(loaded, prompts, max_new_tokens=5)
    assert [len(t) for t in gen.tokens] == [5, 5]
    assert gen.prompt_lengths == [4, 7]  # BOS + words
    assert gen.tokens == sl.generate(lm, [loaded.encode(p) for p in prompts], max_new_tokens=5).tokens
    assert gen.tokens[0] == sl.reference_generate(loaded, loaded.encode(prompts[0]), 5)
    assert isinstance(loaded.decode(gen.tokens[0]), str)


def test_local_dir_in_bfloat16(saved_dir):
    lm = sl.load_model(str(saved_dir), device="cpu", dtype="bfloat16")
    assert lm.dtype == torch.bfloat16
    assert {p.dtype for p in lm.model.parameters()} == {torch.bfloat16}
    assert sl.prefill(lm, "the cat").cache.dtype == torch.bfloat16


def test_dir_without_tokenizer_falls_back_to_bytes(tmp_path, offline):
    cached_model("tiny-gpt2").model.save_pretrained(tmp_path)
    lm = sl.load_model(str(tmp_path), device="cpu")
    assert isinstance(lm.tokenizer, ByteTokenizer) and lm.random_weights is False
    gen = sl.generate(lm, "hello", max_new_tokens=3)
    assert gen.prompt_lengths == [6] and len(gen.tokens[0]) == 3
    assert gen.tokens == sl.generate(cached_model("tiny-gpt2"), "hello", max_new_tokens=3).tokens
    assert offline == []


def test_tokenizer_needing_a_missing_library(saved_dir, monkeypatch):
    def needs_protobuf(*args, **kwargs):
        raise ImportError("LlamaConverter requires the protobuf library but it was not found in your environment.")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", needs_protobuf)
    with pytest.raises(ModelLoadError, match="needs a library that is not installed: LlamaConverter requires"):
        sl.load_model(str(saved_dir), device="cpu")


def test_dir_without_tokenizer_and_small_vocab(tmp_path):
    config = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2, n_positions=64)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="no tokenizer and its vocabulary is too small"):
        sl.load_model(str(tmp_path), device="cpu")


def test_dir_that_is_not_a_model(tmp_path, offline):
    with pytest.raises(ModelLoadError, match="could not load model.*'tiny'"):
        sl.load_model(str(tmp_path), device="cpu")


# --- presets -----------------------------------------------------------------------------------------------

def test_presets_listed():
    presets = sl.list_presets()
    assert set(ARCH_PRESETS) <= set(presets)
    assert {"smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b"} <= set(presets)


def test_preset_properties(lm):
    assert lm.random_weights is True and isinstance(lm.tokenizer, ByteTokenizer)
    assert lm.vocab_size == 259 and lm.max_context == 2048
    assert lm.model_id == "tiny|llama|L4|H8|KV2|D32|float32"
    assert lm.weight_bytes == 4 * lm.n_params
    assert "GQA" in repr(lm) and "random weights" in repr(lm)
    assert not lm.model.training


def test_seed_fixes_weights_and_leaves_global_rng_alone():
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    a = sl.load_model("tiny-qwen2", device="cpu", seed=7)
    assert torch.equal(torch.rand(3), expected)  # loading did not consume the caller's random stream
    b = sl.load_model("tiny-qwen2", device="cpu", seed=7)
    c = sl.load_model("tiny-qwen2", device="cpu", seed=8)
    pa, pb, pc = (dict(m.model.named_parameters()) for m in (a, b, c))
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert not all(torch.equal(pa[k], pc[k]) for k in pa)


def test_preset_in_bfloat16():
    lm = cached_model("tiny", "bfloat16")
    assert lm.dtype == torch.bfloat16 and lm.model_id.endswith("|bfloat16")
    assert lm.weight_bytes == 2 * lm.n_params
    assert len(sl.generate(lm, "hi", max_new_tokens=3).tokens[0]) == 3


def test_byte_tokenizer_round_trip():
    tok = ByteTokenizer()
    text = "héllo ✓ KV"
    ids = tok.encode(text)
    assert ids[0] == tok.bos_token_id and ids[1:] == list(text.encode("utf-8"))
    assert tok.encode(text, add_bos=False) == ids[1:]
    assert tok.decode(ids) == text
    assert tok.decode(torch.tensor(ids + [tok.eos_token_id, tok.pad_token_id])) == text
    assert tok.decode([104, 105, 300]) == "hi\ufffd"
