"""The reward stage: scores of sampled responses, the shaping applied to them, and ReMax's greedy baseline.

Scores come from the reward model (when the run has one), then the reward function (rule scorers or a custom
function, through the reward manager), then the user's reward hooks. Shaping: DAPO's soft overlong penalty
(``reward_model.overlong_buffer``) is added on each response's last token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from verl import core_algos
from verl.engine.callbacks import apply_reward_hooks
from verl.protocol import DataProto

PROMPT_KEYS = ["input_ids", "attention_mask", "position_ids"]


def compute_reward(data: DataProto, reward_fn: Callable) -> tuple[torch.Tensor, dict[str, list]]:
    """``(reward_tensor (bs, R), reward_extra_info)`` of ``reward_fn`` on ``data`` (verl's function)."""
    result = reward_fn(data, return_dict=True)
    return result["reward_tensor"], result.get("reward_extra_info", {})


def score_batch(
    batch: DataProto, reward_fn: Callable, rm_wg: Any = None, hooks: Sequence[Callable] = ()
) -> tuple[torch.Tensor, dict[str, list]]:
    """Token-level scores of ``batch``: the reward model's (``rm_scores``, when ``rm_wg`` is given) read by the reward
    function, then the reward hooks."""
    if rm_wg is not None:
        batch = batch.union(rm_wg.compute_rm_score(batch))
    reward_tensor, extra = compute_reward(batch, reward_fn)
    return apply_reward_hooks(hooks, reward_tensor), extra


def overlong_penalty(response_mask: torch.Tensor, overlong_buffer: Any, max_response_length: int) -> torch.Tensor:
    """DAPO's soft overlong penalty per row (zeros when ``reward_model.overlong_buffer`` is off)."""
    lengths = response_mask.sum(-1)
    if not overlong_buffer.enable:
        return torch.zeros(len(lengths), dtype=torch.float32)
    return core_algos.compute_overlong_penalty(
        lengths, max_response_length, overlong_buffer.len, overlong_buffer.penalty_factor
    ).float()


def add_scores(
    batch: DataProto,
    reward_tensor: torch.Tensor,
    extra: dict[str, list],
    overlong_buffer: Any,
    max_response_length: int,
) -> int:
    """Put the scores on ``batch``: ``token_level_scores`` (with the overlong penalty on each last token, the
    penalty itself as ``overlong_penalty``), the reward function's extra fields as non-tensor columns (their names
    in ``meta_info["reward_extra_keys"]``). Returns the number of samples whose scoring call failed."""
    batch.batch["token_level_scores"] = reward_tensor
    for key, values in extra.items():
        batch.non_tensor_batch[key] = np.array(values, dtype=object)
    batch.meta_info["reward_extra_keys"] = [k for k in extra if k not in ("score", "reward_errors")]
    if overlong_buffer.enable:
        mask = batch.batch["response_mask"]
        penalty = overlong_penalty(mask, overlong_buffer, max_response_length)
        last = (mask.sum(-1) - 1).clamp(min=0).long()
        reward_tensor[torch.arange(len(batch)), last] += penalty.to(reward_tensor.dtype)
        batch.batch["overlong_penalty"] = penalty  # kept with its rows: the metric covers the trained batch
    errors = extra.get("reward_errors")
    return int(errors[0]) if errors else 0


def greedy_prompts(batch: DataProto, n: int) -> DataProto:
    """One row per prompt of a generated batch (rows ``0, n, 2n, ...`` of an interleaved repeat), holding the prompt
    exactly as it was sampled from (ids, mask, positions) and the prompt's columns, to be decoded greedily."""
    rows = batch[torch.arange(0, len(batch), n)]
    width = rows.batch["prompts"].shape[1]
    prompts = DataProto.from_dict(
        {
            "input_ids": rows.batch["prompts"],
            "attention_mask": rows.batch["attention_mask"][:, :width],
            "position_ids": rows.batch["position_ids"][:, :width],
        },
        meta_info={"do_sample": False},
    )
    prompts.non_tensor_batch = dict(rows.non_tensor_batch)
    return prompts


def compute_remax_baseline(
    batch: DataProto, n: int, generate: Callable[[DataProto], DataProto], score: Callable, shaping: Callable
) -> torch.Tensor:
    """ReMax's baseline (Li et al., 2023) for every row: the score of the greedy response to its prompt, shaped as
    the sampled responses' scores are (``shaping(score (bs,), response_mask) -> (bs,)``). Shape (bs,)."""
    prompts = greedy_prompts(batch, n)
    out = generate(prompts)
    scored = prompts.select(batch_keys=[], non_tensor_batch_keys=list(prompts.non_tensor_batch)).union(out)
    scores, _ = score(scored)
    baseline = shaping(scores.sum(-1), out.batch["response_mask"])
    return baseline.repeat_interleave(n)
