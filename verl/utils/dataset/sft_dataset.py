"""Prompt/response pairs for supervised fine-tuning; the loss sees response tokens only."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from verl.utils.dataset.parquet import get_nested, prompt_to_messages, read_parquet_rows, render_prompt

TRUNCATION_MODES = ("error", "left", "right")


class SFTDataset(torch.utils.data.Dataset):
    """Tokenizes every row once: ``input_ids`` = prompt (chat template) + response + EOS, ``loss_mask`` on the response.

    ``truncation`` decides rows longer than ``max_length``: ``error`` (say which row and how to fix), ``left`` (drop the
    prompt's first tokens) or ``right`` (drop the response's last tokens).
    """

    def __init__(
        self,
        parquet_files: str | Sequence[str],
        tokenizer,
        prompt_key: str = "prompt",
        response_key: str = "extra_info.answer",
        max_length: int = 256,
        truncation: str = "error",
    ):
        if truncation not in TRUNCATION_MODES:
            raise ValueError(f"data.truncation={truncation!r}: use one of {TRUNCATION_MODES}")
        self.examples: list[tuple[list[int], int]] = []  # (token ids, prompt length)
        self.num_truncated = 0
        eos = tokenizer.eos_token or ""
        for row in read_parquet_rows(parquet_files, required_columns=[prompt_key, response_key]):
            prompt = render_prompt(tokenizer, prompt_to_messages(get_nested(row, prompt_key), row), row.where)
            response = get_nested(row, response_key)
            if not isinstance(response, str):
                raise ValueError(f"{row.where}: response at {response_key!r} must be a string, got {response!r}")
            p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            r_ids = tokenizer(response + eos, add_special_tokens=False)["input_ids"]
            if len(p_ids) + len(r_ids) > max_length:
                if truncation == "error":
                    raise ValueError(
                        f"{row.where}: {len(p_ids) + len(r_ids)} tokens exceed data.max_length={max_length}. "
                        "Raise data.max_length, or set data.truncation=left|right."
                    )
                self.num_truncated += 1
                if truncation == "left":
                    p_ids = p_ids[max(0, len(p_ids) + len(r_ids) - max_length) :]
                r_ids = r_ids[: max_length - len(p_ids)]
                if not r_ids:
                    raise ValueError(f"{row.where}: the prompt alone fills data.max_length={max_length}.")
            self.examples.append((p_ids + r_ids, len(p_ids)))
        self.pad_token_id = tokenizer.pad_token_id

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> tuple[list[int], int]:
        return self.examples[i]

    def collate(self, items: list[tuple[list[int], int]]) -> dict[str, torch.Tensor]:
        """Right-pad to the longest sequence in the batch (not to max_length: less compute on short data)."""
        width = max(len(ids) for ids, _ in items)
        input_ids = torch.full((len(items), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(items), width), dtype=torch.long)
        loss_mask = torch.zeros((len(items), width), dtype=torch.long)
        for b, (ids, prompt_len) in enumerate(items):
            input_ids[b, : len(ids)] = torch.tensor(ids)
            attention_mask[b, : len(ids)] = 1
            loss_mask[b, prompt_len : len(ids)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask, "loss_mask": loss_mask}
