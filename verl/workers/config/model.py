"""Model sections: what each role loads (``actor_rollout_ref.model``, ``critic.model``, ``reward_model.model``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig
from verl.workers.config.engine import FSDPEngineConfig

__all__ = ["FSDPCriticModelCfg", "HFModelConfig", "MtpConfig", "RewardModelModelConfig"]


@dataclass
class MtpConfig(BaseConfig):
    """Multi-token-prediction layers (verl's ``MtpConfig``): not implemented here (training them is an error,
    speculative decoding with them warns)."""

    enable: bool = False  # no effect: load and save MTP weights without using them
    enable_train: bool = False  # train the MTP layers: not implemented (true is an error)
    enable_rollout: bool = False  # speculative decoding with the MTP layers: not implemented (true warns)
    detach_encoder: bool = False  # no effect: MTP training only
    mtp_loss_scaling_factor: float = 0.1  # no effect: MTP training only
    speculative_algorithm: str = "EAGLE"  # no effect: SGLang speculative decoding only
    speculative_num_steps: int = 2  # no effect: SGLang speculative decoding only
    speculative_eagle_topk: int = 2  # no effect: SGLang speculative decoding only
    speculative_num_draft_tokens: int = 4  # no effect: SGLang speculative decoding only
    method: str = "mtp"  # no effect: vLLM speculative decoding only
    num_speculative_tokens: int = 1  # no effect: vLLM speculative decoding only


@dataclass
class HFModelConfig(BaseConfig):
    """The policy (``actor_rollout_ref.model``): one HF causal-LM directory shared by actor, rollout and reference."""

    # any local HF model directory (builtin://<name>: a shipped one)
    path: str = field(
        default="~/models/deepseek-llm-7b-chat", metadata={"api": ("model.pretrained_model_name_or_path",)}
    )
    dtype: str = "fp32"  # fp32 | bf16
    enable_gradient_checkpointing: bool = True  # recompute activations in backward: less memory, ~30% more compute
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
    # LoRA adapters (PEFT; docs/lora.md): > 0 trains rank-r adapters on the frozen base, whose reference policy is
    # the same module with its adapters off; 0 trains every weight
    lora_rank: int = 0
    lora_alpha: int = 16  # the adapters' scale is lora_alpha / lora_rank
    # modules that get adapters: all-linear (every linear but the output head), or a list / comma-separated names
    target_modules: Any = "all-linear"
    exclude_modules: Any = None  # modules left without adapters (a list, comma-separated names, or a regex)
    # a saved PEFT adapter directory to start from (e.g. a checkpoint's actor/lora_adapter); implies LoRA
    lora_adapter_path: str | None = None
    # a model config directory other than path: not read here (a value warns; the config comes from path)
    hf_config_path: str | None = None
    # a tokenizer other than the model's: use data.tokenizer here (a value warns; the tokenizer comes from
    # data.tokenizer, else path)
    tokenizer_path: str | None = None
    use_shm: bool = False  # no effect: the model is read from its directory (no copy to /dev/shm)
    # a Jinja chat template replacing the tokenizer's: not applied in this version (a value is an error: prompts
    # would differ); put it in the tokenizer directory's tokenizer_config.json
    custom_chat_template: str | None = None
    # no effect: options of the fused kernels (use_fused_kernels)
    fused_kernel_options: dict[str, Any] = field(default_factory=lambda: {"impl_backend": "torch"})
    # tiled MLP (memory for long sequences): not implemented (enabled=true warns; the plain MLP runs, same math)
    tiled_mlp: dict[str, Any] = field(default_factory=lambda: {"enabled": False, "num_shards": 4})
    mtp: MtpConfig = field(default_factory=MtpConfig)  # multi-token-prediction layers (not implemented)


@dataclass
class FSDPCriticModelCfg(BaseConfig):
    """The value model (``critic.model``): a token-classification head (one label) on a causal LM."""

    path: str = "~/models/deepseek-llm-7b-chat"  # a value head (num_labels=1) is added on this causal LM
    dtype: str = "fp32"  # fp32 | bf16
    enable_gradient_checkpointing: bool = True  # recompute activations in backward: less memory, ~30% more compute
    fsdp_config: FSDPEngineConfig = field(default_factory=FSDPEngineConfig)  # FSDP2 sharding (trainer.backend=ray)
    use_remove_padding: bool = False  # no effect: the critic's passes are padded
    tokenizer_path: str | None = None  # no effect: the critic reads the actor's token ids
    external_lib: str | None = None  # a module imported before the model loads (custom architectures)
    trust_remote_code: bool = False  # allow the model directory's own Python code
    # no effect here (the critic's model config loads as saved)
    override_config: dict[str, Any] = field(default_factory=dict)
    use_shm: bool = False  # no effect: the model is read from its directory
    enable_activation_offload: bool = False  # GPU activation offload: not available (true warns)
    # LoRA adapters on the value model (docs/lora.md); its value head trains in full. 0: every weight trains
    lora_rank: int = 0
    lora_alpha: int = 16  # the adapters' scale is lora_alpha / lora_rank
    target_modules: Any = "all-linear"  # all-linear, or a list / comma-separated module names
    exclude_modules: Any = None  # modules left without adapters
    # tiled MLP: not implemented (enabled=true warns; the plain MLP runs, same math)
    tiled_mlp: dict[str, Any] = field(default_factory=lambda: {"enabled": False, "num_shards": 4})


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
    override_config: dict[str, Any] = field(default_factory=dict)  # no effect: the RM's model config loads as saved
    use_shm: bool = False  # no effect: the model is read from its directory
    use_fused_kernels: bool = False  # no effect: the RM runs the model's own ops
