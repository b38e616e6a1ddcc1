"""The reward-manager interface (verl's ``AbstractRewardManager``): a callable that turns a batch of responses into
token-level scores.

    manager = Manager(tokenizer, num_examine, compute_score, reward_fn_key="data_source", **kwargs)
    reward_tensor = manager(data)                          # (bs, response_length) float32
    out = manager(data, return_dict=True)                  # {"reward_tensor": ..., "reward_extra_info": {...}}

``reward_extra_info`` maps a name to one value per row (logged as ``reward/<name>/mean``, kept as a column of the
batch). A custom manager subclasses this, registers with ``@register("name")`` and is chosen with
``reward_model.reward_manager=name``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import torch

from verl.protocol import DataProto

__all__ = ["AbstractRewardManager", "RawRewardFn"]

RawRewardFn = Callable[..., Any]


class AbstractRewardManager(ABC):
    @abstractmethod
    def __init__(
        self,
        tokenizer: Any,
        num_examine: int,
        compute_score: RawRewardFn | None,
        reward_fn_key: str = "data_source",
        **kwargs: Any,
    ): ...

    @abstractmethod
    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]: ...

    def _extract_reward_from_rm_scores(
        self, data: DataProto, return_dict: bool = False
    ) -> torch.Tensor | dict[str, Any] | None:
        """The scores already on the batch (``rm_scores``, from a reward model or from scoring during generation),
        with the extra columns named in ``meta_info["reward_extra_keys"]``; None when the batch has none."""
        if data.batch is None or "rm_scores" not in data.batch.keys():
            return None
        if not return_dict:
            return data.batch["rm_scores"]
        keys = [k for k in data.meta_info.get("reward_extra_keys", []) if k in data.non_tensor_batch]
        return {
            "reward_tensor": data.batch["rm_scores"],
            "reward_extra_info": {k: data.non_tensor_batch[k] for k in keys},
        }
