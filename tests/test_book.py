"""The book as a whole: every chapter's install cell points at the repository in _config.yml, notebooks are
stored without outputs, and `jupyter-book build . -W --keep-going` succeeds (every chapter executed live).
The chapters themselves also run cell by cell under nbval (`book/` is in pytest's testpaths); in the test command
the build renders the notebooks nbval executed instead of executing each chapter a second time (``built_book`` in
conftest.py, tests/book_outputs.py).

The rendered book in a real browser (headless Chromium, driven by selenium): every page loads with no
JavaScript error and no request to the network, every interactive figure is drawn, and moving its slider (a mouse
click on the slider's rail) or picking a dropdown entry changes the data drawn; at 1280 px and at a 412 px phone
width. No page
scrolls sideways at either width (the failure names the elements past the right edge), and no printout of a cell
scrolls sideways in its own box (``splitlab-book.css`` wraps them).

Also: every chapter whose notebook calls an ipywidgets explorer (``sl.widgets.``) carries at least one interactive
figure on its page (read from the HTML, no browser needed).

The browser tests are skipped, saying why, where Chromium, chromedriver or selenium is missing (``.ci/run`` installs
Debian's ``chromium`` and ``chromium-driver``). The book is the one the slow build test builds (``built_book``), or
the build ``SPLITLAB_BOOK_HTML`` names.

The build and the browser tests share one file so that the book is built once: with tests spread over workers
(pytest-xdist --dist loadgroup), this file runs in the group "book", after every chapter's cells on the same worker
(conftest.py)."""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


def test_every_toc_chapter_exists():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    for f in files:
        assert list(ROOT.glob(f + ".*")), f"_toc.yml lists {f} but no such file exists"
    assert {f"book/{c.stem}" for c in CHAPTERS} <= set(files), "a chapter notebook is missing from _toc.yml"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_install_cell_and_clean(path):
    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "NBVAL_SKIP" in first.source, "the Colab install cell must be skipped by nbval"
    assert "google.colab" in first.source and f"git+{repo}" in first.source
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "store notebooks without outputs"
    assert re.search(r'MODEL = os\.environ\.get\("SPLITLAB_MODEL", "tiny"\)', "".join(c.source for c in nb.cells))
    sources = [c.source for c in nb.cells]
    assert any("sl.check." in s for s in sources), "every chapter has exercises checked by splitlab.check"


def test_nbval_reads_the_ignore_output_tag():
    """The chapters mark cells whose output nbval ignores by the cell tag, not by a ``# NBVAL_IGNORE_OUTPUT`` line a
    reader would see on the page: the nbval installed here must read that tag."""
    from nbval.plugin import find_metadata_tags
    assert dict(find_metadata_tags({"tags": ["nbval-ignore-output"]})) == {"check": False}


def test_nbval_reads_the_check_output_tag():
    """A cell whose output nbval compares even under --nbval-lax carries the tag nbval-check-output, which the
    nbval installed here must read as the ``# NBVAL_CHECK_OUTPUT`` comment."""
    from nbval.plugin import find_metadata_tags
    assert dict(find_metadata_tags({"tags": ["nbval-check-output"]})) == {"check": True}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_nbval_comment_on_the_page(path):
    """No code a reader sees carries an ``# NBVAL_...`` comment (the cell tags nbval-ignore-output,
    nbval-check-output, nbval-skip say the same): only a cell removed from the page (remove-cell, such as the
    Colab install cell) may."""
    nb = nbformat.read(path, as_version=4)
    shown = [c.id for c in nb.cells if c.cell_type == "code" and "NBVAL_" in c.source
             and "remove-cell" not in c.metadata.get("tags", [])]
    assert not shown, f"{path.stem}: use nbval's cell tags instead of the NBVAL_ comments in cells {shown}"


#: A phone's column at 412 px holds about 42 characters of code; a visible code cell takes at most 15 such lines.
PHONE_COLUMNS, PHONE_LINES = 42, 15


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_visible_code_cells_fit_a_phone(path):
    """Every code cell a reader sees (not tagged hide-input, remove-input or remove-cell) is at most PHONE_LINES
    lines once each line wraps at PHONE_COLUMNS characters."""
    hidden = {"hide-input", "remove-input", "remove-cell"}
    long = {}
    for c in nbformat.read(path, as_version=4).cells:
        if c.cell_type == "code" and not hidden & set(c.metadata.get("tags", [])):
            n = sum(max(1, -(-len(line) // PHONE_COLUMNS)) for line in c.source.split("\n"))
            if n > PHONE_LINES:
                long[c.id] = n
    assert not long, f"{path.stem}: cells of more than {PHONE_LINES} lines on a phone (id: lines): {long}"


def _rendered_lines(source: str, columns: int) -> int:
    """Lines ``source`` takes in a block of ``columns`` characters under the book's phone CSS (``white-space:
    pre-wrap; overflow-wrap: anywhere``): a line breaks after spaces (spaces hang past the edge), a word that does
    not fit starts a new line, and one longer than a line is then broken anywhere. Checked against headless
    Chromium at 412 px on 131 code cells of chapters 1, 3, 4 and 5: never fewer lines than it drew, 7 cells 1-2
    more."""
    total = 0
    for line in source.split("\n"):
        n, pos = 1, 0
        for token in re.findall(r"\S+\s*|\s+", line):
            word = token.rstrip(" ")
            if pos + len(word) > columns:
                n, pos = (n + 1, 0) if pos else (n, 0)
                while len(word) > columns:
                    n, word = n + 1, word[columns:]
                pos = len(word) + len(token) - len(token.rstrip(" "))
            else:
                pos += len(token)
        total += n
    return total


#: Code columns at 412 px, measured in Chromium: a cell of the page, and one inside a solution's dropdown.
PAGE_COLUMNS, SOLUTION_COLUMNS = 42, 39


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_visible_code_cells_fit_a_phone_wrapped_at_words(path):
    """Every code cell a reader sees, on the page or in an opened solution, is at most PHONE_LINES lines as a
    412 px phone wraps it: at words, in PAGE_COLUMNS (SOLUTION_COLUMNS in a solution). Wrapping at any character
    (the test above) undercounts: ch03-05 each had a cell of 16-17 lines that it counted as 15 or fewer, and once
    every chapter was checked, ch01 cell-12, ch02 cell-06, ch06 c02a and ch08 c12 and c33 had 16-17."""
    hidden = {"hide-input", "remove-input", "remove-cell"}
    long, solution = {}, False
    for c in nbformat.read(path, as_version=4).cells:
        if c.cell_type == "markdown":
            solution = (solution or "{solution-start}" in c.source) and "{solution-end}" not in c.source
        elif not hidden & set(c.metadata.get("tags", [])):
            n = _rendered_lines(c.source, SOLUTION_COLUMNS if solution else PAGE_COLUMNS)
            if n > PHONE_LINES:
                long[c.id] = n
    assert not long, f"{path.stem}: cells of more than {PHONE_LINES} lines on a phone (id: lines): {long}"


def test_rendered_lines_wrap_at_words():
    assert _rendered_lines("x" * 42, 42) == 1 and _rendered_lines("x" * 43, 42) == 2
    assert _rendered_lines("a = " + "b" * 40, 42) == 2  # the long word starts a new line
    assert _rendered_lines("a = " + "b" * 90, 42) == 4  # ... and is then broken anywhere: 42 + 42 + 6
    assert _rendered_lines(" " * 47 + "tail", 42) == 2  # leading spaces hang, the word goes on
    assert _rendered_lines("one\ntwo", 42) == 2


#: What a text table of a page holds at 412 px without scrolling sideways: 3 columns, words of at most 16 characters
#: (measured in Chromium: ch09's table of 4 columns with `LMCacheConnectorV1` in a cell was 642 px wide in a 365 px
#: column, its SGLang column out of sight; of 3 columns with `local_prefill_tokens`, 454 px)
TABLE_COLUMNS, TABLE_WORD = 3, 16


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_text_tables_fit_a_phone(path):
    """Every Markdown table of a chapter has at most TABLE_COLUMNS columns and no word (a code name is one word:
    it does not break) longer than TABLE_WORD characters, so that no column hides past a phone's edge."""
    wide = []
    for c in nbformat.read(path, as_version=4).cells:
        rows = [line for line in c.source.split("\n") if c.cell_type == "markdown" and line.startswith("|")]
        for row in rows:
            cells = row.strip().strip("|").split("|")
            long = [w for w in re.split(r"\s+", " ".join(cells)) if len(w.strip("`(),;:.")) > TABLE_WORD]
            if len(cells) > TABLE_COLUMNS or long:
                wide.append((len(cells), long, row[:60]))
    assert not wide, f"{path.stem}: table rows too wide for a phone (columns, long words, row): {wide}"


#: Most figures a chapter may show (issue 9: each one answers the chapter's question).
MAX_FIGURES = 6


@pytest.mark.slow
def test_book_builds_without_warnings(built_book):
    """The whole book builds with -W, every chapter executed live (by nbval, or by the build), under MPLBACKEND=Agg
    (set by many headless build servers, it used to drop every figure without a warning): each chapter page shows
    at least one figure, as many as its executed notebook made, and at most MAX_FIGURES, the interactive (plotly)
    explorers counted: a reader sees them as figures too."""
    html = built_book
    for chapter in CHAPTERS:
        page = (html / "book" / f"{chapter.stem}.html").read_text()
        assert "colab.research.google.com" in page, f"{chapter.stem} has no Colab launch button"
        shown = len(re.findall(r'<img[^>]*src="[^"]*_images/[^"]+\.png"', page))
        executed = nbformat.read(html.parent / "jupyter_execute" / "book" / f"{chapter.stem}.ipynb", 4)
        made = sum("image/png" in o.get("data", {}) for c in executed.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
        assert made >= 1, f"{chapter.stem} made no figure when executed (was the inline backend selected?)"
        assert shown == made, f"{chapter.stem}: {made} figures made, {shown} on the page"
        interactive = len(re.findall(r'class="plotly-graph-div"', page))
        assert made + interactive <= MAX_FIGURES, (f"{chapter.stem} shows {made} figures and {interactive} "
                                                   f"interactive ones, more than {MAX_FIGURES}")


CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")


def _need_browser() -> None:
    """Skip, saying why, where Chromium, chromedriver or selenium is missing."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        pytest.skip(f"the browser tests need {' and '.join(missing)} (Debian: apt-get install chromium "
                    "chromium-driver)")
    pytest.importorskip("selenium", reason="the browser tests need selenium (pip install selenium)")


WIDTHS = (1280, 412)

JS_READY = """
const gds = Array.from(document.querySelectorAll('.plotly-graph-div'));
return document.readyState === 'complete' && (gds.length === 0 || typeof window.Plotly === 'object') &&
       gds.every(gd => gd._fullLayout && gd.querySelector('.main-svg') && !gd._transitioning);"""
JS_STATE = """
const gd = document.querySelectorAll('.plotly-graph-div')[arguments[0]];
return JSON.stringify({sliders: (gd._fullLayout.sliders || []).map(s => s.active),
                       menus: (gd._fullLayout.updatemenus || []).map(m => m.active),
                       traces: gd._fullData.map(t => [t.visible, t.x ? Array.from(t.x) : null,
                                                t.y ? Array.from(t.y) : null,
                                                t.z ? JSON.stringify(t.z) : null,  // a heatmap is an image
                                                t.hovertext ? JSON.stringify(t.hovertext) : null]),  // on touch
                       painted: Array.from(gd.querySelectorAll('.trace path, .trace .point, .ytick text, .xtick text, '
                                                               + '.hm image, .trace text'))
                                     .map(p => (p.getAttribute('d') || '') + (p.getAttribute('transform') || '')
                                               + (p.getAttribute('href') || '') + (p.textContent || ''))});"""

#: How wide the page is, and what makes it so: ``scroll``/``inner``: the document's scroll width and the window's
#: width; ``past``: the elements whose right edge lies beyond the window and that no ancestor clips (a box that
#: scrolls on its own, overflow other than visible, keeps what is inside it), each as tag.class, its right edge and
#: the start of its text; ``text``: cell printouts (pre) that scroll sideways inside their own box (the book's CSS
#: wraps them).
JS_WIDE = """
const W = window.innerWidth, past = [], text = [];
const name = e => e.tagName.toLowerCase() + (typeof e.className === 'string' && e.className.trim()
    ? '.' + e.className.trim().split(/\\s+/).slice(0, 2).join('.') : '');
const clipped = e => { for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
    if (getComputedStyle(p).overflowX !== 'visible' && p.getBoundingClientRect().right <= W + 1) return true; }
  return false; };
for (const e of document.querySelectorAll('body *')) {
  const r = e.getBoundingClientRect();
  if (r.width > 0 && r.right > W + 1 && getComputedStyle(e).visibility !== 'hidden' && !clipped(e)
      && !(e.parentElement && e.parentElement.getBoundingClientRect().right > W + 1 && !clipped(e.parentElement)))
    past.push(name(e) + ' right=' + Math.round(r.right) + ' "'
              + Array.from(e.innerText || '').slice(0, 40).join('') + '"');
}
for (const e of document.querySelectorAll('div.cell_output pre'))
  if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1)
    text.push(e.scrollWidth + ' > ' + e.clientWidth + ' px "' + Array.from(e.innerText).slice(0, 40).join('') + '"');
return JSON.stringify({scroll: document.documentElement.scrollWidth, inner: W, past: past.slice(0, 10),
                       text: text.slice(0, 10)});"""


def _state(driver, i) -> dict:
    return json.loads(driver.execute_script(JS_STATE, i))


def _errors(driver) -> list[str]:
    """SEVERE console entries: uncaught errors, console.error, failed loads (an unreachable CDN shows up here)."""
    return [e["message"] for e in driver.get_log("browser")
            if e["level"] == "SEVERE" and "/favicon.ico" not in e["message"]]


@pytest.fixture(scope="module")
def site(built_book):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(built_book)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def driver():
    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1280,900"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(90)
    yield drv
    drv.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _open(driver, url: str, width: int) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.set_window_size(width, 900)
    inner = driver.execute_script("return window.innerWidth")
    if inner != width:
        driver.set_window_size(2 * width - inner, 900)
    driver.get_log("browser")  # forget what earlier pages logged
    driver.get(url)
    try:
        WebDriverWait(driver, 60, poll_frequency=0.2).until(lambda d: d.execute_script(JS_READY))
    except Exception:
        pytest.fail(f"{url}: figures not drawn; console: {_errors(driver)}")


def _click_slider(driver, i: int, step: int) -> None:
    """A mouse click on the rail of figure ``i``'s slider, above the tick of ``step``."""
    from selenium.webdriver.common.action_chains import ActionChains

    gd = driver.find_elements("css selector", ".plotly-graph-div")[i]
    container = gd.find_element("css selector", ".slider-container")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", container)
    rail = container.find_element("css selector", ".slider-rail-touch-rect")
    tick = container.find_elements("css selector", ".slider-tick-rect")[step]
    dx = driver.execute_script("const r = arguments[0].getBoundingClientRect(), t = arguments[1]"
                               ".getBoundingClientRect(); return (t.left + t.width / 2) - (r.left + r.width / 2);",
                               rail, tick)
    ActionChains(driver).move_to_element_with_offset(rail, int(round(dx)), 0).click().perform()


def _pick(driver, i: int, entry: int) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    gd = driver.find_elements("css selector", ".plotly-graph-div")[i]
    header = gd.find_element("css selector", ".updatemenu-header")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", header)
    ActionChains(driver).move_to_element(header).click().perform()
    WebDriverWait(driver, 10).until(lambda d: gd.find_elements("css selector", ".updatemenu-dropdown-button"))
    button = gd.find_elements("css selector", ".updatemenu-dropdown-button")[entry]
    ActionChains(driver).move_to_element(button).click().perform()


def _changed(driver, i: int, before: dict, key: str | None = None) -> dict:
    """Figure ``i``'s state once it differs from ``before`` (in ``key`` where given: the slider's index moves at
    once, its restyle of the traces a moment later on a busy machine; CI once read the traces in between). A figure
    that never changes ``key`` within 15 s is returned as it is, for the caller's assertion to name."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 15, poll_frequency=0.1).until(lambda d: d.execute_script(JS_READY)
                                                        and _state(d, i) != before)
    if key is not None:
        try:
            WebDriverWait(driver, 15, poll_frequency=0.1).until(lambda d: _state(d, i)[key] != before[key])
        except TimeoutException:
            pass
    return _state(driver, i)


@pytest.mark.slow
def test_pages_work_offline_and_every_interactive_figure_moves(built_book, site, driver):
    pages = sorted(p.relative_to(built_book).as_posix() for p in built_book.rglob("*.html")
                   if p.name not in ("genindex.html", "search.html", "index.html") and "_static" not in p.parts)
    assert pages, f"no pages in {built_book}"
    moved = 0
    for width in WIDTHS:
        for page in pages:
            _open(driver, f"{site}/{page}", width)
            wide = json.loads(driver.execute_script(JS_WIDE))
            assert wide["scroll"] <= wide["inner"] + 1, \
                f"{page} scrolls sideways at {width} px ({wide['scroll']} px of content in {wide['inner']} px); " \
                f"past the right edge: {wide['past']}"
            assert not wide["text"], f"{page} at {width} px: printed text scrolls sideways in its box: {wide['text']}"
            for i in range(driver.execute_script("return document.querySelectorAll('.plotly-graph-div').length")):
                before = _state(driver, i)
                target = 1 if before["sliders"][0] != 1 else 0
                _click_slider(driver, i, target)
                after = _changed(driver, i, before, "traces")
                assert after["sliders"][0] == target, f"{page} figure {i}: the slider did not move"
                assert after["traces"] != before["traces"], f"{page} figure {i}: moving the slider changed nothing"
                shown = [[t[:-1] for t in state["traces"]] for state in (before, after)]  # all but the hover text
                assert shown[0] == shown[1] or after["painted"] != before["painted"], \
                    f"{page} figure {i}: the slider changed the data but nothing drawn"
                # (a map whose winners and margins a link does not move on this device changes only its hover
                # text: every layout's goodput, which the link does move; a loaded machine's calibration did so)
                if after["menus"]:
                    _pick(driver, i, 1 if after["menus"][0] != 1 else 0)
                    assert _changed(driver, i, after)["menus"] != after["menus"]
                moved += 1
            errors = _errors(driver)
            assert not errors, f"{page} at {width} px logged JavaScript errors: {errors}"
    if not moved:
        pytest.skip("the built book has no interactive figure yet")


def _explorer_chapters() -> list[Path]:
    """The chapter notebooks whose code calls an ipywidgets explorer (``sl.widgets.``)."""
    found = []
    for nb_path in sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        if any(c.cell_type == "code" and re.search(r"\bsl\.widgets\.", c.source) for c in nb.cells):
            found.append(nb_path)
    return found


@pytest.mark.slow
def test_every_chapter_with_an_explorer_has_an_interactive_figure(built_book):
    """An ipywidgets explorer is dead in the static HTML: each page that has one must also carry a plotly figure
    (moved by the test above). Read from the built HTML, so this runs without a browser too."""
    chapters = _explorer_chapters()
    assert chapters, "no chapter calls sl.widgets: the search for explorers is broken"
    without = []
    for nb_path in chapters:
        page = Path(built_book) / nb_path.relative_to(ROOT).with_suffix(".html")
        assert page.is_file(), f"{nb_path.name} was not built to {page}"
        if len(re.findall(r'class="plotly-graph-div"', page.read_text(encoding="utf-8"))) < 1:
            without.append(nb_path.name)
    assert not without, f"pages with an ipywidgets explorer but no interactive figure: {without}"
