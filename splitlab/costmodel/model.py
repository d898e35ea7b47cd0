"""A cost model of one worker: predicted seconds of a prefill, a decode step and a KV transfer.

- a prefill forward over rows that add ``n_i`` tokens each after ``p_i`` cached ones: ``prefill_base_s +
  prefill_per_token_s * sum(n_i) + prefill_per_token2_s * sum((p_i + n_i)^2 - p_i^2)`` (the matmuls grow with
  the tokens, attention with the square of the length: DistServe's ``a + b*sum(l) + c*sum(l^2)``, OSDI'24),
  plus ``prefill_masked_per_pair_s * masked_pairs`` where the forward attends through an explicit mask:
  ``masked_pairs`` = query x key pairs of such a forward (a left-padded batch of ``B`` ragged prompts:
  ``B * longest^2``; a chunk of ``n`` tokens after ``p`` cached ones: ``n * (p + n)``), 0 for a fresh prompt
  alone, which takes the causal kernel. Vidur (MLSys'24) profiles attention per kernel for the same reason:
  one formula per kernel path, not one for all.
- one decode step of ``B`` sequences holding ``C`` cached tokens in all: ``decode_base_s + decode_per_seq_s * B
  + decode_per_token_s * C`` (weights are read once per step; each sequence reads its own KV; DistServe's
  ``a + b*B + c*sum(context)``), plus ``decode_batched_s`` once when ``B > 1``: a batch of one runs
  matrix-vector products, a larger batch matrix-matrix kernels and (ragged rows) the masked attention path,
  a step up in fixed cost that a line through batches 1 to 16 would spread over every batch.
- a hybrid step (chunked prefill, Sarathi-Serve, OSDI'24): ONE forward over the prompt chunks and the decode
  rows, whose tokens ride along in the chunk's pass. It is a prefill forward whose rows are the chunks (``n_i``
  new after ``p_i`` cached) and the decode rows (1 new after ``c_j`` cached: ``(c_j + 1)^2 - c_j^2 = 2 c_j + 1``
  squares): ``prefill_s(sum(n_i) + B, chunk squares + 2 C + B, masked_pairs)``: the linear work of every token in
  one pass, each row's attention, one fixed cost (``prefill_base_s``; no decode base or per-sequence cost); plus
  what a ragged forward's per-row attention adds: ``hybrid_per_row_s * B + hybrid_per_context_token_s * C`` (one
  attention call per decode row and layer, and the reads of its cached keys and values: splitlab's fused path
  runs each row's attention on its own, as a variable-length kernel does; fitted on fused forwards, 0 where none
  were measured: measured on the tiny model on a CPU, the prefill form alone missed fused forwards of 16-32
  decode rows by 25-55% (rms 21% over 76 forwards), with the two terms by 9% rms). That is the fused form
  (:meth:`CostModel.fused_hybrid_s`); a cost model whose engine cannot fuse (``hybrid_path`` "two-pass": a
  calibration of a sliding-window or MLA family, :func:`splitlab.phases.fused.fused_unsupported`, the reason in
  ``two_pass_reason``) charges what that engine runs instead, the decode step and then the chunk's prefill
  forward: ``decode_s(B, C) + prefill_s(chunk_tokens, chunk_squares, masked_pairs)``.
- a KV transfer of ``b`` bytes: ``transfer_base_s + b / transfer_bytes_per_s``

Defaults are round numbers of the tiny model on a 2-thread laptop CPU (measured on the development machine: prefill
512 tokens ~39 ms, decode ~3.3 ms/token). :func:`splitlab.profiling.calibrate` measures this device and fits the
coefficients (:mod:`.fit`, saved with :mod:`.calibration`); :mod:`.analytic` derives them from a datasheet.
:class:`splitlab.serving.simulated.CostModelExecutor` runs the serving scheduler on any of them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..sizing.links import link_bandwidth

__all__ = ["CostModel", "hybrid_terms", "hybrid_as_prefill", "hybrid_fit_row", "HYBRID_TERMS", "HYBRID_PATHS"]

#: how a cost model's engine runs a hybrid step (:attr:`CostModel.hybrid_path`)
HYBRID_PATHS = ("fused", "two-pass")
#: the arguments of :meth:`CostModel.hybrid_s`, the columns of a "hybrid" step record (``serving.run_step``)
HYBRID_TERMS = ("chunk_tokens", "chunk_squares", "masked_pairs", "decode_batch", "decode_context_tokens")


@dataclass(frozen=True)
class CostModel:
    """Coefficients in seconds (per token / per sequence / per byte as named).

    ``kv_bytes_per_token`` and ``max_context`` describe the modeled model (defaults: the tiny preset, float32);
    ``memory_bytes``, ``weight_bytes`` and ``activation_bytes_per_token`` the worker's device, its weights and the
    activations one token of a forward holds at its peak (:func:`splitlab.sizing.activation_bytes_per_token`):
    the "auto" KV budget is a share of the memory less the weights and the largest forward's activations
    (:func:`splitlab.sizing.kv_budget_bytes`; None: no memory given, the stated
    :data:`splitlab.sizing.CPU_MEMORY_BYTES` then);
    ``padded_prefill``: a batch of whole prompts runs padded to its longest (splitlab's engine, so a calibration
    of it sets this) rather than ragged (a paged server);
    ``source`` says where the numbers come from ("built-in", "measured on ...", "predicted: ...");
    ``hybrid_path``: how the modeled engine runs a hybrid step, "fused" (one forward; production engines do, and
    so do the built-in and the roofline models) or "two-pass" (the decode step, then the chunks' prefill), which
    :meth:`hybrid_s` charges and the simulator reports; ``two_pass_reason``: why (None where fused).

    Raises:
        ValueError: a ``hybrid_path`` other than "fused" or "two-pass", or a ``two_pass_reason`` not a string.
    """

    prefill_base_s: float = 2e-3
    prefill_per_token_s: float = 7e-5
    prefill_per_token2_s: float = 0.0
    prefill_masked_per_pair_s: float = 0.0
    hybrid_per_row_s: float = 0.0
    hybrid_per_context_token_s: float = 0.0
    decode_base_s: float = 3e-3
    decode_per_seq_s: float = 2e-4
    decode_per_token_s: float = 5e-8
    decode_batched_s: float = 0.0
    transfer_base_s: float = 1e-4
    transfer_bytes_per_s: float = 2e9
    kv_bytes_per_token: int = 2048
    max_context: int = 2048
    memory_bytes: float | None = None
    weight_bytes: float = 0.0
    activation_bytes_per_token: float = 0.0
    padded_prefill: bool = False
    source: str = "built-in (tiny model, laptop CPU)"
    hybrid_path: str = "fused"
    two_pass_reason: str | None = None

    def __post_init__(self):
        if self.hybrid_path not in HYBRID_PATHS:
            raise ValueError(f"hybrid_path must be one of {', '.join(map(repr, HYBRID_PATHS))}, got "
                             f"{self.hybrid_path!r}")
        if self.two_pass_reason is not None and not isinstance(self.two_pass_reason, str):
            raise ValueError(f"two_pass_reason must be a string or None, got {self.two_pass_reason!r}")

    def prefill_s(self, tokens: int, squares: int | None = None, masked_pairs: int = 0) -> float:
        """Seconds of one prefill forward adding ``tokens`` tokens in all; ``squares`` = sum over its rows of
        (cached + new)^2 - cached^2 (default ``tokens ** 2``: one fresh row); ``masked_pairs``: query x key
        pairs it attends through an explicit mask (0: the causal kernel; see the module docstring)."""
        squares = tokens * tokens if squares is None else squares
        return (self.prefill_base_s + self.prefill_per_token_s * tokens + self.prefill_per_token2_s * squares
                + self.prefill_masked_per_pair_s * masked_pairs)

    def hybrid_s(self, chunk_tokens: int, chunk_squares: int, masked_pairs: int, decode_batch: int,
                 decode_context_tokens: int) -> float:
        """Seconds of one hybrid step as this model's engine runs it (``hybrid_path``): prompt chunks adding
        ``chunk_tokens`` tokens in all (``chunk_squares`` = sum of (cached + new)^2 - cached^2 over them) and
        ``decode_batch`` decode rows holding ``decode_context_tokens`` cached tokens in all, one token each;
        ``masked_pairs``: query x key pairs of the chunks' explicit masks
        (:func:`splitlab.serving.executor.hybrid_terms`). "fused": :meth:`fused_hybrid_s`; "two-pass":
        :meth:`two_pass_s`."""
        terms = (chunk_tokens, chunk_squares, masked_pairs, decode_batch, decode_context_tokens)
        return self.fused_hybrid_s(*terms) if self.hybrid_path == "fused" else self.two_pass_s(*terms)

    def two_pass_s(self, chunk_tokens: int, chunk_squares: int, masked_pairs: int, decode_batch: int,
                   decode_context_tokens: int) -> float:
        """Seconds of a hybrid step run in two passes (:meth:`hybrid_s`'s arguments): the decode step of the batch,
        then the chunks' prefill as one forward (a step of one chunk, the chunked policy's usual step, exactly; the
        simulator charges a step of several chunks one forward each, as the engine runs them)."""
        return self.decode_s(decode_batch, decode_context_tokens) + self.prefill_s(chunk_tokens, chunk_squares,
                                                                                  masked_pairs)

    def fused_hybrid_s(self, chunk_tokens: int, chunk_squares: int, masked_pairs: int, decode_batch: int,
                       decode_context_tokens: int) -> float:
        """Seconds of one fused hybrid forward (:meth:`hybrid_s`'s arguments), whatever ``hybrid_path`` says:
        the prefill form over every row of the forward plus the per-row attention terms (module docstring);
        :func:`splitlab.profiling.calibrate` fits them on real fused forwards among the prefill measurements.
        Never less than the decode step of its rows alone (``decode_s``): a fused forward does that work and more,
        and forms fitted or chosen apart can say otherwise (the built-in model's 2 ms prefill base against its 3 ms
        decode base made one prompt token beside a decode row cheaper than the row alone, 2.1 against 3.2 ms)."""
        fused = (self.prefill_s(*hybrid_as_prefill(chunk_tokens, chunk_squares, masked_pairs, decode_batch,
                                                   decode_context_tokens))
                 + self.hybrid_per_row_s * decode_batch + self.hybrid_per_context_token_s * decode_context_tokens)
        return max(fused, self.decode_s(decode_batch, decode_context_tokens)) if decode_batch else fused

    def decode_s(self, batch: int, context_tokens: int) -> float:
        """Seconds of one decode step of ``batch`` sequences holding ``context_tokens`` cached tokens in all."""
        base = self.decode_base_s + self.decode_per_seq_s * batch + (self.decode_batched_s if batch > 1 else 0.0)
        return base + self.decode_per_token_s * context_tokens  # the operations of decode_run_s, in its order

    def decode_run_s(self, batch: int, context_tokens: int, steps: int) -> np.ndarray:
        """Seconds of ``steps`` decode steps in a row of the same batch (each adds ``batch`` cached tokens):
        element ``i`` equals ``decode_s(batch, context_tokens + i * batch)`` exactly (same operations)."""
        context = context_tokens + batch * np.arange(steps, dtype=np.float64)
        base = self.decode_base_s + self.decode_per_seq_s * batch + (self.decode_batched_s if batch > 1 else 0.0)
        return base + self.decode_per_token_s * context

    def transfer_s(self, nbytes: int) -> float:
        """Seconds to move ``nbytes`` of KV cache between the pools."""
        return self.transfer_base_s + nbytes / self.transfer_bytes_per_s

    def with_(self, **changes) -> "CostModel":
        """A copy with some fields changed."""
        return replace(self, **changes)

    def over_link(self, link: str | float, latency_s: float = 0.0) -> "CostModel":
        """A copy whose KV transfers cross ``link``: a name in :data:`splitlab.sizing.LINKS` (its bandwidth in one
        direction) or a bandwidth in bytes/s (a measured one), with ``latency_s`` per transfer; ``source`` says
        which. A calibration's own transfer fit times a copy on its one device, which is no link between two.

        Raises:
            ValueError: an unknown link name, a bandwidth that is not > 0 and finite, or a latency < 0.
        """
        bandwidth = link_bandwidth(link)
        if not latency_s >= 0:
            raise ValueError(f"latency_s must be >= 0 s, got {latency_s!r}")
        name = link if isinstance(link, str) else f"a {bandwidth / 1e9:.3g} GB/s link"
        return replace(self, transfer_base_s=float(latency_s), transfer_bytes_per_s=bandwidth,
                       source=f"{self.source}; KV over {name} ({bandwidth / 1e9:.3g} GB/s one way"
                              f"{f', {latency_s * 1e3:.3g} ms latency' if latency_s else ''})")

    def fit(self, prefill_df, decode_df, transfer_df=None) -> "CostModel":
        """A copy with coefficients fitted (non-negative least squares on relative error, :mod:`.fit`) to
        measurements: ``prefill_df`` with columns tokens, squares, prefill_s (and masked_pairs, optional);
        ``decode_df`` with batch, context_tokens, step_s (and batched, optional: 1 where batch > 1);
        ``transfer_df`` (optional) with nbytes, seconds."""
        from .fit import coefficients, fit_decode, fit_prefill, fit_transfer
        fits = [fit_prefill(prefill_df), fit_decode(decode_df)]
        if transfer_df is not None:
            fits.append(fit_transfer(transfer_df))
        return replace(self, **coefficients(fits))


def hybrid_terms(decode_batch: int, decode_context_tokens: int, chunks) -> dict:
    """The arguments of :meth:`CostModel.hybrid_s` for one fused forward over ``decode_batch`` decode rows
    holding ``decode_context_tokens`` cached tokens in all and ``chunks``, ``(cached, new)`` tokens per prompt
    chunk: ``chunk_tokens``, ``chunk_squares`` (sum of (p + n)^2 - p^2), ``masked_pairs`` (attention is per row,
    :mod:`splitlab.phases.fused`: a chunk after ``p > 0`` cached tokens attends through a mask, ``n x (p + n)``
    pairs, as in a two-pass step; a decode row's one query needs none), ``decode_batch`` and
    ``decode_context_tokens``."""
    return dict(chunk_tokens=sum(n for _, n in chunks), chunk_squares=sum((p + n) ** 2 - p * p for p, n in chunks),
                masked_pairs=sum(n * (p + n) for p, n in chunks if p), decode_batch=decode_batch,
                decode_context_tokens=decode_context_tokens)


def hybrid_as_prefill(chunk_tokens: int, chunk_squares: int, masked_pairs: int, decode_batch: int,
                      decode_context_tokens: int) -> tuple[int, int, int]:
    """A fused hybrid forward as the terms ``(tokens, squares, masked_pairs)`` of one prefill forward: a decode
    row adds 1 token after ``c`` cached ones, ``(c + 1)^2 - c^2 = 2c + 1`` squares (module docstring). Its
    per-row terms are the fit columns of :func:`hybrid_fit_row`."""
    return (chunk_tokens + decode_batch, chunk_squares + 2 * decode_context_tokens + decode_batch, masked_pairs)


def hybrid_fit_row(chunk_tokens: int, chunk_squares: int, masked_pairs: int, decode_batch: int,
                   decode_context_tokens: int) -> dict:
    """A fused hybrid forward as a row of the prefill fit (:func:`splitlab.costmodel.fit_prefill`): the terms
    of :func:`hybrid_as_prefill` and the per-row columns ``hybrid_rows`` (decode rows) and
    ``hybrid_context_tokens`` (their cached tokens), which fit ``hybrid_per_row_s`` and
    ``hybrid_per_context_token_s``."""
    tokens, squares, masked = hybrid_as_prefill(chunk_tokens, chunk_squares, masked_pairs, decode_batch,
                                                decode_context_tokens)
    return dict(tokens=tokens, squares=squares, masked_pairs=masked, hybrid_rows=decode_batch,
                hybrid_context_tokens=decode_context_tokens)
