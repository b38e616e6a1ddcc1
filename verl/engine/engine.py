"""``HybridEngine``: the ``engine.step()`` callback interface (docs/python_api.md), a view on a trainer's step callbacks.

    trainer.engine.step(KLFilterCallback(threshold=0.5))       # register a StepCallback

    @trainer.engine.step                                        # or a function, run at on_advantages
    def log_kl(trainer, batch, metrics):
        metrics["callbacks/kl_max"] = batch.batch["token_level_kl"].max().item()

The engine does not run anything itself: the controller's step calls the callbacks registered here, exactly as it
calls those added with ``trainer.add_callback`` (the same list).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class HybridEngine:
    """Step-callback registration for a trainer (``trainer.engine``); ``step``/``register_step_callback`` are
    aliases of ``trainer.add_callback``."""

    def __init__(self, trainer: Any):
        self.trainer = trainer

    @property
    def callbacks(self) -> list[Any]:
        return self.trainer.callbacks

    def register_step_callback(self, callback: Any, hook: str = "on_advantages") -> Any:
        """Register a :class:`~verl.engine.StepCallback` or a function ``fn(trainer, batch, metrics)`` run at
        ``hook``; returns what was given, so it works as a decorator."""
        self.trainer.add_callback(callback, hook)
        return callback

    def step(self, callback: Any = None, *, hook: str = "on_advantages") -> Any:
        """``engine.step(cb)`` registers ``cb``; ``@engine.step`` and ``@engine.step(hook="on_rewards")`` decorate."""
        if callback is None:

            def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
                return self.register_step_callback(fn, hook)

            return decorator
        return self.register_step_callback(callback, hook)
