"""Prompts for RL: verl-format parquet rows tokenized with the chat template, batched as DataProto."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto, to_object_array
from verl.utils.config import as_section
from verl.utils.dataset.data_config import RLDataConfig
from verl.utils.dataset.parquet import get_nested, prompt_to_messages, read_parquet_rows, render_prompt
from verl.utils.ppo_config import runs_agent_loop

logger = logging.getLogger(__name__)

NON_TENSOR_KEYS = ("data_source", "reward_model", "extra_info", "ability")


class RLHFDataset(torch.utils.data.Dataset):
    """Tokenized prompts plus the row fields the reward needs.

    Each item carries ``data_source``, ``reward_model``, ``extra_info``, ``ability`` and the ``reward_fn_key`` column
    (``data.reward_fn_key``: the column that picks each row's scorer, when it is another one), the chat messages as
    ``raw_prompt`` with ``return_raw_chat``, and ``agent_name`` when the row has one (the agent loop it runs).

    verl's construction ``RLHFDataset(data_files=, tokenizer=, config=<data section>, processor=, max_samples=)``
    reads the settings below from the ``data`` section (`RLDataConfig`; a dict or untyped ``DictConfig`` is converted
    to one, its missing keys taking the schema's defaults) instead of the keyword arguments.

    ``max_samples`` > 0 keeps that many rows (verl's ``data.train_max_samples`` / ``val_max_samples``): the first ones,
    or a random subset drawn with ``sample_seed`` when given.

    Prompts longer than ``max_prompt_length`` are dropped when ``filter_overlong_prompts`` (the count is kept in
    ``num_filtered``), else cut per ``truncation``: ``error`` names the row, ``left`` keeps the prompt's end,
    ``right`` its start.
    """

    def __init__(
        self,
        data_files: str | Sequence[str],
        tokenizer,
        prompt_key: str = "prompt",
        max_prompt_length: int = 512,
        filter_overlong_prompts: bool = True,
        truncation: str = "error",
        return_raw_chat: bool = False,
        reward_fn_key: str = "data_source",
        max_samples: int = -1,
        sample_seed: int | None = None,
        *,
        config: Any = None,
        processor: Any = None,
    ):
        if config is None and not isinstance(prompt_key, str):  # verl's positional (data_files, tokenizer, config)
            config, prompt_key = prompt_key, "prompt"
        if config is not None:  # verl's construction: the settings come from the data section, typed once
            data = as_section(config, RLDataConfig)  # a dict's missing keys: the schema's defaults
            prompt_key, max_prompt_length, truncation = data.prompt_key, data.max_prompt_length, data.truncation
            filter_overlong_prompts, return_raw_chat = data.filter_overlong_prompts, data.return_raw_chat
            reward_fn_key = data.reward_fn_key
            if data.shuffle and sample_seed is None:
                sample_seed = data.seed
        self.processor = processor  # multimodal processors are not used: prompts are text
        if truncation not in ("error", "left", "right"):
            raise ValueError(f"data.truncation={truncation!r}: use error, left or right")
        self.items: list[dict[str, Any]] = []
        self.num_filtered = 0
        self.num_truncated = 0
        rows = read_parquet_rows(data_files, required_columns=[prompt_key])
        if 0 < max_samples < len(rows):  # verl's data.train_max_samples / val_max_samples
            if sample_seed is None:
                rows = rows[:max_samples]
            else:  # a seeded random subset, kept in file order
                picked = np.random.default_rng(sample_seed).choice(len(rows), size=max_samples, replace=False)
                rows = [rows[i] for i in sorted(picked.tolist())]
        for row in rows:
            messages = prompt_to_messages(get_nested(row, prompt_key), row)
            ids = tokenizer(render_prompt(tokenizer, messages, row.where), add_special_tokens=False)["input_ids"]
            if len(ids) > max_prompt_length:
                if filter_overlong_prompts:
                    self.num_filtered += 1
                    continue
                if truncation == "error":
                    raise ValueError(
                        f"{row.where}: the prompt has {len(ids)} tokens, more than data.max_prompt_length="
                        f"{max_prompt_length}. Raise it, set data.filter_overlong_prompts=true, or data.truncation=left|right."
                    )
                ids = ids[-max_prompt_length:] if truncation == "left" else ids[:max_prompt_length]
                self.num_truncated += 1
            item = {"input_ids": ids, "index": len(self.items)}
            for key in (*NON_TENSOR_KEYS, reward_fn_key) if reward_fn_key not in NON_TENSOR_KEYS else NON_TENSOR_KEYS:
                item[key] = row.data.get(key)
            if item["reward_model"] is None:
                item["reward_model"] = {}
            if return_raw_chat:
                item["raw_prompt"] = messages
            if row.data.get("agent_name") is not None:  # the agent loop this row runs (rollout.mode=async)
                item["agent_name"] = str(row.data["agent_name"])
            self.items.append(item)
        if self.num_filtered:
            logger.warning("filtered %d prompts longer than %d tokens", self.num_filtered, max_prompt_length)
        if not self.items:
            raise ValueError(f"no usable prompts in {data_files} (filtered {self.num_filtered} as too long)")

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.items[i]


def collate_prompts(items: Sequence[dict[str, Any]], pad_token_id: int) -> DataProto:
    """Left-pad prompts to the batch's longest (decoder-only generation appends on the right)."""
    width = max(len(it["input_ids"]) for it in items)
    input_ids = torch.full((len(items), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(items), width), dtype=torch.long)
    for b, it in enumerate(items):
        n = len(it["input_ids"])
        input_ids[b, width - n :] = torch.tensor(it["input_ids"])
        attention_mask[b, width - n :] = 1
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    keys = dict.fromkeys(k for it in items for k in it if k != "input_ids")  # a column some rows lack: None there
    non_tensors = {k: [it.get(k) for it in items] for k in keys}
    return DataProto.from_dict(
        {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids}, non_tensors
    )


def epoch_order(n: int, shuffle: bool, seed: int, epoch: int) -> np.ndarray:
    """The row order of one epoch: file order, or a permutation drawn from ``seed + epoch`` (so a resumed run, or a
    second loader with the same seed, sees exactly the same batches)."""
    return np.random.default_rng(seed + epoch).permutation(n) if shuffle else np.arange(n)


def num_batches(n: int, batch_size: int, drop_last: bool) -> int:
    return n // batch_size if drop_last else -(-n // batch_size)


class PromptLoader:
    """Shuffled batches of prompts with a resumable position: ``state_dict()`` / ``load_state_dict()``.

    Epoch ``e``'s order is a permutation drawn from ``seed + e``, so a resumed run sees exactly the batches an
    uninterrupted run would have.
    """

    def __init__(
        self,
        dataset: RLHFDataset,
        batch_size: int,
        pad_token_id: int,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = True,
    ):
        if batch_size > len(dataset):
            raise ValueError(f"data.train_batch_size={batch_size} is larger than the dataset ({len(dataset)} prompts)")
        self.dataset, self.batch_size, self.pad_token_id = dataset, batch_size, pad_token_id
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch, self.batch_idx = 0, 0

    def __len__(self) -> int:
        return num_batches(len(self.dataset), self.batch_size, self.drop_last)

    def next_batch(self) -> DataProto:
        """The next batch, moving to the next epoch when this one is used up."""
        if self.batch_idx >= len(self):
            self.epoch, self.batch_idx = self.epoch + 1, 0
        order = epoch_order(len(self.dataset), self.shuffle, self.seed, self.epoch)
        idx = order[self.batch_idx * self.batch_size : (self.batch_idx + 1) * self.batch_size]
        self.batch_idx += 1
        return collate_prompts([self.dataset[int(i)] for i in idx], self.pad_token_id)

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "batch_idx": self.batch_idx}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.batch_idx = int(state["epoch"]), int(state["batch_idx"])


def collate_fn(data_list: list[dict]) -> dict[str, Any]:
    """verl's collation of dataset items: tensors stacked into (batch_size, ...) tensors, every other value into a
    1-D object array of length batch_size (a list or dict per row stays one element)."""
    keys = dict.fromkeys(k for item in data_list for k in item)
    out: dict[str, Any] = {}
    for key in keys:
        values = [item[key] for item in data_list]
        out[key] = torch.stack(values) if isinstance(values[0], torch.Tensor) else to_object_array(values)
    return out


def build_dataset(config: Any, files: Any, tokenizer: Any, key: str = "data.train_files") -> RLHFDataset:
    """The prompts of ``files`` (the value of config key ``key``, named in errors) under a whole job config: its
    ``data`` section, with ``trainer.seed`` seeding a ``*_max_samples`` subset when ``data.seed`` is null."""
    d = config.data
    if not files:
        raise ValueError(
            f"{key} is empty: give parquet files or builtin:// specs, e.g. {key}=[builtin://arithmetic/train]"
        )
    try:
        return RLHFDataset(
            files,
            tokenizer,
            d.prompt_key,
            d.max_prompt_length,
            d.filter_overlong_prompts,
            d.truncation,
            d.return_raw_chat or runs_agent_loop(config),  # agent loops render the rows' messages
            reward_fn_key=d.reward_fn_key,
            max_samples=d.val_max_samples if key == "data.val_files" else d.train_max_samples,
            # verl draws the subset at random when the data is shuffled, else takes the first rows
            sample_seed=(d.seed if d.seed is not None else config.trainer.seed) if d.shuffle else None,
        )
    except ValueError as e:
        if str(e).startswith("no usable prompts"):
            raise ValueError(f"{key}: {e}") from None
        raise


def total_training_steps(config: Any, dataset_len: int) -> int:
    """The run's length: ``trainer.total_training_steps``, else ``total_epochs`` passes over the prompts."""
    if config.trainer.total_training_steps:
        return int(config.trainer.total_training_steps)
    return max(1, dataset_len // config.data.train_batch_size) * config.trainer.total_epochs


def copy_prompts(prompts: DataProto) -> DataProto:
    """A shallow copy (shared tensors) of a caller's prompt batch: a training step's in-place edits never reach it."""
    batch = None if prompts.batch is None else prompts.batch.copy()  # a TensorDict's copy is shallow
    return DataProto(batch, dict(prompts.non_tensor_batch), dict(prompts.meta_info))
