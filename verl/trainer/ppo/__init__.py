"""The PPO-family controller (``ray_trainer``) and its stages; ``core_algos`` re-exports ``verl.core_algos``.

``from verl.trainer.ppo import PPOTrainer`` (the Python API, :mod:`verl.trainer.api`) works as the docs
write it (docs/python_api.md): this package ``__init__`` is a facade of the entry layer (docs/architecture.md), imported on first use.
"""

__all__ = ["PPOTrainer"]


def __getattr__(name: str):
    if name == "PPOTrainer":
        from verl.trainer.api import PPOTrainer

        return PPOTrainer
    raise AttributeError(f"module 'verl.trainer.ppo' has no attribute {name!r}")
