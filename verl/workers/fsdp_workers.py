"""Role workers: what the controller calls. One class per role group, as in verl.

- ``ActorRolloutRefWorker``: the actor, its rollout (the hybrid engine: the sampler uses the actor's module in
  place, so generation always sees the latest weights with no copy) and optionally the frozen reference policy.
- ``CriticWorker``: the value model.
- ``RewardModelWorker``: a sequence-classification reward model.

In the local backend each worker is one in-process object holding whole models. The Ray backend runs the same
classes as Ray actors, sharding the models with FSDP2 across processes.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from verl.protocol import DataProto
from verl.utils.checkpoint import save_hf_checkpoint
from verl.utils.model import load_causal_lm, load_tokenizer, resolve_model_path
from verl.utils.optim import build_adamw
from verl.workers.actor.dp_actor import DataParallelPPOActor
from verl.workers.critic.dp_critic import DataParallelPPOCritic
from verl.workers.rollout.hf_rollout import HFRollout


def build_optimizer(module: torch.nn.Module, optim_cfg, total_steps: int):
    """AdamW with linear warmup, then constant or cosine decay (verl's ``optim`` keys)."""
    warmup = optim_cfg.lr_warmup_steps
    if warmup is None or warmup < 0:
        warmup = int(optim_cfg.lr_warmup_steps_ratio * total_steps)
    return build_adamw(
        module.parameters(),
        optim_cfg.lr,
        optim_cfg.betas,
        optim_cfg.weight_decay,
        total_steps,
        warmup,
        optim_cfg.warmup_style,
        optim_cfg.min_lr_ratio,
    )


def _save_optim(path: str, optimizer, scheduler, extra: dict[str, Any] | None = None) -> None:
    torch.save(
        {"optimizer": optimizer.state_dict(), "lr_scheduler": scheduler.state_dict(), **(extra or {})},
        os.path.join(path, "optim.pt"),
    )


def _set_dynamic_bsz(data: DataProto, cfg) -> None:
    """Token-budget micro-batches for a log-prob pass (``log_prob_use_dynamic_bsz``, ``log_prob_max_token_len_per_gpu``)."""
    data.meta_info.setdefault("use_dynamic_bsz", bool(cfg.get("log_prob_use_dynamic_bsz", False)))
    data.meta_info.setdefault("max_token_len", cfg.get("log_prob_max_token_len_per_gpu", None))


class ActorRolloutRefWorker:
    """``role``: ``actor_rollout``, ``actor_rollout_ref`` or ``ref``."""

    def __init__(self, config, role: str = "actor_rollout", total_training_steps: int = 1, seed: int = 0):
        self.config = config
        self.role = role
        self._is_actor = role.startswith("actor")
        self._is_ref = role.endswith("ref")
        self.total_training_steps = max(1, total_training_steps)
        self.seed = seed

    def init_model(self) -> None:
        cfg = self.config
        self.tokenizer = load_tokenizer(cfg.model.path)
        if self._is_actor:
            self.actor_module = load_causal_lm(cfg.model.path, dtype=cfg.model.dtype)
            if cfg.model.enable_gradient_checkpointing:
                self.actor_module.gradient_checkpointing_enable()
            self.actor_optimizer, self.actor_lr_scheduler = build_optimizer(
                self.actor_module, cfg.actor.optim, self.total_training_steps
            )
            self.actor = DataParallelPPOActor(
                cfg.actor,
                self.actor_module,
                self.actor_optimizer,
                use_remove_padding=cfg.model.get("use_remove_padding", False),
                pad_token_id=self.tokenizer.pad_token_id,
            )
            self.rollout = HFRollout(
                self.actor_module,
                cfg.rollout,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
                seed=self.seed,
            )
        if self._is_ref:
            self.ref_module = load_causal_lm(cfg.model.path, dtype=cfg.model.dtype)
            self.ref_module.requires_grad_(False)
            self.ref_policy = DataParallelPPOActor(
                cfg.actor,
                self.ref_module,
                use_remove_padding=cfg.model.get("use_remove_padding", False),
                pad_token_id=self.tokenizer.pad_token_id,
            )

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        prompts.meta_info.setdefault("eos_token_id", self.tokenizer.eos_token_id)
        prompts.meta_info.setdefault("pad_token_id", self.tokenizer.pad_token_id)
        return self.rollout.generate_sequences(prompts)

    def compute_log_prob(self, data: DataProto) -> DataProto:
        data.meta_info.setdefault("micro_batch_size", self.config.rollout.log_prob_micro_batch_size_per_gpu)
        data.meta_info.setdefault("temperature", self.config.rollout.temperature)
        _set_dynamic_bsz(data, self.config.rollout)
        log_probs, entropys = self.actor.compute_log_prob(data, calculate_entropy=True)
        return DataProto.from_dict(
            {"old_log_probs": log_probs, "entropys": entropys}, meta_info={"temperature": data.meta_info["temperature"]}
        )

    def compute_ref_log_prob(self, data: DataProto) -> DataProto:
        data.meta_info.setdefault("micro_batch_size", self.config.ref.log_prob_micro_batch_size_per_gpu)
        data.meta_info.setdefault("temperature", self.config.rollout.temperature)
        _set_dynamic_bsz(data, self.config.ref)
        log_probs, _ = self.ref_policy.compute_log_prob(data)
        return DataProto.from_dict({"ref_log_prob": log_probs})

    def update_actor(self, data: DataProto) -> DataProto:
        data.meta_info.setdefault("temperature", self.config.rollout.temperature)
        metrics = self.actor.update_policy(data)
        metrics["actor/lr"] = self.actor_lr_scheduler.get_last_lr()[0]
        self.actor_lr_scheduler.step()
        return DataProto(meta_info={"metrics": metrics})

    def save_checkpoint(self, local_path: str) -> None:
        """``local_path/huggingface`` (a plain HF directory) + ``optim.pt`` (optimizer, LR schedule, sampler RNG)."""
        os.makedirs(local_path, exist_ok=True)
        save_hf_checkpoint(self.actor_module, self.tokenizer, os.path.join(local_path, "huggingface"))
        _save_optim(
            local_path, self.actor_optimizer, self.actor_lr_scheduler, {"rollout_rng": self.rollout.get_rng_state()}
        )

    def load_checkpoint(self, local_path: str) -> None:
        hf_dir = os.path.join(local_path, "huggingface")
        state = load_causal_lm(hf_dir, dtype=self.config.model.dtype).state_dict()
        self.actor_module.load_state_dict(state)
        saved = torch.load(os.path.join(local_path, "optim.pt"), weights_only=False)
        self.actor_optimizer.load_state_dict(saved["optimizer"])
        self.actor_lr_scheduler.load_state_dict(saved["lr_scheduler"])
        self.rollout.set_rng_state(saved["rollout_rng"])


class CriticWorker:
    def __init__(self, config, total_training_steps: int = 1, seed: int = 0):
        self.config = config
        self.total_training_steps = max(1, total_training_steps)
        self.seed = seed

    def init_model(self) -> None:
        from transformers import AutoModelForTokenClassification
        from transformers.utils import logging as hf_logging

        cfg = self.config
        path = resolve_model_path(cfg.model.path)
        hf_logging.disable_progress_bar()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)  # the fresh value head is seeded: same seed, same critic
            verbosity = hf_logging.get_verbosity()
            hf_logging.set_verbosity_error()  # "score.weight newly initialized" is expected for a value head
            self.critic_module = AutoModelForTokenClassification.from_pretrained(path, num_labels=1)
            hf_logging.set_verbosity(verbosity)
        if cfg.model.dtype == "bf16":
            self.critic_module.to(torch.bfloat16)
        if cfg.model.enable_gradient_checkpointing:
            self.critic_module.gradient_checkpointing_enable()
        self.tokenizer = load_tokenizer(path)
        self.critic_optimizer, self.critic_lr_scheduler = build_optimizer(
            self.critic_module, cfg.optim, self.total_training_steps
        )
        self.critic = DataParallelPPOCritic(cfg, self.critic_module, self.critic_optimizer)

    def compute_values(self, data: DataProto) -> DataProto:
        return DataProto.from_dict({"values": self.critic.compute_values(data)})

    def update_critic(self, data: DataProto) -> DataProto:
        metrics = self.critic.update_critic(data)
        metrics["critic/lr"] = self.critic_lr_scheduler.get_last_lr()[0]
        self.critic_lr_scheduler.step()
        return DataProto(meta_info={"metrics": metrics})

    def save_checkpoint(self, local_path: str) -> None:
        os.makedirs(local_path, exist_ok=True)
        save_hf_checkpoint(self.critic_module, self.tokenizer, os.path.join(local_path, "huggingface"))
        _save_optim(local_path, self.critic_optimizer, self.critic_lr_scheduler)

    def load_checkpoint(self, local_path: str) -> None:
        from transformers import AutoModelForTokenClassification

        loaded = AutoModelForTokenClassification.from_pretrained(os.path.join(local_path, "huggingface"))
        self.critic_module.load_state_dict(loaded.state_dict())
        saved = torch.load(os.path.join(local_path, "optim.pt"), weights_only=False)
        self.critic_optimizer.load_state_dict(saved["optimizer"])
        self.critic_lr_scheduler.load_state_dict(saved["lr_scheduler"])


class RewardModelWorker:
    """Scores whole responses with any local HF ``AutoModelForSequenceClassification`` directory.

    The policy's tokens are decoded and re-tokenized with the RM's own tokenizer (and chat template when it has one),
    so the RM need not share the policy's vocabulary. The score lands on the last response token as ``rm_scores``.
    """

    def __init__(self, config, policy_tokenizer):
        self.config = config
        self.policy_tokenizer = policy_tokenizer

    def init_model(self) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = resolve_model_path(self.config.model.path)
        self.rm_tokenizer = AutoTokenizer.from_pretrained(self.config.model.input_tokenizer or path)
        if self.rm_tokenizer.pad_token is None:
            self.rm_tokenizer.pad_token = self.rm_tokenizer.eos_token
        self.rm_tokenizer.padding_side = "right"
        self.rm_module = AutoModelForSequenceClassification.from_pretrained(path)
        self.rm_module.eval()
        if self.rm_module.config.pad_token_id is None:
            self.rm_module.config.pad_token_id = self.rm_tokenizer.pad_token_id

    @torch.no_grad()
    def compute_rm_score(self, data: DataProto) -> DataProto:
        responses, mask = data.batch["responses"], data.batch["response_mask"]
        prompts = self.policy_tokenizer.batch_decode(data.batch["prompts"], skip_special_tokens=True)
        texts = self.policy_tokenizer.batch_decode(
            [responses[i][mask[i].bool()] for i in range(len(data))], skip_special_tokens=True
        )
        scores = []
        for start in range(0, len(texts), self.config.micro_batch_size_per_gpu):
            chunk = [
                p + t for p, t in zip(prompts[start:], texts[start : start + self.config.micro_batch_size_per_gpu])
            ]
            enc = self.rm_tokenizer(chunk, return_tensors="pt", padding=True, truncation=True)
            logits = self.rm_module(**enc).logits
            scores.append(logits[:, 0].float())
        scores = torch.cat(scores)
        rm_scores = torch.zeros(responses.shape, dtype=torch.float32)
        last = (mask.sum(-1) - 1).clamp(min=0).long()
        rm_scores[torch.arange(len(data)), last] = scores
        return DataProto.from_dict({"rm_scores": rm_scores})
