"""The ``data`` section of RL jobs: prompt files, lengths, batch sizes and order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig

__all__ = ["DataSamplerConfig", "ModuleConfig", "RLDataConfig"]


@dataclass
class ModuleConfig(BaseConfig):
    """A class or function in a Python file (verl's custom dataset / custom reward hooks)."""

    path: str | None = None  # a Python file
    name: str | None = None  # the class or function in it


@dataclass
class DataSamplerConfig(BaseConfig):
    """A custom (curriculum) sampler of the training prompts."""

    class_path: str | None = None  # a Python file: custom samplers are not supported (a value is an error)
    class_name: str | None = None  # the sampler class in it


@dataclass
class RLDataConfig(BaseConfig):
    """Prompts to train and validate on. ``train_batch_size`` counts prompts; each gets ``rollout.n`` responses."""

    # defaults to the actor model's tokenizer
    tokenizer: str | None = field(default=None, metadata={"api": ("model.tokenizer_name_or_path",)})
    # parquet/JSONL files (verl's columns) or builtin://<task>/<split>
    train_files: list[str] = field(
        default_factory=lambda: ["~/data/rlhf/gsm8k/train.parquet"], metadata={"api": ("DataConfig.train_files",)}
    )
    # validation prompts, scored by the same reward function
    val_files: list[str] = field(
        default_factory=lambda: ["~/data/rlhf/gsm8k/test.parquet"], metadata={"api": ("DataConfig.val_files",)}
    )
    prompt_key: str = "prompt"  # column holding the chat messages (or a plain string)
    reward_fn_key: str = "data_source"  # column that picks each row's rule scorer
    # longer prompts are filtered or truncated (data.truncation)
    max_prompt_length: int = field(default=512, metadata={"api": ("DataConfig.max_prompt_length",)})
    # tokens sampled per response at most
    max_response_length: int = field(
        default=512, metadata={"api": ("DataConfig.max_response_length", "train.max_response_length")}
    )
    # prompts per step
    train_batch_size: int = field(default=1024, metadata={"api": ("DataConfig.rollout_batch_size", "train.batch_size")})
    # null: the whole validation set in one generation call
    val_batch_size: int | None = field(default=None, metadata={"api": ("DataConfig.val_batch_size",)})
    filter_overlong_prompts: bool = False  # drop prompts longer than max_prompt_length (count logged)
    truncation: str = "error"  # when not filtered: error | left | right
    # reshuffle the training prompts every epoch (seeded)
    shuffle: bool = field(default=True, metadata={"api": ("DataConfig.shuffle",)})
    # data order seed; null: trainer.seed
    seed: int | None = field(default=None, metadata={"api": ("DataConfig.seed",)})
    # keep each prompt's messages in the batch (raw_prompt): a reward model's chat template reads them
    return_raw_chat: bool = True
    # > 0: train on that many rows (a seeded random subset when data.shuffle, else the first)
    train_max_samples: int = -1
    val_max_samples: int = -1  # > 0: validate on that many rows (chosen as train_max_samples)
    validation_shuffle: bool = False  # no effect: validation runs the rows in file order
    dataloader_num_workers: int = 8  # no effect: prompts are tokenized once, up front
    return_full_prompt: bool = False  # no effect: the prompt text is not carried in the batch
    image_key: str = "images"  # no effect: text-only models (a multimodal column is ignored)
    video_key: str = "videos"  # no effect: text-only models
    # a custom dataset class: not supported (an error when set)
    custom_cls: ModuleConfig = field(default_factory=ModuleConfig)
    use_shm: bool = False  # no effect: data files are read where they are (no copy to /dev/shm)
    tool_config_path: str | None = None  # (derived) multi-turn only: follows rollout.multi_turn.tool_config_path
    return_raw_input_ids: bool = False  # no effect: a reward model re-tokenizes the decoded text with its tokenizer
    image_patch_size: int = 14  # no effect: text-only models
    filter_overlong_prompts_workers: int = 1  # no effect: prompts are tokenized once, in one process
    trust_remote_code: bool = False  # no effect: the tokenizer loads with actor_rollout_ref.model.trust_remote_code
    return_multi_modal_inputs: bool = True  # no effect: text-only models
    sampler: DataSamplerConfig = field(default_factory=DataSamplerConfig)  # a custom prompt sampler (not supported)
    # a class generating training data during the run: not supported (a path is an error)
    datagen: ModuleConfig = field(default_factory=ModuleConfig)
    # keyword arguments for the chat template (e.g. enable_thinking): not passed in this version (a value is an error:
    # the prompts would differ)
    apply_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
