"""Memory and throughput planning for RL runs: ``python scripts/auto_config.py`` (``python -m verl.planner``) and
``trainer.check_memory``. See docs/auto_config.md."""

from verl.planner.hardware import GPUS, Device, gpu, this_machine
from verl.planner.memory import MemoryEstimate, PlanInputs, estimate_memory, format_estimate
from verl.planner.shapes import ModelShape, preset_shape, shape_from_hf_config, shape_from_model_path

__all__ = [
    "GPUS",
    "Device",
    "MemoryEstimate",
    "ModelShape",
    "PlanInputs",
    "estimate_memory",
    "format_estimate",
    "gpu",
    "preset_shape",
    "shape_from_hf_config",
    "shape_from_model_path",
    "this_machine",
]
