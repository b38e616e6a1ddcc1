"""A recipe in verl's style, runnable on a laptop CPU: your own policy loss and reward manager, registered by
decorator, and a trainer built the way verl's recipes (DAPO's main_dapo.py) build theirs.

    python examples/recipe/main_recipe.py trainer.total_training_steps=20
    python examples/recipe/main_recipe.py trainer.backend=ray trainer.n_gpus_per_node=2   # the same on Ray workers

Any ``key=value`` of the ``ppo_trainer`` config is accepted. The loss is a PPO clipped loss whose advantage is
scaled by the response's share of the group's length ("shorter right answers count more"); the manager scores with
the built-in rule scorer and reports each response's length as an extra column (``reward/response_chars/mean``).
"""

from __future__ import annotations

import sys

import torch

from verl.trainer.ppo import core_algos
from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, ResourcePoolManager, Role
from verl.utils import hf_tokenizer
from verl.utils.cli import job_config
from verl.workers.fsdp_workers import ActorRolloutRefWorker
from verl.workers.reward_manager import NaiveRewardManager, register


@register_policy_loss("length_scaled_ppo")
def compute_policy_loss_length_scaled(
    old_log_prob: torch.Tensor,  # (bs, response_length)
    log_prob: torch.Tensor,  # (bs, response_length)
    advantages: torch.Tensor,  # (bs, response_length)
    response_mask: torch.Tensor,  # (bs, response_length)
    loss_agg_mode: str = "token-mean",
    config=None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's clipped surrogate with A_i scaled by mean(|y|) / |y_i|: the same clipping, more weight on short
    responses. verl's loss signature: returns the loss and its metrics."""
    lengths = response_mask.sum(-1, keepdim=True).clamp(min=1)
    scaled = advantages * (lengths.mean() / lengths)
    ratio = torch.exp(log_prob - old_log_prob)
    clip = config.clip_ratio
    pg_losses = torch.maximum(-scaled * ratio, -scaled * torch.clamp(ratio, 1 - clip, 1 + clip))
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)
    clipped = ((ratio - 1).abs() > clip).float()
    return loss, {"actor/pg_clipfrac": core_algos.masked_mean(clipped, response_mask).item()}


@register("with_lengths")
class LengthReportingRewardManager(NaiveRewardManager):
    """The naive manager's scores, plus each response's length in characters as an extra column."""

    def __call__(self, data, return_dict: bool = False):
        out = super().__call__(data, return_dict=True)
        mask = data.batch["attention_mask"][:, -data.batch["responses"].shape[1] :]
        texts = [
            self.tokenizer.decode(ids[: int(n)], skip_special_tokens=True)
            for ids, n in zip(data.batch["responses"], mask.sum(-1))
        ]
        out["reward_extra_info"]["response_chars"] = [float(len(t)) for t in texts]
        return out if return_dict else out["reward_tensor"]


def main(argv: list[str]) -> dict:
    config = job_config(
        "ppo_trainer",
        [
            "actor_rollout_ref.actor.policy_loss.loss_mode=length_scaled_ppo",
            "reward_model.reward_manager=with_lengths",
            "trainer.default_local_dir=outputs/recipe-example",
            *argv,
        ],
        "examples/recipe/main_recipe.py",
        __doc__,
    )
    tokenizer = hf_tokenizer(config.actor_rollout_ref.model.path)
    # verl's recipes wrap these with ray.remote; plain classes work too, and trainer.backend picks the processes
    role_worker_mapping = {Role.ActorRollout: ActorRolloutRefWorker, Role.RefPolicy: ActorRolloutRefWorker}
    pool = "global_pool"
    resource_pool_manager = ResourcePoolManager(
        resource_pool_spec={pool: [config.trainer.n_gpus_per_node] * config.trainer.nnodes},
        mapping={role: pool for role in role_worker_mapping},
    )
    reward_fn = LengthReportingRewardManager(tokenizer=tokenizer, num_examine=0)
    val_reward_fn = LengthReportingRewardManager(tokenizer=tokenizer, num_examine=1)
    trainer = RayPPOTrainer(
        config=config,
        tokenizer=tokenizer,
        role_worker_mapping=role_worker_mapping,
        resource_pool_manager=resource_pool_manager,
        reward_fn=reward_fn,
        val_reward_fn=val_reward_fn,
    )
    try:
        trainer.init_workers()
        result = trainer.fit()
    finally:
        trainer.shutdown()
    history = result["history"]
    chars = history["reward/response_chars/mean"][-1][1]
    print(f"trained {trainer.global_steps} steps; last step's mean response length: {chars:.1f} characters")
    for key in sorted(k for k in history if k.startswith("val-core/")):
        print(f"{key}: {history[key][-1][1]:.3f}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
