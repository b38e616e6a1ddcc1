"""Pre-tokenized prompt batches from a JSONL file, for ``trainer.train_step(batch)`` (docs/python_api.md).

    from verl.data import make_pretokenized_dataloader

    loader = make_pretokenized_dataloader(file_path="data.jsonl", tokenizer_name_or_path=model_dir,
                                          batch_size=4, seq_len=512)
    for batch in loader:          # DataProto batches, as the controller's own prompt loader yields them
        trainer.train_step(batch)

Each line is a JSON object with a ``prompt``: a string (one user turn) or a chat message list
(``[{"role": "user", "content": ...}]``). Optional fields feed the reward: ``data_source`` and ``ground_truth`` (or a
verl-style ``reward_model: {"ground_truth": ...}``), and ``extra_info``. Every prompt is rendered with the
tokenizer's chat template (with the generation prompt) and tokenized once, when the loader is built; batches are
left-padded (decoder-only generation appends on the right). A line that is not JSON, has no ``prompt``, or is longer
than ``seq_len`` tokens raises ``ValueError`` naming the file and line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from verl.protocol import DataProto


def _prompt_messages(prompt: Any, where: str) -> list[dict[str, str]]:
    if isinstance(prompt, str) and prompt:
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list) and prompt:
        if all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in prompt
        ):
            return [{"role": m["role"], "content": m["content"]} for m in prompt]
    raise ValueError(f"{where}: 'prompt' must be a non-empty string or a list of {{role, content}} messages")


def tokenize_prompts(
    records: Sequence[dict[str, Any]],
    tokenizer: Any,
    seq_len: int,
    truncation: str = "error",
    where: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Render and tokenize each record's ``prompt``; the items are what :func:`collate_prompts` batches."""
    from verl.utils.dataset.parquet import render_prompt

    if truncation not in ("error", "left", "right"):
        raise ValueError(f"truncation={truncation!r}: use error, left or right")
    items = []
    for i, rec in enumerate(records):
        loc = where[i] if i < len(where) else f"prompt {i}"
        if not isinstance(rec, dict) or "prompt" not in rec:
            raise ValueError(f'{loc}: no \'prompt\' field (each line needs {{"prompt": "..."}})')
        text = render_prompt(tokenizer, _prompt_messages(rec["prompt"], loc), loc)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > seq_len:
            if truncation == "error":
                raise ValueError(
                    f"{loc}: the prompt has {len(ids)} tokens, more than seq_len={seq_len}; raise seq_len or pass "
                    "truncation='left' (keep the end) or 'right'"
                )
            ids = ids[-seq_len:] if truncation == "left" else ids[:seq_len]
        rm = rec.get("reward_model") if isinstance(rec.get("reward_model"), dict) else {}
        if "ground_truth" in rec:
            rm = {**rm, "ground_truth": rec["ground_truth"]}
        items.append(
            {
                "input_ids": ids,
                "data_source": rec.get("data_source", "unknown"),
                "reward_model": rm,
                "extra_info": rec.get("extra_info") or {},
                "index": i,
            }
        )
    return items


def read_jsonl(file_path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The file's records and, for error messages, ``"<file>, line <n>"`` for each (blank lines skipped)."""
    path = os.path.expanduser(file_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data file {file_path!r} does not exist")
    records, where = [], []
    with open(path, encoding="utf-8-sig") as f:  # a UTF-8 BOM (Windows editors) is not part of line 1
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{file_path}, line {n}: not valid JSON ({e.msg})") from None
            where.append(f"{file_path}, line {n}")
    if not records:
        raise ValueError(f"{file_path}: no JSON lines")
    return records, where


class DataLoader:
    """Batches of pre-tokenized prompts (``DataProto``: ``input_ids``, ``attention_mask``, ``position_ids`` and the
    non-tensors ``data_source``, ``reward_model``, ``extra_info``, ``index``), in file order unless ``shuffle``.

    Iterating yields one epoch; ``shuffle`` draws a new order per epoch from ``seed + epoch``. ``drop_last=False``
    keeps a short last batch. ``len()`` is the number of batches per epoch.
    """

    def __init__(
        self,
        items: list[dict[str, Any]],
        batch_size: int,
        pad_token_id: int,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int = 0,
        tokenizer_name_or_path: str | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        if not items:
            raise ValueError("DataLoader: no prompts")
        self.items, self.batch_size, self.pad_token_id = items, batch_size, pad_token_id
        self.shuffle, self.drop_last, self.seed = shuffle, drop_last, seed
        self.tokenizer_name_or_path = tokenizer_name_or_path
        self.epoch = 0

    def __len__(self) -> int:
        from verl.utils.dataset.rl_dataset import num_batches

        return num_batches(len(self.items), self.batch_size, self.drop_last)

    def __iter__(self) -> Iterator[DataProto]:
        from verl.utils.dataset.rl_dataset import collate_prompts, epoch_order

        order = epoch_order(len(self.items), self.shuffle, self.seed, self.epoch)
        self.epoch += 1
        for b in range(len(self)):
            idx = order[b * self.batch_size : (b + 1) * self.batch_size]
            batch = collate_prompts([self.items[int(i)] for i in idx], self.pad_token_id)
            batch.meta_info["tokenizer_name_or_path"] = self.tokenizer_name_or_path
            yield batch


def make_pretokenized_dataloader(
    file_path: str,
    tokenizer_name_or_path: str,
    batch_size: int = 4,
    seq_len: int = 512,
    shuffle: bool = False,
    drop_last: bool = False,
    seed: int = 0,
    truncation: str = "error",
) -> DataLoader:
    """Read ``file_path`` (JSONL, a ``prompt`` per line), tokenize every prompt with the chat template of
    ``tokenizer_name_or_path`` (a local HF directory or ``builtin://`` model; use the policy's), and return a
    :class:`DataLoader` of left-padded ``DataProto`` batches of ``batch_size`` prompts. ``seq_len`` is the longest
    prompt allowed, in tokens (``truncation``: ``error`` names the line, ``left``/``right`` cut it)."""
    from verl.utils.model import load_tokenizer

    records, where = read_jsonl(file_path)
    tokenizer = load_tokenizer(tokenizer_name_or_path)
    items = tokenize_prompts(records, tokenizer, seq_len, truncation, where)
    return DataLoader(items, batch_size, tokenizer.pad_token_id, shuffle, drop_last, seed, str(tokenizer_name_or_path))
