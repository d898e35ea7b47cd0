"""teach.kernel_wait: nbclient reads a shell reply within a slice even when the socket's wake-up was missed
(jupyter/nbclient#312), keeps a finite timeout, and the book build's nbclient carries the guard."""
from __future__ import annotations

import asyncio
import queue
import subprocess
import sys
import time

import nbformat
import pytest

from splitlab.teach.kernel_wait import SLICE_S, WakefulClient, sliced


class MissedWakeup:
    """A shell channel whose reply arrived at ``arrives_s`` but whose waits never wake for it: like a zmq.asyncio
    poll that lost its edge-triggered event, a wait sees the reply only when its timeout ends (the poller's final
    non-blocking poll), and a wait without a timeout never ends."""

    def __init__(self, arrives_s: float):
        self.t0, self.arrives_s, self.waits = time.monotonic(), arrives_s, []

    async def get_msg(self, timeout=None):
        self.waits.append(timeout)
        if timeout is None:
            await asyncio.sleep(3600)
        await asyncio.sleep(timeout)
        if time.monotonic() - self.t0 >= self.arrives_s:
            return {"msg_type": "execute_reply"}
        raise queue.Empty


def test_a_missed_wakeup_costs_one_slice_not_the_wait():
    shell = MissedWakeup(arrives_s=0.05)
    t0 = time.monotonic()
    msg = asyncio.run(asyncio.wait_for(sliced(shell.get_msg, 0.1)(timeout=None), 30))
    assert msg == {"msg_type": "execute_reply"}
    assert time.monotonic() - t0 < 10  # unguarded, this wait never ends (wait_for would raise after 30 s)
    assert shell.waits and all(w is not None and w <= 0.1 for w in shell.waits)


def test_the_cell_timeout_still_ends_the_wait_with_empty():
    shell = MissedWakeup(arrives_s=3600)
    t0 = time.monotonic()
    with pytest.raises(queue.Empty):
        asyncio.run(sliced(shell.get_msg, 0.1)(timeout=0.35))
    assert 0.3 <= time.monotonic() - t0 < 10
    assert len(shell.waits) >= 4 and shell.waits[-1] <= 0.1  # the last slice: what the timeout left


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1", True, None])
def test_a_slice_that_is_not_a_positive_number_is_refused(bad):
    with pytest.raises(ValueError, match="slice_s must be a positive number of seconds"):
        sliced(MissedWakeup(0).get_msg, bad)


def test_wakeful_client_runs_an_explorer_cell_with_its_shell_channel_sliced():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import ipywidgets as w\nfrom IPython.display import display\n"
        "s = w.IntSlider(value=2)\nout = w.interactive_output(lambda n: print('n =', n), {'n': s})\n"
        "display(w.VBox([s, out]))")])
    client = WakefulClient(nb, timeout=600, kernel_name="python3")
    with client.setup_kernel():
        assert client.kc.shell_channel.get_msg.slice_s == SLICE_S <= 1.0
        client.execute_cell(nb.cells[0], 0)
    client.set_widgets_metadata()
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    outputs = [m["state"]["outputs"] for m in state.values() if m["model_name"] == "OutputModel"]
    assert outputs == [[{"output_type": "stream", "name": "stdout", "text": "n = 2\n"}]]


def test_the_book_build_s_nbclient_carries_the_guard():
    """book_assets (the build's Sphinx extension) guards every NotebookClient of the build's process, once."""
    code = ("from types import SimpleNamespace as N\nfrom nbclient import NotebookClient\n"
            "from splitlab.teach import book_assets\n"
            "before = NotebookClient.async_start_new_kernel_client\n"
            "nop = lambda *a, **k: None\napp = N(add_js_file=nop, add_css_file=nop, connect=nop)\n"
            "book_assets.setup(app)\nonce = NotebookClient.async_start_new_kernel_client\n"
            "book_assets.setup(app)\n"
            "assert once is not before and once.guarded and NotebookClient.async_start_new_kernel_client is once\n"
            "print('guarded')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "guarded", done.stderr[-2000:]
