"""Two real processes and a KV cache between them: :class:`Peer` (this process is rank 0, a spawned child rank 1).

    import splitlab as sl
    from splitlab.transfer.peer import Peer
    lm = sl.load_model("tiny")
    pre = sl.prefill(lm, [ids])
    with Peer() as peer:                                     # spawns, joins (gloo on CPU), ~2-4 s
        r = peer.transfer(pre.cache)                         # header + payload, timed until the receiver acks
        back, _ = peer.echo(pre.cache)                       # round trip: bit-exact?  torch.equal(...)
        tokens = peer.decode(pre.cache, [first], 16, model="tiny")  # decoded over there, one list per row
        r = peer.stream(lm, ids)                             # layer-wise while prefill computes; overlap

The receiving side can be told which model it runs (``model=``, ``dtype=``): it then checks the header and a cache
from another model fails with :class:`splitlab.CacheMismatchError` here, with the receiver's message.

Arguments are checked here, before anything reaches the child. An exchange that times out or fails half-way
marks the peer broken (:class:`PeerBroken` from then on): the two ends could otherwise disagree about the next
bytes on the wire.
"""
from __future__ import annotations

import numbers
import time

import torch

from ..common.threads import check_threads
from ..kvcache import CacheMismatchError, KVCache
from . import link as L
from . import wire as W
from .control import Message, ProtocolError, decode
from ..common.timeouts import check_timeout
from .group import DEFAULT_JOIN_TIMEOUT_S, DEFAULT_TIMEOUT_S, DistributedError, WorkerDied
from .header import Packet
from .peer_child import PeerDone, PeerOp, PeerReady, PeerStop, _peer_worker
from .spawn import spawn_group

__all__ = ["Peer", "PeerBroken"]


class PeerBroken(DistributedError):
    """An earlier exchange with the peer timed out or failed half-way: the two processes may disagree about
    what comes next on the wire, so the peer takes no more work (start a new one)."""


class Peer:
    """A child process joined to this one over torch.distributed, for KV transfers you can time and check.

    Args:
        backend: "gloo" (CPU) or "cpu:gloo,cuda:nccl"; device: where the child keeps received caches.
        timeout_s: limit of every send/recv and of every wait for the child's answer (never a hang), in seconds.
        join_timeout_s: how long the child may take to start and join (default: timeout_s, at least 60 s). Both
            at most a week (:func:`splitlab.common.timeouts.check_timeout`).
        fault: a fault hook (:mod:`splitlab.common.faults`), e.g. ``KillWorker("rank1", "join", hang=True)`` (the
            child never joins) or ``KillWorker("peer", "op", after=2)`` (it dies during its 2nd operation).

    Raises: ValueError/TypeError for a timeout (> 0 s, at most a week), thread count (an integer in 1 .. this
    machine's CPU count), device or fault hook the child could not use (here, before any process starts); from
    ``start``/``with``: :class:`splitlab.transfer.group.PeerJoinTimeout` (its message names the
    ``if __name__ == "__main__":`` guard when a script without one was why), KeyboardInterrupt after stopping
    the child.
    """

    def __init__(self, backend: str = "gloo", device: str = "cpu", timeout_s: float = DEFAULT_TIMEOUT_S,
                 join_timeout_s: float | None = None, threads: int = 1, fault=None, port: int | None = None):
        _check_options(device, timeout_s, join_timeout_s, threads, fault)
        join_timeout_s = max(DEFAULT_JOIN_TIMEOUT_S, timeout_s) if join_timeout_s is None else join_timeout_s
        self.options = dict(backend=backend, timeout_s=timeout_s, join_timeout_s=join_timeout_s, threads=threads,
                            fault=fault, port=port)
        self.device, self.timeout_s, self.group, self.broken = device, timeout_s, None, None

    def start(self) -> "Peer":
        if self.group is None:
            self.group = spawn_group(_peer_worker, 1, (self.device,), **self.options)
            self.broken = None
        return self

    def close(self) -> dict:
        """Stop the child (asked, then killed after a grace period); returns ``{rank: exit code}``."""
        if self.group is None:
            return {}
        if not self.group.dead():
            try:
                self.group.mailbox.send(1, **PeerStop().to_dict())
            except Exception:  # noqa: BLE001
                pass
        group, self.group = self.group, None
        return group.close()

    def __enter__(self) -> "Peer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- rank 0 side ---------------------------------------------------------------------------------------
    def _wait(self, kind: type) -> Message:
        """The child's next message (must be a ``kind``), watching that it is alive; never longer than timeout_s."""
        deadline = time.time() + self.timeout_s
        while time.time() < deadline:
            raw = self.group.mailbox.get(timeout=0.1)
            if raw is not None:
                msg = decode(raw)
                if isinstance(msg, PeerDone) and msg.error == "CacheMismatchError":
                    raise CacheMismatchError(f"receiver (rank 1): {msg.message}")
                if not isinstance(msg, kind):
                    raise ProtocolError(f"expected {kind.__name__} from rank 1, got {type(msg).__name__}")
                return msg
            if self.group.dead():
                raise WorkerDied(f"the peer process (rank 1) exited with code {self.group.dead()[1]} "
                                 f"while rank 0 waited for {kind.__name__}")
        raise DistributedError(f"the peer (rank 1) did not answer ({kind.__name__}) within {self.timeout_s:g} s")

    def _exchange(self, op: PeerOp, send, wait_ack: bool = False):
        """Ask for ``op``, wait until the child is ready, run ``send()`` and return ``(its result, PeerDone)``.
        Any failure on the way marks the peer broken (except a refused cache: the child answered in order)."""
        if self.group is None:
            raise DistributedError("the Peer is not started: use `with Peer() as peer:` or peer.start()")
        if self.broken:
            raise PeerBroken(f"this peer is broken ({self.broken}); close it and start a new one")
        try:
            self.group.mailbox.send(1, **op.to_dict())
            self._wait(PeerReady)
            t0 = time.perf_counter()
            result = send()
            if wait_ack:
                W.recv_ack(1)
            self._end = time.perf_counter()
            return result, self._end - t0, self._wait(PeerDone)
        except CacheMismatchError:
            raise
        except Exception as err:
            self.broken = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            raise

    def transfer(self, cache: KVCache, first_tokens=None, model: str | None = None, dtype: str | None = None,
                 mode: str = "whole", segments: str = "tensors", planned: bool = True) -> dict:
        """Send ``cache`` (``mode`` "whole" or "layerwise", see :func:`splitlab.transfer.link.send_cache`); time it
        until the receiver has a usable cache (its acknowledgement). ``planned=False``: the receiver is not told
        the cache's layout beforehand; it reads the header, then posts its receives (into its pool).

        Returns ``{"nbytes", "seconds", "gbps", "send": WireStats, "receiver": dict}``.

        Raises:
            CacheMismatchError: ``model``/``dtype`` name a receiver the cache does not fit.
            TypeError, ValueError: a ``cache``, ``mode``, ``segments`` or ``model`` of the wrong kind (refused here).
        """
        _check_cache(cache, mode, segments, model)
        op = PeerOp("recv", "ack", model, dtype, plan=W.cache_plan(cache, mode, segments) if planned else None,
                    nbytes=0 if planned else cache.nbytes)
        stats, seconds, done = self._exchange(
            op, lambda: L.send_cache(cache, 1, first_tokens, mode=mode, segments=segments), wait_ack=True)
        return dict(nbytes=stats.nbytes, seconds=seconds, gbps=stats.nbytes / seconds / 1e9, send=stats,
                    receiver=done.stats)

    def echo(self, cache: KVCache, first_tokens=None, mode: str = "whole", segments: str = "tensors"
             ) -> tuple[Packet, dict]:
        """Send ``cache`` (``mode``/``segments`` as in :meth:`transfer`); the child sends back what it received
        (whole). Returns ``(Packet as it came back, the child's receive stats)``."""
        _check_cache(cache, mode, segments, None)

        def there_and_back():
            L.send_cache(cache, 1, first_tokens, mode=mode, segments=segments)
            return L.recv_cache(1)[0]  # no plan: how the child lays out its copy is its business

        packet, _, done = self._exchange(PeerOp("recv", "echo", plan=W.cache_plan(cache, mode, segments)),
                                         there_and_back)
        return packet, done.stats

    def decode(self, cache: KVCache, first_tokens, n_tokens: int, model: str, dtype: str | None = None
               ) -> list[list[int]]:
        """Send ``cache`` with each row's first token; the child (running ``model``, which checks the header)
        decodes greedily until every row has ``n_tokens`` tokens (the first included) and returns them."""
        _check_cache(cache, "whole", "tensors", model)
        if not isinstance(model, str):
            raise TypeError(f"decode needs the model the child runs (a preset name), got {model!r}")
        if isinstance(n_tokens, bool) or not isinstance(n_tokens, numbers.Integral) or n_tokens < 1:
            raise ValueError(f"n_tokens must be an integer >= 1, got {n_tokens!r}")
        firsts = list(first_tokens)
        if len(firsts) != cache.batch_size:
            raise ValueError(f"{len(firsts)} first tokens for a cache of batch {cache.batch_size}")
        op = PeerOp("recv", "decode", model, dtype, int(n_tokens), W.cache_plan(cache))
        _, _, done = self._exchange(op, lambda: L.send_cache(cache, 1, firsts))
        return done.tokens

    def stream(self, lm, prompts, model: str | None = None, dtype: str | None = None, then: str = "ack",
               n_tokens: int = 1) -> dict:
        """Prefill ``prompts`` (one or a batch) here while streaming each layer's KV to the child
        (:func:`splitlab.transfer.link.prefill_streaming`).

        Returns ``{"prefill": PrefillOutput, "first_tokens", "stats": WireStats, "total_s" (call -> receiver
        acknowledged), "exposed_s" (forward ended -> receiver acknowledged: the transfer the streaming did not
        hide), "tokens" (then="decode")}``.
        """
        if then not in ("ack", "decode"):
            raise ValueError(f"then must be 'ack' or 'decode', got {then!r}")
        plan = W.plan_of(W.stream_header(lm, prompts), "layerwise")  # checks the prompts here
        out, seconds, done = self._exchange(PeerOp("recv", then, model, dtype, n_tokens, plan),
                                            lambda: L.prefill_streaming(lm, prompts, 1), wait_ack=then == "ack")
        prefill, firsts, stats = out
        return dict(prefill=prefill, first_tokens=firsts, stats=stats, total_s=seconds,
                    exposed_s=self._end - stats.compute_end, tokens=done.tokens, receiver=done.stats)

    def raw(self, data: int | torch.Tensor) -> float:
        """Seconds to send one contiguous tensor's bytes until the child acknowledges (the baseline). ``data``: the
        tensor (e.g. the very buffer a flat cache lives in, so both read the same memory), or a byte count (a
        zeroed buffer of that size, kept between calls so that it is not freshly written, hence cache-hot). A
        tensor on a GPU is copied to host memory inside the timed call, as :meth:`transfer` stages a GPU cache
        for gloo, which sends host memory only.

        Raises:
            TypeError: ``data`` neither a byte count nor a tensor.
            ValueError: a count < 1, or a tensor that is empty, not contiguous, not strided (sparse) or on the meta
                device (no data)."""
        if isinstance(data, bool) or not isinstance(data, (numbers.Integral, torch.Tensor)):
            raise TypeError(f"raw takes a byte count or a tensor, got {type(data).__name__}")
        if isinstance(data, numbers.Integral):
            if data < 1:
                raise ValueError(f"raw needs at least one byte, got {data}")
            if getattr(self, "_raw_buf", None) is None or self._raw_buf.numel() != data:
                self._raw_buf = torch.zeros(int(data), dtype=torch.uint8)
            buf = self._raw_buf
        else:
            if data.layout != torch.strided:  # a sparse tensor is never contiguous: .contiguous() would not help
                raise ValueError(f"raw sends a strided tensor, got {data.layout} (call .to_dense() first)")
            if data.is_meta:  # its copy to host memory failed in the timed call, breaking the peer
                raise ValueError("a meta tensor holds no data for raw to send")
            if not data.is_contiguous():
                raise ValueError("raw sends a contiguous tensor (call .contiguous() first)")
            buf = data.reshape(-1).view(torch.uint8)
            if buf.numel() < 1:  # as a count of 0: a baseline of nothing
                raise ValueError(f"raw needs at least one byte, got a tensor of 0 (shape {tuple(data.shape)})")
        staged = (lambda: buf) if buf.device.type == "cpu" else (lambda: buf.cpu())  # gloo: host memory only
        _, seconds, _ = self._exchange(PeerOp("raw", nbytes=buf.numel()), lambda: W.send_raw(staged(), 1),
                                       wait_ack=True)
        return seconds


def _check_options(device, timeout_s, join_timeout_s, threads, fault) -> None:
    """Refuse, before a process is started, options the child could only fail on (or wait forever with)."""
    check_timeout(timeout_s)  # 1e15 s was an OverflowError from timedelta when the child started
    if join_timeout_s is not None:
        check_timeout(join_timeout_s, "join_timeout_s")
    check_threads(threads)  # 100000 segfaulted the child, 10000 starved the machine
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N' (where the child keeps caches), got {device!r}")
    if fault is not None and not callable(fault):
        raise TypeError(f"fault must be a fault hook (e.g. KillWorker('peer', 'op')) or None, got "
                        f"{type(fault).__name__}")


def _check_cache(cache, mode: str, segments: str, model) -> None:
    """Refuse, on this side, what would otherwise fail (or hang) in the child."""
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a splitlab.KVCache, got {type(cache).__name__}")
    if mode not in ("whole", "layerwise"):
        raise ValueError(f"mode must be 'whole' or 'layerwise', got {mode!r}")
    if segments not in ("tensors", "flat"):
        raise ValueError(f"segments must be 'tensors' or 'flat', got {segments!r}")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise TypeError(f"model must be a preset name or None, got {model!r}")
