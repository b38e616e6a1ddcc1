"""Typed config sections of the role workers (verl's ``verl.workers.config``): each dataclass holds its keys' types,
defaults and meanings. ``verl.utils.config.omega_conf_to_dataclass`` turns a loaded section into one."""

from verl.workers.config import (
    actor,
    actor_rollout_ref,
    checkpoint,
    critic,
    engine,
    model,
    optimizer,
    reward_model,
    rollout,
)
from verl.workers.config.actor import *  # noqa: F403
from verl.workers.config.actor_rollout_ref import *  # noqa: F403
from verl.workers.config.checkpoint import *  # noqa: F403
from verl.workers.config.critic import *  # noqa: F403
from verl.workers.config.engine import *  # noqa: F403
from verl.workers.config.model import *  # noqa: F403
from verl.workers.config.optimizer import *  # noqa: F403
from verl.workers.config.reward_model import *  # noqa: F403
from verl.workers.config.rollout import *  # noqa: F403

__all__ = (
    actor.__all__
    + actor_rollout_ref.__all__
    + checkpoint.__all__
    + critic.__all__
    + engine.__all__
    + model.__all__
    + optimizer.__all__
    + reward_model.__all__
    + rollout.__all__
)
