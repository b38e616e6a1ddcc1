"""The Python trainer API (docs/python_api.md): a thin layer over the same controller ``main_ppo`` runs.

    from verl.trainer.ppo import PPOTrainer
    from verl import DataConfig, EngineConfig

    trainer = PPOTrainer(actor_model="builtin://tiny-qwen2-arith-sft", reward_model="rule",
                         data_config=DataConfig(rollout_batch_size=32, num_rollout_steps=16),
                         engine_config=EngineConfig(kl_coef=0.05, gamma=0.99, reward_temp=1.0),
                         optim_config={"actor_lr": 1e-5, "critic_lr": 5e-6})
    metrics = trainer.train(max_steps=200, eval_interval=50)   # {"eval/reward_mean": [...], ...}

Every trainer here turns its arguments into the ``ppo_trainer`` config tree (``load_config("ppo_trainer",
overrides=...)``; ``trainer.config`` is that tree) and drives ``RayPPOTrainer`` built by
``main_ppo.build_trainer``: ``train()`` is ``RayPPOTrainer.fit()``, ``train_step(batch)`` is one
``RayPPOTrainer.train_step`` -- the same ``_step`` ``fit`` loops. There is no second training loop.
docs/python_api.md has the argument -> config-key table.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from verl.engine.callbacks import as_callback
from verl.trainer.api_rewards import (  # noqa: F401 (the API's reward helpers, importable from here)
    NAMED_REWARDS,
    auto_compute_score,
    length_score,
    resolve_reward,
    wrap_reward_function,
)
from verl.trainer.config.ppo_trainer import PPOTrainerConfig
from verl.utils.config_dict import api_table, flatten_leaves, ppo_dict_to_overrides
from verl.utils.config_loader import (
    ConfigError,
    UnknownConfigKeyError,
    _closest,
    default_config,
    load_config,
    replace_keys,
    to_container,
)

logger = logging.getLogger(__name__)

OUTPUT_ROOT = os.path.join("outputs", "verl-python")

# ------------------------------------------------------------------------------------------------------------------
# PPOTrainer's argument groups (docs/python_api.md): DataConfig, EngineConfig, optim_config (plain dicts, known keys)
# ------------------------------------------------------------------------------------------------------------------


class _ApiConfig(dict):
    """A plain ``dict`` restricted to ``KEYS``; an unknown key raises naming the closest valid one.

    ``KEYS``: ``{API name: config-tree key}``, generated from the schema's ``"api"`` field metadata
    (:func:`verl.utils.config_dict.api_table`: the schema field ``data.train_batch_size`` names
    ``DataConfig.rollout_batch_size``); a name several fields carry sets them all, ``"key1 + key2"``."""

    KEYS: dict[str, str] = {}

    def __init__(self, data: Mapping[str, Any] | None = None, **kwargs: Any):
        super().__init__()
        for k, v in {**(data or {}), **kwargs}.items():
            self[k] = v

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self.KEYS:
            raise UnknownConfigKeyError(
                f"{type(self).__name__}: unknown key {key!r}.{_closest(key, self.KEYS)} Valid keys: {sorted(self.KEYS)}"
            )
        super().__setitem__(key, value)

    def update(self, other: Mapping[str, Any] = (), **kw: Any) -> None:  # type: ignore[override]
        for k, v in dict(other, **kw).items():
            self[k] = v


class DataConfig(_ApiConfig):
    """What each step samples (docs/python_api.md). ``rollout_batch_size``: prompts per step; ``num_rollout_steps``:
    optimizer updates each rollout feeds (see :func:`split_rollout`)."""

    KEYS = api_table("DataConfig")


class EngineConfig(_ApiConfig):
    """The RL algorithm's knobs (docs/python_api.md). ``kl_coef`` > 0 puts a fixed-coefficient KL penalty to the reference
    policy in the reward (``algorithm.kl_ctrl.kl_coef``, with ``algorithm.use_kl_in_reward`` and ``kl_ctrl.type=fixed``);
    ``reward_temp`` divides the score before KL and advantages."""

    KEYS = api_table("EngineConfig")


class OptimConfig(_ApiConfig):
    """``optim_config``: learning rates and the optimizer settings shared by actor and critic."""

    KEYS = api_table("OptimConfig")


# PPOTrainer's estimator when none is given: the schema's (PPO with a critic, GAE), as the dict API's
# (verl.utils.config_dict.PPO_DICT_SCHEMA_DEFAULT_KEYS), not the quickstart recipe's grpo.
DEFAULT_ADV_ESTIMATOR: str = default_config("ppo_trainer").algorithm.adv_estimator


def split_rollout(rollout_batch_size: int, num_rollout_steps: int) -> tuple[int, int]:
    """``(ppo_mini_batch_size, ppo_epochs)`` so that each rollout of ``rollout_batch_size`` prompts feeds
    ``num_rollout_steps`` optimizer updates, or the most that fits below it.

    The batch splits into m mini-batches per epoch, m the largest divisor of ``rollout_batch_size`` that is at most
    ``num_rollout_steps`` (mini-batch = rollout_batch_size / m prompts), over ``num_rollout_steps // m`` epochs. Updates
    per rollout = m * epochs: exactly ``num_rollout_steps`` when it divides or is a multiple of the divisor, else
    rounded down (32 prompts: 16 -> 16, 24 -> 16, 48 -> 32, 64 -> 64 (32 x 2 epochs), 100 -> 96, 128 -> 128).
    """
    if not isinstance(rollout_batch_size, int) or rollout_batch_size < 1:
        raise ConfigError(f"DataConfig.rollout_batch_size={rollout_batch_size!r} must be an integer >= 1")
    if not isinstance(num_rollout_steps, int) or num_rollout_steps < 1:
        raise ConfigError(f"DataConfig.num_rollout_steps={num_rollout_steps!r} must be an integer >= 1")
    m = max(d for d in range(1, rollout_batch_size + 1) if rollout_batch_size % d == 0 and d <= num_rollout_steps)
    return rollout_batch_size // m, max(1, num_rollout_steps // m)


def ppo_trainer_overrides(
    actor_model: str | None = None,
    data_config: Mapping[str, Any] | None = None,
    engine_config: Mapping[str, Any] | None = None,
    optim_config: Mapping[str, Any] | None = None,
    adv_estimator: str | None = DEFAULT_ADV_ESTIMATOR,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The dotted config-tree overrides for :class:`PPOTrainer`'s arguments (docs/python_api.md has the table)."""
    data, engine, optim = DataConfig(data_config), EngineConfig(engine_config), OptimConfig(optim_config)
    out: dict[str, Any] = {}
    if adv_estimator is not None:
        out["algorithm.adv_estimator"] = adv_estimator
    if actor_model is not None:
        out["actor_rollout_ref.model.path"] = os.fspath(actor_model)
    for key, value in data.items():
        if key != "num_rollout_steps":
            out[DataConfig.KEYS[key]] = value
    if data.get("num_rollout_steps") is not None:
        # the rollout batch the run will have: DataConfig's, else an override's, else the default
        batch = data.get(
            "rollout_batch_size",
            (overrides or {}).get("data.train_batch_size", load_config("ppo_trainer").data.train_batch_size),
        )
        mini, epochs = split_rollout(batch, data["num_rollout_steps"])
        out["actor_rollout_ref.actor.ppo_mini_batch_size"] = mini
        out["actor_rollout_ref.actor.ppo_epochs"] = epochs
        if (batch // mini) * epochs != data["num_rollout_steps"]:
            logger.info(
                "num_rollout_steps=%s with rollout_batch_size=%s: %s updates per rollout (%s mini-batches x %s epochs)",
                data["num_rollout_steps"],
                batch,
                (batch // mini) * epochs,
                batch // mini,
                epochs,
            )
    for key, value in engine.items():
        if key == "kl_coef":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"EngineConfig.kl_coef={value!r} must be a number >= 0 (0: no KL penalty)")
            out["algorithm.use_kl_in_reward"] = value > 0
            out["algorithm.kl_ctrl.type"] = "fixed"
            out["algorithm.kl_ctrl.kl_coef"] = value
        else:
            out[EngineConfig.KEYS[key]] = value
    for key, value in optim.items():
        for tree_key in OptimConfig.KEYS[key].split(" + "):
            out[tree_key] = value
    return out


# ------------------------------------------------------------------------------------------------------------------
# The trainers
# ------------------------------------------------------------------------------------------------------------------


class TrainResult(dict):
    """``train()``'s return: ``{metric name: [values in step order]}`` (validation metrics such as
    ``eval/reward_mean`` once per evaluation, training metrics once per step). ``steps[name]`` holds the step of each
    value; ``stop_reason`` says why a run ended early (None when it ran all steps)."""

    def __init__(self, history: Mapping[str, list], stop_reason: str | None = None):
        super().__init__({k: [v for _, v in pts] for k, pts in history.items()})
        self.steps = {k: [s for s, _ in pts] for k, pts in history.items()}
        self.stop_reason = stop_reason


def _unique_output_dir(kind: str) -> str:
    return os.path.join(OUTPUT_ROOT, f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}")


class RLTrainer:
    """The generic trainer (``verl.Trainer`` / ``verl.trainer.RLTrainer``): a config tree plus callbacks, evaluators
    and reward hooks, driving one ``RayPPOTrainer`` built on first use.

    ``config``: a ``ppo_trainer`` tree (``load_config("ppo_trainer", ...)``) or None for the defaults;
    ``overrides``: ``{"dotted.key": value}`` applied on top (unknown keys raise with the closest valid key);
    ``reward_model``: see :func:`resolve_reward`; ``output_dir``: ``trainer.default_local_dir`` (default: a fresh
    ``outputs/verl-python/<kind>-<time>-<id>`` unless the config set one, so separate trainers never resume each
    other's checkpoints; pass the same directory again to resume).
    """

    _kind = "rl"

    def __init__(
        self,
        config: PPOTrainerConfig | Any | None = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        reward_model: Any = None,
        output_dir: str | None = None,
    ):
        reward_overrides, self.compute_score = resolve_reward(reward_model)
        base = flatten_leaves(to_container(config)) if config is not None else {}
        defaults = flatten_leaves(to_container(load_config("ppo_trainer")))
        merged = {k: v for k, v in base.items() if defaults.get(k, object()) != v}
        merged.update(reward_overrides)
        merged.update(overrides or {})
        if output_dir is not None:
            merged["trainer.default_local_dir"] = os.fspath(output_dir)
        elif "trainer.default_local_dir" not in merged:
            merged["trainer.default_local_dir"] = _unique_output_dir(self._kind)
        self.overrides = merged
        self.config: PPOTrainerConfig = load_config("ppo_trainer", overrides=merged)
        self.callbacks: list[Any] = []
        self.evaluators: dict[str, Any] = {}
        self.reward_hooks: list[Callable[[Any], Any]] = []
        self.controller = None  # the RayPPOTrainer, built on first train()/train_step()

    # ---------------------------------------------------------------- extension points
    def add_callback(self, callback: Any, hook: str = "on_advantages") -> Any:
        """Register a step callback (:class:`verl.engine.StepCallback`), or a function ``fn(trainer, batch,
        metrics)`` run at ``hook``. Returns the registered callback. Add callbacks that change the config (e.g.
        :class:`verl.engine.KLFilterCallback` enables the reference policy) before the first step."""
        cb = as_callback(callback, hook)
        self.callbacks.append(cb)  # build_trainer runs cb.configure(config) before the workers exist
        return cb

    def add_evaluator(self, name: str, evaluator: Any) -> None:
        """Run ``evaluator`` on every validation; its results appear as ``eval/<name>_*``
        (:mod:`verl.trainer.ppo.evaluators`)."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"evaluator name {name!r} must be a non-empty string without '/'")
        if name == "reward":
            raise ValueError("evaluator name 'reward' is taken by the built-in eval/reward_mean and eval/reward_std")
        if not (hasattr(evaluator, "evaluate") or callable(evaluator)):
            raise TypeError(f"evaluator {name!r} needs an evaluate(trainer, batch) method or must be callable")
        self.evaluators[name] = evaluator

    def set_reward_hook(self, fn: Callable[[Any], Any] | None) -> None:
        """Replace the training reward hook: ``fn(reward_tensor) -> reward_tensor`` with ``reward_tensor`` the
        step's token-level scores (batch, response_length; each response's score on its last token), applied right
        after scoring. A hook that returns another shape or NaN/inf raises ``ValueError`` naming it. ``None``
        removes it. Validation scores are not hooked."""
        if fn is not None and not callable(fn):
            raise TypeError(f"reward hook {fn!r} is not callable")
        self.reward_hooks[:] = [] if fn is None else [fn]

    @property
    def engine(self) -> Any:
        """The hybrid engine's callback interface: ``trainer.engine.step(callback)`` (see :class:`verl.engine.HybridEngine`)."""
        from verl.engine import HybridEngine

        return HybridEngine(self)

    # ---------------------------------------------------------------- running
    def build(self) -> Any:
        """Build the controller now (models loaded, checkpoint resumed on the first step); idempotent."""
        if self.controller is None:
            from verl.trainer.main_ppo import build_trainer

            ctrl = build_trainer(self.config, self.callbacks, self.compute_score, self.evaluators, self.reward_hooks)
            ctrl.callbacks, ctrl.evaluators, ctrl.reward_hooks = self.callbacks, self.evaluators, self.reward_hooks
            self.controller, self.config = ctrl, ctrl.config  # the tree it runs (callbacks may have changed a copy)
        return self.controller

    def train(self, max_steps: int | None = None, eval_interval: int | None = None) -> TrainResult:
        """Run the controller's ``fit``: ``max_steps`` steps (``trainer.total_training_steps``; None: the config's),
        validating every ``eval_interval`` steps (``trainer.test_freq``) and at the end. A later call trains
        ``max_steps`` more. Returns every metric's values in step order (:class:`TrainResult`)."""
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps={max_steps!r} must be an integer >= 1")
        if eval_interval is not None:
            self._replace({"trainer.test_freq": int(eval_interval)})
        if self.controller is None:
            if max_steps is not None:
                self._replace({"trainer.total_training_steps": max_steps})
            self.build()
        elif max_steps is not None:
            self.controller.total_training_steps = self.controller.global_steps + max_steps
            actor_optim, critic_optim = self.config.actor_rollout_ref.actor.optim, self.config.critic.optim
            styles = {actor_optim.lr_scheduler_type, critic_optim.lr_scheduler_type}
            if "cosine" in styles:  # the schedule was built for the first call's length and has ended
                logger.warning(
                    "train(max_steps=%d) after %d steps: the cosine learning-rate schedule was built for the first "
                    "call's %d steps and stays at lr * min_lr_ratio (%s) for these; set the whole length in the "
                    "first call, or warmup_style=constant",
                    max_steps,
                    self.controller.global_steps,
                    self.config.trainer.total_training_steps,
                    actor_optim.min_lr_ratio or 0.0,
                )
        self.controller.stop_reason = None
        self.controller.fit()
        return self.metrics

    def _replace(self, updates: Mapping[str, Any]) -> None:
        """A changed copy of the config (``{"dotted.key": value}``), for this trainer and its controller: the
        loaded config is frozen."""
        self.config = replace_keys(self.config, updates)
        if self.controller is not None:
            self.controller.config = self.config

    def train_step(self, batch: Any = None) -> dict[str, Any]:
        """One controller step on ``batch``: a ``DataProto`` of left-padded prompts (as
        :func:`verl.data.make_pretokenized_dataloader` yields), a dict of such tensors, a list of prompt strings, or
        None for the next batch of ``data.train_files``. Returns ``{"loss": actor policy loss, "reward": mean
        sequence score (after the reward hook), "step": int, "metrics": every metric of the step}``."""
        ctrl = self.build()
        prompts = None if batch is None else self._as_prompts(batch)
        metrics = ctrl.train_step(prompts)
        return {
            "loss": float(metrics.get("actor/pg_loss", float("nan"))),
            "reward": float(metrics["critic/score/mean"]),
            "step": ctrl.global_steps,
            "metrics": metrics,
        }

    def evaluate(self) -> dict[str, float]:
        """Validate now (greedy responses to ``data.val_files``, evaluators and ``on_validation`` callbacks
        included; after resuming from the run directory's checkpoint, if any); returns the metrics."""
        ctrl = self.build()
        ctrl.init()
        return ctrl.validate()

    def save_checkpoint(self) -> str:
        """Write a checkpoint of the current step to ``trainer.default_local_dir``; returns its directory."""
        ctrl = self.build()
        ctrl.init()
        return ctrl.save_checkpoint()

    @property
    def metrics(self) -> TrainResult:
        """Everything logged so far, as ``train()`` returns it."""
        if self.controller is None:
            return TrainResult({})
        return TrainResult(self.controller.history, self.controller.stop_reason)

    @property
    def output_dir(self) -> str:
        return os.path.abspath(os.path.expanduser(self.config.trainer.default_local_dir))

    def close(self) -> None:
        """Close the loggers (and the log file of :class:`DataParallelRLTrainer`); training can go on after it."""
        if self.controller is not None:
            self.controller.close()

    def shutdown(self) -> None:
        """``close``, then stop the worker processes (``trainer.backend=ray``); the trainer cannot train after it."""
        self.close()
        if self.controller is not None:
            self.controller.shutdown()

    def __enter__(self) -> RLTrainer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def _as_prompts(self, batch: Any) -> Any:
        import torch

        from verl.protocol import DataProto

        tokenizer = self.controller.tokenizer
        if isinstance(batch, Sequence) and batch and all(isinstance(p, str) for p in batch):
            from verl.data.loader import tokenize_prompts
            from verl.utils.dataset.rl_dataset import collate_prompts

            limit = self.config.data.max_prompt_length
            where = [f"train_step prompt {i} (data.max_prompt_length={limit})" for i in range(len(batch))]
            items = tokenize_prompts([{"prompt": p} for p in batch], tokenizer, limit, where=where)
            return collate_prompts(items, tokenizer.pad_token_id)
        if isinstance(batch, Mapping):
            tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
            batch = DataProto.from_dict(tensors, {k: v for k, v in batch.items() if k not in tensors})
        if not isinstance(batch, DataProto):
            raise TypeError(
                f"train_step(batch): got {type(batch).__name__}; pass a DataProto of prompts (as "
                "make_pretokenized_dataloader yields), a dict of input_ids/attention_mask tensors, or a list of strings"
            )
        b = batch.batch if batch.batch is not None else {}
        if "input_ids" not in b or "attention_mask" not in b:
            raise KeyError(
                f"train_step(batch): the batch needs input_ids and attention_mask tensors; it has {list(b.keys())}"
            )
        if "position_ids" not in b:  # on a copy: the caller's batch is never changed
            batch = DataProto(
                batch=dict(b), non_tensor_batch=dict(batch.non_tensor_batch), meta_info=dict(batch.meta_info)
            )
            batch.batch["position_ids"] = (b["attention_mask"].long().cumsum(-1) - 1).clamp(min=0)
        if int(b["input_ids"].max()) >= len(tokenizer):
            raise ValueError(
                f"train_step(batch): token id {int(b['input_ids'].max())} is outside the policy's vocabulary "
                f"({len(tokenizer)}): build the batch with the model's tokenizer "
                f"({self.config.data.tokenizer or self.config.actor_rollout_ref.model.path})"
            )
        return batch


class PPOTrainer(RLTrainer):
    """PPO through keyword arguments (docs/python_api.md); a thin layer over the ``ppo_trainer`` tree and its controller.

    ``actor_model``: the policy (any local HF directory or ``builtin://`` model; the critic starts from it too).
    ``reward_model``: a scorer name, a Python function or a local reward-model directory (:func:`resolve_reward`).
    ``data_config`` (:class:`DataConfig`), ``engine_config`` (:class:`EngineConfig`), ``optim_config``
    (:class:`OptimConfig` keys: ``actor_lr``, ``critic_lr``, ...): plain dicts with known keys.
    ``adv_estimator``: ``gae`` (PPO with a critic, the default), or any of the main job's estimators.
    ``overrides``: ``{"dotted.key": value}`` for anything else in the tree (wins over the arguments).
    """

    _kind = "ppo"

    def __init__(
        self,
        actor_model: str | None = None,
        reward_model: Any = None,
        data_config: Mapping[str, Any] | None = None,
        engine_config: Mapping[str, Any] | None = None,
        optim_config: Mapping[str, Any] | None = None,
        *,
        adv_estimator: str = DEFAULT_ADV_ESTIMATOR,
        overrides: Mapping[str, Any] | None = None,
        output_dir: str | None = None,
    ):
        mapped = ppo_trainer_overrides(
            actor_model, data_config, engine_config, optim_config, adv_estimator, overrides=overrides
        )
        super().__init__(overrides={**mapped, **(overrides or {})}, reward_model=reward_model, output_dir=output_dir)


class DataParallelRLTrainer(RLTrainer):
    """The dict-config trainer (docs/python_api.md): ``DataParallelRLTrainer(config, log_dir='./logs')`` with ``config`` from
    :func:`verl.utils.config.get_ppo_default_config` (or any dict with its keys).

    ``log_dir``: a ``verl-<YYYYmmdd-HHMMSS>.log`` file is written there (Python logging: the per-step ``loss``,
    ``reward`` and key metrics, and every ``verl`` warning), and the run's output directory (metrics.jsonl,
    config.yaml, checkpoints) is ``<log_dir>/verl-<time>/`` unless the config sets ``trainer.default_local_dir``.
    """

    _kind = "dp"

    def __init__(self, config: Mapping[str, Any] | None = None, log_dir: str | None = None, **kwargs: Any):
        from verl.utils.config import get_ppo_default_config

        overrides, reward = ppo_dict_to_overrides(config if config is not None else get_ppo_default_config())
        self.log_file: str | None = None
        self._handler: logging.Handler | None = None
        if log_dir is not None:
            self.log_file = _free_path(os.path.join(log_dir, f"verl-{time.strftime('%Y%m%d-%H%M%S')}"), ".log")
            if "trainer.default_local_dir" not in overrides and kwargs.get("output_dir") is None:
                kwargs["output_dir"] = self.log_file[: -len(".log")]
        super().__init__(overrides={**overrides, **kwargs.pop("overrides", {})}, reward_model=reward, **kwargs)
        if self.log_file is not None:
            self._open_log()

    def _open_log(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.log_file)), exist_ok=True)
        handler = logging.FileHandler(self.log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.INFO)
        root = logging.getLogger("verl")
        root.addHandler(handler)
        self._saved_level = root.level
        if root.getEffectiveLevel() > logging.INFO:
            root.setLevel(logging.INFO)
        self._handler = handler
        logger.info(
            "DataParallelRLTrainer: run directory %s (config.yaml, metrics.jsonl, checkpoints)", self.output_dir
        )

    def train_step(self, batch: Any = None) -> dict[str, Any]:
        out = super().train_step(batch)
        m = out["metrics"]
        logger.info(
            "step %d: loss=%.4f reward=%.4f response_length=%.1f step_time=%.2fs",
            out["step"],
            out["loss"],
            out["reward"],
            m.get("response_length/mean", float("nan")),
            m.get("timing_s/step", float("nan")),
        )
        return out

    def close(self) -> None:
        super().close()
        if self._handler is not None:
            root = logging.getLogger("verl")
            root.removeHandler(self._handler)
            root.setLevel(self._saved_level)
            self._handler.close()
            self._handler = None


def _free_path(stem: str, suffix: str) -> str:
    path, i = stem + suffix, 1
    while os.path.exists(path) or os.path.exists(path[: -len(suffix)]):
        path, i = f"{stem}-{i}{suffix}", i + 1
    return path


Trainer = RLTrainer
