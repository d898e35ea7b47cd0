"""Interactive explorers (core ipywidgets + inline matplotlib, which work on Colab and in Jupyter).

Widgets are dead in the static HTML of the book, so every explorer first draws a static figure at its default
settings, then shows the sliders, which redraw a live copy when a kernel is running. Beside each explorer, a
``*_figure`` function builds the plotly figure that stays interactive in the rendered book
(:mod:`splitlab.teach.interactive`); both take their numbers from one ``*_grid`` function.

One module per chapter (``ch01`` ...); every explorer is reachable here as ``splitlab.widgets.<name>``.
"""
from .base import explorer
from .ch01 import decode_step_of, timeline_grid, two_phases_explorer, two_phases_figure
from .ch02 import kv_grid, kv_size_explorer, kv_size_figure
from .ch03 import decode_roofline_explorer, decode_roofline_figure, decode_roofline_grid
from .ch04 import stall_explorer, ttft_load_explorer, ttft_load_figure, ttft_load_grid
from .ch05 import kv_transfer_explorer, kv_transfer_figure
from .ch06 import split_explorer, split_figure
from .ch07 import pools_explorer, pools_figure
from .split_map import split_map_explorer, split_map_figure, split_map_grid, split_map_grids

__all__ = ['explorer', 'decode_roofline_explorer', 'kv_size_explorer', 'kv_transfer_explorer', 'pools_explorer',
           'split_explorer', 'stall_explorer', 'ttft_load_explorer', 'two_phases_explorer',
           # the grids the explorers share with their figures in the rendered book
           'timeline_grid', 'decode_step_of', 'two_phases_figure', 'kv_grid', 'kv_size_figure', 'decode_roofline_grid',
           'decode_roofline_figure', 'ttft_load_grid', 'ttft_load_figure', 'kv_transfer_figure', 'split_figure',
           'pools_figure', 'split_map_explorer', 'split_map_grid', 'split_map_grids', 'split_map_figure']
