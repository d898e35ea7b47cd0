"""Chapter 5 (moving the KV cache): its exercise checkers."""
from __future__ import annotations

from typing import Any

from ... import sizing
from .verdict import verdict

__all__ = ['kv_transfer_bytes', 'link_transfer_seconds', 'transfer_decode_steps', 'streamed_exposed',
           'transfer_prediction']


def kv_transfer_bytes(answer: Any, model: str, prompt_tokens: int, dtype: str = "fp16", batch: int = 1) -> bool:
    """Ch. 5: bytes the prefill worker must send for ``batch`` prompts of ``prompt_tokens`` tokens of ``model`` (a
    published model or preset) in ``dtype``: the whole KV cache, :func:`splitlab.sizing.kv_bytes`."""
    expected = sizing.kv_bytes(sizing.resolve_config(model), prompt_tokens, batch, dtype)
    return verdict(answer, expected, 0.001, f"the KV bytes to move for {batch} x {prompt_tokens} tokens of {model}",
                   "prompt tokens x 2 (K and V) x layers x KV heads x head_dim x bytes per element.")


def link_transfer_seconds(answer: Any, model: str, prompt_tokens: int, link: str, dtype: str = "fp16") -> bool:
    """Ch. 5: seconds to move the KV cache of one ``prompt_tokens`` prompt of ``model`` over ``link`` (a name in
    :data:`splitlab.sizing.LINKS`, one direction's bandwidth), latency ignored."""
    expected = sizing.handoff(model, prompt_tokens, link, dtype=dtype)["transfer_s"]
    return verdict(answer, expected, 0.01, f"the transfer time over {link} in seconds",
                   "KV bytes of the prompt divided by the link's bytes per second (sizing.LINKS[link]"
                   "['bandwidth_bytes_per_s']; GB/s x 1e9).")


def transfer_decode_steps(answer: Any, model: str, prompt_tokens: int, link: str, gpu: str = "H100",
                          dtype: str = "fp16") -> bool:
    """Ch. 5: how many minimum decode steps of ``model`` on ``gpu`` (weights + this cache read once per step) the
    transfer of one ``prompt_tokens`` prompt's cache over ``link`` lasts (:func:`splitlab.sizing.handoff`)."""
    expected = sizing.handoff(model, prompt_tokens, link, gpu, dtype)["decode_steps"]
    return verdict(answer, expected, 0.02, f"the transfer over {link} in {gpu} decode steps",
                   "transfer time / sizing.min_decode_step_s(weight bytes, KV bytes of the prompt, GPU memory "
                   "bandwidth); weight bytes = parameters x bytes per element.")


def streamed_exposed(answer: Any, prefill_s: float, nbytes: float, layers: int, bandwidth_bytes_per_s: float,
                     latency_s: float = 0.0) -> bool:
    """Ch. 5: transfer time (s) left after a prefill of ``prefill_s`` when each of ``layers`` layers sends its
    share of ``nbytes`` as soon as it is computed (:func:`splitlab.sizing.streamed_exposed_s`)."""
    expected = sizing.streamed_exposed_s(prefill_s, nbytes, layers, bandwidth_bytes_per_s, latency_s)
    return verdict(answer, expected, 0.02, "the transfer time left after the prefill (s)",
                   "layer i is ready at (i + 1) x prefill / layers; the link sends one layer after another, each "
                   "taking latency + its bytes / bandwidth; subtract the prefill time from when the last one "
                   "arrives. If the link keeps up, only the last layer is left.")



def transfer_prediction(answer: Any, nbytes: int, latency_s: float, bandwidth_bytes_per_s: float,
                        measured_s: float | None = None) -> bool:
    """Ch. 5 (experiment): the predicted transfer time (s) of ``nbytes`` over a link fitted as ``latency_s`` +
    bytes / ``bandwidth_bytes_per_s``; with ``measured_s`` (the reader's own run of that transfer), also says how
    far the run landed from the prediction."""
    expected = sizing.transfer_time_s(nbytes, bandwidth_bytes_per_s, latency_s)
    ok = verdict(answer, expected, 0.02, "the predicted transfer time (s)",
                 "latency + bytes / bandwidth, with the fit to whole-cache transfers.")
    if ok and measured_s is not None:
        miss = measured_s / expected - 1
        print(f"Your run: {measured_s * 1e3:.2f} ms measured against {expected * 1e3:.2f} ms predicted ({miss:+.0%}"
              + ("; within a quarter: the line holds at this size)." if abs(miss) <= 0.25 else
                 "; more than a quarter off: the machine's load changed between the sweep and this run)."))
    return ok
