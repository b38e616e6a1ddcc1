"""Stub workers for tests of the controller's own bookkeeping (`RayPPOTrainer` generate/reward/advantage stages)
without a model: every response is R tokens of 7, prompts are P tokens of 1."""

import torch

from verl.protocol import DataProto
from verl.trainer.ppo.metric_utils import StepTimer
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.trainer.ppo.v1 import SyncRounds
from verl.utils.config import load_config

P, R = 3, 4


class SameResponseWorkers:
    def generate_sequences(self, prompts):
        bs = len(prompts)
        resp, mask = torch.full((bs, R), 7), torch.ones(bs, R, dtype=torch.long)
        batch = {
            "prompts": prompts.batch["input_ids"],
            "responses": resp,
            "input_ids": torch.cat([prompts.batch["input_ids"], resp], 1),
            "attention_mask": torch.cat([prompts.batch["attention_mask"], mask], 1),
            "position_ids": torch.arange(P + R).expand(bs, -1).clone(),
            "response_mask": mask,
        }
        return DataProto(batch=batch, non_tensor_batch=dict(prompts.non_tensor_batch), meta_info={})


class PromptLoader:
    def __init__(self, batch_size: int):
        self.batch_size = batch_size

    def next_batch(self):
        ids = torch.ones(self.batch_size, P, dtype=torch.long)
        return DataProto.from_dict(
            {
                "input_ids": ids,
                "attention_mask": ids.clone(),
                "position_ids": torch.arange(P).expand(self.batch_size, -1).clone(),
            },
            {"data_source": ["x"] * self.batch_size},
        )


def _dotted(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        out.update(_dotted(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def make_controller(config: dict, reward_fn, batch_size: int) -> RayPPOTrainer:
    """A controller at step 1 with only what `generate_and_score`, `compute_token_level_rewards` and the step's
    metrics read; ``config`` overrides the ``ppo_trainer`` defaults."""
    t = RayPPOTrainer.__new__(RayPPOTrainer)
    t.config = load_config("ppo_trainer", overrides=_dotted(config))
    t.actor_rollout_wg, t.train_loader, t.reward_fn, t.rm_wg, t.reward_hooks = (
        SameResponseWorkers(),
        PromptLoader(batch_size),
        reward_fn,
        None,
        [],
    )
    t.metrics, t.timer, t.global_steps, t.callbacks = {}, StepTimer(), 1, []
    t.policy_version, t.sync_rounds = 0, SyncRounds(lambda batch: t.rollout_wg.generate_sequences(batch))
    t.rollout_rounds = t.sync_rounds
    return t
