"""Loading trained weights for :func:`splitlab.load_model`: a Hugging Face name (from the hub or its local
cache), a local directory saved with ``save_pretrained``, or a model with an offline source
(:mod:`splitlab.phases.trained`: the local Hugging Face cache, else a GGUF file dequantized once into splitlab's
cache, else the hub)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
import transformers
from safetensors import SafetensorError

from ..common.presets import list_presets
from .attention import attention_for, causal_lm_class, unusable
from .gguf_model import converted
from .locate import ModelNotFound, check_loadable
from .tokenizer import ModelLoadError, load_tokenizer
from .trained import OFFLINE_MODELS, OfflineModel, converted_dir, find_gguf, in_hub_cache, is_converted, offline_model

__all__ = ["load_pretrained", "offline_source"]


def _one_line(err: BaseException) -> str:
    """The whole error on one line (transformers' messages span lines; a cut one hid the real cause)."""
    text = re.sub(r"\s+", " ", str(err)).strip()
    return f"{type(err).__name__}: {text}"


def offline_source(spec: OfflineModel) -> tuple[str, str | None]:
    """Where ``spec`` loads from here, and the GGUF file its weights were dequantized from (None: the hub's own
    weights): the snapshot folder in the Hugging Face cache; else the folder converted from the GGUF of its
    package (converting it now if no process has yet), or one converted before; else its hub name (the caller
    has checked that the hub can be reached)."""
    if in_hub_cache(spec):
        from huggingface_hub import try_to_load_from_cache
        return str(Path(try_to_load_from_cache(spec.hub_name, "config.json")).parent), None
    gguf = find_gguf(spec)
    if gguf is not None:
        return str(converted(spec, gguf)), spec.gguf_file
    if is_converted(converted_dir(spec)):  # the package was uninstalled after a conversion
        return str(converted_dir(spec)), spec.gguf_file
    return spec.hub_name, None


def load_pretrained(name: str, device: torch.device, dtype: torch.dtype, attn_implementation: str | None,
                    tokenizer: Any) -> tuple[Any, Any, str | None]:
    """The model (eval mode, on ``device``, in ``dtype``) and tokenizer that hub name or path ``name`` names, and
    the GGUF file the weights were dequantized from (None for original weights). Raises what
    :func:`splitlab.load_model` documents for names that are not presets."""
    fallback = (f"use the embedded default load_model('tiny') or a preset with random weights: "
                f"{', '.join(list_presets())}")
    path = Path(name).expanduser()
    if path.exists() and not path.is_dir():
        gguf = (f"a GGUF file: load_model reads GGUF only through the trained models it names "
                f"({', '.join(OFFLINE_MODELS)}); read another with transformers.AutoModelForCausalLM."
                f"from_pretrained(folder, gguf_file=...) and pass the model: load_model(model, tokenizer)")
        raise ModelLoadError(f"could not load model {name!r}: it is " + (gguf if path.suffix == ".gguf" else (
            f"a file; give the directory a model was saved to with save_pretrained (config.json and weights), "
            f"or {fallback}")))
    if path.is_dir() and not (path / "config.json").is_file():
        raise ModelLoadError(f"could not load model {name!r}: the directory has no config.json (not a model saved "
                             f"with save_pretrained); {fallback}")
    try:  # at once, where the hub client would retry an unreachable hub for half a minute
        check_loadable(name)
    except ModelNotFound as err:
        raise ModelNotFound(f"could not load model {name!r} ({err}). Without network access or a local copy, "
                            f"{fallback}") from None
    spec = offline_model(name)
    source, dequantized_from = offline_source(spec) if spec is not None else (name, None)
    # a converted folder whose files were edited or cut since: say which folder to delete, not "no network"
    damaged = (f"; the files converted from {dequantized_from} before are damaged: delete {source} and load again "
               f"to convert them anew") if dequantized_from else ""
    try:
        config = transformers.AutoConfig.from_pretrained(source)
    except OSError as err:
        raise ModelLoadError(f"could not load model {name!r} ({_one_line(err)})" + (damaged or (
            f". Without network access or a local copy, {fallback}"))) from None
    except ValueError as err:
        raise ModelLoadError(f"could not load model {name!r} ({_one_line(err)}){damaged}") from None
    attn = attention_for(config, attn_implementation, name)
    bar = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # a "Loading weights" bar per load, in every notebook cell
    try:
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(source, dtype=dtype, attn_implementation=attn)
        except TypeError:  # transformers 4.x names the argument torch_dtype
            model = transformers.AutoModelForCausalLM.from_pretrained(source, torch_dtype=dtype,
                                                                      attn_implementation=attn)
    except OSError as err:
        raise ModelLoadError(f"could not load model {name!r} ({_one_line(err)}). Without network access or a "
                             f"local copy, {fallback}") from None
    except (ValueError, ImportError, SafetensorError) as err:  # SafetensorError: a truncated weights file
        if attn_implementation is not None and "attn_implementation" in str(err):  # a name transformers refused
            raise unusable(name, attn, causal_lm_class(config), err) from None
        raise ModelLoadError(f"could not load model {name!r} ({_one_line(err)})"
                             f"{damaged if isinstance(err, SafetensorError) else ''}") from None
    finally:
        if bar:
            transformers.utils.logging.enable_progress_bar()
    model = model.to(device).eval()
    tok = tokenizer if tokenizer is not None else load_tokenizer(source, model.config.vocab_size)
    if dequantized_from and tokenizer is None and getattr(tok, "chat_template", None) is None:
        # a lost chat_template.jinja or an unreadable tokenizer.json loaded as bytes with no template, and
        # encode_chat then said to load 'smollm2-135m-instruct', the model it was
        raise ModelLoadError(f"could not load model {name!r}: its tokenizer or chat template is missing or "
                             f"unreadable{damaged}")
    return model, tok, dequantized_from
