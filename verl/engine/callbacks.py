"""Step callbacks: code that sees each RL step's intermediate products and may change them or stop the run."""

from __future__ import annotations

from typing import Any


class StepCallback:
    """Subclass and override what you need; the controller calls these on every step.

    ``on_advantages(trainer, batch, metrics)``: after advantages are computed, before the updates. ``batch`` is the
    step's ``DataProto`` (``old_log_probs``, ``ref_log_prob``, ``values``, ``token_level_rewards``, ``advantages``,
    ``response_mask``, ...); change its tensors in place to change what the updates see.
    ``on_step_end(trainer, batch, metrics)``: after the step's metrics are logged; return ``False`` to stop training.
    """

    def on_advantages(self, trainer: Any, batch: Any, metrics: dict[str, Any]) -> None:
        return None

    def on_step_end(self, trainer: Any, batch: Any, metrics: dict[str, Any]) -> bool | None:
        return None
