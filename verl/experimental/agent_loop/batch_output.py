"""Trajectories (`AgentLoopOutput`) padded into the trainer's batch, in the layout of `HFRollout`'s batch call:

    prompts          (bs, P)     left-padded with pad_token_id; P = max(rollout.prompt_length, longest prompt)
    responses        (bs, R)     right-padded, R = rollout.response_length
    response_mask    (bs, R)     1 on the model's own tokens, 0 on tool/user-turn tokens and padding
    input_ids        (bs, P+R)   prompts + responses
    attention_mask   (bs, P+R)   1 on every real token (prompt, model, tool/user turns)
    position_ids     (bs, P+R)   the prompt's real tokens count from 0; the response side continues from there
    rollout_log_probs (bs, R)    float32 sampling log-probs of model tokens, 0 elsewhere (absent when a loop gave none)
    rm_scores        (bs, R)     only when every trajectory scored itself (``reward_score``): the score on its last
                                 model token

    responses:     |<- model turn ->|<- tool turn ->|<- model turn ->|<- padding ->|
    response_mask: | 1  1  1  ...  1 | 0  0  ...  0  | 1  1  ...  1  1 | 0  ...  0   |

Non-tensor columns: the input rows' columns, ``__num_turns__`` (verl's), ``agent_loop_metrics`` (one dict per row:
`verl.experimental.agent_loop.metrics`) and each ``extra_fields`` key (None where a trajectory lacks it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from verl.experimental.agent_loop.base import AgentLoopOutput

__all__ = ["check_output", "output_columns", "outputs_to_tensors"]


def check_output(out: Any, response_length: int, where: str) -> AgentLoopOutput:
    """``out`` if it is a well-formed trajectory, else a ValueError naming ``where`` (the row and its loop)."""
    if not isinstance(out, AgentLoopOutput):
        raise TypeError(f"{where}: run() returned {type(out).__name__}, not an AgentLoopOutput")
    n = len(out.response_ids)
    if len(out.response_mask) != n:
        raise ValueError(f"{where}: {n} response_ids but {len(out.response_mask)} response_mask entries")
    if out.response_logprobs is not None and len(out.response_logprobs) != n:
        raise ValueError(f"{where}: {n} response_ids but {len(out.response_logprobs)} response_logprobs")
    if any(m not in (0, 1) for m in out.response_mask):
        raise ValueError(f"{where}: response_mask holds values other than 0 and 1")
    if n > response_length:
        raise ValueError(
            f"{where}: {n} response tokens, more than actor_rollout_ref.rollout.response_length={response_length}; "
            "an agent loop must stop at the response budget"
        )
    if not out.prompt_ids:
        raise ValueError(f"{where}: empty prompt_ids")
    return out


def _last_model_token(mask: list[int]) -> int:
    for i in range(len(mask) - 1, -1, -1):
        if mask[i]:
            return i
    return 0


def outputs_to_tensors(
    outputs: list[AgentLoopOutput], pad_token_id: int, prompt_length: int, response_length: int
) -> dict[str, torch.Tensor]:
    """The batch tensors of the module docstring."""
    bs = len(outputs)
    width = max([prompt_length, *(len(o.prompt_ids) for o in outputs)])
    prompts = torch.full((bs, width), pad_token_id, dtype=torch.long)
    prompt_mask = torch.zeros((bs, width), dtype=torch.long)
    responses = torch.full((bs, response_length), pad_token_id, dtype=torch.long)
    response_mask = torch.zeros((bs, response_length), dtype=torch.long)
    response_attn = torch.zeros((bs, response_length), dtype=torch.long)
    with_logprobs = all(o.response_logprobs is not None for o in outputs)
    logprobs = torch.zeros((bs, response_length), dtype=torch.float32)
    for row, o in enumerate(outputs):
        p, n = len(o.prompt_ids), len(o.response_ids)
        prompts[row, width - p :] = torch.tensor(o.prompt_ids, dtype=torch.long)
        prompt_mask[row, width - p :] = 1
        if n:
            responses[row, :n] = torch.tensor(o.response_ids, dtype=torch.long)
            response_mask[row, :n] = torch.tensor(o.response_mask, dtype=torch.long)
            response_attn[row, :n] = 1
            if with_logprobs:
                values = torch.tensor(o.response_logprobs, dtype=torch.float32)
                logprobs[row, :n] = values * response_mask[row, :n].float()
    prompt_pos = torch.clamp(prompt_mask.cumsum(-1) - 1, min=0)
    response_pos = prompt_pos[:, -1:] + torch.arange(1, response_length + 1, dtype=torch.long).unsqueeze(0)
    out = {
        "prompts": prompts,
        "responses": responses,
        "response_mask": response_mask,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": torch.cat([prompt_mask, response_attn], dim=1),
        "position_ids": torch.cat([prompt_pos, response_pos], dim=1),
    }
    if with_logprobs:
        out["rollout_log_probs"] = logprobs
    if bs and all(o.reward_score is not None for o in outputs):
        scores = torch.zeros((bs, response_length), dtype=torch.float32)
        for row, o in enumerate(outputs):
            scores[row, _last_model_token(o.response_mask)] = float(o.reward_score)
        out["rm_scores"] = scores
    return out


def output_columns(outputs: list[AgentLoopOutput], metrics: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The per-row non-tensor columns the trajectories add."""
    columns: dict[str, np.ndarray] = {
        "__num_turns__": np.array([o.num_turns for o in outputs], dtype=np.int32),
        "agent_loop_metrics": _objects(metrics),
    }
    keys = dict.fromkeys(k for o in outputs for k in o.extra_fields)
    for key in keys:
        columns[key] = _objects([o.extra_fields.get(key) for o in outputs])
    return columns


def _objects(values: list[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr
