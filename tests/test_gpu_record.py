"""Chapter 3's recorded GPU run (splitlab/data/gpu_measured.json): its words follow its numbers."""
from __future__ import annotations

import json

import pytest

from splitlab.teach.figures.gpu_record import gpu_record, gpu_record_note


def _prefill(tokens, measured, predicted=1.0, batch=1):
    return dict(kind="prefill", batch=batch, prompt_tokens=tokens, measured_s=measured, predicted_s=predicted)


def _run(rows, pairs=()):
    return dict(date="2026-12-04T02:00:00+00:00", rows=rows, pairs=list(pairs))


def _record(*runs):
    return dict(gpu="H200", model="Llama-3-8B", command="python benchmarks/gpu_roofline.py", runs=list(runs))


def test_the_shipped_record_is_read_and_said():
    data = gpu_record()
    assert data["gpu"] == "H200" and len(data["runs"]) == 2
    text = gpu_record_note(data)
    assert "Prefills of 2,048 tokens and more" in text  # every prefill of >= 2,048 tokens within 15%, both runs
    assert "1.04 to 1.12x the prediction" in text and "CUDA graph" in text
    assert "8 decode rows" in text and "32 decode rows" in text


def test_the_threshold_is_the_smallest_size_from_which_every_run_holds():
    decode = dict(kind="decode", batch=1, measured_s=0.04, predicted_s=0.004)
    a = _run([_prefill(512, 1.3), _prefill(1024, 1.1), _prefill(2048, 1.05), decode])
    b = _run([_prefill(512, 1.1), _prefill(1024, 1.2), _prefill(2048, 1.02), decode])
    text = gpu_record_note(_record(a, b))
    assert "Prefills of 2,048 tokens and more in one forward took 1.02 to 1.05x" in text
    assert "Smaller prefills took 1.1 to 1.3x" in text and "decode steps (batch 1 to 1) 10x" in text


def test_no_size_on_the_roof_is_said():
    decode = dict(kind="decode", batch=2, measured_s=0.04, predicted_s=0.004)
    text = gpu_record_note(_record(_run([_prefill(512, 2.0), _prefill(2048, 1.5), decode])))
    assert "No prefill size landed within 15%" in text and "Prefills of" not in text


@pytest.mark.parametrize("savings, words", [
    ((0.3, 0.4), "30% to 40% less than its two passes, where the roofline predicts 30% less."),
    ((-0.2, -0.5), "20% to 50% more than its two passes, where"),
    ((-0.5, 0.1), "from 50% more to 10% less than its two passes")])
def test_fused_steps_are_said_as_measured(savings, words):
    pairs = [dict(decode_batch=8, saving=s, predicted_saving=0.3) for s in savings]
    text = gpu_record_note(_record(_run([_prefill(2048, 1.0)], pairs)))
    assert words in text
    assert ("variable-length kernel" in text) == any(s < 0 for s in savings)


@pytest.mark.parametrize("content", [{"runs": []}, {"runs": [{"rows": [{"measured_s": 0, "predicted_s": 1}]}]}])
def test_a_file_that_is_no_record_is_refused(tmp_path, content):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="no GPU record"):
        gpu_record(path)
