"""The hybrid engine's hooks: step callbacks that see each step's intermediate products (seed article 000)."""

from verl.engine.callbacks import StepCallback

__all__ = ["StepCallback"]
