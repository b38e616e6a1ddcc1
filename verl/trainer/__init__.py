"""Trainers: the main jobs (``main_ppo``, ``main_sft``, ``main_eval``) and the Python trainer API.

``RLTrainer`` (alias ``Trainer``), ``PPOTrainer`` and ``DataParallelRLTrainer`` live in :mod:`verl.trainer.api` and
are imported on first use.
"""

import importlib

_API = ("Trainer", "RLTrainer", "PPOTrainer", "DataParallelRLTrainer")

__all__ = list(_API)


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module("verl.trainer.api"), name)
    raise AttributeError(f"module 'verl.trainer' has no attribute {name!r}")
