"""teach.notebook.setup(): figures show as cell outputs even when the kernel's environment says MPLBACKEND=Agg
(which silently drops every figure from a book build), the book's figure style, one CPU thread; and every chapter
calls it in its first code cell after the Colab install cell."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from splitlab.teach import notebook

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


def _images_after(setup_source: str) -> int:
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(setup_source),
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]);"),
    ])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    return sum("image/png" in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))


def test_setup_brings_figures_back_under_mplbackend_agg(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert _images_after("import matplotlib") == 0, "the failure this guards against: Agg shows no figure"
    assert _images_after("from splitlab.teach import notebook\nnotebook.setup()") == 1


def test_setup_outside_a_kernel_sets_style_and_threads_only():
    import matplotlib
    import torch

    before = torch.get_num_threads()
    try:
        assert notebook.inline_figures() is False
        notebook.setup(cpu_threads=1)
        assert matplotlib.rcParams["font.size"] == notebook.BOOK_STYLE["font.size"]
        assert torch.cuda.is_available() or torch.get_num_threads() == 1
        for bad in (0, -1, 1.5, True, "1"):
            with pytest.raises(ValueError, match="cpu_threads"):
                notebook.setup(cpu_threads=bad)
    finally:
        torch.set_num_threads(before)
        matplotlib.rcdefaults()


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_calls_setup_first(path):
    code = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    assert "google.colab" in code[0], "the Colab install cell comes first"
    def only_imports(source: str) -> bool:  # a phone-sized chapter may put its imports in a cell of their own
        lines = [ln.strip() for ln in source.splitlines() if ln.strip() and not ln.strip().startswith("#")]
        return bool(lines) and all(ln.startswith(("import ", "from ")) for ln in lines)

    first = next(c for c in code[1:] if not only_imports(c))
    assert "notebook.setup(" in first, "the first code cell after the install cell and the imports calls setup()"
