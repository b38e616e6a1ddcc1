"""The PPO actor: log-probs of responses under the policy, and the clipped policy-gradient update.

Knows models and tensors, not algorithms' dataflow: which loss and which advantages come from the config and the
batch. Data-parallel across processes comes from the worker that wraps it (FSDP); here it is one module.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch

from verl.protocol import DataProto
from verl.trainer.ppo import core_algos
from verl.utils.fsdp_utils import all_reduce_sum, clip_grad_norm, dp_size
from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits


def forward_response_logits(module, micro: dict[str, torch.Tensor], response_length: int, temperature: float):
    """Logits that predict each response token: positions [-R-1, -1) of the full sequence, divided by temperature."""
    out = module(
        input_ids=micro["input_ids"],
        attention_mask=micro["attention_mask"],
        position_ids=micro["position_ids"],
        use_cache=False,
    )
    logits = out.logits[:, -response_length - 1 : -1, :].float()
    return logits / temperature if temperature != 1.0 else logits


def mini_batch_means(weighted_sums: dict[str, float]) -> dict[str, float]:
    """Per-mini-batch metrics from micro-batch values summed with their loss weights (`micro_batch_loss_weight`),
    over all ranks: exactly what the whole mini-batch would give in one pass, on any number of workers."""
    keys = sorted(weighted_sums)
    totals = all_reduce_sum(torch.tensor([weighted_sums[k] for k in keys], dtype=torch.float64)) / dp_size()
    return dict(zip(keys, totals.tolist()))


def split_into_micro_batches(data: DataProto, micro_batch_size: int) -> list[DataProto]:
    return data.split(max(1, int(micro_batch_size)))


class DataParallelPPOActor:
    """``compute_log_prob`` (with entropy) and ``update_policy`` over an HF causal LM."""

    def __init__(self, config, actor_module: torch.nn.Module, actor_optimizer: torch.optim.Optimizer | None = None):
        self.config = config
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer

    @torch.no_grad()
    def compute_log_prob(self, data: DataProto, calculate_entropy: bool = False):
        """Per-token log-probs (bs, R) of ``responses``, and entropies (bs, R) when asked; micro-batched."""
        was_training = self.actor_module.training
        self.actor_module.eval()
        micro_bsz = data.meta_info.get("micro_batch_size", 128)
        temperature = data.meta_info.get("temperature", 1.0)
        keys = ["responses", "input_ids", "attention_mask", "position_ids"]
        log_probs, entropys = [], []
        for micro in split_into_micro_batches(data.select(batch_keys=keys), micro_bsz):
            r = micro.batch["responses"]
            logits = forward_response_logits(self.actor_module, micro.batch, r.shape[1], temperature)
            log_probs.append(logprobs_from_logits(logits, r))
            if calculate_entropy:
                entropys.append(entropy_from_logits(logits))
        self.actor_module.train(was_training)
        return torch.cat(log_probs), (torch.cat(entropys) if calculate_entropy else None)

    def update_policy(self, data: DataProto) -> dict[str, list[float]]:
        """PPO epochs over mini-batches (one optimizer step each), micro-batches accumulating gradients.

        Needs ``responses``, ``response_mask``, ``input_ids``, ``attention_mask``, ``position_ids``,
        ``old_log_probs``, ``advantages`` and, with ``use_kl_loss``, ``ref_log_prob``.
        """
        cfg = self.config
        self.actor_module.train()
        temperature = data.meta_info.get("temperature", 1.0)
        keys = [
            "responses",
            "response_mask",
            "input_ids",
            "attention_mask",
            "position_ids",
            "old_log_probs",
            "advantages",
        ]
        if cfg.use_kl_loss:
            keys.append("ref_log_prob")
        data = data.select(batch_keys=keys)
        n = data.meta_info.get("rollout_n", 1)
        mini_bsz = cfg.ppo_mini_batch_size * n // dp_size()  # ppo_mini_batch_size counts prompts, over all ranks
        micro_bsz = cfg.ppo_micro_batch_size_per_gpu
        loss_mode = cfg.policy_loss.get("loss_mode", "vanilla")
        policy_loss_fn = core_algos.get_policy_loss_fn(loss_mode)
        metrics: dict[str, list[float]] = defaultdict(list)
        generator = torch.Generator().manual_seed(int(data.meta_info.get("global_steps", 0)))
        for _ in range(cfg.ppo_epochs):
            order = torch.randperm(len(data), generator=generator) if cfg.shuffle else torch.arange(len(data))
            shuffled = data[order] if cfg.shuffle else data
            for mini in shuffled.split(mini_bsz):
                self.actor_optimizer.zero_grad(set_to_none=True)
                counts = all_reduce_sum(core_algos.loss_normalizer_counts(mini.batch["response_mask"]))
                weighted: dict[str, float] = defaultdict(float)
                for micro in split_into_micro_batches(mini, micro_bsz):
                    weight = core_algos.micro_batch_loss_weight(
                        micro.batch["response_mask"], counts, cfg.loss_agg_mode, dp_size()
                    )
                    stats = self._micro_step(micro, policy_loss_fn, temperature, weight)
                    for k, v in stats.items():
                        weighted[k] += v * weight
                for k, v in mini_batch_means(weighted).items():
                    metrics[k].append(v)
                grad_norm = clip_grad_norm(self.actor_module, cfg.grad_clip)
                if torch.isfinite(grad_norm):
                    self.actor_optimizer.step()
                else:  # skip the step rather than poison the weights; the metric shows it
                    self.actor_optimizer.zero_grad(set_to_none=True)
                metrics["actor/grad_norm"].append(float(grad_norm))
        self.actor_optimizer.zero_grad(set_to_none=True)
        return dict(metrics)

    def _micro_step(self, micro: DataProto, policy_loss_fn, temperature: float, scale: float) -> dict[str, Any]:
        cfg = self.config
        b = micro.batch
        response_mask = b["response_mask"].to(torch.float32)
        logits = forward_response_logits(self.actor_module, b, b["responses"].shape[1], temperature)
        log_prob = logprobs_from_logits(logits, b["responses"])
        pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower = policy_loss_fn(
            old_log_prob=b["old_log_probs"],
            log_prob=log_prob,
            advantages=b["advantages"],
            response_mask=response_mask,
            loss_agg_mode=cfg.loss_agg_mode,
            config=cfg,
        )
        stats: dict[str, Any] = {}
        loss = pg_loss
        if cfg.entropy_coeff != 0:
            entropy = core_algos.agg_loss(entropy_from_logits(logits), response_mask, cfg.loss_agg_mode)
            loss = loss - cfg.entropy_coeff * entropy
            stats["actor/entropy"] = entropy.item()
        if cfg.use_kl_loss:
            kld = core_algos.kl_penalty(log_prob, b["ref_log_prob"], cfg.kl_loss_type)
            kl_loss = core_algos.agg_loss(kld, response_mask, cfg.loss_agg_mode)
            loss = loss + cfg.kl_loss_coef * kl_loss
            stats["actor/kl_loss"] = kl_loss.item()
            stats["actor/kl_coef"] = cfg.kl_loss_coef
        (loss * scale).backward()
        stats.update(
            {
                "actor/pg_loss": pg_loss.item(),
                "actor/pg_clipfrac": float(pg_clipfrac.detach()),
                "actor/ppo_kl": float(ppo_kl.detach()),
                "actor/pg_clipfrac_lower": float(pg_clipfrac_lower.detach()),
            }
        )
        return stats
