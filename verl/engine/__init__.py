"""The hybrid engine's hooks: step callbacks that see each step's intermediate products (docs/python_api.md, "Step callbacks").

``StepCallback`` is the protocol; ``KLFilterCallback``, ``DynamicGammaScheduler`` and ``RewardAwareEarlyStopping``
are the built-ins; ``HybridEngine`` is ``trainer.engine`` (``engine.step(callback)``).
"""

from verl.engine.callbacks import (
    DynamicGammaScheduler,
    FunctionCallback,
    KLFilterCallback,
    RewardAwareEarlyStopping,
    StepCallback,
)
from verl.engine.engine import HybridEngine

__all__ = [
    "DynamicGammaScheduler",
    "FunctionCallback",
    "HybridEngine",
    "KLFilterCallback",
    "RewardAwareEarlyStopping",
    "StepCallback",
]
