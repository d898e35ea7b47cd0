"""The book's phone rule as a test: every figure the chapters draw (tests/phone_cases.py: the figure functions of
chapters 1-5 and 8 and their explorers' static figures, on small fixed data), drawn in the book's style as after
``notebook.setup()``, keeps every text at 9 pt or more when a 412 px phone shrinks it to its ~3.85 in column,
puts at most two panels side by side and draws no text over another. Chapters 6 and 7 check theirs in
tests/test_split_chapter.py and tests/test_pools_tables.py."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from phone_cases import CASES, as_figure, is_number as _number  # noqa: E402
from splitlab.teach.figures import phone  # noqa: E402
from splitlab.teach.notebook import BOOK_STYLE, rc_style  # noqa: E402


@pytest.mark.parametrize("name", list(CASES))
def test_figure_reads_on_a_phone(name):
    with rc_style(BOOK_STYLE):
        fig = as_figure(CASES[name]())
        try:
            texts = phone.phone_texts(fig)
            small = [(round(pt, 1), text) for pt, text in texts if pt < phone.MIN_PT]
            assert not small, f"{name}: shown {phone.rendered_width_in(fig):.2f} in wide, texts below 9 pt: {small[:5]}"
            assert phone.panel_columns(fig) <= phone.MAX_COLUMNS
            assert not phone.overlapping_texts(fig), phone.overlapping_texts(fig)[:5]
            for ax in (a for a in fig.axes if a.get_visible() and a.axison):
                for axis, label in ((ax.xaxis, "get_xlabel"), (ax.yaxis, "get_ylabel")):
                    if any(_number(t.get_text()) for t in axis.get_ticklabels()):  # a scale, not names: say what
                        assert any(getattr(a, label)() for a in fig.axes), f"{name}: an axis without a label"
        finally:
            plt.close("all")


def test_the_rule_catches_a_small_font_and_a_wide_figure():
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.set_xlabel("tokens", fontsize=12)
    ax.set_ylabel("ms", fontsize=12)
    ax.tick_params(labelsize=10)
    w = phone.rendered_width_in(fig)
    assert 5.5 < w < 6.6  # the tight box of what is drawn, plus 0.1 in each side
    assert phone.phone_font_pt(fig) == pytest.approx(10 * phone.COLUMN_IN / w)
    assert phone.phone_font_pt(fig) < phone.MIN_PT
    fig2, axes = plt.subplots(1, 3, figsize=(3.0, 2.0))
    for a in axes:
        a.set_title("t", fontsize=9)
    assert phone.panel_columns(fig2) == 3
    assert phone.phone_font_pt(fig2) == pytest.approx(min(t.get_fontsize() for t in fig2.findobj(
        matplotlib.text.Text) if t.get_text().strip() and t.get_visible()), rel=0.01)  # narrower: not enlarged
    fig3, ax3 = plt.subplots(figsize=(3, 2))
    ax3.text(0.5, 0.5, "one")
    ax3.text(0.5, 0.5, "two")
    assert ("one", "two") in phone.overlapping_texts(fig3)
    with pytest.raises(ValueError, match="no visible text"):
        empty = plt.figure()
        phone.phone_font_pt(empty)
    plt.close("all")


def test_titles_wider_than_the_figure_are_wrapped():
    fig, (ax,) = phone.figure(1)
    ax.set_title("A title far too long for a phone-wide figure of the book, which would widen it")
    phone.fit_titles(fig)
    assert "\n" in ax.get_title()
    box = ax.title.get_window_extent(fig.canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width
    plt.close("all")
