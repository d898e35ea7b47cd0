"""Cost models: the predicted seconds of each step a worker runs (prefill, decode, KV transfer), fitted to
measurements or derived from datasheets; torch-free, so the simulator and the planner run without a model."""
from .model import CostModel

__all__ = ["CostModel"]
