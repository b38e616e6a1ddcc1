"""What every reward manager shares: reading a batch's responses and answers, turning a scoring function's result
into a number without ever stopping the run, and placing outcome scores on the last response token.

The rule for failures (`ScoreGuard`), the same for every manager: a scoring call that raises, times out, or returns
None / NaN / inf / a non-number gives that sample ``error_score`` and is counted in ``reward_errors``, so one bad
sample never stops a long run. Only a function that fails on every sample of the first batch it scores stops it,
with one error naming the last failure: that is a wrong signature or wrong data, not a bad sample. So does a machine
that cannot run the scorer safely at all (`FATAL_ERRORS`: the code sandbox without its isolation), at once.
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from typing import Any

import torch

from verl.protocol import DataProto
from verl.sandbox.local import SandboxUnavailable

logger = logging.getLogger(__name__)

__all__ = ["ScoreGuard", "decode_responses", "extra_info_columns", "outcome_reward_tensor", "response_lengths"]
__all__ += ["FATAL_ERRORS", "raise_if_fatal", "sample_answer", "score_positions"]

# errors of the machine, not of a sample: scoring every sample as a failure would train on nothing, silently
FATAL_ERRORS: tuple[type[BaseException], ...] = (SandboxUnavailable,)


def raise_if_fatal(error: BaseException) -> None:
    """Re-raise ``error`` when it is one of `FATAL_ERRORS` (called first in every scorer's ``except``)."""
    if isinstance(error, FATAL_ERRORS):
        raise error


def response_lengths(data: DataProto) -> torch.Tensor:
    """Response-side tokens per row (bs,): the response side of ``attention_mask`` -- with multi-turn trajectories the
    whole transcript (the model's turns and the tool/user turns between them), which is what the scorer reads --
    else ``response_mask`` sums."""
    responses = data.batch["responses"]
    keys = data.batch.keys()
    mask = (
        data.batch["attention_mask"][:, -responses.shape[1] :]
        if "attention_mask" in keys
        else data.batch["response_mask"]
    )
    return mask.sum(-1).long()


def score_positions(data: DataProto) -> torch.Tensor:
    """Where each row's outcome score goes (bs,): its last model token (the last 1 of ``response_mask``; a tool or
    user turn after it is not the policy's action), else the last response token."""
    keys = data.batch.keys()
    if "response_mask" not in keys:
        return (response_lengths(data) - 1).clamp(min=0)
    mask = data.batch["response_mask"].bool()
    index = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return torch.where(mask, index, torch.zeros_like(index)).max(dim=-1).values.long()


def decode_responses(tokenizer: Any, data: DataProto, lengths: torch.Tensor) -> list[str]:
    """Each row's response text: its first ``lengths[i]`` tokens, special tokens dropped."""
    responses = data.batch["responses"]
    return tokenizer.batch_decode([responses[i, : int(lengths[i])] for i in range(len(data))], skip_special_tokens=True)


def sample_answer(data: DataProto, i: int, reward_fn_key: str) -> tuple[Any, Any, Any]:
    """``(data_source, ground_truth, extra_info)`` of row ``i``; a JSON-encoded ``reward_model`` cell (a CSV/JSON
    round trip) is decoded. Missing columns read as ``"unknown"``, None, None. For an agent-loop trajectory the
    ``extra_info`` is a copy with verl's ``num_turns`` and ``rollout_reward_scores`` (each tool's ``calc_reward``)
    added, and the tools' step rewards (``tool_rewards``) and the interaction's turn scores (``turn_scores``)."""
    nt = data.non_tensor_batch
    source = nt[reward_fn_key][i] if reward_fn_key in nt else "unknown"
    rm = nt["reward_model"][i] if "reward_model" in nt else {}
    if isinstance(rm, str):
        try:
            rm = json.loads(rm)
        except ValueError:
            rm = {}
    truth = rm.get("ground_truth") if isinstance(rm, dict) else None
    extra = nt["extra_info"][i] if "extra_info" in nt else None
    if "__num_turns__" in nt:  # an agent-loop trajectory: what the rollout knows about it, as verl passes it
        extra = dict(extra) if isinstance(extra, dict) else {}
        extra["num_turns"] = int(nt["__num_turns__"][i])
        extra["rollout_reward_scores"] = nt["reward_scores"][i] if "reward_scores" in nt else {}
        for key in ("tool_rewards", "turn_scores"):
            if key in nt:
                extra[key] = nt[key][i]
    return source, truth, extra


class ScoreGuard:
    """The failure rule of the module docstring for one manager: `convert` a result, `call` a function, then
    `end_batch` once per batch."""

    def __init__(self, error_score: float = 0.0):
        self.error_score = float(error_score)
        self.last_error: str | None = None
        self.ever_scored = False  # one batch with a successful call: later all-failed batches are tolerated

    def fail(self, message: str) -> tuple[float, dict, bool]:
        self.last_error = message
        return self.error_score, {}, True

    def convert(self, result: Any) -> tuple[float, dict, bool]:
        """``(score, numeric extra fields, failed)`` of one result: a number, or a dict with ``score`` and more."""
        extra = {}
        if isinstance(result, dict):
            extra = {k: v for k, v in result.items() if k != "score" and isinstance(v, (int, float, bool))}
            result = result.get("score")
        try:
            score = float(result)
        except (TypeError, ValueError):
            self.last_error = f"returned {result!r}, not a number"
            return self.error_score, extra, True
        if not math.isfinite(score):
            self.last_error = f"returned {score}"
            return self.error_score, extra, True
        return score, extra, False

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> tuple[float, dict, bool]:
        """`convert` of ``fn(*args, **kwargs)``; an exception is a failed sample."""
        try:
            result = fn(*args, **kwargs)
        except Exception as e:  # a user's function may raise anything; the run must go on
            raise_if_fatal(e)
            return self.fail(f"{type(e).__name__}: {e}")
        return self.convert(result)

    def end_batch(self, errors: int, n: int) -> None:
        """Stop on a first batch where every call failed (module docstring); otherwise log the failures."""
        if errors and errors == n and not self.ever_scored:
            raise ValueError(
                f"the reward function failed on all {errors} samples of the first batch it scored; last: "
                f"{self.last_error}. Check custom_reward_function (signature fn(data_source, solution_str, "
                "ground_truth, extra_info=None, **kwargs)) and the data's data_source / reward_model.ground_truth"
            )
        self.ever_scored = self.ever_scored or errors < n
        if errors:
            logger.warning("%d of %d reward calls failed; last: %s", errors, n, self.last_error)


def outcome_reward_tensor(scores: list[float], positions: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """(bs, R) float32 zeros with each row's score at ``positions[i]`` (`score_positions`: the last model token; an
    empty response keeps its score on the first slot, so it is not silently 0)."""
    reward = torch.zeros(shape, dtype=torch.float32)
    for i, score in enumerate(scores):
        reward[i, int(positions[i])] = score
    return reward


def extra_info_columns(scores: list[float], per_sample: list[dict], errors: int) -> dict[str, list]:
    """``reward_extra_info``: ``score``, each extra field the function returned (NaN where a sample lacks it: its
    call failed or returned fewer keys, so one bad sample never drops a metric) and ``reward_errors``."""
    columns: dict[str, list] = defaultdict(list)
    columns["score"] = list(scores)
    keys = dict.fromkeys(k for fields in per_sample for k in fields)  # ordered set: first-seen order
    for fields in per_sample:
        for k in keys:
            columns[k].append(fields.get(k, math.nan))
    columns["reward_errors"] = [errors] * len(scores)
    return dict(columns)
