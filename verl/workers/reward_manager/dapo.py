"""``reward_manager=dapo``: per-response scores plus DAPO's soft overlong penalty, applied by the manager as the
DAPO recipe does (Yu et al., 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale").

This package's trainer applies the same penalty on its own with ``reward_model.overlong_buffer.enable``; give the
manager an ``overlong_buffer_cfg`` only when that is off, or responses are penalised twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

from verl import core_algos
from verl.protocol import DataProto
from verl.utils.config import as_section
from verl.workers.config.reward_model import OverlongBufferConfig
from verl.workers.reward_manager.abstract import AbstractRewardManager
from verl.workers.reward_manager.registry import register
from verl.workers.reward_manager.scoring import (
    ScoreGuard,
    decode_responses,
    extra_info_columns,
    outcome_reward_tensor,
    raise_if_fatal,
    response_lengths,
    sample_answer,
    score_positions,
)

__all__ = ["DAPORewardManager"]


@register("dapo")
class DAPORewardManager(AbstractRewardManager):
    """Scores each response with ``compute_score(data_source, solution_str, ground_truth, extra_info)`` (the
    default scorer when None), then, with ``overlong_buffer_cfg.enable``, adds

        penalty = min(0, -(|y| - (max_resp_len - len)) / len * penalty_factor)

    for a response of |y| tokens (``len`` and ``penalty_factor`` from ``overlong_buffer_cfg``: an
    `OverlongBufferConfig`, or a dict of its keys, the others taking its defaults). With
    ``overlong_buffer_cfg.log`` the extra info gets ``overlong_reward`` and ``overlong`` (penalised or not). A plain
    number result is also reported as ``acc``. Failures follow `verl.workers.reward_manager.scoring`."""

    def __init__(
        self,
        tokenizer: Any,
        num_examine: int,
        compute_score: Callable[..., Any] | None = None,
        reward_fn_key: str = "data_source",
        max_resp_len: int | None = None,
        overlong_buffer_cfg: Any = None,
        error_score: float = 0.0,
        **reward_kwargs: Any,
    ) -> None:
        from verl.utils.reward_score import default_compute_score

        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.compute_score = compute_score or default_compute_score
        self.reward_fn_key = reward_fn_key
        self.max_resp_len = max_resp_len
        # verl's recipe passes its reward_model.overlong_buffer section; a dict (reward_kwargs) is typed here, once
        self.overlong_buffer_cfg = (
            as_section(overlong_buffer_cfg, OverlongBufferConfig) if overlong_buffer_cfg is not None else None
        )
        self.reward_kwargs = reward_kwargs
        self.guard = ScoreGuard(error_score)
        if self._overlong_on:
            buffer_len = self.overlong_buffer_cfg.len
            if max_resp_len is None:
                raise ValueError(
                    "reward_manager=dapo with overlong_buffer_cfg.enable needs max_resp_len (the rollout's "
                    "response_length): pass it in reward_model.reward_kwargs"
                )
            if not 0 < buffer_len <= max_resp_len:
                raise ValueError(f"overlong_buffer_cfg.len={buffer_len} must be in (0, max_resp_len={max_resp_len}]")

    @property
    def _overlong_on(self) -> bool:
        return self.overlong_buffer_cfg is not None and bool(self.overlong_buffer_cfg.enable)

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        precomputed = self._extract_reward_from_rm_scores(data, return_dict)
        if precomputed is not None:
            return precomputed
        lengths = response_lengths(data)
        texts = decode_responses(self.tokenizer, data, lengths)
        eos = getattr(self.tokenizer, "eos_token", None)
        if self._overlong_on:
            cfg = self.overlong_buffer_cfg
            penalties = core_algos.compute_overlong_penalty(
                lengths, self.max_resp_len, cfg.len, cfg.penalty_factor
            ).tolist()
        scores, per_sample, errors = [], [], 0
        shown: dict[Any, int] = defaultdict(int)
        for i, text in enumerate(texts):
            if eos and text.endswith(eos):
                text = text[: -len(eos)]
            source, truth, extra = sample_answer(data, i, self.reward_fn_key)
            result_is_number = True
            try:
                result = self.compute_score(source, text, truth, extra, **self.reward_kwargs)
                result_is_number = not isinstance(result, dict)
                score, fields, failed = self.guard.convert(result)
            except Exception as e:  # a user's function may raise anything; the run must go on
                raise_if_fatal(e)
                score, fields, failed = self.guard.fail(f"{type(e).__name__}: {e}")
            if result_is_number and not failed:
                fields = {**fields, "acc": score}
            if self._overlong_on:
                score += penalties[i]
                if self.overlong_buffer_cfg.log:
                    fields = {**fields, "overlong_reward": penalties[i], "overlong": penalties[i] < 0}
            errors += failed
            scores.append(score)
            per_sample.append(fields)
            if shown[source] < self.num_examine:
                shown[source] += 1
                print(f"[{source}] response={text!r} ground_truth={truth!r} score={score}")
        self.guard.end_batch(errors, len(data))
        reward_tensor = outcome_reward_tensor(scores, score_positions(data), data.batch["responses"].shape)
        if return_dict:
            return {"reward_tensor": reward_tensor, "reward_extra_info": extra_info_columns(scores, per_sample, errors)}
        return reward_tensor
