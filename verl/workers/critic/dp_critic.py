"""The PPO critic: a value head (num_labels=1) on a causal LM, trained with the clipped value loss."""

from __future__ import annotations

from collections import defaultdict

import torch

from verl import core_algos
from verl.protocol import DataProto
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.fsdp_utils import all_reduce_sum, clip_grad_norm, dp_size
from verl.utils.torch_functional import masked_mean
from verl.workers.actor.dp_actor import mini_batch_means
from verl.workers.config import FSDPCriticConfig


def forward_response_values(module, micro: dict[str, torch.Tensor], response_length: int) -> torch.Tensor:
    """V(s_t) for each response token t: the value read at the position that predicts the token, (bs, R)."""
    out = module(
        input_ids=micro["input_ids"],
        attention_mask=micro["attention_mask"],
        position_ids=micro["position_ids"],
        use_cache=False,
    )
    values = out.logits.squeeze(-1) if hasattr(out, "logits") else out[0].squeeze(-1)
    return values[:, -response_length - 1 : -1].float()


class DataParallelPPOCritic:
    """Values of responses and the clipped value-loss update; ``config`` is the critic section (``FSDPCriticConfig``,
    or a mapping of its keys)."""

    def __init__(self, config, critic_module: torch.nn.Module, critic_optimizer: torch.optim.Optimizer | None = None):
        self.config: FSDPCriticConfig = omega_conf_to_dataclass(config, FSDPCriticConfig)
        self.critic_module = critic_module
        self.critic_optimizer = critic_optimizer

    @torch.no_grad()
    def compute_values(self, data: DataProto) -> torch.Tensor:
        """Values (bs, R), zero outside the response mask."""
        was_training = self.critic_module.training
        self.critic_module.eval()
        cfg = self.config
        micro_bsz = data.meta_info.get(
            "micro_batch_size", cfg.forward_micro_batch_size_per_gpu or cfg.ppo_micro_batch_size_per_gpu
        )
        keys = ["responses", "input_ids", "attention_mask", "position_ids", "response_mask"]
        values = []
        for micro in data.select(batch_keys=keys).split(micro_bsz):
            v = forward_response_values(self.critic_module, micro.batch, micro.batch["responses"].shape[1])
            values.append(v * micro.batch["response_mask"])
        self.critic_module.train(was_training)
        return torch.cat(values)

    def update_critic(self, data: DataProto) -> dict[str, list[float]]:
        cfg = self.config
        self.critic_module.train()
        keys = ["responses", "input_ids", "attention_mask", "position_ids", "response_mask", "values", "returns"]
        data = data.select(batch_keys=keys)
        mini_bsz = cfg.ppo_mini_batch_size * data.meta_info.get("rollout_n", 1) // dp_size()
        metrics: dict[str, list[float]] = defaultdict(list)
        generator = torch.Generator().manual_seed(int(data.meta_info.get("global_steps", 0)) + 1)
        for _ in range(cfg.ppo_epochs):
            shuffled = data[torch.randperm(len(data), generator=generator)] if cfg.shuffle else data
            for mini in shuffled.split(mini_bsz):
                self.critic_optimizer.zero_grad(set_to_none=True)
                counts = all_reduce_sum(core_algos.loss_normalizer_counts(mini.batch["response_mask"]))
                weighted: dict[str, float] = defaultdict(float)
                for micro in mini.split(cfg.ppo_micro_batch_size_per_gpu):
                    b = micro.batch
                    mask = b["response_mask"].to(torch.float32)
                    vpreds = forward_response_values(self.critic_module, b, b["responses"].shape[1])
                    vf_loss, vf_clipfrac = core_algos.compute_value_loss(
                        vpreds=vpreds,
                        returns=b["returns"],
                        values=b["values"],
                        response_mask=mask,
                        cliprange_value=cfg.cliprange_value,
                        loss_agg_mode=cfg.loss_agg_mode,
                    )
                    weight = core_algos.micro_batch_loss_weight(mask, counts, cfg.loss_agg_mode, dp_size())
                    (vf_loss * weight).backward()
                    token_weight = core_algos.micro_batch_loss_weight(mask, counts, "token-mean", dp_size())
                    weighted["critic/vf_loss"] += vf_loss.item() * weight
                    weighted["critic/vf_clipfrac"] += float(vf_clipfrac) * token_weight  # per-token rates
                    weighted["critic/vpred_mean"] += masked_mean(vpreds, mask).item() * token_weight
                for k, v in mini_batch_means(weighted).items():
                    metrics[k].append(v)
                grad_norm = clip_grad_norm(self.critic_module, cfg.grad_clip)
                if torch.isfinite(grad_norm):
                    self.critic_optimizer.step()
                metrics["critic/grad_norm"].append(float(grad_norm))
        self.critic_optimizer.zero_grad(set_to_none=True)
        return dict(metrics)
