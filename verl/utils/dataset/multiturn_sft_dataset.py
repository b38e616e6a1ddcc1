"""verl's multi-turn SFT dataset: whole conversations (with tool calls and tool responses), loss on the assistant only.

Each row holds a message list (``data.multiturn.messages_key``, default ``messages``) and optionally the tool schemas
the template shows (``tools_key``, default ``tools``) and an ``enable_thinking`` flag (``enable_thinking_key``). The
conversation is cut into one token segment per message (:mod:`verl.utils.dataset.chat_segments`); ``loss_mask`` is 1
exactly on the assistant's own tokens (its content, its ``<tool_call>`` text, its end-of-turn token, and whatever the
template writes after that inside its turn) and 0 on system, user and tool tokens and on the generation prompts.

Constructed as verl's: ``MultiTurnSFTDataset(parquet_files, tokenizer, config)`` with ``config`` the ``data``
section (or a dict: ``max_length``, ``truncation``, ``pad_mode``, ``multiturn: {messages_key, tools_key,
enable_thinking_key}``, ``apply_chat_template_kwargs``, ``ignore_input_ids_mismatch``); an item is verl's dict of
``input_ids``, ``attention_mask``, ``position_ids``, ``loss_mask`` (right-padded to ``max_length``, or unpadded with
``pad_mode="no_padding"``). Differences from verl: every row is tokenized once, up front, so a bad row fails at
load naming its file and row; ``truncation="error"`` names the row too; :meth:`collate` pads a batch to its longest
row only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from verl.utils.dataset.chat_segments import check_ids, check_messages, drop_nulls, tokenize_conversation
from verl.utils.dataset.parquet import read_parquet_rows

logger = logging.getLogger(__name__)

PAD_MODES = ("right", "no_padding")
TRUNCATION_MODES = ("error", "left", "right")


def _option(config: Any, key: str, default: Any) -> Any:
    """``config.multiturn.<key>`` (verl's YAML), else ``config.<key>`` (verl's dataset reads it there), else default."""
    multiturn = _get(config, "multiturn", None)
    value = _get(multiturn, key, None) if multiturn is not None else None
    return value if value is not None else _get(config, key, default)


def _get(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    value = config.get(key, default) if isinstance(config, Mapping) or hasattr(config, "get") else default
    return default if value is None else value


class MultiTurnSFTDataset(torch.utils.data.Dataset):
    """Tokenized conversations with an assistant-only loss mask; see the module docstring."""

    def __init__(
        self,
        parquet_files: str | Sequence[str],
        tokenizer,
        config: Any = None,
        processor: Any = None,
        max_samples: int = -1,
    ):
        if processor is not None:
            raise ValueError("MultiTurnSFTDataset: images and videos (a processor) are not supported in this version")
        self.tokenizer = tokenizer
        self.max_length = int(_get(config, "max_length", 1024))
        self.truncation = _get(config, "truncation", "error")
        self.pad_mode = _get(config, "pad_mode", "right")
        if self.truncation not in TRUNCATION_MODES:
            raise ValueError(f"data.truncation={self.truncation!r}: use one of {TRUNCATION_MODES}")
        if self.pad_mode not in PAD_MODES:
            raise ValueError(f"data.pad_mode={self.pad_mode!r}: use one of {PAD_MODES}")
        self.messages_key = _option(config, "messages_key", "messages")
        self.tools_key = _option(config, "tools_key", "tools")
        self.enable_thinking_key = _option(config, "enable_thinking_key", "enable_thinking")
        self.template_kwargs = dict(_get(config, "apply_chat_template_kwargs", {}))
        self.ignore_input_ids_mismatch = bool(_get(config, "ignore_input_ids_mismatch", False))
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

        rows = read_parquet_rows(parquet_files, required_columns=[self.messages_key])
        rows = _select(rows, max_samples, bool(_get(config, "shuffle", False)), _get(config, "seed", None))
        self.examples: list[tuple[list[int], list[int]]] = []  # (token ids, loss mask)
        self.num_truncated = 0
        for row in rows:
            self.examples.append(self._tokenize(row))

    def _tokenize(self, row) -> tuple[list[int], list[int]]:
        messages = check_messages(row.data.get(self.messages_key), row.where)
        tools = drop_nulls(row.data.get(self.tools_key)) or None
        kwargs = dict(self.template_kwargs)
        if row.data.get(self.enable_thinking_key) is not None:
            kwargs["enable_thinking"] = bool(row.data[self.enable_thinking_key])
        segments = tokenize_conversation(self.tokenizer, messages, tools, row.where, **kwargs)
        if not check_ids(self.tokenizer, segments, messages, tools, **kwargs):
            problem = (
                f"{row.where}: the ids of the conversation tokenized message by message differ from one tokenization "
                "of its whole text (a merge across a turn boundary)"
            )
            if not self.ignore_input_ids_mismatch:
                raise ValueError(problem + "; set data.ignore_input_ids_mismatch=true to train on the per-message ids")
            logger.warning("%s; training on the per-message ids", problem)
        ids = [t for s in segments for t in s.ids]
        mask = [m for s in segments for m in s.loss_mask]
        if len(ids) > self.max_length:
            if self.truncation == "error":
                raise ValueError(
                    f"{row.where}: {len(ids)} tokens exceed data.max_length={self.max_length}. "
                    "Raise data.max_length, or set data.truncation=left|right."
                )
            self.num_truncated += 1
            cut = slice(len(ids) - self.max_length, None) if self.truncation == "left" else slice(self.max_length)
            ids, mask = ids[cut], mask[cut]
            if not any(mask):
                raise ValueError(
                    f"{row.where}: after {self.truncation} truncation to data.max_length={self.max_length} no "
                    "assistant token is left; raise data.max_length"
                )
        return ids, mask

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids, mask = self.examples[i]
        n = len(ids)
        width = n if self.pad_mode == "no_padding" else self.max_length
        item = {
            "input_ids": torch.full((width,), self.pad_token_id, dtype=torch.long),
            "attention_mask": torch.zeros(width, dtype=torch.long),
            "position_ids": torch.zeros(width, dtype=torch.long),
            "loss_mask": torch.zeros(width, dtype=torch.long),
        }
        item["input_ids"][:n] = torch.tensor(ids, dtype=torch.long)
        item["attention_mask"][:n] = 1
        item["position_ids"][:n] = torch.arange(n)
        item["loss_mask"][:n] = torch.tensor(mask, dtype=torch.long)
        if self.pad_mode == "no_padding":
            del item["attention_mask"]
        return item

    def collate(self, items: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """Right-pad to the longest row of the batch (``input_ids``, ``attention_mask``, ``loss_mask``), as
        :meth:`verl.utils.dataset.sft_dataset.SFTDataset.collate` does."""
        lengths = [int(it["attention_mask"].sum()) if "attention_mask" in it else len(it["input_ids"]) for it in items]
        width = max(lengths)
        batch = {
            "input_ids": torch.full((len(items), width), self.pad_token_id, dtype=torch.long),
            "attention_mask": torch.zeros((len(items), width), dtype=torch.long),
            "loss_mask": torch.zeros((len(items), width), dtype=torch.long),
        }
        for b, (item, n) in enumerate(zip(items, lengths)):
            batch["input_ids"][b, :n] = item["input_ids"][:n]
            batch["attention_mask"][b, :n] = 1
            batch["loss_mask"][b, :n] = item["loss_mask"][:n]
        return batch


def _select(rows: list, max_samples: int, shuffle: bool, seed: int | None) -> list:
    """verl's ``max_samples``: the first N rows, or N drawn without replacement (numpy, ``seed``) when shuffling."""
    if max_samples is None or max_samples <= 0 or max_samples >= len(rows):
        return rows
    if shuffle:
        rng = np.random.default_rng(*(() if seed is None else (seed,)))
        return [rows[i] for i in rng.choice(len(rows), size=max_samples, replace=False)]
    return rows[:max_samples]
