"""The presets splitlab ships: configs in ``splitlab/configs`` that load with random weights and no download.

The one list of presets: models, sizing and the CLI all read it from here (torch-free).
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["CONFIG_DIR", "list_presets", "is_preset", "preset_fields"]

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def list_presets() -> list[str]:
    """Names of the configs shipped in splitlab/configs (loadable with random weights, no download)."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.json"))


def is_preset(name: object) -> bool:
    return isinstance(name, str) and name in list_presets()


def preset_fields(name: str) -> dict:
    """The config fields of preset ``name`` (its ``_comment`` dropped). Raises KeyError for an unknown preset."""
    if not is_preset(name):
        raise KeyError(f"unknown preset {name!r}; presets: {', '.join(list_presets())}")
    fields = json.loads((CONFIG_DIR / f"{name}.json").read_text())
    fields.pop("_comment", None)
    return fields
