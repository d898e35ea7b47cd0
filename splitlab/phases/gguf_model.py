"""A GGUF file dequantized once into a safetensors folder under splitlab's cache, so that later loads take
seconds, not the 16 s of CPU time transformers' GGUF reader takes (27 s before :func:`_read_once`).

Several processes may load the model at once for the first time (pytest-xdist workers, the book's chapters run
in parallel): one converts while the others wait on a file lock, and the conversion is written to a temporary
folder and renamed into place, so no process ever reads a half-written folder, even after a crash.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .tokenizer import ModelLoadError
from .trained import CONVERTED_FILES, OfflineModel, converted_dir, is_converted

__all__ = ["converted", "SOURCE_FILE"]

#: What a converted folder was made from, written beside its weights.
SOURCE_FILE = "splitlab_source.json"


def converted(spec: OfflineModel, gguf: Path) -> Path:
    """The folder of ``spec``'s weights dequantized from ``gguf`` to float32 safetensors (with its tokenizer and
    chat template), converting them first when no process has yet.

    Raises:
        ModelLoadError: the GGUF reader is not installed (``gguf``; transformers 5 also needs ``accelerate``), the
            file cannot be read, or the cache folder cannot be written (``SPLITLAB_CACHE`` chooses another).
    """
    target = converted_dir(spec, gguf)
    if is_converted(target):
        return target
    from filelock import Timeout
    lock = str(target) + ".lock"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _waiting_lock(lock, f"another process is converting {gguf.name} into {target.parent}"):
            if is_converted(target):  # another process converted it while this one waited
                return target
            for stale in target.parent.glob(f".{target.name}.tmp-*"):  # left by a killed conversion
                shutil.rmtree(stale, ignore_errors=True)
            if target.exists():  # a conversion damaged since (a file deleted): the rename below needs its place
                _remove_damaged(target)
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
            try:
                _convert(spec, gguf, tmp)
                os.rename(tmp, target)  # atomic: the folder appears whole
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except Timeout:  # a TimeoutError, hence an OSError: caught first
        raise ModelLoadError(f"waited 15 minutes for another process converting {gguf.name} into {target.parent}; if "
                             f"none is, delete {lock} and load again") from None
    except OSError as err:
        raise ModelLoadError(f"could not write the weights converted from {gguf.name} to {target.parent} "
                             f"({type(err).__name__}: {err}); set SPLITLAB_CACHE to a writable folder") from None
    return target


@contextlib.contextmanager
def _waiting_lock(path: str, holder: str, timeout_s: float = 900):
    """``path``'s file lock held while the block runs; when another process holds it, a line on stderr says whose
    turn it is before waiting (the second process sat silent for the minutes the first one took).

    Raises:
        filelock.Timeout: not acquired within ``timeout_s``."""
    from filelock import FileLock, Timeout
    lock = FileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"splitlab: {holder}: waiting for it (at most {timeout_s / 60:.0f} minutes)", file=sys.stderr, flush=True)
        lock.acquire(timeout=timeout_s)
    try:
        yield
    finally:
        lock.release()


def _remove_damaged(target: Path) -> None:
    """Delete ``target``, a converted folder that lacks a file of :data:`~.trained.CONVERTED_FILES`, saying so."""
    missing = [name for name in CONVERTED_FILES if not (target / name).is_file()]
    print(f"splitlab: {target} lacks {', '.join(missing)}: converting again", file=sys.stderr, flush=True)
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    else:
        target.unlink()


@contextlib.contextmanager
def _no_bar(module):
    """``module.tqdm`` replaced by a pass-through while the block runs (in a notebook it would draw a widget)."""
    saved = getattr(module, "tqdm", None)
    module.tqdm = lambda iterable=None, *args, **kwargs: iterable
    try:
        yield
    finally:
        module.tqdm = saved


@contextlib.contextmanager
def _read_once():
    """While the block runs, ``gguf.GGUFReader`` of a file made once and ``gguf.get_tensor_name_map`` computed
    once per (architecture, layers): transformers' GGUF loader imports both from ``gguf`` at each call, parsed the
    file's metadata (SmolLM2's 49,152-token vocabulary) three times (tokenizer, config, weights) and built the name
    map once per module (397 times), together half of the conversion's CPU time (profiled 2026-12-04). Both are
    only read by the loader; outside the block gguf is as it was."""
    try:
        import gguf as gguf_lib
    except ImportError:  # the loader below says what is missing
        yield
        return
    reader, name_map = gguf_lib.GGUFReader, gguf_lib.get_tensor_name_map
    readers: dict = {}

    def read_once(path, *args, **kwargs):
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader(path, *args, **kwargs)
        return readers[key]

    gguf_lib.GGUFReader, gguf_lib.get_tensor_name_map = read_once, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf_lib.GGUFReader, gguf_lib.get_tensor_name_map = reader, name_map


def _convert(spec: OfflineModel, gguf: Path, out: Path) -> None:
    """Dequantize ``gguf`` with transformers' GGUF reader and save the model and tokenizer to ``out``."""
    import torch
    import transformers
    from transformers.utils import logging
    print(f"splitlab: dequantizing {gguf.name} ({spec.quantization}) to float32 safetensors once, in {out.parent} "
          f"(about 15 s of CPU time; later loads take seconds)", file=sys.stderr, flush=True)
    bar = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()  # transformers' own bars; the GGUF reader's plain tqdm is passed over below
    try:
        try:
            from transformers import modeling_gguf_pytorch_utils as gguf_utils
            with _no_bar(gguf_utils), _read_once():
                tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
                model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                                          dtype=torch.float32)
        except ImportError as err:  # gguf missing, or accelerate under transformers 5
            raise ModelLoadError(f"reading {gguf.name} needs a library that is not installed: "
                                 f"{str(err).strip().splitlines()[0][:200]} (pip install gguf accelerate)") from None
        except (OSError, ValueError) as err:
            raise ModelLoadError(f"could not read {gguf}: {type(err).__name__}: {err}") from None
        # The weights are plain float32 tensors now; without the GGUF quantizer's marks it saves as any model.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(out)  # an OSError here (a full disk) is the caller's "could not write"
        tokenizer.save_pretrained(out)
    finally:
        if bar:
            logging.enable_progress_bar()
    source = {"gguf_file": gguf.name, "quantization": spec.quantization, "distribution": spec.distribution,
              "hub_name": spec.hub_name}
    (out / SOURCE_FILE).write_text(json.dumps(source, indent=1) + "\n")
