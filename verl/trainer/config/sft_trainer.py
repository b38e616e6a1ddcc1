"""The schema of the SFT job (``python -m verl.trainer.main_sft``; docs/sft.md). verl's SFT keys that change nothing
here are accepted so that ported scripts run (docs/sft.md, "Porting a verl SFT script")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig
from verl.trainer.config.config import CheckpointConfig, ModuleConfig

__all__ = ["SFTDataConfig", "SFTModelConfig", "SFTOptimConfig", "SFTTrainerConfig", "SFTTrainerSection"]


@dataclass
class MultiturnSFTConfig(BaseConfig):
    """verl's multi-turn SFT data: whole conversations, loss on the assistant's tokens only (docs/sft.md)."""

    enable: bool = False  # train on conversations (MultiTurnSFTDataset) instead of prompt/response pairs
    messages_key: str = "messages"  # the column of message lists (role, content, tool_calls)
    tools_key: str = "tools"  # the column of OpenAI tool schemas the chat template shows (optional)
    enable_thinking_key: str = "enable_thinking"  # the column of per-row enable_thinking flags (optional)


@dataclass
class SFTDataConfig(BaseConfig):
    """Prompt/response pairs to fine-tune on."""

    # parquet files (concatenated) or builtin:// task specs (the sft_quickstart recipe: builtin://arithmetic/train)
    train_files: list[str] = field(default_factory=lambda: ["~/data/gsm8k/train.parquet"])
    # held-out rows for the accuracy check
    val_files: list[str] = field(default_factory=lambda: ["~/data/gsm8k/test.parquet"])
    prompt_key: str = "question"  # a chat message list (chat template applied) or a plain string
    response_key: str = "answer"  # dotted path into the row; the EOS token is appended
    max_length: int = 1024  # prompt + response tokens
    truncation: str = "error"  # error | left (cut the prompt's start) | right (cut the response's end)
    train_batch_size: int = 256  # sequences per optimizer step
    micro_batch_size_per_gpu: int = 4  # sequences per forward/backward; gradients accumulate up to train_batch_size
    shuffle: bool = True  # reshuffle every epoch (seeded)
    # keys under data.prompt_key leading to the prompt (verl: [question] with prompt_key=extra_info)
    prompt_dict_keys: list[str] | None = None
    response_dict_keys: list[str] | None = None  # keys under data.response_key leading to the response (verl: [answer])
    multiturn: MultiturnSFTConfig = field(default_factory=MultiturnSFTConfig)  # multi-turn SFT
    chat_template: str | None = None  # no effect: the tokenizer's own chat template renders the prompt
    # extra arguments of apply_chat_template (e.g. {enable_thinking: false}); multi-turn SFT only
    apply_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # a custom dataset class: not supported (an error when set)
    custom_cls: ModuleConfig = field(default_factory=ModuleConfig)
    use_shm: bool = False  # no effect


@dataclass
class WrapPolicyConfig(BaseConfig):
    """verl's FSDP auto-wrap policy."""

    min_num_params: int = 0  # no effect


@dataclass
class SFTFSDPConfig(BaseConfig):
    """verl's SFT sharding keys (SFT runs in one process here)."""

    model_dtype: str = "fp32"  # no effect: the model loads in model.dtype
    cpu_offload: bool = False  # no effect
    offload_params: bool = False  # no effect
    wrap_policy: WrapPolicyConfig = field(default_factory=WrapPolicyConfig)  # no effect


@dataclass
class SFTModelConfig(BaseConfig):
    """The model to fine-tune."""

    partial_pretrain: str = "~/models/gemma-1.1-7b-it"  # any local HF model directory, or a builtin:// model
    dtype: str = "fp32"  # fp32 | bf16
    enable_gradient_checkpointing: bool = True  # recompute activations in backward: less memory, more time
    external_lib: str | None = None  # a module imported before the model loads (custom architectures)
    trust_remote_code: bool = False  # allow the model directory's own tokenizer and modelling code
    # LoRA adapters (PEFT; docs/lora.md): > 0 trains rank-r adapters on the frozen model and saves the adapter
    # (PEFT format) at each checkpoint; 0 fine-tunes every weight
    lora_rank: int = 0
    lora_alpha: int = 16  # the adapters' scale is lora_alpha / lora_rank
    target_modules: Any = "all-linear"  # all-linear, or a list / comma-separated module names
    exclude_modules: Any = None  # modules left without adapters
    lora_adapter_path: str | None = None  # a saved PEFT adapter directory to go on training; implies LoRA
    use_liger: bool = False  # Liger GPU kernels: not available here (true warns)
    strategy: str = "fsdp2"  # no effect: SFT runs in one process
    fsdp_config: SFTFSDPConfig = field(default_factory=SFTFSDPConfig)  # no effect: SFT runs in one process


@dataclass
class SFTOptimConfig(BaseConfig):
    """AdamW with warmup and a cosine or constant schedule."""

    lr: float = 1.0e-3  # AdamW learning rate (peak)
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # AdamW betas
    weight_decay: float = 0.01  # AdamW decoupled weight decay
    warmup_steps_ratio: float = 0.05  # linear warmup as a share of the steps
    lr_scheduler: str = "cosine"  # cosine | constant
    min_lr_ratio: float = 0.0  # cosine decays to lr * min_lr_ratio
    clip_grad: float = 1.0  # max global gradient norm


@dataclass
class SFTTrainerSection(BaseConfig):
    """The SFT run: length, validation and checkpoint cadence, loggers, seed."""

    project_name: str = "gsm8k-sft"  # names the run directory
    experiment_name: str = "test"  # names the run directory
    # metrics, config, checkpoints
    default_local_dir: str = "checkpoints/${trainer.project_name}/${trainer.experiment_name}"
    total_epochs: int = 4  # used when total_training_steps is null
    total_training_steps: int | None = None  # overrides total_epochs when set
    test_freq: int = -1  # validate every N steps (-1: only at the end)
    # save a checkpoint every N steps (-1: only at the end): an HF model directory, a PEFT adapter one with LoRA
    save_freq: int = -1
    log_freq: int = 10  # console/file metrics every N steps
    logger: list[str] = field(default_factory=lambda: ["console", "file"])  # console | file | tensorboard
    seed: int = 1  # data order and init: same seed, same run on CPU
    val_generation_max_new_tokens: int = 32  # greedy decoding budget for the held-out accuracy
    val_max_samples: int = -1  # -1: the whole validation set
    val_batch_size: int = 256  # prompts per generation call in the accuracy check
    nnodes: int = 1  # SFT runs in one process: more than one node is an error
    n_gpus_per_node: int = 1  # SFT runs in one process: more than one is an error (torchrun --nproc_per_node=1)
    device: str = "cpu"  # SFT trains on the CPU here (cuda warns and trains on the CPU)
    max_ckpt_to_keep: int | None = None  # no effect: every saved checkpoint is kept
    # no effect: SFT starts from model.partial_pretrain (and model.lora_adapter_path); no SFT resume
    resume_mode: str = "auto"
    resume_from_path: str | None = None  # no effect (no SFT resume)
    # no effect: checkpoints are HF model directories (PEFT adapter directories with LoRA)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)


@dataclass
class SFTTrainerConfig(BaseConfig):
    """Supervised fine-tuning (the warm start for RL)."""

    data: SFTDataConfig = field(default_factory=SFTDataConfig)  # training and held-out pairs
    model: SFTModelConfig = field(default_factory=SFTModelConfig)  # the model
    optim: SFTOptimConfig = field(default_factory=SFTOptimConfig)  # the optimizer
    trainer: SFTTrainerSection = field(default_factory=SFTTrainerSection)  # the run
    ulysses_sequence_parallel_size: int = 1  # Ulysses sequence parallelism: not implemented (> 1 warns)
    use_remove_padding: bool = False  # no effect: SFT passes are padded
    # ours: the named recipe applied under the overrides (verl/trainer/config/recipes/<name>.yaml, or a YAML path);
    # null: sft_quickstart when no model and no data are given (or only builtin:// ones), else none. none: no recipe
    recipe: str | None = None


# The recipe a run gets when it names none and trains a built-in model on built-in data (docs/recipes.md).
DEFAULT_RECIPE = "sft_quickstart"
# The shipped recipes written for this job (recipe=<name>).
RECIPES = ("sft_quickstart",)
# A run that sets one of these to a path of its own is the user's task: verl's defaults, no recipe.
USER_TASK_KEYS = ("model.partial_pretrain", "data.train_files", "data.val_files")

# Keys verl's SFT configs have whose default differs here on purpose, each with the reason (docs/config_reference.md
# shows them; tests/trainer/config/test_sft_verl_defaults.py fails on any other difference). verl's defaults: its
# current SFT job's (the key list verl/trainer/config/verl_sft_trainer_keys.yaml), and for a key only its legacy SFT job
# has (this schema's layout: model.partial_pretrain, data.prompt_key, ...) that job's
# (verl/trainer/config/verl_sft_trainer_legacy_keys.yaml).
SFT_VERL_DEFAULT_EXCEPTIONS: dict[str, str] = {
    "data.val_files": (
        "legacy verl's held-out file: this job always validates (loss and greedy accuracy at the end); the current "
        "trainer's null (no validation) is not supported"
    ),
    "trainer.logger": "console + file (metrics.jsonl, read by the tuner and tools); wandb needs an account",
    "trainer.device": "cpu: SFT trains on the CPU in this version (cuda warns and trains on the CPU)",
}
VERL_DEFAULT_EXCEPTIONS = SFT_VERL_DEFAULT_EXCEPTIONS  # the name every job's schema module gives its exceptions


DERIVED_DEFAULTS: dict[str, str] = {
    "trainer.checkpoint.load_contents": "trainer.checkpoint.save_contents",
}
