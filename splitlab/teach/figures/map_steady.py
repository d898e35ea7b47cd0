"""The map's steady-state check on the real model: a cell of each region (:data:`REGIONS`: the split wins, colocated
prefill-first wins, colocated chunked wins, a tie) served by the real model (emulated) in the very runs the map's
goodput searches make, at a rate between the two layouts' goodputs.

A map cell's goodput is the highest rate at which a run of the map's kind holds 90% of its requests within the
SLOs: arrivals spanning 20 request lifetimes (at least the map's ``min_requests``, at most its ``max_requests``),
attainment counted after a warm-up of two lifetimes and before a cool-down of one
(:mod:`splitlab.serving.goodput_runs`). So where the map says a layout serves more than its runner-up, a run at a
rate between their goodputs should find the winner at 90% or more and the runner-up below: that is the map's
claim in one run. :func:`steady_cell` makes that run, per seed, on both layouts (in turn, the first layout
alternating from seed to seed), with the real model (:func:`splitlab.serving.attainment_curve` on a
:class:`~splitlab.serving.ModelExecutor`) and on the simulator, and judges the paired gaps as chapter 6 does
(:func:`~.pools_live_words.gap_interval`: the 95% interval of the mean gap over the seeds, Student's t; a tie by an
equivalence test, :func:`~.pools_live_words.even`, or by its goodputs: :mod:`.map_steady_tie_sitting`).

Before a cell's runs it is placed on this machine (:mod:`.map_steady_place`): a probe times a few prefills and
decode steps, a pilot serves the cell on both layouts for a few request lifetimes, the cost model is rescaled by the
steps the pilot measured, the cell is put back at its coordinates in decode steps there, both goodputs are searched
again, and the rate is their geometric mean. Such runs take minutes of CPU per cell on emulated workers, so
``benchmarks/map_live.py`` serves every region and records it (:func:`save_record`, :func:`load_record`), and
chapter 7 prints the records (:mod:`.map_steady_text`).
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import pandas as pd

from .map_steady_checks import check_cell_fields, check_runs, read_record_json, record_text
from .map_steady_in_run import in_run, ratios_of
from .pools_live import _on_link, layout_config
from .pools_live_args import REGIONS, check_map, cost_of, ordered_maps, seeds_of, whole
from .map_steady_place import _positive, place, pilot, settings_of
from .map_steady_tie_read import cell_ladder, ladder_outcome
from .map_steady_tie_sitting_read import cell_sitting, sitting_outcome
from .pools_live_probe import rescaled, step_probe
from .pools_live_words import TIE_GAP, TIE_LOADED, even, gap_interval

__all__ = ["REGIONS", "MIN_MARGIN", "MIN_TPOT_STEPS", "TIE_RATE", "NO_TEST", "RECORD", "RECORDS", "SteadyCell",
           "lifetime_s", "pick_cells", "steady_cell", "in_run", "save_record", "load_record"]

#: the record chapter 7 prints: ``benchmarks/map_live.py --out`` on this file (4 workers), and per cluster size
RECORD = Path(__file__).resolve().parents[2] / "data" / "map_live.json"
RECORDS = {4: RECORD, 8: RECORD.with_name("map_live_8.json")}

#: a cell a kind wins is chosen for the check only if the kind's margin is at least this (when the region has such
#: a cell): a goodput 20% above the runner-up's leaves a rate between them some room on either side
MIN_MARGIN = 0.2

#: ... and at a TPOT SLO of at least this many lone decode steps (when the region has such a cell): at 1.5 steps a
#: live run has no room for this machine's jitter (benchmarks/map_live.py, 2026-12-05: a tie at 1.5 steps the
#: simulator put at 91% and 94% was served at 16% and 6% while other work ran beside it)
MIN_TPOT_STEPS = 2.5

#: a tie is served at this share of its two goodputs' geometric mean: at both goodputs its runs scattered 6% to 93%
#: per seed (benchmarks/map_live.py, 2026-12-05); placed by a pilot, at 0.85 both layouts kept 100% on all 6 seeds
#: (no load), and another calibration's tie at 1.0 left both far past their goodputs (37% and 16%). One rate cannot
#: test a tie, so a tie is tested by a ladder of rates from this one (:func:`~.map_steady_tie.tie_ladder`)
TIE_RATE = 0.85


#: below this mean attainment (%) for both layouts a run is far past both goodputs: no test of their order (the
#: 8-worker record of 2026-12-05: 0% and 10%, at a rate 27% and 68% above the goodputs on the runs' own steps)
NO_TEST = 50.0

#: the pilot's seed: none of the runs' (their seeds are small whole numbers), so the pilot's requests are not theirs
PILOT_SEED = 10_000


def lifetime_s(m, cell) -> float:
    """The most time a request of ``cell`` may take within its SLOs (s): TTFT SLO + (answer tokens - 1) x TPOT SLO,
    the unit of a goodput run's length (:func:`splitlab.serving.goodput_runs.lifetime_s`)."""
    return cell.ttft_slo_s + (m.output_tokens - 1) * cell.tpot_slo_s


def pick_cells(maps: dict) -> dict:
    """{region: (map, cell)}: per region of :data:`REGIONS`, the cell the steady-state check serves, from the map on
    the cost model's own link, else (a region it gives no cell) from the slider's slowest link (``maps``: {link
    GB/s or None: map} of one cluster size, as :func:`~splitlab.teach.widgets.split_map_grid` returns them). Of a
    region's cells, the one whose requests live shortest (:func:`lifetime_s`; a run spans 20 lifetimes, but at most
    the map's ``max_requests``, so a short lifetime at a high rate makes a short run, not a cheap one) among those
    won by at least
    :data:`MIN_MARGIN` (a tie's: any) at a TPOT SLO of at least :data:`MIN_TPOT_STEPS` (where the region has none
    there, at any TPOT SLO), else the widest margin. A region no map gives a cell is left out. ValueError: those of
    :func:`~.pools_live_args.ordered_maps` (not a dict of maps, maps of several sizes)."""
    out = {}
    for kind in REGIONS:
        for m in ordered_maps(maps):
            cells = [c for c in m.cells if c.winner == kind]
            if not cells:
                continue
            wide = [c for c in cells if kind == "tie" or c.margin >= MIN_MARGIN]
            roomy = [c for c in wide if c.tpot_steps >= MIN_TPOT_STEPS]
            out[kind] = (m, min(roomy or wide, key=lambda c: (lifetime_s(m, c), -c.margin)) if wide else
                         max(cells, key=lambda c: c.margin))
            break
    return out


@dataclass
class SteadyCell:
    """What :func:`steady_cell` served. The map's cell: ``region``, ``workers``, ``link_gbps`` (the map's KV link,
    GB/s; None: the cost model's own), ``map_prompt_tokens``, ``prefill_steps`` and ``tpot_steps`` (its
    coordinates, lone decode steps), ``margin``, ``winner`` and ``rival`` (layout names: the winner or a tie's
    leader, and the runner-up), ``map_goodput`` ({layout: requests/s per worker}). Placed on this machine now:
    ``probe`` ({"prefill", "decode"}: measured / calibrated step times), ``prompt_tokens``, ``ttft_slo_s``,
    ``tpot_slo_s``, ``goodput_now`` ({layout: requests/s per worker} on the cost model rescaled by the probe, then
    by the pilot: :mod:`.map_steady_place`),
    ``rate_per_worker`` (their geometric mean; a tie's :data:`TIE_RATE` of it), ``lifetimes`` (the runs' arrivals in
    request lifetimes). Runs:
    ``seeds``, ``requests`` and ``counted`` (per seed, of the first layout: every layout serves the same set),
    ``predicted`` and ``measured`` ({layout: [% within both SLOs, per seed]}: simulated on the rescaled cost model
    and served by the real model), ``cpu_s`` (CPU seconds of the probe, pilot, searches and runs),
    ``extra["pilot"]`` (:func:`~.map_steady_place.pilot`'s, with the goodputs and prompt of the probe's placement),
    ``extra["steps"]`` ({layout: {step kind: measured / predicted}}: the live runs' steps against the rescaled model,
    medians), ``extra["in_run"]`` (:func:`in_run`: the runs simulated on the model rescaled by those steps) and
    what it needs (the rescaled model's coefficients, the answers' length, the runs' request limits)."""

    region: str
    workers: int
    link_gbps: float | None
    map_prompt_tokens: int
    prefill_steps: float
    tpot_steps: float
    margin: float
    winner: str
    rival: str
    map_goodput: dict
    probe: dict
    prompt_tokens: int
    ttft_slo_s: float
    tpot_slo_s: float
    goodput_now: dict
    rate_per_worker: float
    lifetimes: float
    seeds: list
    requests: list
    counted: list
    predicted: dict
    measured: dict
    cpu_s: float = 0.0
    extra: dict = field(default_factory=dict)

    def frame(self, which: str = "measured") -> pd.DataFrame:
        """``measured`` or ``predicted`` as a DataFrame: one row per seed, one column per layout (%). ValueError: runs
        of another length than the seeds, fewer than 2 distinct seeds (:func:`~.map_steady_checks.check_runs`)."""
        check_runs(self)
        return pd.DataFrame(getattr(self, which), index=self.seeds)[[self.winner, self.rival]]

    def gap(self, which: str = "measured") -> dict:
        """The winner's lead over the runner-up, seed by seed, with its intervals (:func:`gap_interval`)."""
        return gap_interval(self.frame(which), self.winner, self.rival)

    def outcome(self, which: str = "measured") -> str:
        """"no test" (both layouts' mean below :data:`NO_TEST`%: far past both goodputs, where a run says nothing of
        their order), else: "matches" (the 95% interval of the winner's mean lead lies above zero and the winner
        kept 90% on average while the runner-up did not: the map's goodput order in one run), "leads" (above zero,
        but not that: the winner serves more at this rate, at or past a goodput), "does not match" (below zero),
        "undecided"; for a tie, "matches: a tie" (:func:`even`: the 90% interval within +-:data:`TIE_GAP` points,
        and a layout loaded: its mean below :data:`TIE_LOADED`%), "does not match" (the 95% interval excludes
        zero) or "undecided"; measured, a tie served in a sitting: its :func:`~.map_steady_tie_sitting.sitting_outcome`
        (one rate cannot test a tie), else one on a ladder of rates: its :func:`~.map_steady_tie.ladder_outcome`."""
        if which == "measured" and cell_sitting(self) is not None:  # ValueError: a sitting or a ladder not this tie's
            return sitting_outcome(self.extra["sitting"])
        if which == "measured" and cell_ladder(self) is not None:
            return ladder_outcome(self.extra["ladder"])
        g, mean = self.gap(which), self.frame(which).mean()
        if float(mean.max()) < NO_TEST:
            return "no test"
        if self.region == "tie":
            loaded = float(mean.min()) < TIE_LOADED
            return "does not match" if g["excludes_zero"] else "matches: a tie" if even(g) and loaded else "undecided"
        if not g["excludes_zero"]:
            return "undecided"
        if g["ci_low"] < 0:
            return "does not match"
        return "matches" if mean[self.winner] >= 90 > mean[self.rival] else "leads"

    def to_json(self) -> dict:
        return {k: (v if k != "probe" else {n: float(v[n]) for n in ("prefill", "decode")})
                for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, d: dict, where: str = "the cell") -> "SteadyCell":
        """The cell :meth:`to_json` wrote. ValueError naming ``where`` and the fields: missing or unknown ones."""
        check_cell_fields(d, {f.name: f.default is f.default_factory is dataclasses.MISSING
                              for f in dataclasses.fields(cls)}, where)
        return cls(**d)


def steady_cell(m, cell, lm, cost, region: str | None = None, seeds: Sequence[int] = (0, 1, 2),
                max_requests: int | None = None, progress: bool | None = None,
                tie_rate: float = TIE_RATE) -> SteadyCell:
    """Serve ``cell`` of the map ``m`` (calibrated as ``cost``) on ``lm`` in steady state (module docstring): place the
    cell by a probe, then by a pilot of real serving (:mod:`.map_steady_place`), search both layouts' goodputs again
    on the rescaled cost model, and at their geometric mean (a tie: ``tie_rate`` of it) serve each seed's run
    (the map's run length, at most ``max_requests`` requests, default the map's) on both layouts, simulated and
    live. ``region``: the cell's (default its winner).

    Raises (all but the last before the probe):
        ValueError: a cell no layout wins nor ties (none), a cell not of ``m``, a ``region`` other than the cell's
            winner, the cell's layouts of another cluster size than ``m``'s, fewer than 2 distinct seeds,
            max_requests (or the map's own) not a whole number >= 2, tie_rate not a finite number > 0; those of
            :func:`step_probe` and the runs.
        TypeError: ``m`` not a map; ``cost`` not a CostModel or None; ``lm`` not a LoadedModel; ``progress`` not
            a bool or None."""
    from ...common.progress import show_progress
    from ...phases.loaded import require_loaded
    from ...serving import CostModelExecutor, ModelExecutor, attainment_curve
    check_map(m)
    if cell not in m.cells:
        raise ValueError("cell must be a cell of the map m (its SLO rules, answers and link place it)")
    if cell.winner not in REGIONS:
        raise ValueError(f"cell has no winner to check (winner {cell.winner!r}): no layout meets its SLOs")
    if region not in (None, cell.winner):
        raise ValueError(f"region must be the cell's winner {cell.winner!r} (or None), got {region!r}")
    seeds = list(seeds_of(seeds))
    show_progress(progress)  # its TypeError before the probe, not after minutes of goodput searches
    _positive("tie_rate", tie_rate)
    settings = settings_of(m)
    cap = settings["max_requests"] if max_requests is None else max_requests
    if not whole(cap) or cap < 2:
        raise ValueError(f"max_requests must be a whole number >= 2, got {cap!r}"
                         + (" (the map's search setting)" if max_requests is None else ""))
    names = [cell.names[k] for k in (cell.leader, cell.runner_up)]
    options = _on_link(m, dict(m.search.get("options", {}), max_batch=m.max_batch, trace=False))
    configs = {n: layout_config(n, m.workers, m.chunk_tokens, **options) for n in names}  # a cell of another size
    require_loaded(lm, "steady_cell's lm")
    cost, cpu0 = cost_of(cost), time.process_time()
    probe = step_probe(lm, cost, cell.prompt_tokens)
    aimed = rescaled(cost, probe["prefill"], probe["decode"])
    runs = dict(ttft_slo_s=None, tpot_slo_s=None, min_requests=min(settings["min_requests"] or cap, cap),
                max_requests=cap, scale=1.0)
    first = place(m, cell, configs, aimed, settings, tie_rate)
    flew = pilot(first, configs, lm, aimed, m.workers, {**runs, "ttft_slo_s": first["ttft_s"],
                                                        "tpot_slo_s": first["tpot_s"]}, seed=PILOT_SEED)
    now = rescaled(aimed, flew["prefill"], flew["decode"])
    at = place(m, cell, configs, now, settings, tie_rate)
    spec, rate, sim = at["spec"], at["rate_per_worker"], CostModelExecutor(now)
    runs.update(rates_per_worker=[rate], ttft_slo_s=at["ttft_s"], tpot_slo_s=at["tpot_s"])
    predicted, measured, requests, counted = {n: [] for n in names}, {n: [] for n in names}, [], []
    executors = {n: ModelExecutor(lm) for n in names}
    for ex in executors.values():
        ex.step_log = []  # each layout's steps, against the rescaled model afterwards
    from ...common.progress import progress_bar
    with progress_bar(2 * len(seeds), f"{cell.winner} cell live", progress, unit="run") as bar:
        for i, s in enumerate(seeds):
            for n in (names if i % 2 == 0 else names[::-1]):  # ABBA: neither layout always meets the machine first
                p = attainment_curve(spec, configs[n], sim, seed=s, **runs).iloc[0]
                live = attainment_curve(spec, configs[n], executors[n], seed=s, **runs).iloc[0]
                predicted[n].append(100 * float(p.attainment))
                measured[n].append(100 * float(live.attainment))
                bar.update()
            requests.append(int(live.requests))
            counted.append(int(live.counted))
    span = (requests[0] - 1) / (rate * m.workers)
    gbps = None if m.link_bytes_per_s is None else float(m.link_bytes_per_s) / 1e9
    out = SteadyCell(region or cell.winner, m.workers, gbps, cell.prompt_tokens, float(cell.prefill_steps),
                     float(cell.tpot_steps), float(cell.margin), *names,
                     {n: float(cell.goodput[k]) for n, k in zip(names, (cell.leader, cell.runner_up))},
                     probe, at["prompt"], at["ttft_s"], at["tpot_s"], at["goodput"], rate, span / at["lifetime_s"],
                     seeds, requests, counted, predicted, measured, time.process_time() - cpu0,
                     {"steps": {n: ratios_of(now, ex.step_log) for n, ex in executors.items()},
                      "cost": dataclasses.asdict(now), "output_tokens": m.output_tokens,
                      "min_requests": runs["min_requests"], "max_requests": cap,
                      "pilot": {**flew, "goodput": first["goodput"], "prompt": first["prompt"]}})
    out.extra["in_run"] = in_run(out)
    return out


def save_record(cells: dict, path: str, **meta) -> str:
    """Write ``cells`` ({region: SteadyCell}) and ``meta`` (date, machine, command...) to ``path`` as JSON; the text is
    made whole first, so a record that cannot be written leaves the file as it was. TypeError: ``cells`` not a dict
    of SteadyCells; TypeError/ValueError: meta JSON cannot hold (NaN...); OSError: a path that cannot be written."""
    text = record_text(cells, meta)
    Path(path).write_text(text)
    return path


def load_record(path: str | Path = RECORD) -> tuple[dict, dict]:
    """(meta, {region: SteadyCell}) of a file :func:`save_record` wrote. FileNotFoundError: no file at ``path``;
    ValueError naming the file: not JSON, NaN, another shape, a cell missing a field (:func:`read_record_json`), a
    cell under a key other than its region (one of :data:`REGIONS`), runs not one per seed (:func:`check_runs`)."""
    d = read_record_json(path)
    cells = {r: SteadyCell.from_json(c, f"{path}: cell {r!r}") for r, c in d.pop("cells").items()}
    for r, c in cells.items():
        if r not in REGIONS or c.region != r:
            raise ValueError(f"{path}: cell {r!r} must be kept under its region, one of {REGIONS}, got {c.region!r}")
        try:
            check_runs(c)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    if any(not math.isfinite(c.rate_per_worker) for c in cells.values()):
        raise ValueError(f"{path} holds a cell without a rate")
    return d, cells
