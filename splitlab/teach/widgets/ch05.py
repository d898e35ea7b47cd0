"""Chapter 5's explorers."""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt  # noqa: F401 (NullFormatter below)

from ... import sizing
from .base import explorer

__all__ = ['kv_transfer_explorer']


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

    speeds = {k: v["bandwidth_bytes_per_s"] for k, v in sizing.LINKS.items()} | dict(measured or {})

    def draw(model: str, prompt_tokens: int, link: str) -> None:
        fig, (a1, a2) = confusions.figure(2, 3.5)
        with confusions.phone():
            _draw(a1, a2, model, prompt_tokens, link)

    def _draw(a1, a2, model: str, prompt_tokens: int, link: str) -> None:
        tokens = np.geomspace(128, 32768, 40)
        h = [sizing.handoff(model, int(t), speeds[link], gpu, dtype) for t in tokens]
        a1.loglog(tokens, [x["transfer_s"] * 1e3 for x in h], color=transfer_plots.TRANSFER, lw=2,
                  label=f"transfer over {link}")
        a1.loglog(tokens, [x["decode_step_s"] * 1e3 for x in h], "--", color="tab:blue",
                  label=f"one decode step on {gpu} (minimum)")
        a1.loglog(tokens, [x["prefill_s"] * 1e3 for x in h], ":", color="tab:orange",
                  label=f"prefill on {gpu} (roofline)")
        a1.axvline(prompt_tokens, color="grey", lw=1)
        transfer_plots._plain_log(a1.yaxis)
        a1.set_xticks([128, 512, 2048, 8192, 32768], ["128", "512", "2,048", "8,192", "32,768"])
        a1.xaxis.set_minor_formatter(plt.NullFormatter())  # unlabelled minor ticks: the labels overlapped
        a1.set_xlabel("prompt length (tokens, log scale)")
        a1.set_ylabel("time (ms, log scale)")
        here = sizing.handoff(model, prompt_tokens, speeds[link], gpu, dtype)
        a1.set_title(f"{prompt_tokens:,} tokens, {link}: {here['decode_steps']:.2g} decode steps, "
                     f"{here['prefill_share']:.0%} of the prefill", fontsize="medium")
        a1.legend(fontsize="x-small", loc="upper left")
        transfer_plots.handoff_dots(model, prompt_tokens, gpu, dtype, extra=measured, ax=a2)

    return explorer(draw,
                    model=widgets.Dropdown(options=list(sizing.PUBLISHED_MODELS), value=model, description="model"),
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 128, 32768, 128, description="prompt"),
                    link=widgets.Dropdown(options=list(speeds), value=link, description="link"))

