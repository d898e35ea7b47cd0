"""Shared fixtures: tiny random-weight presets on CPU, loaded once per session (each loads in well under a second)."""
from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest
import torch
import transformers

import splitlab as sl
from splitlab.phases.cpu_threads import pin_threads

try:  # tests/book_outputs.py: nbval's notebooks kept for the book build; needs nbformat (installed with nbval)
    import book_outputs
except ModuleNotFoundError as err:  # a GPU machine with torch and pytest alone runs tests/test_gpu.py without it
    if err.name != "nbformat":
        raise
    book_outputs = None

# Tiny models gain nothing from a second thread, and OpenMP threads spinning against other busy processes made
# decode 20-40x slower on a loaded 2-core machine: one thread unless SPLITLAB_TEST_THREADS says otherwise.
pin_threads(int(os.environ.get("SPLITLAB_TEST_THREADS", "1")))  # torch.set_num_threads, kept by load_model

#: Presets covering the attention layouts and architectures of DESIGN.md section 6.
ARCH_PRESETS = ["tiny", "tiny-gpt2", "tiny-bigcode-mqa", "tiny-qwen2", "tiny-mistral", "tiny-mha", "tiny-mqa"]

#: Prompts of different lengths (bytes + BOS with the byte tokenizer).
PROMPTS = ["Hi", "The prefill/decode split", "KV cache"]


@functools.lru_cache(maxsize=None)
def cached_model(name: str, dtype: str = "float32") -> sl.LoadedModel:
    """One instance per (preset, dtype) for the whole session; tests must not modify it."""
    return sl.load_model(name, device="cpu", dtype=dtype)


@pytest.fixture(scope="session")
def lm() -> sl.LoadedModel:
    """The embedded default: Llama-style GQA, 4 layers, 8 heads, 2 KV heads, random weights, float32."""
    return cached_model("tiny")


@pytest.fixture
def offline(monkeypatch):
    """HF_HUB_OFFLINE=1 (the env var, and the flags huggingface_hub/transformers read at import), and any
    attempt to open a network connection recorded and refused."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(transformers.utils.hub, "_is_offline_mode", True, raising=False)  # transformers 4.x
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access attempted in an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


@pytest.fixture(scope="module", params=ARCH_PRESETS)
def arch_lm(request) -> sl.LoadedModel:
    return cached_model(request.param)


def greedy_chain(lm: sl.LoadedModel, prompt_ids: list[int], n: int):
    """Greedy decoding written out with prefill + decode_step: returns (tokens, logits per step [n, vocab])."""
    out = sl.prefill(lm, [prompt_ids])
    cache, logits = out.cache, out.logits
    tokens, all_logits = [], [logits[0]]
    for step in range(n):
        tok = int(logits[0].argmax())
        tokens.append(tok)
        if step == n - 1:
            break
        dec = sl.decode_step(lm, cache, [tok])
        cache, logits = dec.cache, dec.logits
        all_logits.append(logits[0])
    return tokens, torch.stack(all_logits)


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> Path:
    """The HTML of the whole book, built once per session (``jupyter-book build . -W --keep-going``) with
    ``MPLBACKEND=Agg`` in the environment as on a headless server (the chapters must still show their figures).

    Every chapter is executed live once: where nbval ran every cell of every notebook of ``book/`` in this process
    earlier in the session (the test command: the chapters and tests/test_book.py share one xdist group, chapters
    first), the book is built from those executed notebooks with execution off (:mod:`book_outputs`, on a copy of
    the project); otherwise (``-m slow``, one chapter named, a cell failed) the build executes every chapter itself.
    ``SPLITLAB_BOOK_HTML`` names an existing build to use instead (a quick local rerun)."""
    given = os.environ.get("SPLITLAB_BOOK_HTML")
    if given:
        return Path(given)
    root = Path(__file__).resolve().parents[1]
    out = tmp_path_factory.mktemp("book")
    executed, why_not = book_outputs.executed_book(root)
    if executed:
        source = book_outputs.project_with_outputs(root, executed, tmp_path_factory.mktemp("project"))
    else:
        source = root
        print(f"built_book: every chapter executed by the build ({why_not})")
    exe = shutil.which("jupyter-book") or str(Path(sys.executable).with_name("jupyter-book"))
    env = dict(os.environ, MPLBACKEND="Agg")
    done = subprocess.run([exe, "build", str(source), "-W", "--keep-going", "--path-output", str(out)],
                          capture_output=True, text=True, timeout=3600, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out / "_build" / "html"


@pytest.fixture
def probe_once(monkeypatch) -> list[str]:
    """The quick measurement of a model that serve/compare make to choose the SLOs left out
    (``splitlab.cli.defaults.probe``), made once per model id for the test and reused by its later runs (the
    same tiny model measured again costs about 2 s of CPU and checks nothing new). Returns the model ids asked
    for, one per run that chose its SLOs on the model."""
    from splitlab.cli import defaults
    probe, measured, asked = defaults.probe, {}, []

    def once(lm, progress=False):
        asked.append(lm.model_id)
        if lm.model_id not in measured:
            measured[lm.model_id] = probe(lm, progress)
        return measured[lm.model_id]
    monkeypatch.setattr(defaults, "probe", once)
    return asked


def cli(*args: str) -> tuple[int, str, str]:
    """``python -m splitlab ...`` in this process: (status, stdout, stderr); argparse's usage errors give their
    exit status instead of raising SystemExit."""
    import contextlib
    import io
    from splitlab.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as stop:  # argparse usage errors
            status = stop.code
    return status, out.getvalue(), err.getvalue()


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(session, config, items):
    """Under ``--dist loadgroup`` (pyproject.toml) each file is one xdist group, so that module fixtures are built
    once per file, except one group "book": every chapter notebook's cells (nbval), then tests/test_book.py, whose
    book build then renders the notebooks nbval executed instead of executing them again. The group goes first
    (the longest by far): the other worker(s) run everything else meanwhile."""
    chapter = book_outputs.is_chapter_cell if book_outputs else (lambda item: item.path.suffix == ".ipynb")
    book = [item for item in items if chapter(item)] + \
        [item for item in items if item.path.name == "test_book.py"]
    in_book = {id(item) for item in book}
    items[:] = book + [item for item in items if id(item) not in in_book]
    for item in items:
        item.add_marker(pytest.mark.xdist_group("book" if id(item) in in_book else item.nodeid.split("::")[0]))


def pytest_configure(config):
    """The hooks that keep each chapter's outputs for the book build (:mod:`book_outputs`): a plugin, not this
    conftest's hooks, so that they reach the cells of book/ too."""
    if book_outputs is not None and not config.pluginmanager.is_registered(book_outputs):
        config.pluginmanager.register(book_outputs, "splitlab-book-outputs")
