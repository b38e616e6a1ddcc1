"""``reward_manager=prime``: scoring in a pool of worker processes with a deadline, as the PRIME recipe does (Cui et
al., 2025, "Process Reinforcement through Implicit Rewards"), for scorers that run generated code or a slow
checker. A response whose check is still running at the deadline, or hangs, gets ``error_score``; its process is
killed with the pool, so one runaway program never stalls training.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

from verl.protocol import DataProto
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

__all__ = ["PrimeRewardManager", "run_reward_scoring"]


def _first_number(result: Any) -> Any:
    """PRIME scorers may return ``(score, details)``: the score is the first item."""
    return result[0] if isinstance(result, (tuple, list)) and result else result


def run_reward_scoring(
    evaluation_func: Callable[..., Any],
    completions: list[str],
    references: list[Any],
    tasks: list[Any],
    extra_info: list[Any] | None = None,
    num_processes: int = 64,
    timeout: float = 300.0,
) -> list[Any]:
    """``evaluation_func(task, completion, reference, extra_info)`` for every response, in up to ``num_processes``
    worker processes, all within ``timeout`` seconds from the start. Each entry is the function's result, or the
    ``Exception`` it raised, or ``TimeoutError`` for a check unfinished at the deadline. A function that cannot be
    sent to another process (a lambda, a closure) runs here instead, without the deadline."""
    n = len(completions)
    extra_info = list(extra_info) if extra_info is not None else [None] * n
    calls = list(zip(tasks, completions, references, extra_info))
    try:
        pickle.dumps(evaluation_func)
    except Exception:
        return [_call_here(evaluation_func, args) for args in calls]
    pool = multiprocessing.get_context().Pool(processes=max(1, min(num_processes, n, os.cpu_count() or 1)))
    try:
        pending = [pool.apply_async(evaluation_func, args) for args in calls]
        deadline = time.monotonic() + timeout
        out: list[Any] = []
        for p in pending:
            try:
                out.append(p.get(timeout=max(0.0, deadline - time.monotonic())))
            except multiprocessing.TimeoutError:
                out.append(TimeoutError(f"not finished within {timeout:g} s"))
            except Exception as e:  # raised inside the worker process
                out.append(e)
        return out
    finally:
        pool.terminate()  # kills checks still running (a hung program) with their processes
        pool.join()


def _call_here(fn: Callable[..., Any], args: tuple) -> Any:
    try:
        return fn(*args)
    except Exception as e:  # a user's function may raise anything; the run must go on
        return e


@register("prime")
class PrimeRewardManager(AbstractRewardManager):
    """Scores with ``compute_score(data_source, solution_str, ground_truth, extra_info)`` (the default scorer when
    None) in ``num_processes`` processes within ``timeout`` seconds per batch (`run_reward_scoring`). A result may
    be a number, a dict with ``score``, or ``(score, ...)``. Failures and timeouts follow
    `verl.workers.reward_manager.scoring`; the scores are also left on the batch as ``acc``."""

    def __init__(
        self,
        tokenizer: Any,
        num_examine: int,
        compute_score: Callable[..., Any] | None = None,
        reward_fn_key: str = "data_source",
        error_score: float = 0.0,
        num_processes: int = 64,
        timeout: float = 300.0,
    ) -> None:
        from verl.utils.reward_score import default_compute_score

        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.compute_score = compute_score or default_compute_score
        self.reward_fn_key = reward_fn_key
        self.num_processes = num_processes
        self.timeout = timeout
        self.guard = ScoreGuard(error_score)

    def verify(self, data: DataProto) -> list[float]:
        """Score every row (module docstring); returns the scores and sets ``data.batch["acc"]``."""
        scores, _, _ = self._score(data)
        return scores

    def _score(self, data: DataProto) -> tuple[list[float], list[dict], int]:
        lengths = response_lengths(data)
        texts = decode_responses(self.tokenizer, data, lengths)
        answers = [sample_answer(data, i, self.reward_fn_key) for i in range(len(data))]
        results = run_reward_scoring(
            self.compute_score,
            completions=texts,
            references=[a[1] for a in answers],
            tasks=[a[0] for a in answers],
            extra_info=[a[2] for a in answers],
            num_processes=self.num_processes,
            timeout=self.timeout,
        )
        scores, per_sample, errors = [], [], 0
        for result in results:
            if isinstance(result, BaseException):
                raise_if_fatal(result)
                score, fields, failed = self.guard.fail(f"{type(result).__name__}: {result}")
            else:
                score, fields, failed = self.guard.convert(_first_number(result))
            scores.append(score)
            per_sample.append(fields)
            errors += failed
        data.batch["acc"] = torch.tensor(scores, dtype=torch.float32, device=data.batch["responses"].device)
        return scores, per_sample, errors

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        precomputed = self._extract_reward_from_rm_scores(data, return_dict)
        if precomputed is not None:
            return precomputed
        scores, per_sample, errors = self._score(data)
        self.guard.end_batch(errors, len(data))
        lengths = response_lengths(data)
        shown: dict[Any, int] = defaultdict(int)
        for i in range(len(data)):
            source, truth, _ = sample_answer(data, i, self.reward_fn_key)
            if shown[source] < self.num_examine:
                shown[source] += 1
                text = decode_responses(self.tokenizer, data[i : i + 1], lengths[i : i + 1])[0]
                print(f"[{source}] response={text!r} ground_truth={truth!r} score={scores[i]}")
        reward_tensor = outcome_reward_tensor(scores, score_positions(data), data.batch["responses"].shape)
        if return_dict:
            return {"reward_tensor": reward_tensor, "reward_extra_info": extra_info_columns(scores, per_sample, errors)}
        return reward_tensor
