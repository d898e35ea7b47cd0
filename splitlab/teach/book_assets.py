"""A Sphinx extension for the book's HTML: every script and style a page needs comes from the book's own static files.

- plotly.js (for :mod:`.interactive`): copied from the installed plotly package into ``_static/`` at the end of the
  build (so it always matches the plotly that wrote the figures) and loaded in every page's head before any other
  script (priority 500 < ``html_js_files``' 800), so a figure's inline script finds ``window.Plotly``.
- ``splitlab-book.css`` (shipped in ``splitlab/teach/static/``, copied into ``_static/`` the same way, linked from
  every page): pages that read on a 412 px phone without scrolling sideways: printed text wraps at the column,
  a table or a formula too wide scrolls in its own box, and on narrow screens code wraps and tables are set in
  13 px with tighter cells.
- Two console errors of jupyter-book 1.0.4 pages fixed: Sphinx 7.4 lists inline scripts added after the builder
  started twice (``Identifier 'THEBE_JS_URL' has already been declared``), and nothing sets the theme's
  ``default_mode`` (``Got invalid theme mode``).

The build executes every chapter with nbclient; ``setup`` gives nbclient the guard of :mod:`.kernel_wait` (a reply
the kernel sent is read within a second, not after the cell's 600 s timeout, when a widget's message crossed it).

MathJax comes from the ``sphinx-mathjax-offline`` extension; ipywidgets load no JavaScript in the static pages
(``nb_ipywidgets_js: {}``: widgets need a kernel anyway, and every explorer also draws a static figure and an
interactive plotly figure). Enabled in ``_config.yml`` under ``sphinx: extra_extensions``.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from .kernel_wait import guard_nbclient

PLOTLY_JS = "plotly.min.js"
BOOK_CSS = "splitlab-book.css"


def _plotly_source() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / PLOTLY_JS


def _page_context(app, pagename, templatename, context, doctree) -> None:
    if not context.get("default_mode"):
        context["default_mode"] = "auto"
    files = context.get("script_files")
    if isinstance(files, list):
        seen, kept = set(), []
        for js in files:
            key = (os.fspath(getattr(js, "filename", js) or ""), tuple(sorted(getattr(js, "attributes", {}).items())))
            if key not in seen:
                seen.add(key)
                kept.append(js)
        context["script_files"] = kept


def _build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        static = Path(app.outdir, "_static")
        static.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_plotly_source(), static / PLOTLY_JS)
        shutil.copyfile(Path(__file__).parent / "static" / BOOK_CSS, static / BOOK_CSS)


def setup(app):
    guard_nbclient()
    app.add_js_file(PLOTLY_JS, priority=500)
    app.add_css_file(BOOK_CSS, priority=900)  # after the theme's and extensions' styles (default 500), so it wins
    app.connect("html-page-context", _page_context, priority=900)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
