"""One call to serve requests: :func:`run` (one configuration) and :func:`compare` (several, on the same requests).

    import splitlab as sl
    from splitlab import serving
    lm = sl.load_model("tiny")
    reqs = serving.make_workload("chat", 16, rate_per_s=4, model=lm)
    res = serving.run(reqs, serving.ServingConfig.colocated(workers=2), model=lm)      # emulated back end
    res.metrics(ttft_slo_s=0.5, tpot_slo_s=0.05); res.timeline; res.kv_usage; res.request_table()
    cmp = serving.compare(reqs, serving.contenders(prefill_workers=1, decode_workers=1), model=lm)
    cmp.tokens_identical, cmp.table()

The back end: ``model=`` runs the real model (emulated: measured times on virtual clocks); ``backend=`` takes an
executor (:class:`~.emulated.ModelExecutor`, :class:`~.simulated.CostModelExecutor`) or a
:class:`~.distributed.DistributedBackend`; with neither, the default cost model predicts the times (simulated).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import pandas as pd

from ..common.progress import show_progress
from . import metrics as M
from .cluster import Cluster
from .config import ServingConfig
from .inputs import check_config, fresh_requests
from .request import Request, State
from .result import ServingResult

__all__ = ["run", "compare", "Comparison", "contenders", "backend_for"]


def backend_for(model=None, backend=None):
    """The back end a run uses: ``backend`` if given, else an emulated one for ``model``, else the simulator
    with the default cost model."""
    if backend is not None and model is not None:
        raise ValueError("give model= (an emulated run of that model) or backend=, not both: the run would use only "
                         "one of them")
    if backend is not None:
        return backend
    if model is not None:
        from .emulated import ModelExecutor  # imports torch and the model code: only for emulated runs
        return ModelExecutor(model)
    from .simulated import CostModelExecutor
    return CostModelExecutor()


def run(requests: Sequence[Request], config: ServingConfig | None = None, backend=None, *, model=None,
        faults=None, progress: bool | None = None) -> ServingResult:
    """Serve fresh copies of ``requests`` (the list is not modified) and return a :class:`ServingResult`.

    Args:
        requests: from :func:`~.workload.make_workload` (or built by hand).
        config: the layout and its options (:class:`ServingConfig`; default: one colocated worker).
        backend, model: see the module docstring.
        faults: a fault hook (:mod:`splitlab.common.faults`), for tests and teaching.
        progress: a tqdm bar on stderr of the requests arrived, once the run has gone on for a few seconds
            (emulated and simulated back ends): True, False, or None (only when stderr is a terminal;
            :mod:`splitlab.common.progress`).

    Raises:
        TypeError: requests that are not Requests, a config that is not a ServingConfig, a back end that runs no
            steps, a fault hook that is not callable, ``progress`` that is not True, False or None. ValueError: two
            requests with the same id; both ``model`` and ``backend`` given; a KillWorker naming no worker of the
            layout.
    """
    show = show_progress(progress)  # a bad value is refused before any worker starts
    backend = backend_for(model, backend)
    result = Cluster(backend, config, faults).run(fresh_requests(requests), show)
    result.hybrid_path = getattr(backend, "hybrid_path", None)
    return result


def contenders(workers: int | None = None, prefill_workers: int = 1, decode_workers: int = 1,
               **options) -> dict[str, ServingConfig]:
    """The classic pair: ``workers`` colocated workers (default ``prefill_workers + decode_workers``, so both get
    the same number) and the split into ``prefill_workers`` + ``decode_workers``; ``options`` go to both (a
    conditional split's ``local_prefill_tokens`` and ``local_prefill_queue`` to the split only)."""
    n = prefill_workers + decode_workers if workers is None else workers
    colocated = {k: v for k, v in options.items() if k not in ("local_prefill_tokens", "local_prefill_queue")}
    return {"colocated": ServingConfig.colocated(n, **colocated),
            "disaggregated": ServingConfig.disaggregated(prefill_workers, decode_workers, **options)}


@dataclass
class Comparison:
    """Several configurations on the same requests: ``results`` maps a name to its :class:`ServingResult`.
    ``tokens_identical``: the requests completed in every run got the same output tokens; ``tokens_compared``:
    how many requests that is (0: the check compared nothing)."""

    results: dict[str, ServingResult]

    def __getitem__(self, name: str) -> ServingResult:
        return self.results[name]

    def _first(self, layout: str) -> ServingResult:
        for res in self.results.values():
            if res.config.layout == layout:
                return res
        raise KeyError(f"no {layout} run in this comparison ({list(self.results)})")

    @property
    def colocated(self) -> ServingResult:
        return self._first("colocated")

    @property
    def disaggregated(self) -> ServingResult:
        return self._first("disaggregated")

    def _done(self) -> list[dict[int, list[int]]]:
        return [{r.id: r.output for r in res.requests if r.state == State.FINISHED} for res in self.results.values()]

    @property
    def tokens_compared(self) -> int:
        done = self._done()
        return len(set.intersection(*(set(d) for d in done))) if done else 0

    @property
    def tokens_identical(self) -> bool:
        done = self._done()
        common = set.intersection(*(set(d) for d in done)) if done else set()
        return all(d[i] == done[0][i] for d in done for i in common)

    def metrics(self, ttft_slo_s: float | None = M.DEFAULT_TTFT_SLO_S,
                tpot_slo_s: float | None = M.DEFAULT_TPOT_SLO_S) -> dict:
        """``{name: metrics, ..., "tokens_identical": bool, "tokens_compared": int}``."""
        out = {name: res.metrics(ttft_slo_s, tpot_slo_s) for name, res in self.results.items()}
        return dict(out, tokens_identical=self.tokens_identical, tokens_compared=self.tokens_compared)

    def table(self, ttft_slo_s: float | None = M.DEFAULT_TTFT_SLO_S,
              tpot_slo_s: float | None = M.DEFAULT_TPOT_SLO_S) -> pd.DataFrame:
        """Side-by-side headline numbers, one column per configuration."""
        rows = {}
        for name, res in self.results.items():
            m = res.metrics(ttft_slo_s, tpot_slo_s)
            rows[name] = {"workers": len(m["workers"]), "completed": m["completed"], "rejected": m["rejected"],
                          "failed": m["failed"],
                          **{f"ttft_{k}_s": v for k, v in m["ttft_s"].items() if k != "mean"},
                          **{f"tpot_{k}_s": v for k, v in m["tpot_s"].items() if k != "mean"},
                          "slo_attainment": m["slo_attainment"],
                          "throughput_tokens_per_s": m["throughput_tokens_per_s"]}
        return pd.DataFrame(rows)


def compare(requests: Sequence[Request], configs: Mapping[str, ServingConfig] | Sequence[ServingConfig],
            backend=None, *, model=None, faults=None, progress: bool | None = None) -> Comparison:
    """Serve the same ``requests`` once per configuration (``configs``: name -> config, or a list named by
    :attr:`ServingConfig.name`), on one back end (see :func:`run`; ``progress``: one bar per run)."""
    if configs is None or isinstance(configs, (str, ServingConfig)):
        raise TypeError(f"configs must be a dict name -> ServingConfig or a list of ServingConfigs (e.g. "
                        f"serving.contenders()), got {type(configs).__name__}")
    if not isinstance(configs, Mapping):
        configs = [check_config(c) for c in configs]
        names = [c.name for c in configs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"configurations {twice} appear more than once: a list is named by ServingConfig.name, "
                             f"so give a dict name -> config to compare them")
        configs = dict(zip(names, configs))
    if not configs:
        raise ValueError("compare needs at least one configuration")
    configs = {name: check_config(c) for name, c in configs.items()}
    requests = fresh_requests(requests)  # read once (a generator), served fresh by every configuration
    ex = backend_for(model, backend)
    return Comparison({name: run(requests, cfg, ex, faults=faults, progress=progress)
                       for name, cfg in configs.items()})
