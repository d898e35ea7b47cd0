"""Tokenizers: the byte-level tokenizer of the random-weight presets (UTF-8 bytes as token ids, plus three special
ids), and finding the Hugging Face tokenizer saved with a model."""
from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any

__all__ = ["ByteTokenizer", "ModelLoadError", "load_tokenizer", "check_tokenizer"]


class ModelLoadError(RuntimeError):
    """A model name, path or object could not be loaded (no network, no local copy, not a causal LM, or a
    kind of model splitlab does not handle: the message says which and why)."""


class ByteTokenizer:
    """UTF-8 bytes as token ids 0..255, plus BOS=256, EOS=257, PAD=258 (vocabulary of 259).

    Used by the random-weight presets. ``decode`` shows ids outside the byte range as U+FFFD.
    """

    bos_token_id, eos_token_id, pad_token_id = 256, 257, 258
    vocab_size = 259

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of ``text``: optional BOS then one id per UTF-8 byte."""
        return ([self.bos_token_id] if add_bos else []) + list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        """Text of ``ids``; special ids are dropped, undecodable bytes and ids >= 256 become U+FFFD.

        Raises:
            TypeError: ``ids`` a string, or holding anything but integers (was "'<=' not supported between
                instances of 'int' and 'str'")."""
        if isinstance(ids, (str, bytes)):
            raise TypeError(f"decode takes token ids (integers), got the text {ids!r:.40}: encode turns text into ids")
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)  # a tensor or array of ids, or a list
        bad = [i for i in ids if not isinstance(i, numbers.Integral)]
        if bad:
            raise TypeError(f"decode takes integer token ids, got {bad[0]!r}")
        specials = (self.bos_token_id, self.eos_token_id, self.pad_token_id)
        out = bytearray()
        for i in ids:
            if i in specials:
                continue
            out += bytes([i]) if 0 <= i < 256 else "\ufffd".encode()
        return out.decode("utf-8", errors="replace")


#: Files one of which every saved Hugging Face tokenizer has.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                    "spiece.model", "merges.txt")


def load_tokenizer(name: str, vocab_size: int, required: bool = True) -> Any:
    """The tokenizer saved with hub model or directory ``name``, or a :class:`ByteTokenizer` when there is none
    (``required`` False: None when there is none).

    A directory without tokenizer files is not handed to ``AutoTokenizer``: transformers 5 would build an empty
    tokenizer from the model type (every text encodes to no ids), and 4.x asks for sentencepiece/protobuf to
    convert a tokenizer that does not exist.

    Raises:
        ModelLoadError: no tokenizer and a vocabulary too small for bytes; or the tokenizer needs a library that
            is not installed.
    """
    path = Path(name)
    if not path.is_dir() or any((path / f).is_file() for f in _TOKENIZER_FILES):
        try:
            import transformers
            tokenizer = transformers.AutoTokenizer.from_pretrained(name)
        except ImportError as err:
            raise ModelLoadError(f"the tokenizer of {name!r} needs a library that is not installed: "
                                 f"{str(err).strip().splitlines()[0][:200]}") from None
        except (OSError, ValueError, TypeError):
            tokenizer = None
        if tokenizer is not None and tokenizer("Hello, world", add_special_tokens=False)["input_ids"]:
            return tokenizer
    if not required:
        return None
    if vocab_size < ByteTokenizer.vocab_size:
        raise ModelLoadError(f"{name!r} has no tokenizer and its vocabulary is too small for bytes")
    return ByteTokenizer()  # a local checkpoint saved without a tokenizer


def check_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer`` itself when it can encode and decode (a Hugging Face tokenizer, a :class:`ByteTokenizer`, or
    None for ids only); else a TypeError saying what to pass (a name is not a tokenizer: load it first)."""
    if tokenizer is None or isinstance(tokenizer, ByteTokenizer):
        return tokenizer
    if isinstance(tokenizer, (str, Path)):
        raise TypeError(f"tokenizer must be a tokenizer object, not the name {str(tokenizer)!r}: load it with "
                        f"transformers.AutoTokenizer.from_pretrained({str(tokenizer)!r})")
    if not (callable(tokenizer) and callable(getattr(tokenizer, "decode", None))):
        raise TypeError(f"tokenizer must be a tokenizer (callable on text, with a decode method, e.g. from "
                        f"transformers.AutoTokenizer.from_pretrained), got {type(tokenizer).__name__}")
    return tokenizer
