"""The notebooks nbval executes stand for the book build's own execution (tests/book_outputs.py): a notebook run
under nbval comes out with the outputs, widget state and metadata nbclient (what jupyter-book executes with)
stores, and the book is built from them only when every notebook of book/ ran whole in this process."""
from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import copy

import nbformat
import yaml
from myst_nb.core.utils import coalesce_streams

from splitlab.teach.kernel_wait import WakefulClient

import book_outputs

TESTS = Path(__file__).resolve().parent

#: Cells that exercise what nbval and nbclient read differently: a skipped remove-cell (the Colab install cell), a
#: trailing semicolon, merged prints, an inline figure under MPLBACKEND=Agg, an explorer's live figure (captured by
#: an ipywidgets Output widget), a display updated by its id, cleared output, the kernel's MPLBACKEND.
CELLS = [
    ("# NBVAL_SKIP\nimport sys", ["remove-cell"]),
    ("%matplotlib inline\nimport matplotlib.pyplot as plt\nimport ipywidgets as widgets\n"
     "from IPython.display import display, clear_output", []),
    ("print('a')\nprint('b')\n6 * 7", []),
    ("6 * 7;", ["hide-input"]),
    ("plt.plot([1, 2, 3]);", []),
    ("def draw(n):\n    print('n =', n)\n    plt.plot(range(n))\n    plt.show()\n"
     "s = widgets.IntSlider(value=3, min=1, max=5)\n"
     "display(widgets.VBox([s, widgets.interactive_output(draw, {'n': s})]))", []),
    ("h = display('first', display_id=True)\nh.update('second')", []),
    ("print('gone')\nclear_output()\nprint('kept')", []),
    ("import os\nprint(os.environ.get('MPLBACKEND'))", []),
]

DUMP = """
import json, os
import book_outputs, nbformat
def pytest_sessionfinish(session):
    for path, rec in book_outputs.RECORDERS.items():
        nbformat.write(rec.nb, os.environ["DUMP_TO"])
        with open(os.environ["DUMP_TO"] + ".json", "w") as f:
            json.dump({"complete": rec.complete, "failed": rec.failed}, f)
"""


def _shape(nb) -> list:
    """Each code cell's outputs as the book shows them, not what they measured: type, stream text, mime types.

    A print reaches the kernel's stdout as several writes ("Agg", then "\\n"), and whether they leave in one
    message or two depends on when the kernel's flush timer fires (two, now and then, on a loaded machine). The book
    merges a cell's streams (``nb_merge_streams: true`` in ``_config.yml``), so the shapes compare after the same
    merge (myst-nb's ``coalesce_streams``)."""
    return [[(o.output_type, o.get("text"), sorted(o.get("data", {})))
             for o in coalesce_streams(copy.deepcopy(c.outputs))] for c in nb.cells if c.cell_type == "code"]


def _widgets(nb) -> list:
    """The widget models the notebook keeps, with each Output widget's captured outputs as :func:`_shape` has it."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return sorted((m["model_name"], str([(o["output_type"], o.get("text"), sorted(o.get("data", {})))
                                         for o in m["state"].get("outputs", [])])) for m in state.values())


def test_a_notebook_nbval_ran_holds_what_nbclient_stores(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                           "display_name": "Python 3"}})
    nb.cells = [nbformat.v4.new_code_cell(src, metadata={"tags": tags}) for src, tags in CELLS]
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, path)
    (tmp_path / "dump_plugin.py").write_text(DUMP)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(tmp_path), os.environ.get("PYTHONPATH", "")]),
               DUMP_TO=str(tmp_path / "recorded.ipynb"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-p",
                           "book_outputs", "-p", "dump_plugin", "--nbval-lax", "--nbval-current-env", "-q",
                           str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "8 passed, 1 skipped" in done.stdout, done.stdout[-3000:]
    assert yaml.safe_load((tmp_path / "recorded.ipynb.json").read_text()) == {"complete": True, "failed": ""}
    recorded = nbformat.read(tmp_path / "recorded.ipynb", 4)

    monkeypatch.setenv("MPLBACKEND", "Agg")  # as built_book builds
    live = nbformat.read(path, 4)  # as myst-nb's execution (nbclient), guarded as the build's is (teach.kernel_wait)
    WakefulClient(live, timeout=600, resources={"metadata": {"path": str(tmp_path)}}, record_timing=False).execute()

    assert _shape(recorded) == _shape(live)
    shape = _shape(live)
    assert shape[2] == [("stream", "a\nb\n", []), ("execute_result", None, ["text/plain"])]
    assert shape[3] == [] and shape[4][-1][2] == ["image/png", "text/plain"]
    assert shape[7] == [("stream", "kept\n", [])] and shape[8] == [("stream", "Agg\n", [])]
    assert recorded.cells[6].outputs[0].data["text/plain"] == "'second'"
    assert _widgets(recorded) == _widgets(live)
    assert ("OutputModel", str([("stream", "n = 3\n", []), ("display_data", None, ["image/png", "text/plain"])])) \
        in _widgets(live)  # the explorer's live figure: in the widget's state, not among the cell's outputs
    assert recorded.metadata["language_info"] == live.metadata["language_info"]
    assert [c.get("execution_count") for c in recorded.cells] == [c.get("execution_count") for c in live.cells]


def _book(root: Path, names: list[str]) -> None:
    (root / "book").mkdir(parents=True)
    for name in names:
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), root / "book" / name)
    (root / "_config.yml").write_text(yaml.safe_dump({"title": "t", "execute": {"execute_notebooks": "force"}}))


def test_the_build_renders_nbval_s_notebooks_only_when_every_one_ran_whole(tmp_path, monkeypatch):
    root = tmp_path / "project"
    _book(root, ["a.ipynb", "b.ipynb"])
    monkeypatch.setattr(book_outputs, "RECORDERS", {})
    executed, why = book_outputs.executed_book(root)
    assert executed == {} and why == "a.ipynb: not run by nbval in this process"

    done = book_outputs.RECORDERS[(root / "book" / "a.ipynb").resolve()] = \
        book_outputs.Recorder(nbformat.read(root / "book" / "a.ipynb", 4))
    done.passed = 1
    done.nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "1"}, execution_count=1)]
    half = book_outputs.RECORDERS[(root / "book" / "b.ipynb").resolve()] = \
        book_outputs.Recorder(nbformat.read(root / "book" / "b.ipynb", 4))
    assert book_outputs.executed_book(root) == ({}, "b.ipynb: 0 of 1 cells ran")
    half.passed, half.failed = 1, "cell 0 failed"
    assert book_outputs.executed_book(root) == ({}, "b.ipynb: cell 0 failed")

    half.failed = ""
    executed, why = book_outputs.executed_book(root)
    assert why == "" and sorted(p.name for p in executed) == ["a.ipynb", "b.ipynb"]
    copy = book_outputs.project_with_outputs(root, executed, tmp_path / "copy")
    assert yaml.safe_load((copy / "_config.yml").read_text())["execute"]["execute_notebooks"] == "off"
    assert nbformat.read(copy / "book" / "a.ipynb", 4).cells[0].outputs[0].data == {"text/plain": "1"}
    assert not nbformat.read(root / "book" / "a.ipynb", 4).cells[0].outputs, "the project itself is left alone"


def _ran(rec: book_outputs.Recorder, tags: list[str]) -> None:
    """``rec`` told that nbval passed its first cell, whose kernel raised an error (NBVAL_RAISES_EXCEPTION)."""
    rec.nb.cells[0].metadata["tags"] = tags
    rec.msg_id = "m"
    rec.messages = [{"msg_type": t, "parent_header": {"msg_id": "m"}, "header": {"msg_type": t}, "content": c,
                     "metadata": {}}
                    for t, c in (("status", {"execution_state": "busy"}),
                                 ("error", {"ename": "ValueError", "evalue": "no", "traceback": []}),
                                 ("status", {"execution_state": "idle"}))]
    cell = types.SimpleNamespace(parent=types.SimpleNamespace(kernel=types.SimpleNamespace()), cell_num=0,
                                 options={"skip": False})
    rec.stop(cell, "passed")


def test_a_cell_that_raises_stands_for_the_build_only_with_the_tag_the_build_reads():
    """nbval passes a cell that raises under its NBVAL_RAISES_EXCEPTION comment; the build stops at it unless the
    cell carries the raises-exception tag: only then does the notebook stand for the build's execution."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise ValueError('no')  # NBVAL_RAISES_EXCEPTION")])
    untagged, tagged = book_outputs.Recorder(nb), book_outputs.Recorder(nb)
    _ran(untagged, [])
    _ran(tagged, ["raises-exception"])
    assert not untagged.complete and untagged.failed == "cell 0 raised ValueError without the raises-exception tag"
    assert tagged.complete and tagged.nb.cells[0].outputs[0].ename == "ValueError"
