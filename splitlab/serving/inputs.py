"""What a serving run accepts, checked before anything runs: the requests, the configuration, the back end and the
fault hook. A wrong one is refused here with an error naming it (never an AttributeError from the event loop, a
request lost, or a fault that silently never fires)."""
from __future__ import annotations

import pickle
from dataclasses import replace
from typing import Iterable

from ..common.faults import KillWorker
from .config import ServingConfig
from .executor import Executor
from .request import Request

__all__ = ["arrival_refusal", "fresh_requests", "check_config", "check_backend", "check_faults", "SERVING_EVENTS"]

#: the fault-hook events a serving run calls (``"join"`` and ``"op"`` belong to process groups and Peers)
SERVING_EVENTS = ("step", "send", "receive")


def fresh_requests(requests: Iterable[Request]) -> list[Request]:
    """Fresh copies of ``requests`` (any iterable of :class:`Request`, read once), so a run never mutates them.

    Raises:
        TypeError: not an iterable of Requests.
    """
    if requests is None or isinstance(requests, (str, bytes, dict)):
        raise TypeError(f"requests must be a list of splitlab.serving.Request (build them with make_workload), got "
                        f"{type(requests).__name__}")
    try:
        items = list(requests)  # a generator is read once, here: checking it first would leave nothing to serve
    except TypeError:
        raise TypeError(f"requests must be a list of splitlab.serving.Request (build them with make_workload), got "
                        f"{type(requests).__name__}") from None
    bad = [r for r in items if not isinstance(r, Request)]
    if bad:
        raise TypeError(f"requests must be splitlab.serving.Request objects (build them with make_workload), got a "
                        f"{type(bad[0]).__name__}")
    return [r.fresh() for r in items]


def check_config(config) -> ServingConfig:
    """``config`` itself when it is a :class:`ServingConfig` (None: the default one); else a TypeError."""
    if config is None:
        return ServingConfig()
    if not isinstance(config, ServingConfig):
        raise TypeError(f"config must be a splitlab.serving.ServingConfig (e.g. ServingConfig.colocated(2)), got "
                        f"{type(config).__name__} {config!r:.80}")
    return config


def check_backend(backend) -> None:
    """Refuse what cannot run a step: a back end is an :class:`~.executor.Executor` (ModelExecutor,
    CostModelExecutor) or a wall-clock back end (DistributedBackend)."""
    if isinstance(backend, Executor) or getattr(backend, "wall_clock", False):
        return
    kind = type(backend).__name__
    hint = (": wrap it with serving.CostModelExecutor(cost)" if kind == "CostModel" else
            ": pass the model as model=lm (a splitlab.load_model result)" if hasattr(backend, "generate") or
            hasattr(backend, "geometry") else "")
    raise TypeError(f"backend must be a serving executor (ModelExecutor, CostModelExecutor) or a "
                    f"DistributedBackend, got {kind}{hint}")


def check_faults(faults, workers: list[str], wall: bool):
    """The fault hook a run uses: ``faults`` itself, or for a :class:`KillWorker` a copy that counts its events
    from zero (each run counts afresh, as the worker processes of the distributed back end do with their copy).

    Refuses a hook that could never act: not callable, a :class:`KillWorker` naming no worker of this run or an
    event a serving run never calls, or (distributed: the hook goes to the worker processes) one that cannot be
    pickled."""
    if faults is None:
        return None
    if not callable(faults):
        raise TypeError(f"faults must be a fault hook called as hook(event, worker, request_ids) (e.g. "
                        f"serving.KillWorker('D0')), got {type(faults).__name__}")
    if isinstance(faults, KillWorker):
        if faults.event not in SERVING_EVENTS:
            raise ValueError(f"KillWorker event {faults.event!r} never happens in a serving run; use one of "
                             f"{SERVING_EVENTS}")
        if faults.worker not in workers:
            raise ValueError(f"KillWorker names worker {faults.worker!r}, which this run does not have (its workers: "
                             f"{', '.join(workers)})")
    if wall:
        try:
            pickle.dumps(faults)
        except Exception as err:  # noqa: BLE001 - pickle raises several kinds
            raise TypeError(f"the distributed back end sends the fault hook to its worker processes, so it must be "
                            f"picklable (a module-level function or a KillWorker, not a lambda or a local "
                            f"function): {type(err).__name__}: {err}") from None
    return replace(faults, seen=0) if isinstance(faults, KillWorker) else faults


def arrival_refusal(r: Request, backend) -> str | None:
    """Why ``r`` can never be served by ``backend`` whatever the load (its prompt and answer exceed the model's
    context, or a prompt token id is outside the vocabulary), or None. A negative id is in no vocabulary: refused
    even by a cost model, which has none. Memory is judged by the cluster's KV budgets, not here."""
    if r.max_total_tokens > backend.max_context:
        return (f"prompt ({r.prompt_len}) + max_new_tokens ({r.max_new_tokens}) = {r.max_total_tokens} tokens "
                f"exceed the model's context of {backend.max_context}")
    vocab_size = backend.vocab_size
    lowest, highest = r.prompt_id_range  # computed once per prompt (Request.prompt_id_range)
    if lowest < 0 or (vocab_size is not None and highest >= vocab_size):
        vocab = vocab_size if vocab_size is not None else float("inf")
        bad = next(x for x in r.prompt if not 0 <= x < vocab)
        return (f"prompt token id {bad} is outside the model's vocabulary "
                + (f"0..{vocab_size - 1}" if vocab_size is not None else "(ids are >= 0)"))
    return None
