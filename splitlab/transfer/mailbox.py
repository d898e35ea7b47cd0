"""The control plane between processes: JSON messages through the rendezvous ``TCPStore``, one FIFO queue per rank."""
from __future__ import annotations

import json
import queue
import threading
from datetime import timedelta
from typing import Any

import torch.distributed as dist

__all__ = ["Mailbox"]


class Mailbox:
    """The control plane: JSON messages through the store, one FIFO queue per rank.

    ``send(rank, kind=..., ...)`` pushes a dict; a reader thread blocks on this rank's queue (no polling) and
    ``get(timeout)`` returns the next dict, or None when ``timeout`` passes. When the store goes away (its host,
    rank 0, died) ``get`` returns ``{"kind": "_store_gone", "error": ...}``.
    """

    def __init__(self, store: dist.Store, rank: int, prefix: str):
        self.store, self.rank, self.prefix = store, rank, prefix
        self._lock = threading.Lock()
        self._inbox: queue.Queue = queue.Queue()
        self._reader = store.clone()
        self._reader.set_timeout(timedelta(days=7))
        self._thread = threading.Thread(target=self._read, name=f"mailbox-{rank}", daemon=True)
        self._thread.start()

    def _key(self, rank: int) -> str:
        return f"{self.prefix}/inbox/{rank}"

    def _read(self) -> None:
        while True:
            try:
                msg = json.loads(self._reader.queue_pop(self._key(self.rank)))
            except Exception as err:  # noqa: BLE001 - the store is gone: tell the owner, then stop
                self._inbox.put({"kind": "_store_gone", "error": str(err).splitlines()[0]})
                return
            if msg.get("kind") == "_close":
                return
            self._inbox.put(msg)

    def send(self, to: int, /, **msg: Any) -> None:
        """Push ``msg`` (JSON-serialisable values; ``src`` = this rank is added) to rank ``to``'s queue."""
        msg.setdefault("src", self.rank)
        with self._lock:
            self.store.queue_push(self._key(to), json.dumps(msg))

    def post_local(self, msg: dict) -> None:
        """Queue ``msg`` for this rank's own ``get`` without the store (events from this process's threads)."""
        self._inbox.put(msg)

    def get(self, timeout: float | None = None) -> dict | None:
        try:
            return self._inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop the reader thread (idempotent; harmless when the store is already gone)."""
        if self._thread.is_alive():
            try:
                self.send(self.rank, kind="_close")
            except Exception:  # noqa: BLE001
                pass
            self._thread.join(timeout=2.0)
