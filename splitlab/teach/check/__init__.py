"""Exercise checkers: ``splitlab.check.<exercise>(answer, ...)`` prints whether the answer is right and returns
True/False. Expected values are always computed from the same inputs the reader has (never typed in), with the
tolerance given. ``None`` means "not answered yet" (prints a reminder, returns False).

One module per chapter (``ch01`` ...); every checker is reachable here as ``splitlab.check.<name>``.
"""
from .ch01 import forward_passes, prompt_doubling, recompute_tokens, tpot
from .ch02 import kv_bytes_per_token, max_tokens_in_memory, mla_equivalent_kv_heads, padding_waste
from .ch03 import (compute_bound_batch, decode_floor, decode_intensity, decode_step_prediction, max_batch_for_tpot,
                   ridge_point)
from .ch04 import chunked_prefill_steps, itl_spike, requests_in_kv_budget
from .ch05 import kv_transfer_bytes, link_transfer_seconds, streamed_exposed, transfer_decode_steps, transfer_prediction
from .ch06 import colocated_tpot, min_prefill_workers, planner_winner, split_rate_per_worker, transfer_seconds
from .ch07 import best_split_ratio, cost_per_million_tokens, goodput_from_curve, map_winner, second_token_misses
from .ch08 import paged_waste_share, quantized_kv_bytes, speculative_tpot
from .ch09 import handoff_gb_per_s, mean_handoff_ms, resharded_share

__all__ = ['best_split_ratio', 'chunked_prefill_steps', 'colocated_tpot', 'compute_bound_batch',
           'cost_per_million_tokens', 'decode_floor', 'decode_intensity', 'decode_step_prediction', 'forward_passes',
           'goodput_from_curve', 'itl_spike', 'kv_bytes_per_token', 'kv_transfer_bytes', 'link_transfer_seconds',
           'max_batch_for_tpot', 'max_tokens_in_memory', 'min_prefill_workers', 'mla_equivalent_kv_heads',
           'map_winner', 'padding_waste', 'paged_waste_share', 'planner_winner', 'prompt_doubling',
           'quantized_kv_bytes', 'recompute_tokens', 'requests_in_kv_budget', 'ridge_point', 'second_token_misses',
           'speculative_tpot',
           'split_rate_per_worker', 'streamed_exposed', 'tpot', 'transfer_decode_steps', 'transfer_prediction',
           'transfer_seconds']
__all__ += ['handoff_gb_per_s', 'mean_handoff_ms', 'resharded_share']
