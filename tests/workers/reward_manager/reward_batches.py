"""A scored-batch builder shared by the reward-manager tests: real tokenizer, real DataProto."""

import numpy as np
import torch

from verl.protocol import DataProto
from verl.utils.model import load_tokenizer

MODEL = "builtin://tiny-qwen2-arith-sft"


def tokenizer():
    return load_tokenizer(MODEL)


def make_batch(tok, texts, truths, source="arithmetic", width=None):
    """Responses ``texts`` (right-padded, ``attention_mask`` prompt side of 2 tokens) with ``reward_model``
    ground truths and one ``data_source``."""
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = width or max(len(i) for i in ids) + 1
    responses = torch.full((len(texts), width), tok.pad_token_id)
    mask = torch.zeros(len(texts), width, dtype=torch.long)
    for row, seq in enumerate(ids):
        responses[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    prompts = torch.full((len(texts), 2), tok.pad_token_id)
    return DataProto.from_dict(
        {
            "prompts": prompts,
            "responses": responses,
            "attention_mask": torch.cat([torch.ones(len(texts), 2, dtype=torch.long), mask], dim=1),
        },
        non_tensors={
            "data_source": np.array([source] * len(texts), dtype=object),
            "reward_model": np.array([{"ground_truth": t} for t in truths], dtype=object),
        },
    )
