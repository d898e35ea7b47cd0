"""The chapters executed once per test session: nbval runs each chapter's cells in one kernel, and the book build
(``built_book`` in conftest.py) renders those executed notebooks instead of executing every chapter again.

While nbval runs a cell, :class:`Recorder` keeps every message the kernel published for it; afterwards it hands
them, in order, to the kernel client the build itself uses (nbclient's ``NotebookClient.process_message``, which
jupyter-book's myst-nb runs on each message when it executes a notebook): the cell's outputs, what an ipywidgets
Output widget captured (kept in the widget's state, not among the cell's outputs), ``clear_output`` and the
notebook's widget state come out as the build would have stored them. Beside that the notebook gets what nbclient
adds to it: the kernel's ``language_info`` (its code's highlighting), each cell's execution count.

nbval itself would run each cell without storing it in the kernel's history, where IPython then ignores a
trailing semicolon (the cell's value, hidden on the page, would show): the cells run as nbclient runs them instead,
with ``store_history=True``.

What differs from the build executing the chapter itself: the kernel is nbval's (``--nbval-current-env``: this
Python; the build's ``python3`` kernel is the same interpreter on a set-up machine), started with the build's
``MPLBACKEND=Agg`` (set below for the chapters' kernels), in the notebook's folder as the build does; nbval skips
the Colab install cell (tagged ``remove-cell``, a no-op outside Colab); nbclient's mimic of the Output widget would
send its captured outputs back to the kernel, which this replay cannot (the kernel's copy of a widget's outputs,
which no cell reads). The measured numbers differ run to run either way. Built both ways, chapter 02's page came
out the same but for its measured numbers (and a sentence chosen by them), plotly's random div ids and the key
order of the widget state's JSON (nbformat sorts keys when it writes a notebook).
"""
from __future__ import annotations

import copy
import os
import shutil
import types
from pathlib import Path

import nbformat
import pytest
import yaml
from jupyter_client.session import Session
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionComplete
from nbval.plugin import IPyNbCell

#: What nbval ran in this process: notebook path (resolved) -> its Recorder.
RECORDERS: dict[Path, "Recorder"] = {}


def is_chapter_cell(item) -> bool:
    """Whether a pytest item is a notebook cell that nbval runs."""
    return isinstance(item, IPyNbCell)


class _NoKernel:
    """The kernel client nbclient's Output widget mimic talks to: it sends the widget's captured outputs back to
    the kernel, which a replay after the cell ran cannot do (see the module's docstring)."""
    session = Session()
    shell_channel = types.SimpleNamespace(send=lambda msg: None)


class Recorder:
    """One notebook under nbval: the messages of the cell running now, and the notebook as the build would have
    executed it so far. ``complete`` once every code cell passed, in order, in one kernel."""

    def __init__(self, nb: nbformat.NotebookNode):
        self.nb = copy.deepcopy(nb)
        self.client = NotebookClient(self.nb, record_timing=False)  # as myst-nb's execution
        self.client.kc = _NoKernel()
        self.code_cells = [i for i, c in enumerate(self.nb.cells) if c.cell_type == "code"]
        self.passed = 0
        self.failed = ""  # why this notebook cannot stand for the build's execution, once it cannot
        self.messages: list[dict] = []
        self.msg_id = None

    @classmethod
    def of(cls, item) -> "Recorder":
        path = Path(item.path).resolve()
        rec = RECORDERS.get(path)
        if rec is None or item.cell_num == 0:  # a notebook run again in this process starts afresh
            rec = RECORDERS[path] = cls(item.parent.nb)
        return rec

    def listen(self, item) -> None:
        """Keep the messages nbval reads while it runs ``item`` (and, before the first cell, ask the kernel for its
        ``language_info``, as nbclient does)."""
        kernel, parent = item.parent.kernel, item.parent
        if item.cell_num != self.passed:
            self.failed = self.failed or f"cell {item.cell_num} ran after {self.passed} passed cells"
        if item.cell_num == 0:
            msg_id = kernel.kc.kernel_info()
            while (reply := kernel.kc.get_shell_msg(timeout=60))["parent_header"].get("msg_id") != msg_id:
                pass
            self.nb.metadata["language_info"] = reply["content"]["language_info"]
        self.messages, self.msg_id = [], None
        get = parent.get_kernel_message

        def execute_cell_input(cell_input, allow_stdin=None):  # as nbclient asks (nbval: store_history=False)
            self.msg_id = kernel.kc.execute(cell_input, store_history=True, allow_stdin=allow_stdin,
                                            stop_on_error=False)
            return self.msg_id

        def get_kernel_message(*args, **kwargs):
            msg = get(*args, **kwargs)
            self.messages.append(msg)
            return msg
        kernel.execute_cell_input, parent.get_kernel_message = execute_cell_input, get_kernel_message

    def stop(self, item, outcome: str) -> None:
        """After nbval ran ``item``: ``outcome`` is "passed", "skipped" or "failed"."""
        kernel, parent = item.parent.kernel, item.parent
        for owner, name in ((kernel, "execute_cell_input"), (parent, "get_kernel_message")):
            owner.__dict__.pop(name, None)
        if outcome == "failed" or (outcome == "skipped" and not item.options["skip"]):
            self.failed = self.failed or f"cell {item.cell_num} {outcome}"
            return
        index = self.code_cells[item.cell_num]
        cell = self.nb.cells[index]
        if outcome == "passed":
            cell.outputs, self.client.clear_before_next_output = [], False
            try:
                for msg in self.messages:
                    if msg["parent_header"].get("msg_id") == self.msg_id:
                        self.client.process_message(msg, cell, index)
                self.failed = self.failed or f"cell {item.cell_num}: the kernel never went idle"
            except CellExecutionComplete:
                pass
            except Exception as exc:  # a message this replay does not read as nbclient would: the build executes
                self.failed = self.failed or f"cell {item.cell_num}: {exc!r} replaying its messages"
                return
            raised = [o.ename for o in cell.outputs if o.output_type == "error"]
            if raised and "raises-exception" not in cell.metadata.get("tags", []):  # nbval let it pass (its
                # NBVAL_RAISES_EXCEPTION comment); the build, which reads only the tag, stops there
                self.failed = self.failed or f"cell {item.cell_num} raised {raised[0]} without the raises-exception tag"
                return
        cell.execution_count = item.cell_num + 1  # nbclient counts the cells it ran, the install cell too
        self.passed += 1
        if self.complete:
            self.client.set_widgets_metadata()

    @property
    def complete(self) -> bool:
        return not self.failed and self.passed == len(self.code_cells)


def executed_book(root: Path) -> tuple[dict[Path, nbformat.NotebookNode], str]:
    """Every notebook of ``root/book`` as nbval executed it in this process, and "", or ``{}`` and why not (one of
    them was not run here, not run whole, or failed)."""
    found = {}
    for path in sorted((root / "book").glob("*.ipynb")):
        rec = RECORDERS.get(path.resolve())
        if rec is None or not rec.complete:
            return {}, f"{path.name}: " + ("not run by nbval in this process" if rec is None else
                                           rec.failed or f"{rec.passed} of {len(rec.code_cells)} cells ran")
        found[path] = rec.nb
    return (found, "") if found else ({}, "no notebook in book/")


def project_with_outputs(root: Path, executed: dict[Path, nbformat.NotebookNode], into: Path) -> Path:
    """A copy of the project at ``into`` whose notebooks hold ``executed``'s outputs and whose ``_config.yml``
    turns execution off. Returns the copy's root."""
    copy_root = into / root.name
    shutil.copytree(root, copy_root, ignore=shutil.ignore_patterns(".git", "_build", "__pycache__", "*.egg-info",
                                                                   ".pytest_cache", ".venv", "venv", ".ipynb_*",
                                                                   "build", "dist"))
    for path, nb in executed.items():
        nbformat.write(nb, copy_root / path.relative_to(root))
    config = yaml.safe_load((root / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    (copy_root / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    return copy_root


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """A chapter's kernel (started when nbval sets up its first cell) runs with ``MPLBACKEND=Agg``, as the book
    build's kernels do (``built_book`` in conftest.py): nbval executes the notebook the build would render."""
    if not is_chapter_cell(item):
        return (yield)
    before = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"
    try:
        return (yield)
    finally:
        if before is None:
            del os.environ["MPLBACKEND"]
        else:
            os.environ["MPLBACKEND"] = before


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Each chapter cell's outputs kept as the book build would keep them (:class:`Recorder`)."""
    if not is_chapter_cell(item):
        return (yield)
    recorder = Recorder.of(item)
    recorder.listen(item)
    outcome = "failed"
    try:
        result = yield
        outcome = "passed"
        return result
    except pytest.skip.Exception:
        outcome = "skipped"
        raise
    finally:
        recorder.stop(item, outcome)
