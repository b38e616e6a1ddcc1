"""verl: reinforcement-learning post-training for LLMs.

Submodules are imported lazily so that `import verl` stays fast and works without
the optional heavy parts (Ray, Optuna, vLLM, ...). Importing the package applies the
CPU thread policy (verl.utils.cpu_threads): before torch loads its OpenMP runtime,
which reads its wait settings only then.
"""

import importlib

from verl.version import __version__

_SUBMODULES = ("trainer", "data", "utils", "engine", "models", "protocol", "workers", "single_controller")

# The Python trainer API (docs/python_api.md), imported on first use.
_API = ("Trainer", "RLTrainer", "PPOTrainer", "DataParallelRLTrainer", "DataConfig", "EngineConfig")

__all__ = ["__version__", "DataProto", *_API, *_SUBMODULES]


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"verl.{name}")
    if name == "DataProto":
        from verl.protocol import DataProto

        return DataProto
    if name in _API:
        return getattr(importlib.import_module("verl.trainer.api"), name)
    raise AttributeError(f"module 'verl' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))


def _apply_thread_policy() -> None:
    from verl.utils.cpu_threads import apply_thread_policy

    apply_thread_policy()


_apply_thread_policy()
