"""The ``data`` section of RL jobs: prompt files, lengths, batch sizes and order."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig
from verl.trainer.config.config import ModuleConfig

__all__ = ["RLDataConfig"]


@dataclass
class RLDataConfig(BaseConfig):
    """Prompts to train and validate on. ``train_batch_size`` counts prompts; each gets ``rollout.n`` responses."""

    tokenizer: str | None = None  # defaults to the actor model's tokenizer
    # parquet/JSONL files (verl's columns) or builtin://<task>/<split>
    train_files: list[str] = field(default_factory=lambda: ["builtin://arithmetic/train"])
    # validation prompts, scored by the same reward function
    val_files: list[str] = field(default_factory=lambda: ["builtin://arithmetic/test"])
    prompt_key: str = "prompt"  # column holding the chat messages (or a plain string)
    reward_fn_key: str = "data_source"  # column that picks each row's rule scorer
    max_prompt_length: int = 64  # longer prompts are filtered or truncated (data.truncation)
    max_response_length: int = 32  # tokens sampled per response at most
    train_batch_size: int = 64  # prompts per step
    val_batch_size: int | None = None  # null: the whole validation set in one generation call
    filter_overlong_prompts: bool = True  # drop prompts longer than max_prompt_length (count logged)
    truncation: str = "error"  # when not filtered: error | left | right
    shuffle: bool = True  # reshuffle the training prompts every epoch (seeded)
    seed: int | None = None  # data order seed; null: trainer.seed
    # keep each prompt's messages in the batch (raw_prompt): a reward model's chat template reads them
    return_raw_chat: bool = False
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
