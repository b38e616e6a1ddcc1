"""Shared by the rollout tests: left-padded chat prompts as the controller builds them."""

from __future__ import annotations

import numpy as np
import torch

from verl.protocol import DataProto


def make_prompts(tokenizer, questions, meta_info=None) -> DataProto:
    """``questions`` as chat-template prompts, left-padded, with ``position_ids`` counting real tokens only."""
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
        for q in questions
    ]
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert tokenizer.padding_side == "left"
    mask = enc["attention_mask"]
    position_ids = torch.clamp(mask.cumsum(-1) - 1, min=0)
    return DataProto.from_dict(
        {"input_ids": enc["input_ids"], "attention_mask": mask, "position_ids": position_ids},
        non_tensors={"index": np.arange(len(questions)), "question": list(questions)},
        meta_info=dict(meta_info or {}),
    )
