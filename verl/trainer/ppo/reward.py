"""The reward stage: scores of sampled responses, the shaping applied to them, and ReMax's greedy baseline.

Scores come from the reward model (when the run has one), then the reward function (rule scorers or a custom
function, through the reward manager), then the user's reward hooks. Shaping: DAPO's soft overlong penalty
(``reward_model.overlong_buffer``) is added on each response's last token.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np
import torch

from verl import core_algos
from verl.engine.callbacks import apply_reward_hooks
from verl.protocol import DataProto
from verl.trainer.config.ppo_trainer import PPOTrainerConfig, RewardConfig
from verl.utils.config import as_section
from verl.utils.import_utils import load_extern_object
from verl.workers.config.reward_model import RewardModelConfig
from verl.workers.reward_manager import get_reward_manager_cls, load_custom_reward_function
from verl.workers.reward_manager.scoring import score_positions

PROMPT_KEYS = ["input_ids", "attention_mask", "position_ids"]


def compute_reward(data: DataProto, reward_fn: Callable) -> tuple[torch.Tensor, dict[str, list]]:
    """``(reward_tensor (bs, R), reward_extra_info)`` of ``reward_fn`` on ``data`` (verl's function). A reward
    function without ``return_dict`` (or one returning the bare tensor) gives no extra info."""
    try:
        result = reward_fn(data, return_dict=True)
    except TypeError as e:
        if "return_dict" not in str(e):
            raise
        result = reward_fn(data)
    if isinstance(result, torch.Tensor):
        return result, {}
    return result["reward_tensor"], dict(result.get("reward_extra_info") or {})


def _call_with_kwargs(fn: Callable, bound: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with the configured ``bound`` keyword arguments taking precedence."""
    return fn(*args, **{**kwargs, **bound})


def get_custom_reward_fn(config: Any) -> Callable | None:
    """The function named by ``custom_reward_function.path`` / ``.name`` with its ``reward_kwargs`` bound, or None
    when no path is set (verl's function). ``config``: the job's config; a dict is read as one (`_job`)."""
    section = _job(config).custom_reward_function
    fn = load_custom_reward_function(section.path, section.name)
    if fn is None:
        return None
    bound = dict(section.reward_kwargs)
    return partial(_call_with_kwargs, fn, bound) if bound else fn


def _job(config: Any) -> Any:
    """The job's config, typed: verl's functions here are called with the loaded config, or in ported code with a
    dict of some of its keys (the others take the schema's defaults, derived keys following their sources)."""
    return as_section(config, PPOTrainerConfig)


def reward_manager_class(config: Any) -> type:
    """The manager class the config names: verl's ``reward_manager`` section (``source: register`` with ``name``,
    which follows ``reward_model.reward_manager``, or ``source: importlib`` with ``name`` and ``module.path``)."""
    section = _job(config).reward_manager
    if section.source == "importlib":
        if not section.module.path:
            raise ValueError("reward_manager.source=importlib needs reward_manager.module.path (a .py file)")
        return load_extern_object(section.module.path, section.name)
    if section.source != "register":
        raise ValueError(f"reward_manager.source={section.source!r}: use register or importlib")
    return get_reward_manager_cls(section.name)


# the schema's defaults of the two sections that spell the same settings: a value equal to its default is not set
_NEWER, _OLDER = RewardConfig(), RewardModelConfig()


def manager_settings(config: Any, manager_cls: type) -> dict[str, Any]:
    """The config's settings a reward manager takes, one rule for both ways of building one: ``reward_model.error_score``
    and ``num_workers`` when the class accepts them, and with ``reward_model.sandbox_fusion.url`` set the scorer
    arguments verl binds to its default scorer (``sandbox_fusion_url``, a ``concurrent_semaphore`` of
    ``max_concurrent``, ``memory_limit_mb``: code data sources then run their cases on that service)."""
    config = _job(config)
    newer, older = (
        config.reward,
        config.reward_model,
    )  # newer verl spells these reward.num_workers, reward.sandbox_fusion.*
    accepted = inspect.signature(manager_cls.__init__).parameters
    settings: dict[str, Any] = {}
    if "error_score" in accepted:
        settings["error_score"] = older.error_score
    if "num_workers" in accepted:  # reward.num_workers is null unless set
        settings["num_workers"] = _one_value(
            "num_workers", newer.num_workers, older.num_workers, _NEWER.num_workers, _OLDER.num_workers
        )
    settings = {key: value for key, value in settings.items() if value is not None}
    new_fusion, old_fusion, default = newer.sandbox_fusion, older.sandbox_fusion, _OLDER.sandbox_fusion
    url, max_concurrent, memory_limit_mb = (
        _one_value(f"sandbox_fusion.{key}", new, old, fallback, fallback)
        for key, new, old, fallback in (
            ("url", new_fusion.url, old_fusion.url, default.url),
            ("max_concurrent", new_fusion.max_concurrent, old_fusion.max_concurrent, default.max_concurrent),
            ("memory_limit_mb", new_fusion.memory_limit_mb, old_fusion.memory_limit_mb, default.memory_limit_mb),
        )
    )
    if url:
        import threading

        settings.update(
            sandbox_fusion_url=url,
            concurrent_semaphore=threading.Semaphore(max_concurrent),
            memory_limit_mb=memory_limit_mb,
        )
    return settings


def _one_value(key: str, new: Any, old: Any, new_default: Any, old_default: Any) -> Any:
    """``reward.<key>`` where it is set (not its default), else ``reward_model.<key>``; both set to different values
    is an error naming them."""
    if new != new_default and old != old_default and new != old:
        raise ValueError(
            f"reward.{key}={new!r} and reward_model.{key}={old!r} disagree: they are one setting "
            "(newer verl spells it reward.*); set one of them"
        )
    return new if new != new_default else old


def load_reward_manager(config: Any, tokenizer: Any, num_examine: int, **reward_kwargs: Any) -> Any:
    """The reward manager a config asks for (verl's function): its class by `reward_manager_class`, its scoring
    function the custom one (`get_custom_reward_fn`) or the default scorer, ``reward_fn_key`` from ``data`` and
    ``reward_kwargs`` passed to the manager, with `manager_settings` where ``reward_kwargs`` does not set them."""
    config = _job(config)
    cls = reward_manager_class(config)
    compute_score = get_custom_reward_fn(config)
    if compute_score is None:
        from verl.utils.reward_score import default_compute_score

        compute_score = default_compute_score
    kwargs = {**manager_settings(config, cls), **reward_kwargs}
    return cls(
        tokenizer=tokenizer,
        num_examine=num_examine,
        compute_score=compute_score,
        reward_fn_key=config.data.reward_fn_key,
        **kwargs,
    )


def score_batch(
    batch: DataProto, reward_fn: Callable, rm_wg: Any = None, hooks: Sequence[Callable] = ()
) -> tuple[torch.Tensor, dict[str, list]]:
    """Token-level scores of ``batch``: the reward model's (``rm_scores``, when ``rm_wg`` is given) read by the reward
    function, then the reward hooks."""
    if rm_wg is not None:
        batch = batch.union(rm_wg.compute_rm_score(batch))
    reward_tensor, extra = compute_reward(batch, reward_fn)
    return apply_reward_hooks(hooks, reward_tensor), extra


def score_in_background(score: Callable[[DataProto], tuple[torch.Tensor, dict[str, list]]], batch: DataProto) -> Future:
    """``score(batch)`` in a thread of its own, on a copy of the batch's tensors (the passes that run meanwhile add
    columns and may mask rows: the scores must be those of the batch as sampled). verl's
    ``reward_model.launch_reward_fn_async``: scoring that waits on sandboxes, servers or a reward model overlaps the
    log-prob and value passes. The future's result is ``score``'s, or its exception."""
    snapshot = DataProto(batch.batch.clone(), dict(batch.non_tensor_batch), dict(batch.meta_info))
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verl-reward")
    future = executor.submit(score, snapshot)
    executor.shutdown(wait=False)  # the thread ends with its one task
    return future


def shaped_score(config: Any, score: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """A sequence score on the scale of the sampled responses' rewards under the job's ``config``: DAPO's overlong
    penalty added, divided by ``algorithm.reward_temp``."""
    shaping = (config.reward_model.overlong_buffer, config.data.max_response_length)
    return (score + overlong_penalty(response_mask, *shaping)) / config.algorithm.reward_temp


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
        last = score_positions(batch)  # the last model token (multi-turn: not a tool turn after it)
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
