"""Whether a model name can be loaded here, found out in a fraction of a second: a preset, a local directory, a
model in the Hugging Face cache, a trained model with an offline source (:mod:`splitlab.phases.trained`), or a hub
name while the hub can be reached. Without this check a name that is none of those waits for the Hugging Face
client to retry an unreachable hub for half a minute, in every process that tries it. torch-free, so that the
command line checks a name before importing torch."""
from __future__ import annotations

import difflib
import os
import threading
from pathlib import Path

from ..common.presets import list_presets
from .tokenizer import ModelLoadError
from .trained import (OFFLINE_MODELS, converted_dir, find_gguf, in_hub_cache, is_converted, missing_message,
                      offline_model)

__all__ = ["ModelNotFound", "check_loadable"]


class ModelNotFound(ModelLoadError, ValueError):
    """The model a name points to cannot be loaded here (no such preset, path, cached or reachable hub model)."""


def check_loadable(name: str) -> None:
    """Return if ``name`` may load here; raise :class:`ModelNotFound` at once, naming why, when it cannot: a
    path that does not exist or is a file, an entry of the sizing table (a datasheet, not weights), or a hub name
    that is not in the local cache while the hub cannot be reached (offline mode, or its host does not resolve);
    for a model with an offline source (``smollm2-135m-instruct``), none of its sources here either."""
    try:
        _check(name)
    except ModelNotFound as err:
        near = _nearest(name)  # 'SmolLM2-135M-Instruct', a typo: the name meant, which the lists lacked
        raise ModelNotFound(f"did you mean {near!r}? {err}" if near else str(err)) from None


def _nearest(name: str) -> str | None:
    """The preset or trained model's name (short or hub) closest to ``name``, ignoring case; None if none is, or if
    it is ``name`` itself."""
    names = {n.lower(): n for n in [*list_presets(), *OFFLINE_MODELS, *(m.hub_name for m in OFFLINE_MODELS.values())]}
    near = difflib.get_close_matches(name.strip().lower(), list(names), n=1, cutoff=0.85)
    from ..sizing import PUBLISHED_MODELS  # a sizing-table entry is told to use kv-size instead
    # the name itself (a known model that cannot load here) is no guess: "did you mean 'x'?" to one who typed 'x'
    return names[near[0]] if near and names[near[0]] != name and name not in PUBLISHED_MODELS else None


def _check(name: str) -> None:
    presets = f"{', '.join(list_presets())}; trained: {', '.join(OFFLINE_MODELS)}"
    if name in list_presets() or Path(name).expanduser().is_dir():
        return
    spec = offline_model(name)
    if spec is not None:
        if in_hub_cache(spec) or find_gguf(spec) is not None or is_converted(converted_dir(spec)):
            return
        why = _unreachable()
        if why:
            raise ModelNotFound(missing_message(spec, why))
        return
    if Path(name).expanduser().exists():
        raise ModelNotFound(f"model path {name!r} is a file, not a directory saved with save_pretrained (presets: "
                            f"{presets})")
    from ..sizing import PUBLISHED_MODELS
    if name in PUBLISHED_MODELS:
        raise ModelNotFound(f"{name!r} is an entry of the sizing table, not a loadable model: try "
                            f"'splitlab kv-size {name}', or a preset ({presets})")
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name:
        raise ModelNotFound(f"model path {name!r} does not exist (presets: {presets})")
    from huggingface_hub import try_to_load_from_cache
    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return  # in the local Hugging Face cache
    except ValueError:  # not a valid repo id
        raise ModelNotFound(f"model {name!r} is not a preset, a local directory or a Hugging Face name "
                            f"(presets: {presets})") from None
    why = _unreachable()
    if why:
        raise ModelNotFound(f"model {name!r} is not a preset, not a local directory and not in the Hugging Face "
                            f"cache, and {why}; use a preset: {presets}")


def _unreachable() -> str | None:
    """"<host> cannot be reached" in offline mode or when the hub's host does not resolve; None when it may be."""
    from huggingface_hub import constants
    host = constants.ENDPOINT.split("://")[-1].split("/")[0].split(":")[0]
    return f"{host} cannot be reached" if constants.HF_HUB_OFFLINE or not _resolves(host) else None


def _resolves(host: str, timeout: float = 3.0) -> bool:
    import socket
    found: list[bool] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, 443)
            found.append(True)
        except OSError:
            pass
    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(found)
