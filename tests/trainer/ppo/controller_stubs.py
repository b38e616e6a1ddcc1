"""Stub workers for tests of the controller's own bookkeeping (`RayPPOTrainer` rollout/reward/advantage path)
without a model: every response is R tokens of 7, prompts are P tokens of 1."""

import torch
from omegaconf import OmegaConf

from verl.protocol import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

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


def make_controller(config: dict, reward_fn, batch_size: int) -> RayPPOTrainer:
    """A controller with only what `_rollout_batch`, `_compute_rewards` and `_data_metrics` read."""
    t = RayPPOTrainer.__new__(RayPPOTrainer)
    t.config = OmegaConf.create(config)
    t.actor_rollout_wg, t.train_loader, t.reward_fn, t.use_rm, t.reward_hooks = (
        SameResponseWorkers(),
        PromptLoader(batch_size),
        reward_fn,
        False,
        [],
    )
    return t
