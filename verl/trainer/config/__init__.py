"""Typed config sections of the trainers (verl's ``verl.trainer.config``) and each job's whole schema.

The job schemas (``ppo_trainer``, ``sft_trainer``, ``evaluation``, ``generation``) are the defaults of
``verl.utils.config.load_config(<job>)``; ``docs/config_reference.md`` is generated from them.
"""

from verl.trainer.config import algorithm, config
from verl.trainer.config.algorithm import *  # noqa: F403
from verl.trainer.config.config import *  # noqa: F403

__all__ = algorithm.__all__ + config.__all__
