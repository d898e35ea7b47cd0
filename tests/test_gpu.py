"""On a CUDA GPU: the default model in bf16 still decodes exactly like transformers, timed with CUDA events."""
from __future__ import annotations

import pytest
import torch

import splitlab as sl

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def gpu_lm():
    return sl.load_model("tiny", device="cuda", dtype="bfloat16")


def test_bf16_greedy_equals_transformers_on_cuda(gpu_lm):
    assert gpu_lm.device.type == "cuda" and gpu_lm.dtype == torch.bfloat16
    prompt = gpu_lm.encode("The prefill/decode split on a GPU")
    gen = sl.generate(gpu_lm, prompt, max_new_tokens=16)
    assert gen.cache.device.type == "cuda" and gen.cache.dtype == torch.bfloat16
    assert gen.tokens[0] == sl.reference_generate(gpu_lm, prompt, 16)


def test_timer_uses_cuda_events(gpu_lm, monkeypatch):
    made = []
    real_event = torch.cuda.Event

    def counting_event(*args, **kwargs):
        event = real_event(*args, **kwargs)
        made.append(event)
        return event

    monkeypatch.setattr(torch.cuda, "Event", counting_event)
    with sl.Timer(gpu_lm.device) as timer:
        torch.ones(1024, 1024, device="cuda").matmul(torch.ones(1024, 1024, device="cuda"))
    assert len(made) == 2 and timer.seconds > 0
    out = sl.prefill(gpu_lm, "timed with events")  # the engine times its forward passes the same way
    assert len(made) == 4 and out.seconds > 0


def test_raw_baseline_takes_a_gpu_buffer():
    """Chapters 5 and 8 time ``Peer.raw`` on the buffer a GPU cache lives in: it is staged to host memory inside the
    timed call (gloo sends host memory), as ``transfer`` stages the cache (on an H200 both once raised "raw sends a
    contiguous CPU tensor")."""
    buf = torch.arange(1 << 20, dtype=torch.int32, device="cuda").view(torch.uint8)
    with sl.transfer.peer.Peer(timeout_s=120) as peer:
        seconds = peer.raw(buf)
    assert 0 < seconds < 60
