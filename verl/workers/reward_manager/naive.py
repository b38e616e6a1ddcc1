"""Turning responses into token-level scores with a scoring function (rule scorer or the user's own)."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import sys
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

from verl.protocol import DataProto

logger = logging.getLogger(__name__)


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


class NaiveRewardManager:
    """Score each response with ``compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)``.

    The score lands on the response's last valid token (outcome reward); everything else is 0. A scoring call that
    raises, or returns None/NaN/inf, gives that sample ``error_score`` and is counted in ``reward/errors``: one bad
    sample never stops a long run.
    """

    def __init__(
        self,
        tokenizer,
        num_examine: int = 0,
        compute_score: Callable[..., Any] | None = None,
        reward_fn_key: str = "data_source",
        error_score: float = 0.0,
        **reward_kwargs: Any,
    ):
        from verl.utils.reward_score import default_compute_score

        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self._default_compute_score = default_compute_score
        self.compute_score = compute_score or default_compute_score
        self.reward_fn_key = reward_fn_key
        self.error_score = float(error_score)
        self.reward_kwargs = reward_kwargs
        self._examined: dict[str, int] = defaultdict(int)
        self.last_error: str | None = None
        self._ever_scored = False  # one batch with a successful call: later all-failed batches are tolerated

    def _score_one(self, data_source, response: str, ground_truth, extra_info) -> tuple[float, dict, bool]:
        try:
            result = self.compute_score(data_source, response, ground_truth, extra_info, **self.reward_kwargs)
        except Exception as e:  # a user's function may raise anything; the run must go on
            self.last_error = f"{type(e).__name__}: {e}"
            return self.error_score, {}, True
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

    def __call__(self, data: DataProto, return_dict: bool = False):
        if "rm_scores" in data.batch:  # a reward model already scored the batch
            return (
                {"reward_tensor": data.batch["rm_scores"], "reward_extra_info": {}}
                if return_dict
                else data.batch["rm_scores"]
            )
        responses = data.batch["responses"]
        response_mask = (
            data.batch["response_mask"]
            if "response_mask" in data.batch
            else data.batch["attention_mask"][:, -responses.shape[1] :]
        )
        valid_len = response_mask.sum(-1).long()
        reward_tensor = torch.zeros(responses.shape, dtype=torch.float32)
        extra_info_out: dict[str, list] = defaultdict(list)
        per_sample_extra: list[dict] = []
        extra_keys: dict[str, None] = {}  # ordered set: the columns in first-seen order
        errors = 0
        texts = self.tokenizer.batch_decode(
            [responses[i, : int(valid_len[i])] for i in range(len(data))], skip_special_tokens=True
        )
        nt = data.non_tensor_batch
        if self.reward_fn_key not in nt and self.compute_score is self._default_compute_score:
            # every sample would fail the same way: a configuration error, not a bad sample
            raise KeyError(
                f"reward: data.reward_fn_key={self.reward_fn_key!r} is not a column of the batch (columns: "
                f"{sorted(nt)}); the default scorer picks its rule by that column. Set data.reward_fn_key to the "
                "column that names each row's task, or pass custom_reward_function.path"
            )
        for i, text in enumerate(texts):
            source = nt[self.reward_fn_key][i] if self.reward_fn_key in nt else "unknown"
            rm = nt["reward_model"][i] if "reward_model" in nt else {}
            if isinstance(rm, str):  # a JSON-encoded column (a CSV/JSON round trip)
                try:
                    rm = json.loads(rm)
                except ValueError:
                    rm = {}
            truth = rm.get("ground_truth") if isinstance(rm, dict) else None
            extra = nt["extra_info"][i] if "extra_info" in nt else None
            score, extra_fields, failed = self._score_one(source, text, truth, extra)
            errors += failed
            extra_info_out["score"].append(score)
            per_sample_extra.append(extra_fields)
            extra_keys.update(dict.fromkeys(extra_fields))
            if int(valid_len[i]) > 0:
                reward_tensor[i, int(valid_len[i]) - 1] = score
            else:  # an empty response still gets its score (on the first slot) so it is not silently 0
                reward_tensor[i, 0] = score
            if self._examined[source] < self.num_examine:
                self._examined[source] += 1
                print(f"[{source}] response={text!r} ground_truth={truth!r} score={score}")
        if errors and errors == len(data) and not self._ever_scored:
            # never one success, from the first batch on: the function or the data is wrong, not a sample
            raise ValueError(
                f"the reward function failed on all {errors} samples of the first batch it scored; last: "
                f"{self.last_error}. Check custom_reward_function (signature fn(data_source, solution_str, "
                "ground_truth, extra_info=None, **kwargs)) and the data's data_source / reward_model.ground_truth"
            )
        self._ever_scored = self._ever_scored or errors < len(data)
        if errors:
            logger.warning("%d of %d reward calls failed; last: %s", errors, len(data), self.last_error)
        # A column some samples lack (their scoring call failed, or returned fewer keys) gets NaN there, so one bad
        # sample never drops a metric for the whole batch.
        for fields in per_sample_extra:
            for k in extra_keys:
                extra_info_out[k].append(fields.get(k, math.nan))
        extra_info_out["reward_errors"] = [errors] * len(data)
        if return_dict:
            return {"reward_tensor": reward_tensor, "reward_extra_info": dict(extra_info_out)}
        return reward_tensor
