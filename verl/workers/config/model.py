"""Model sections: what each role loads (``actor_rollout_ref.model``, ``critic.model``, ``reward_model.model``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig
from verl.workers.config.engine import FSDPEngineConfig

__all__ = ["FSDPCriticModelCfg", "HFModelConfig", "RewardModelModelConfig"]


@dataclass
class HFModelConfig(BaseConfig):
    """The policy (``actor_rollout_ref.model``): one HF causal-LM directory shared by actor, rollout and reference."""

    path: str = "builtin://tiny-qwen2-arith-sft"  # any local HF model directory
    dtype: str = "fp32"  # fp32 | bf16
    enable_gradient_checkpointing: bool = False  # recompute activations in backward: less memory, ~30% more compute
    use_remove_padding: bool = True  # packed (padding-free) log-prob/update passes; docs/performance.md
    # each repeated prompt computed once in log-prob/update passes (exact; docs/performance.md)
    use_shared_prefix: bool = True
    # model-config attributes replaced at load, e.g. {attention_dropout: 0.0}
    override_config: dict[str, Any] = field(default_factory=dict)
    external_lib: str | None = None  # a module imported before models load (to register custom architectures)
    trust_remote_code: bool = False  # allow a model directory's own Python code (tokenizer and model)
    use_liger: bool = False  # Liger GPU kernels: not available here (true warns and runs the plain ops)
    # fused GPU log-prob kernels: the log-prob already comes from one log-softmax (true warns)
    use_fused_kernels: bool = False
    enable_activation_offload: bool = False  # GPU activation offload: not available (true warns)
    lora_rank: int = 0  # LoRA: not implemented in this version (> 0 is an error)
    lora_alpha: int = 16  # LoRA scaling (only with lora_rank > 0)
    target_modules: str = "all-linear"  # LoRA target modules (only with lora_rank > 0)


@dataclass
class FSDPCriticModelCfg(BaseConfig):
    """The value model (``critic.model``): a token-classification head (one label) on a causal LM."""

    path: str = "builtin://tiny-qwen2-arith-sft"  # a value head (num_labels=1) is added on this causal LM
    dtype: str = "fp32"  # fp32 | bf16
    enable_gradient_checkpointing: bool = False  # recompute activations in backward: less memory, ~30% more compute
    fsdp_config: FSDPEngineConfig = field(default_factory=FSDPEngineConfig)  # FSDP2 sharding (trainer.backend=ray)
    use_remove_padding: bool = False  # no effect: the critic's passes are padded
    tokenizer_path: str | None = None  # no effect: the critic reads the actor's token ids
    external_lib: str | None = None  # a module imported before the model loads (custom architectures)
    trust_remote_code: bool = False  # allow the model directory's own Python code
    # no effect here (the critic's model config loads as saved)
    override_config: dict[str, Any] = field(default_factory=dict)


@dataclass
class RewardModelModelConfig(BaseConfig):
    """The reward model (``reward_model.model``): an HF sequence-classification directory."""

    path: str | None = None  # any local HF AutoModelForSequenceClassification directory
    input_tokenizer: str | None = None  # null: the RM's own tokenizer (responses are re-tokenized)
    external_lib: str | None = None  # a module imported before the model loads (custom architectures)
    trust_remote_code: bool = False  # allow the reward model directory's own Python code
    use_remove_padding: bool = False  # no effect
    # no effect: the RM is forward-only and whole on every worker
    fsdp_config: FSDPEngineConfig = field(default_factory=FSDPEngineConfig)
