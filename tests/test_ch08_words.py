"""Chapter 8's sentences against the numbers printed beside them (a fresh reader's screenshots, 2026-12-03)."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from splitlab.teach.figures import confusions_real, confusions_tables


def _variants(int8_bytes=1060):
    return {"float32": SimpleNamespace(nbytes=4100), "fp16": SimpleNamespace(nbytes=2050),
            "int8": SimpleNamespace(nbytes=int8_bytes), "fp8": SimpleNamespace(nbytes=1060)}


def test_the_quant_note_calls_same_size_transfers_apart_noise():
    # the page said int8 "fell less than in proportion to the bytes: a transfer costs a fixed latency" (0.79x the
    # time) and fp8 "fell about in proportion" (0.39x) for buffers of the very same size: now one explanation for
    # both, from their mean, and the gap between them called noise
    note = confusions_tables.quant_note(_variants(), {"float32": 3.17e-3, "fp16": 1.94e-3, "int8": 1.53e-3,
                                                      "fp8": 0.757e-3})
    assert "their transfers took 0.79x and 0.39x fp16's time: one took 2x the other's time for the same bytes" in note
    assert "this machine's noise. Taken together (their mean, 0.59x), they fell about in proportion" in note
    steady = confusions_tables.quant_note(_variants(), {"float32": 3e-3, "fp16": 2e-3, "int8": 1.2e-3, "fp8": 1.1e-3})
    assert "noise" not in steady and steady.count("fell about in proportion to the bytes") == 1
    faster = confusions_tables.quant_note(_variants(), {"float32": 3e-3, "fp16": 2e-3, "int8": 0.6e-3, "fp8": 0.6e-3})
    assert "fell further than the bytes, which bytes over bandwidth cannot do" in faster  # 0.3x time, 0.52x bytes
    # the page said int8 "did not fall at all: ... the fixed latency ... outweigh the bytes saved" at 2.26x the time;
    # with buffers of different sizes each transfer gets its own sentence
    slower = confusions_tables.quant_note(_variants(1000), {"float32": 3e-3, "fp16": 1.97e-3, "int8": 4.44e-3,
                                                             "fp8": 3.08e-3})
    assert "The int8 transfer took 2.3x fp16's time for 0.488x its bytes: it took longer for fewer bytes" in slower
    assert "did not fall at all" not in slower


def test_the_quality_note_bounds_the_logit_error_by_the_tables_value():
    # "logits off by at most 1.3" beside a table's 1.34 (and 0.28 for 0.284)
    q = pd.DataFrame([dict(scheme=s, kv_bytes=b, bytes_ratio=b / 5040, tokens=30, tokens_differ=0, prompts_differ=0,
                           step_agreement=1.0, kl_mean=k, kl_max=k * 4, logit_err_max=e)
                      for s, b, k, e in [("full", 5040, 0.0, 0.0), ("int8", 1310, 1.2e-4, 0.284),
                                         ("fp8", 1310, 2.39e-3, 1.34)]])
    note = confusions_real.quality_note(q, 3, full_name="float32")
    assert "logits off by at most 0.284" in note and "logits off by at most 1.34" in note
