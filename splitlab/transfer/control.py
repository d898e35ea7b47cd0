"""Typed control-plane messages: small dataclasses sent as JSON through a
:class:`~splitlab.transfer.mailbox.Mailbox`, and read back with :func:`decode`, which refuses what it does not know.

Subclass :class:`Message` (a dataclass) and the class registers itself under its name; ``to_dict()`` is what
goes on the wire. The :class:`~splitlab.transfer.peer.Peer` and the distributed serving back end
(:mod:`splitlab.serving.distributed.messages`) both speak this way.
"""
from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields

__all__ = ["ProtocolError", "Message", "decode"]


class ProtocolError(RuntimeError):
    """A control message that is not one of splitlab's, or that answers nothing that was asked."""


_TYPES: dict[str, type] = {}


@dataclass
class Message:
    """Base of every control message: ``to_dict()`` for the wire, :func:`decode` back."""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        _TYPES[cls.__name__] = cls

    def to_dict(self) -> dict:
        return {"type": type(self).__name__, **asdict(self)}


def decode(data: dict) -> Message:
    """The message a received dict holds.

    Raises:
        ProtocolError: no "type", a type nobody defined, or fields that do not match it (each named).
    """
    if not isinstance(data, dict) or "type" not in data:
        raise ProtocolError(f"a control message without a type: {str(data)[:200]}")
    name = data["type"]
    cls = _TYPES.get(name)
    if cls is None:
        raise ProtocolError(f"unknown control message type {name!r} (known: {', '.join(sorted(_TYPES))})")
    body = {k: v for k, v in data.items() if k not in ("type", "src")}  # "src": added by the mailbox
    names = {f.name for f in fields(cls)}
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    if not required <= set(body) <= names:
        missing, extra = sorted(required - set(body)), sorted(set(body) - names)
        raise ProtocolError(f"control message {name} with missing fields {missing} / unknown fields {extra}")
    return cls(**body)
