"""Chapter 5's explorers."""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt  # noqa: F401 (NullFormatter below)

from ... import sizing
from ..figures.style import DECODE, PREFILL, TRANSFER
from .base import explorer

__all__ = ['kv_transfer_explorer', 'kv_transfer_figure']

#: the prompt lengths of the rendered book's figure (tokens)
PROMPTS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


def kv_transfer_explorer(model: str = "Llama-3-8B", prompt_tokens: int = 2048, link: str = "PCIe 4.0 x16",
                         gpu: str = "H100", dtype: str = "fp16", measured: dict[str, float] | None = None
                         ) -> widgets.VBox:
    """Ch. 5: when does moving the KV cache cost more than a decode step? For a published ``model`` (dropdown), a
    prompt length (slider) and a link (dropdown: :data:`splitlab.sizing.LINKS` plus ``measured``, label -> bytes/s
    measured here): top, the transfer time over that link, the model's minimum decode step and its roofline
    prefill on ``gpu`` against prompt length; bottom, the chosen prompt's transfer over every link
    (:func:`splitlab.sizing.handoff`)."""
    import numpy as np

    from ..figures import confusions, transfer as transfer_plots
    from ..figures.phone import fit_titles, legend_below

    speeds = {k: v["bandwidth_bytes_per_s"] for k, v in sizing.LINKS.items()} | dict(measured or {})

    def draw(model: str, prompt_tokens: int, link: str) -> None:
        fig, (a1, a2) = confusions.figure(2, 3.5)
        with confusions.phone():
            _draw(a1, a2, model, prompt_tokens, link)
            fit_titles(fig)

    def _draw(a1, a2, model: str, prompt_tokens: int, link: str) -> None:
        tokens = np.geomspace(128, 32768, 40).astype(int)
        h = transfer_plots.handoff_grid([model], tokens, {link: speeds[link]}, gpu=gpu, dtype=dtype)
        a1.loglog(h.prompt_tokens, h.transfer_s * 1e3, color=TRANSFER, lw=2,
                  label=f"transfer over {link}")
        a1.loglog(h.prompt_tokens, h.decode_step_s * 1e3, "--", color=DECODE,
                  label=f"decode step on {gpu} (min.)")
        a1.loglog(h.prompt_tokens, h.prefill_s * 1e3, ":", color=PREFILL,
                  label=f"prefill on {gpu} (roofline)")
        a1.axvline(prompt_tokens, color="grey", lw=1)
        transfer_plots._plain_log(a1.yaxis, minor=False)
        a1.set_xticks([128, 512, 2048, 8192, 32768], ["128", "512", "2,048", "8,192", "32,768"])
        a1.xaxis.set_minor_formatter(plt.NullFormatter())  # unlabelled minor ticks: the labels overlapped
        a1.set_xlabel("prompt length (tokens, log scale)")
        a1.set_ylabel("time (ms, log scale)")
        here = sizing.handoff(model, prompt_tokens, speeds[link], gpu, dtype)
        a1.set_title(f"{prompt_tokens:,} tokens, {link}: {here['decode_steps']:.2g} decode steps, "
                     f"{here['prefill_share']:.0%} of the prefill")
        transfer_plots.handoff_dots(model, prompt_tokens, gpu, dtype, extra=measured, ax=a2)
        handles, labels = a2.figure.legends[0].legend_handles, [t.get_text() for t in a2.figure.legends[0].texts]
        a2.figure.legends.clear()  # one legend under both panels: the lines are the same in both
        legend_below(a2.figure, a1.get_lines()[:1] + handles, [f"transfer over {link}"] +
                     [lab.replace(" (", f" on {gpu} (", 1) for lab in labels])

    return explorer(draw,
                    model=widgets.Dropdown(options=list(sizing.PUBLISHED_MODELS), value=model, description="model"),
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 128, 32768, 128, description="prompt"),
                    link=widgets.Dropdown(options=list(speeds), value=link, description="link"))



def _tick(link: str, source: str = "published") -> str:
    """A link's name on two short lines (a phone's column holds six of them)."""
    if source == "measured":
        return link.split(" (")[0].replace("this ", "this<br>") + "<br>(measured)"
    return link.replace(" network", "<br>network").replace(" (", "<br>(").replace(" x16", "<br>x16")


def kv_transfer_figure(models=("Llama-2-7B", "Llama-3-8B", "Llama-3-70B", "StarCoder-15B"), model: str = "Llama-3-8B",
                       prompt_tokens: int = 2048, gpu: str = "H100", dtype: str = "fp16",
                       measured: dict[str, float] | None = None, prompts=PROMPTS):
    """Ch. 5's explorer for the rendered book (no kernel): a model (dropdown) and a prompt length (slider over
    ``prompts``); the cache's transfer time over every link of :data:`splitlab.sizing.LINKS` and over the links
    in ``measured`` (label -> bytes/s measured here), against the model's minimum decode step and roofline
    prefill on ``gpu``. The numbers are :func:`splitlab.teach.figures.transfer.handoff_grid`'s, the very rows the
    ipywidgets explorer draws. Returns a plotly figure (show it with :func:`splitlab.teach.interactive.show`).

    Raises:
        ValueError: ``model`` not in ``models`` or ``prompt_tokens`` not in ``prompts``, an unknown ``gpu``.
    """
    from ..figures import transfer as transfer_plots
    from ..interactive import Trace, explorer_figure, room_for_legend

    models, prompts = list(models), [int(n) for n in prompts]
    if model not in models or prompt_tokens not in prompts:
        raise ValueError(f"the default {model!r}, {prompt_tokens} must be among {models} and {prompts}")
    if gpu not in sizing.GPUS:
        raise ValueError(f"unknown gpu {gpu!r}; choose one of {list(sizing.GPUS)}")
    grid = transfer_plots.handoff_grid(models, prompts, measured=measured, gpu=gpu, dtype=dtype)
    grid["tick"] = [_tick(link, src) for link, src in zip(grid.link, grid.link_source)]
    ticks = list(dict.fromkeys(grid.tick))

    def traces(m, n):
        g = grid[(grid.model == m) & (grid.prompt_tokens == n)]
        pub, here = g[g.link_source == "published"], g[g.link_source == "measured"]
        return [Trace("published link", list(pub.tick), list(pub.transfer_s * 1e3), "markers", color="#7f7f7f"),
                Trace("link measured here", list(here.tick), list(here.transfer_s * 1e3), "markers", color=TRANSFER),
                Trace(f"decode step, {gpu} (min.)", ticks, [g.decode_step_s.iloc[0] * 1e3] * len(ticks), dash="dash",
                      color=DECODE),
                Trace(f"prefill, {gpu} (roofline)", ticks, [g.prefill_s.iloc[0] * 1e3] * len(ticks), dash="dot",
                      color=PREFILL)]

    fig = explorer_figure(traces, ("prompt", prompts), f"KV transfer (predicted, {dtype})", "link",
                          "time (ms, log scale)", dropdown=("model", models), height=600,
                          slider_default=prompts.index(prompt_tokens), dropdown_default=models.index(model),
                          y_log=True, slider_format=lambda n: f"{n:,} tokens")
    fig.update_xaxes(categoryorder="array", categoryarray=ticks, tickangle=0, tickfont_size=10)
    fig.update_traces(marker_size=10, selector=dict(mode="markers"))
    return room_for_legend(fig, 3, axis_px=57)
