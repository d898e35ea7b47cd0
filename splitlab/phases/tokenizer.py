"""The byte-level tokenizer of the random-weight presets: UTF-8 bytes as token ids, plus three special ids."""
from __future__ import annotations

__all__ = ["ByteTokenizer"]


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
        """Text of ``ids``; special ids are dropped, undecodable bytes and ids >= 256 become U+FFFD."""
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)  # a tensor or array of ids, or a list
        specials = (self.bos_token_id, self.eos_token_id, self.pad_token_id)
        out = bytearray()
        for i in ids:
            if i in specials:
                continue
            out += bytes([i]) if 0 <= i < 256 else "\ufffd".encode()
        return out.decode("utf-8", errors="replace")
