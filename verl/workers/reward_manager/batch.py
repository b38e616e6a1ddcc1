"""``reward_manager=batch``: one call scores the whole batch, for scorers that are cheaper together (a judge model
served in batches, a verifier with start-up cost)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch

from verl.protocol import DataProto
from verl.workers.reward_manager.abstract import AbstractRewardManager, RawRewardFn
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

__all__ = ["BatchRewardManager"]


@register("batch")
class BatchRewardManager(AbstractRewardManager):
    """Scores with ``compute_score(data_sources=[...], solution_strs=[...], ground_truths=[...], extra_infos=[...],
    **reward_kwargs)``, which returns one result per row (a number, or a dict with ``score`` and more fields).

    The failure rule of `verl.workers.reward_manager.scoring` holds per row (a None or NaN result gets
    ``error_score``) and for the call as a whole: a call that raises, or returns the wrong number of results, gives
    every row ``error_score``. The scores are also left on the batch as ``acc`` (verl recipes read it)."""

    def __init__(
        self,
        tokenizer: Any,
        num_examine: int,
        compute_score: RawRewardFn,
        reward_fn_key: str = "data_source",
        error_score: float = 0.0,
        **reward_kwargs: Any,
    ):
        if compute_score is None:
            raise ValueError(
                "reward_manager=batch needs a batch scoring function (custom_reward_function.path/.name) taking "
                "data_sources, solution_strs, ground_truths, extra_infos"
            )
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.compute_score = compute_score
        self.reward_fn_key = reward_fn_key
        self.reward_kwargs = reward_kwargs
        self.guard = ScoreGuard(error_score)

    def verify(self, data: DataProto) -> list[Any]:
        """The scoring function's raw results for ``data``, one per row (``error_score`` for all on a failed call)."""
        self._call_error: str | None = None
        lengths = response_lengths(data)
        answers = [sample_answer(data, i, self.reward_fn_key) for i in range(len(data))]
        extras = [dict(e) if isinstance(e, dict) else {} for _, _, e in answers]
        for i, extra in enumerate(extras):  # what the rollout already scored, for scorers that combine
            if "reward_scores" in data.non_tensor_batch:
                extra["rollout_reward_scores"] = data.non_tensor_batch["reward_scores"][i]
        try:
            results = self.compute_score(
                data_sources=[a[0] for a in answers],
                solution_strs=decode_responses(self.tokenizer, data, lengths),
                ground_truths=[a[1] for a in answers],
                extra_infos=extras,
                **self.reward_kwargs,
            )
            results = list(results)
        except Exception as e:  # a user's function may raise anything; the run must go on
            raise_if_fatal(e)
            self._call_error = f"{type(e).__name__}: {e}"
            return [None] * len(data)
        if len(results) != len(data):
            self._call_error = f"returned {len(results)} results for {len(data)} responses"
            return [None] * len(data)
        return results

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        precomputed = self._extract_reward_from_rm_scores(data, return_dict)
        if precomputed is not None:
            return precomputed
        raw = self.verify(data)
        scores, per_sample, errors = [], [], 0
        for result in raw:
            if self._call_error is not None:
                score, fields, failed = self.guard.fail(self._call_error)
            else:
                score, fields, failed = self.guard.convert(result)
            scores.append(score)
            per_sample.append(fields)
            errors += failed
        self.guard.end_batch(errors, len(data))
        lengths = response_lengths(data)
        data.batch["acc"] = torch.tensor(scores, dtype=torch.float32, device=data.batch["responses"].device)
        self._print_examples(data, lengths, scores)
        reward_tensor = outcome_reward_tensor(scores, score_positions(data), data.batch["responses"].shape)
        if return_dict:
            return {"reward_tensor": reward_tensor, "reward_extra_info": extra_info_columns(scores, per_sample, errors)}
        return reward_tensor

    def _print_examples(self, data: DataProto, lengths: torch.Tensor, scores: list[float]) -> None:
        shown: dict[Any, int] = defaultdict(int)
        texts = None
        for i in range(len(data)):
            source, truth, _ = sample_answer(data, i, self.reward_fn_key)
            if shown[source] >= self.num_examine:
                continue
            shown[source] += 1
            texts = texts or decode_responses(self.tokenizer, data, lengths)
            print(f"[{source}] response={texts[i]!r} ground_truth={truth!r} score={scores[i]}")
