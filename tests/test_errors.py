"""Bad inputs fail early, with the documented exception type and a message that says what is wrong."""
from __future__ import annotations

import time

import pytest
import torch

import splitlab as sl
from splitlab import CacheMismatchError, ContextLengthError, EmptyPromptError, KVCache, ModelLoadError, SamplingParams

from conftest import cached_model


@pytest.fixture(scope="module")
def pre2(lm):
    return sl.prefill(lm, ["ab", "abcd"])


# --- prompts -----------------------------------------------------------------------------------------------

def test_empty_prompt_string(lm):
    with pytest.raises(EmptyPromptError, match="prompt 0 is empty"):
        sl.prefill(lm, "")
    with pytest.raises(EmptyPromptError, match="prompt 1 is empty"):
        sl.generate(lm, ["fine", ""], max_new_tokens=2)


def test_empty_token_list(lm):
    with pytest.raises(EmptyPromptError, match="prompt 0 is empty"):
        sl.prefill(lm, [[]])
    with pytest.raises(EmptyPromptError, match="prompt 1 is empty"):
        sl.prefill(lm, [[1, 2], []])
    with pytest.raises(EmptyPromptError, match="prompt 0 is empty"):
        sl.prefill(lm, torch.tensor([], dtype=torch.long))


def test_empty_batch(lm):
    with pytest.raises(EmptyPromptError, match="no prompts"):
        sl.prefill(lm, [])
    with pytest.raises(EmptyPromptError, match="no prompts"):
        sl.generate(lm, [], max_new_tokens=2)


def test_empty_prompt_error_is_a_value_error():
    assert issubclass(EmptyPromptError, ValueError) and issubclass(ContextLengthError, ValueError)
    assert issubclass(CacheMismatchError, ValueError)


def test_context_length():
    lm = cached_model("tiny-gpt2")  # 512 positions: cheap to reach the limit
    assert lm.max_context == 512
    with pytest.raises(ContextLengthError, match=r"510 tokens \+ 3 new tokens = 513, beyond .* context of 512"):
        sl.generate(lm, [1] * 510, max_new_tokens=3)
    with pytest.raises(ContextLengthError, match="beyond the model's context of 512"):
        sl.prefill(lm, [[1] * 10, [1] * 513])
    # exactly at the limit is fine: 510 + 2 new tokens
    assert len(sl.generate(lm, [1] * 510, max_new_tokens=2).tokens[0]) == 2
    # a full cache cannot take one more token
    full = sl.prefill(lm, [1] * 512)
    assert full.cache.seq_len == 512
    with pytest.raises(ContextLengthError, match="512 tokens, the model's context"):
        sl.decode_step(lm, full.cache, [1])


def test_token_ids_outside_vocabulary(lm, pre2):
    assert lm.vocab_size == 259
    with pytest.raises(ValueError, match="token id 259 outside the vocabulary 0..258"):
        sl.prefill(lm, [1, 2, 259])
    with pytest.raises(ValueError, match="token id -1 outside"):
        sl.prefill(lm, [[5], [-1, 3]])
    with pytest.raises(ValueError, match="must be in 0..258"):
        sl.decode_step(lm, pre2.cache, [1, 259])
    with pytest.raises(ValueError, match="must be in 0..258"):
        sl.decode_step(lm, pre2.cache, [-3, 1])


# --- caches ------------------------------------------------------------------------------------------------

def test_decode_with_cache_of_another_model(pre2):
    other = cached_model("tiny-mqa")
    with pytest.raises(CacheMismatchError, match="cache was made by 'tiny\\|.*not by this model 'tiny-mqa\\|"):
        sl.decode_step(other, pre2.cache, [1, 2])


def test_merge_caches_of_different_configs(pre2):
    other = sl.prefill(cached_model("tiny-mha"), "ab").cache
    with pytest.raises(CacheMismatchError, match="cannot batch caches of different models"):
        KVCache.merge([pre2.cache, other])


def test_wrong_number_of_tokens(lm, pre2):
    with pytest.raises(CacheMismatchError, match="1 tokens for a cache of batch 2"):
        sl.decode_step(lm, pre2.cache, [1])
    with pytest.raises(CacheMismatchError, match="3 tokens for a cache of batch 2"):
        sl.decode_step(lm, pre2.cache, torch.tensor([1, 2, 3]))


# --- generate and sampling parameters -----------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, -1])
def test_max_new_tokens_below_one(lm, n):
    with pytest.raises(ValueError, match=f"max_new_tokens must be >= 1, got {n}"):
        sl.generate(lm, "hello", max_new_tokens=n)


def test_prefill_negative_max_new_tokens(lm):
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0"):
        sl.prefill(lm, "hello", max_new_tokens=-1)


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=-0.5), "temperature must be >= 0"),
    (dict(temperature=1.0, top_k=0), "top_k must be >= 1"),
    (dict(temperature=1.0, top_p=1.5), "top_p must be in \\(0, 1\\]"),
    (dict(temperature=1.0, top_p=0.0), "top_p must be in \\(0, 1\\]"),
])
def test_bad_sampling_params(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**kwargs)


# --- loading -----------------------------------------------------------------------------------------------

def test_unknown_hub_name_offline_fails_fast(offline):
    t0 = time.perf_counter()
    with pytest.raises(ModelLoadError, match="could not load model 'no-such-org/no-such-model-1234'.*'tiny'"):
        sl.load_model("no-such-org/no-such-model-1234", device="cpu")
    assert time.perf_counter() - t0 < 10
    assert offline == [], "the loader tried the network although HF_HUB_OFFLINE=1"


def test_empty_model_name():
    with pytest.raises(ValueError, match="non-empty string"):
        sl.load_model("", device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_cuda_without_gpu():
    with pytest.raises(ValueError, match="no CUDA GPU"):
        sl.load_model("tiny", device="cuda")


@pytest.mark.parametrize("dtype", ["float13", "int3"])
def test_unknown_dtype(dtype):
    with pytest.raises(ValueError, match=f"unknown dtype '{dtype}'"):
        sl.load_model("tiny", device="cpu", dtype=dtype)
