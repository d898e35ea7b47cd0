"""More bad inputs and edge cases, each found by trying to break the public API and CLI: every one must fail early
with a clear error (or be served correctly), never give silent garbage or lose a request."""
from __future__ import annotations

import pytest

import splitlab as sl
from splitlab import serving
from splitlab.serving import DecodeBatch, ModelExecutor, Request, Slot


@pytest.fixture(scope="module")
def executor(lm):
    return ModelExecutor(lm, warm=False)


# --- request ids ---------------------------------------------------------------------------------------------

def test_a_slot_that_reuses_an_old_request_id_brings_its_own_cache(lm, executor):
    """A decode worker keeps its batch between runs; the next run's request 0 must not decode on the last run's
    cache of request 0 (it did: the merged batch cache was matched to slots by request id)."""
    batch = DecodeBatch()
    for prompt in ([1, 2, 3], [1, 2, 3], [7, 8, 9, 10]):  # the same id three times, one run after another
        slot = Slot(Request(0, 0.0, prompt, 3))
        slot.last_token = executor.prefill([slot], [len(prompt)]).first_tokens[0]
        slot.request.emit(slot.last_token, 0.0)
        batch.slots = [slot]
        while not slot.request.done:
            tok = executor.decode(batch).tokens[0]
            slot.request.emit(tok, 0.0)
            slot.last_token = tok
        batch.slots = []
        assert slot.request.output == sl.generate(lm, prompt, max_new_tokens=3).tokens[0]


@pytest.mark.parametrize("layout", ["colocated", "disaggregated"])
def test_duplicate_request_ids_are_refused_before_any_work(layout):
    reqs = [Request(0, 0.0, [1, 2, 3], 2), Request(0, 0.0, [4, 5, 6, 7], 8), Request(1, 0.0, [9], 6)]
    with pytest.raises(ValueError, match="request id 0 appears more than once"):
        serving.run(layout, reqs)  # cost model: nothing is loaded
    assert all(r.state.value == "waiting" for r in reqs)
