"""Cost models: the predicted seconds of each step a worker runs (prefill, decode, KV transfer), fitted to
measurements or derived from datasheets; torch-free, so the simulator and the planner run without a model.

- :mod:`.model`: :class:`CostModel` (linear in tokens, squares, batch and context; the built-in default).
- :mod:`.fit`: least-squares fits with their residuals (:func:`fit_prefill`, :func:`fit_decode`, :func:`fit_transfer`).
- :mod:`.calibration`: :class:`Calibration` (a fitted model + what it was measured on), :func:`save`, :func:`load`,
  :func:`combine` (several calibrations fitted again as one).
- :mod:`.analytic`: :func:`roofline_cost_model`, a published model on a datasheet GPU (everything predicted).
- :mod:`.parallel`: tensor parallelism: :class:`TensorParallel` (a worker of ``tp`` devices), its all-reduces,
  :func:`reshard` (a hand-off between pools of different TP).

Measuring lives with the model code: :func:`splitlab.profiling.calibrate`.
"""
from .analytic import RooflineCostModel, roofline_cost_model
from .calibration import Calibration, CalibrationError, combine, load, save
from .fit import Fit, fit_decode, fit_prefill, fit_transfer
from .model import CostModel
from .parallel import TensorParallel, reshard

__all__ = ["CostModel", "Fit", "fit_prefill", "fit_decode", "fit_transfer", "Calibration", "CalibrationError", "save",
           "load", "combine", "RooflineCostModel", "roofline_cost_model",
           "TensorParallel", "reshard"]
