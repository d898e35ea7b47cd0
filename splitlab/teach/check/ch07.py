"""Chapter 7 (sizing the pools): its exercise checkers."""
from __future__ import annotations

from typing import Any

from .verdict import verdict

__all__ = ['goodput_from_curve', 'cost_per_million_tokens', 'best_split_ratio', 'second_token_misses', 'map_winner']


def goodput_from_curve(answer: Any, curve, workers: int = 1, target: float = 0.9) -> bool:
    """Ch. 7: the goodput (requests/s per worker) an attainment curve shows: the highest tested rate that, with
    every lower one, reaches ``target`` (:func:`splitlab.serving.metrics.goodput`). ``curve``: a DataFrame with
    ``rate_per_s`` (the cluster's rate) and ``attainment``, such as :func:`splitlab.serving.attainment_curve`."""
    from ...serving.metrics import goodput
    expected = goodput(zip(curve["rate_per_s"], curve["attainment"]), target, workers)
    return verdict(answer, expected, 0.001, "the goodput in requests/s per worker",
                   f"walk the rates upwards and stop before the first one below {target:.0%}; divide that rate by "
                   f"the workers of both pools.")


def cost_per_million_tokens(answer: Any, price_per_hour: float, goodput_rps_per_worker: float,
                            mean_output_tokens: float) -> bool:
    """Ch. 7: price of a million output tokens when each worker, at ``price_per_hour``, serves
    ``goodput_rps_per_worker`` requests/s of ``mean_output_tokens`` output tokens each."""
    expected = price_per_hour / 3600 / (goodput_rps_per_worker * mean_output_tokens) * 1e6
    return verdict(answer, expected, 0.01, "the cost of a million output tokens",
                   "a worker costs price / 3600 per second and makes goodput x mean output tokens per second; "
                   "divide, then multiply by a million.")


def best_split_ratio(answer: Any, prefill_rps: float, decode_rps: float, max_workers: int) -> bool:
    """Ch. 7: the split xPyD (x + y <= ``max_workers``) that serves the most requests/s per worker when a prefill
    worker serves ``prefill_rps`` and a decode worker ``decode_rps`` (ties: fewer workers). Answer as "2P+1D"."""
    from ...planning.closed_form import split_capacity
    best = max(((x, n - x) for n in range(2, max_workers + 1) for x in range(1, n)),
               key=lambda xy: (split_capacity(prefill_rps, decode_rps, *xy), -sum(xy)))
    expected = f"{best[0]}P+{best[1]}D"
    if answer is None:
        print("Not answered yet: set answer to a split such as '2P+1D' and run the cell again.")
        return False
    got = str(answer).replace(" ", "").upper()
    if got == expected:
        print(f"Correct: {expected} serves {split_capacity(prefill_rps, decode_rps, *best):.3g} requests/s per "
              f"worker.")
        return True
    print(f"Not yet: {answer!r} is not the best split. Hint: per worker, xPyD serves min(x x prefill rate, "
          f"y x decode rate) / (x + y); try every x + y up to {max_workers}.")
    return False


def second_token_misses(answer: Any, requests, ttft_slo_s: float, tpot_slo_s: float) -> bool:
    """Ch. 7: how many of ``requests`` (a run's requests, from the reader's own run) meet the TTFT and the TPOT
    SLO but miss the second-token bound TTFT SLO + TPOT SLO (:func:`splitlab.serving.metrics.slo_misses`)."""
    from ...serving.metrics import slo_misses
    expected = slo_misses(requests, ttft_slo_s, tpot_slo_s)["ttst"]
    return verdict(answer, expected, 0, "the requests caught only by the second-token bound",
                   "count the finished requests with TTFT <= its SLO and time to second token > TTFT SLO + TPOT "
                   "SLO (serving.metrics.ttst_s); res.request_table() has both columns.")


#: what a reader may call a map's winner, as the map names it
_KINDS = {"split": "split", "disaggregated": "split", "prefill-first": "prefill-first", "pf-first": "prefill-first",
          "colocated prefill-first": "prefill-first", "chunked": "chunked", "colocated chunked": "chunked",
          "tie": "tie", "none": "none"}


def map_winner(answer: Any, m, prompt_tokens: int, tpot_steps: float) -> bool:
    """Ch. 7: who wins the cell of the map ``m`` (:func:`splitlab.planning.split_map.split_map`'s result) at
    ``prompt_tokens`` and a TPOT SLO of ``tpot_steps`` decode steps: "split", "prefill-first", "chunked", "tie" or
    "none" (the map's :attr:`~splitlab.planning.map_result.Cell.winner`). ValueError: no such cell in ``m``."""
    cell = next((c for c in m.cells if c.prompt_tokens == prompt_tokens and c.tpot_steps == tpot_steps), None)
    if cell is None:
        raise ValueError(f"the map has no cell at {prompt_tokens!r} prompt tokens and {tpot_steps!r} TPOT steps: its "
                         f"prompts {list(m.prompt_tokens)}, its TPOT rows {list(m.tpot_steps)}")
    if answer is None:
        print("Not answered yet: set answer to 'split', 'prefill-first', 'chunked' or 'tie' and run the cell again.")
        return False
    got = _KINDS.get(" ".join(str(answer).lower().replace("_", "-").split()))
    said = ", ".join(f"{k} {g:.3g}" for k, g in cell.goodput.items())
    if got == cell.winner:
        print(f"Correct: {cell.winner} (goodput per worker, requests/s: {said}; margin {cell.margin:.0%}).")
        return True
    print(f"Not yet: {answer!r} is not who wins there. Hint: find the column of {prompt_tokens} tokens "
          f"({cell.prefill_steps:.3g} decode steps of prefill) in the row of {tpot_steps:g} steps; a grey cell is a "
          f"tie.")
    return False

