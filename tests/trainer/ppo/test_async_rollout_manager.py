"""``build_async_rollout_manager``: when the trainer generates through the agent loop, and the errors when a
multi-turn run cannot."""

from __future__ import annotations

import pytest

from verl.protocol import DataProto
from verl.trainer.ppo.roles import build_async_rollout_manager
from verl.utils.config import load_config
from verl.workers.rollout.base import BaseRollout


class BatchOnlyRollout(BaseRollout):
    """An engine with the batch call only (no per-request generate), as vLLM's was before its async generate."""

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        return prompts

    async def resume(self, tags):
        pass

    async def update_weights(self, weights, **kwargs):
        pass

    async def release(self):
        pass


class InProcessGroup:
    """What the local backend's role handle offers here: the worker's rollout, in process."""

    rollout = BatchOnlyRollout()


def test_sync_mode_and_the_ray_backend_keep_the_batch_call():
    assert build_async_rollout_manager(load_config("ppo_trainer"), InProcessGroup()) is None
    ray = load_config("ppo_trainer", ["actor_rollout_ref.rollout.mode=async", "trainer.backend=ray"])
    assert build_async_rollout_manager(ray, InProcessGroup()) is None


def test_async_mode_on_an_engine_without_per_request_generate_keeps_the_batch_call():
    config = load_config("ppo_trainer", ["actor_rollout_ref.rollout.mode=async"])
    assert build_async_rollout_manager(config, InProcessGroup()) is None


def test_multi_turn_on_an_engine_without_per_request_generate_is_an_error_naming_it():
    config = load_config("ppo_trainer", ["actor_rollout_ref.rollout.multi_turn.enable=true"])
    with pytest.raises(ValueError, match="which BatchOnlyRollout .* does not serve: use rollout.name=hf"):
        build_async_rollout_manager(config, InProcessGroup())
