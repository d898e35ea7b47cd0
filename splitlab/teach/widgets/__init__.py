"""Interactive explorers (core ipywidgets + inline matplotlib, which work on Colab and in Jupyter).

Widgets are dead in the static HTML of the book, so every explorer first draws a static figure at its default
settings, then shows the sliders, which redraw a live copy when a kernel is running.

One module per chapter (``ch01`` ...); every explorer is reachable here as ``splitlab.widgets.<name>``.
"""
from .base import explorer
from .ch01 import two_phases_explorer
from .ch02 import kv_size_explorer
from .ch03 import decode_roofline_explorer
from .ch04 import stall_explorer, ttft_load_explorer
from .ch05 import kv_transfer_explorer, kv_transfer_figure
from .ch06 import split_explorer, split_figure
from .ch07 import pools_explorer, pools_figure

__all__ = ['explorer', 'decode_roofline_explorer', 'kv_size_explorer', 'kv_transfer_explorer', 'kv_transfer_figure', 'pools_explorer', 'pools_figure', 'split_explorer', 'split_figure', 'stall_explorer', 'ttft_load_explorer', 'two_phases_explorer']
