"""What every figure and table of the book shares: one colour per phase and one per serving layout, the same in
every chapter (matplotlib figures and the kernel-free plotly ones alike), and numbers printed without false
precision.

- :data:`LAYOUT_COLORS`: layout -> colour; :func:`layout_of` reads the layout from a run's name or its
  :class:`~splitlab.serving.ServingConfig`, :func:`layout_color` gives its colour.
- :data:`PREFILL`, :data:`DECODE`, :data:`TRANSFER`, :data:`PREDICTED`: the phases' colours and the colour of a
  prediction (a line computed, not measured); :data:`PHASE_COLORS`: phase -> colour.
- :data:`TARGET`, :data:`TARGET_LS`, :data:`TARGET_DASH`: a target line (the 90% attainment of goodput, an SLO):
  black and dotted in every chapter, apart from a prediction's black dashes.
- :data:`OTHER_COLORS`: colours for what is neither a phase nor a layout (routing policies, draft models, memory
  schemes, ...), none of them a phase's or a layout's, so that no figure seems to name a layout it does not.
- :func:`sig3` and :func:`fmt3`: three significant digits, as a number and as text ("121", not "121.000" or
  "121.0"); :func:`fmt2`: two, for a ratio; :func:`fmt_table`: a display copy of a table in that format.
- :func:`change_words`: the word for how much a quantity changed ("about doubles", "grows by 83%"), computed
  from the ratio, so that a sentence says what its numbers say.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...common.numbers import fmt3

__all__ = ["PREFILL", "DECODE", "TRANSFER", "PREDICTED", "TARGET", "TARGET_LS", "TARGET_DASH", "PHASE_COLORS",
           "OTHER_COLORS", "LAYOUTS", "LAYOUT_COLORS", "layout_of", "layout_color", "sig3", "fmt3", "fmt2", "fmt_table",
           "change_words", "signed_pct", "pct2", "and_list", "gb_per_s"]

#: the phases (matplotlib's tab:orange, tab:blue, tab:green) and a prediction
PREFILL, DECODE, TRANSFER, PREDICTED = "#ff7f0e", "#1f77b4", "#2ca02c", "#000000"
#: a target the numbers are judged against (the 90% SLO attainment that defines goodput, an SLO, a budget): black,
#: as nothing measured is, and dotted where a prediction is dashed (ch08 drew its 90% line dashed like a prediction,
#: ch06 and ch07 dotted); the line style in matplotlib's and in plotly's words
TARGET, TARGET_LS, TARGET_DASH = "#000000", ":", "dot"
#: phase -> colour, the one convention of every chapter (matplotlib and plotly figures alike)
PHASE_COLORS = {"prefill": PREFILL, "decode": DECODE, "transfer": TRANSFER}

#: the serving layouts the book compares, in the order legends list them, with what each means
LAYOUTS = {"prefill-first": "colocated: a worker prefills new prompts before it decodes (vLLM's default before "
                            "chunked prefill)",
           "chunked": "colocated with chunked prefill: each step decodes every stream and prefills one chunk",
           "decode-first": "colocated: a worker prefills only when no stream decodes",
           "split": "prefill and decode workers apart (xPyD, disaggregated), the cache moved between them"}
#: one colour per layout, everywhere in the book, none of them a phase's colour (the split was orange, prefill's
#: colour, and colocated prefill-first blue, decode's: chapter 9 drew orange hand-offs beside orange prefills):
#: split red (tab:red), colocated prefill-first cyan (tab:cyan), chunked purple, decode-first brown
LAYOUT_COLORS = {"prefill-first": "#17becf", "chunked": "#9467bd", "decode-first": "#8c564b", "split": "#d62728"}

#: colours of what is neither a phase nor a layout, in the order a figure takes them (matplotlib's tab:pink,
#: tab:olive, tab:gray, tab20b's indigo and gold): none is a colour of :data:`PHASE_COLORS` or :data:`LAYOUT_COLORS`
OTHER_COLORS = ("#e377c2", "#bcbd22", "#7f7f7f", "#393b79", "#e7ba52")

_SPLIT = re.compile(r"\d+\s*P\s*\+\s*\d+\s*D|\bsplit\b|disaggregated|xPyD", re.IGNORECASE)


def layout_of(run) -> str | None:
    """The layout (a key of :data:`LAYOUT_COLORS`) of ``run``: a :class:`~splitlab.serving.ServingConfig` or a
    planner candidate (anything with ``layout`` and ``policy``), or a run's name as the
    book writes them ("3P+1D", "split 1P+1D", "4 colocated", "4 colocated (chunked, 256-token chunks)",
    "4 chunked 256", "prefill-first", "decode-first"). None when the name names no layout."""
    layout = getattr(run, "layout", None)
    if isinstance(layout, str) or hasattr(run, "policy"):
        policy = getattr(run, "policy", "prefill-first")
        return "split" if layout == "disaggregated" else policy if policy in LAYOUT_COLORS else "prefill-first"
    name = str(run)
    if _SPLIT.search(name):
        return "split"
    low = name.lower()
    for key in ("chunked", "decode-first", "prefill-first"):
        if key in low:
            return key
    return "prefill-first" if "coloc" in low else None


def layout_color(run, default: str | None = None) -> str | None:
    """The colour of ``run``'s layout (:func:`layout_of`), or ``default`` where it names none."""
    layout = layout_of(run)
    return LAYOUT_COLORS[layout] if layout else default


def sig3(value):
    """``value`` rounded to 3 significant digits, as a number a table shows without false precision: an int where
    that leaves no decimals (121 and 8630, not 121.0 or 8.63e+03), else a float (0.00708, 12.3); NaN, inf, bools
    and non-numbers unchanged. A table of such values, kept as ``dtype=object``, prints each as written."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return value
    if not np.isfinite(value):
        return value
    r = float(f"{float(value):.3g}")
    return int(r) if r.is_integer() else r


def fmt2(value: float) -> str:
    """A ratio as text with 2 significant digits: :func:`fmt3` with ``digits=2`` (0.21, 4.7, 47, 120)."""
    return fmt3(value, 2)


def fmt_table(df: pd.DataFrame, columns: dict, index: str | None = None) -> pd.DataFrame:
    """A display copy of ``df``: for each ``column: (header, scale)`` (or ``column: header``) the column times
    ``scale``, as text of 3 significant digits (:func:`fmt3`); integer columns stay integers; text stays text.
    ``index`` names the column (after renaming) to index the table by."""
    out = {}
    for col, spec in columns.items():
        header, scale = (spec, 1) if isinstance(spec, str) else spec
        values = df[col]
        if pd.api.types.is_integer_dtype(values) and scale == 1:
            out[header] = values.astype(int).to_numpy()
        elif pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            out[header] = [fmt3(v * scale) for v in values]
        else:
            out[header] = values.to_numpy()
    table = pd.DataFrame(out)
    return table.set_index(index) if index else table


def signed_pct(value: float) -> str:
    """A relative difference as a signed whole percent, "+12%", "-7%", and "+0%" where it rounds to zero (not
    "-0%")."""
    return "+0%" if abs(value) < 0.005 else f"{value:+.0%}"


def gb_per_s(gbps: float) -> str:
    """A link's bandwidth as every page writes it: '12.5 GB/s', '0.01 GB/s', '1,000,000 GB/s' (up to 6 significant
    digits, so two links of a slider never print alike; no exponent)."""
    return f"{fmt3(gbps, 6)} GB/s"


def pct2(share: float, signed: bool = False) -> str:
    """A share as a percentage of 2 significant digits, no trailing zeros (:func:`fmt2` of 100 x ``share``):
    "-50%", "7.5%", "0.19%", "0%", "n/a" for NaN; ``signed``: "+" before a positive value ("+12%", "-0.5%"). A
    table's error or spread in percent needs no more: "-0.501" or "0.187" claimed digits a second run moves."""
    if not np.isfinite(share):
        return "n/a"  # a spread of a single run
    text = fmt2(100 * float(share) + 0.0) + "%"  # + 0.0: no "-0%"
    return "+" + text if signed and share > 0 and text != "0%" else text


def change_words(ratio: float, near: float = 0.05, number: bool = False) -> str:
    """How a quantity changed when it became ``ratio`` times as large, in words that follow from the number:
    "stays about the same" (within ``near``), "about doubles" / "about triples" (within ``near`` of 2 or 3),
    "grows by 83%" (below 2x), "grows 4.2x", "falls by 30%" (above half), "falls to 0.21x"; with ``number``,
    the words that carry no number get it in brackets ("stays about the same (+3%)", "about doubles (2.04x)").

    Raises:
        ValueError: ``ratio`` is not a positive finite number.
    """
    ratio = float(ratio)
    if not np.isfinite(ratio) or ratio <= 0:
        raise ValueError(f"a ratio of change must be a positive number, got {ratio}")
    if abs(ratio - 1) <= near + 1e-9:
        return "stays about the same" + (f" ({ratio - 1:+.0%})" if number else "")
    for times, word in ((2, "doubles"), (3, "triples")):
        if abs(ratio / times - 1) <= near + 1e-9:
            return f"about {word}" + (f" ({ratio:.2f}x)" if number else "")
    if ratio > 1:
        return f"grows by {ratio - 1:.0%}" if ratio < 2 else f"grows {fmt2(ratio)}x"
    return f"falls by {1 - ratio:.0%}" if ratio >= 0.5 else f"falls to {fmt2(ratio)}x"


def and_list(items) -> str:
    """``["a", "b", "c"]`` -> "a, b and c" (items as text; one item alone)."""
    items = [str(v) for v in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
