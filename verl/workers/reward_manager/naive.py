"""Turning responses into token-level scores with a scoring function (rule scorer or the user's own)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections import defaultdict
from collections.abc import Callable
from typing import Any

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


def load_custom_reward_function(path: str | None, name: str = "compute_score") -> Callable[..., Any] | None:
    """Import ``name`` from the Python file at ``path`` (verl's ``custom_reward_function.path/.name``)."""
    if not path:
        return None
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(path):
        raise FileNotFoundError(f"custom_reward_function.path={path!r} is a directory; give the .py file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"custom_reward_function.path={path!r} does not exist")
    # registered under a unique name before it runs (dataclasses and pickling look the module up), and its own
    # directory importable, so the file may import its neighbours
    module_name = f"custom_reward_{abs(hash(path)):x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.append(folder)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(module_name, None)
        raise ImportError(f"importing custom reward file {path!r} failed: {type(e).__name__}: {e}") from e
    if not callable(getattr(module, name, None)):
        found = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        raise ValueError(f"{path!r} has no function {name!r} (custom_reward_function.name); it defines {found}")
    return getattr(module, name)


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


@register("naive")
class NaiveRewardManager(AbstractRewardManager):
    """Score each response with ``compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)``.

    The score lands on the response's last valid token (outcome reward); everything else is 0. A scoring call that
    raises, or returns None/NaN/inf, gives that sample ``error_score`` and is counted in ``reward/errors``: one bad
    sample never stops a long run (the rule: `verl.workers.reward_manager.scoring`).
    """

    def __init__(
        self,
        tokenizer,
        num_examine: int = 0,
        compute_score: Callable[..., Any] | None = None,
        reward_fn_key: str = "data_source",
        error_score: float = 0.0,
        num_workers: int = 1,
        **reward_kwargs: Any,
    ):
        from verl.utils.reward_score import default_compute_score

        if num_workers < 1:
            raise ValueError(f"reward_model.num_workers must be >= 1, got {num_workers}")
        self.num_workers = num_workers
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self._default_compute_score = default_compute_score
        self.compute_score = compute_score or default_compute_score
        self.reward_fn_key = reward_fn_key
        self.reward_kwargs = reward_kwargs
        self.guard = ScoreGuard(error_score)
        self._examined: dict[str, int] = defaultdict(int)

    @property
    def error_score(self) -> float:
        return self.guard.error_score

    @property
    def last_error(self) -> str | None:
        return self.guard.last_error

    def _score_all(self, texts: list[str], answers: list[tuple]) -> list[tuple[float, dict, bool]]:
        """One guarded scoring call per response, in ``num_workers`` threads when > 1 (a scorer that waits on a
        sandbox process or a server overlaps its waits; results keep the batch's order). With the default scorer,
        the responses that share a data source and a ground truth (a prompt's ``rollout.n`` samples) go to the data
        source's group scorer in one call when it has one (the code sources: one sandbox run per prompt)."""
        results: list[tuple[float, dict, bool] | None] = [None] * len(texts)

        def one(i: int) -> None:
            source, truth, extra = answers[i]
            results[i] = self.guard.call(self.compute_score, source, texts[i], truth, extra, **self.reward_kwargs)

        def group(members: list[int]) -> None:
            from verl.utils.reward_score import default_compute_score_group

            source, truth, _ = answers[members[0]]
            extras = [answers[i][2] for i in members]
            try:
                scored = default_compute_score_group(
                    source, [texts[i] for i in members], truth, extras, **self.reward_kwargs
                )
            except Exception as e:  # as for one sample: the group's samples fail, the run goes on
                raise_if_fatal(e)
                failed = self.guard.fail(f"{type(e).__name__}: {e}")
                for i in members:
                    results[i] = failed
                return
            for i, result in zip(members, scored):
                results[i] = self.guard.convert(result)

        groups = self._groups(answers)
        tasks = [lambda members=members: group(members) for members in groups]
        grouped = {i for members in groups for i in members}
        tasks += [lambda i=i: one(i) for i in range(len(texts)) if i not in grouped]
        if self.num_workers == 1 or len(tasks) < 2:
            for task in tasks:
                task()
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(self.num_workers, len(tasks))) as pool:
                list(pool.map(lambda task: task(), tasks))
        return results  # type: ignore[return-value]

    def _groups(self, answers: list[tuple]) -> list[list[int]]:
        """Indices of the responses to score together: two or more with the same data source and ground truth,
        whose data source has a group scorer (only with the default scorer: a custom function scores one by one)."""
        from verl.utils.reward_score import has_group_scorer

        if self.compute_score is not self._default_compute_score:
            return []
        by_key: dict[tuple, list[int]] = defaultdict(list)
        for i, (source, truth, _) in enumerate(answers):
            if has_group_scorer(source):
                by_key[(source, _hashable(truth))].append(i)
        return [members for members in by_key.values() if len(members) > 1]

    def __call__(self, data: DataProto, return_dict: bool = False):
        precomputed = self._extract_reward_from_rm_scores(data, return_dict)
        if precomputed is not None:  # a reward model already scored the batch
            return precomputed
        lengths = response_lengths(data)
        texts = decode_responses(self.tokenizer, data, lengths)
        nt = data.non_tensor_batch
        if self.reward_fn_key not in nt and self.compute_score is self._default_compute_score:
            # every sample would fail the same way: a configuration error, not a bad sample
            raise KeyError(
                f"reward: data.reward_fn_key={self.reward_fn_key!r} is not a column of the batch (columns: "
                f"{sorted(nt)}); the default scorer picks its rule by that column. Set data.reward_fn_key to the "
                "column that names each row's task, or pass custom_reward_function.path"
            )
        scores, per_sample, errors = [], [], 0
        answers = [sample_answer(data, i, self.reward_fn_key) for i in range(len(texts))]
        results = self._score_all(texts, answers)
        for text, (source, truth, _), (score, fields, failed) in zip(texts, answers, results):
            errors += failed
            scores.append(score)
            per_sample.append(fields)
            if self._examined[source] < self.num_examine:
                self._examined[source] += 1
                print(f"[{source}] response={text!r} ground_truth={truth!r} score={score}")
        self.guard.end_batch(errors, len(data))
        reward_tensor = outcome_reward_tensor(scores, score_positions(data), data.batch["responses"].shape)
        if return_dict:
            return {"reward_tensor": reward_tensor, "reward_extra_info": extra_info_columns(scores, per_sample, errors)}
        return reward_tensor
