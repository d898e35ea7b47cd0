"""Chapter 1's explorers."""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from ...phases.engine import generate
from ...phases.models import LoadedModel
from ...phases.profiling import random_prompt
from ..figures import phases as plots
from .base import explorer

__all__ = ['two_phases_explorer']


def two_phases_explorer(lm: LoadedModel, prompt_tokens: int = 256, new_tokens: int = 32) -> widgets.VBox:
    """Ch. 1: run one real request for the chosen prompt length and output length; plot its token timeline."""
    def draw(prompt_tokens: int, new_tokens: int) -> None:
        gen = generate(lm, [random_prompt(lm, prompt_tokens)], max_new_tokens=new_tokens)
        plots.token_timeline(gen, ax=plt.subplots()[1], title=f"{prompt_tokens}-token prompt, {new_tokens} new tokens ({lm.name})")

    cap = min(2048, lm.max_context) - 128
    return explorer(draw,
                    prompt_tokens=widgets.IntSlider(prompt_tokens, 16, cap, 16, description="prompt"),
                    new_tokens=widgets.IntSlider(new_tokens, 4, 128, 4, description="new tokens"))

