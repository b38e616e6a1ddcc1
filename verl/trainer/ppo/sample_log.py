"""Samples written to disk as JSON lines, for reading what the policy generates.

- ``trainer.rollout_data_dir`` / ``validation_data_dir`` (verl's keys): every training / validation sample of step N
  (input, output, score, step, the reward function's extra fields, and for an agent-loop trajectory its
  ``num_turns``, ``finish_reason``, ``num_tool_calls`` and ``tool_errors``) in ``<dir>/N.jsonl``;
- ``trainer.log_val_generations``: the first N validation samples of each validation, appended to
  ``<default_local_dir>/val_generations.jsonl``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto


def generation_samples(batch: DataProto, reward_tensor: torch.Tensor, tokenizer, limit: int) -> list[dict]:
    """Up to ``limit`` rows of a scored batch as ``{input, output, score}`` text (the output of a multi-turn trajectory
    is its whole transcript: the model's turns and the tool/user turns between them)."""
    if limit <= 0:
        return []
    b = batch.batch
    prompt_mask = b["attention_mask"][:, : b["prompts"].shape[1]].bool()
    response_side = b["attention_mask"][:, b["prompts"].shape[1] :].bool()  # multi-turn: tool/user turns too
    decode = tokenizer.decode
    return [
        {
            "input": decode(b["prompts"][i][prompt_mask[i]], skip_special_tokens=True),
            "output": decode(b["responses"][i][response_side[i]], skip_special_tokens=True),
            "score": float(reward_tensor[i].sum()),
        }
        for i in range(min(limit, len(batch)))
    ]


def dump_generations(batch: DataProto, folder: str | None, step: int, tokenizer, append: bool = False) -> None:
    """Every sample of ``batch`` (scored: ``token_level_scores``) as a JSON line in ``<folder>/<step>.jsonl``;
    nothing when ``folder`` is unset."""
    if not folder:
        return
    folder = os.path.expanduser(folder)
    os.makedirs(folder, exist_ok=True)
    samples = generation_samples(batch, batch.batch["token_level_scores"], tokenizer, limit=len(batch))
    extra_keys = [k for k in batch.meta_info.get("reward_extra_keys", []) if k in batch.non_tensor_batch]
    with open(os.path.join(folder, f"{step}.jsonl"), "a" if append else "w") as f:
        for i, sample in enumerate(samples):
            extra = {k: json_value(batch.non_tensor_batch[k][i]) for k in extra_keys}
            f.write(json.dumps({**sample, "step": step, **trajectory_fields(batch, i), **extra}) + "\n")


def trajectory_fields(batch: DataProto, i: int) -> dict[str, Any]:
    """Row ``i``'s agent-loop facts ({} for a batch the agent loop did not generate): turns, why it ended, calls."""
    columns = batch.non_tensor_batch
    out: dict[str, Any] = {}
    if "__num_turns__" in columns:
        out["num_turns"] = int(columns["__num_turns__"][i])
    if "finish_reason" in columns and columns["finish_reason"][i] is not None:
        out["finish_reason"] = str(columns["finish_reason"][i])
    metrics = columns["agent_loop_metrics"][i] if "agent_loop_metrics" in columns else None
    if isinstance(metrics, dict):  # a loop that calls no tools (single_turn_agent) reports none: 0
        out.update({key: json_value(metrics.get(key, 0)) for key in ("num_tool_calls", "tool_errors")})
    return out


def append_val_generations(samples: list[dict], run_dir: str, step: int) -> None:
    """``samples`` appended as JSON lines (one per sample, with the step) to ``<run_dir>/val_generations.jsonl``."""
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "val_generations.jsonl"), "a") as f:
        for sample in samples:
            f.write(json.dumps({"step": step, **sample}) + "\n")


def json_value(value: Any) -> Any:
    """A reward field's value as JSON can hold it: numpy scalars as Python numbers, anything else unknown as text."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value if not (isinstance(value, float) and value != value) else None
    return str(value)


def finite_numbers(values) -> list[float]:
    """The numeric entries of a reward field as floats; NaN (a sample whose scoring call failed) and non-numbers
    left out."""
    return [float(v) for v in values if isinstance(v, (int, float, bool, np.number)) and v == v]
