"""Step callbacks: code that sees each RL step's intermediate products and may change them or stop the run.

The controller (``RayPPOTrainer``) calls every registered callback at fixed points of each step (see
:class:`StepCallback`). After each call it checks what the callback touched: a batch tensor whose shape changed, that
was removed, or that now holds NaN/inf raises ``ValueError`` naming the callback and the key, so a bad callback fails
the step it broke instead of silently training on garbage. A callback that raises stops the run with its exception;
checkpoints already on disk stay intact (they are written to a temp directory and renamed).

Three built-ins (docs/python_api.md, "Step callbacks"):

- :class:`KLFilterCallback`: tokens whose per-token KL to the reference exceeds a threshold leave the loss;
- :class:`DynamicGammaScheduler`: ``algorithm.gamma`` is lowered while the step's reward variance is high;
- :class:`RewardAwareEarlyStopping`: stop when ``eval/reward_std`` stays below a threshold for k evaluations.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

logger = logging.getLogger(__name__)

HOOKS = ("on_rewards", "on_advantages", "on_validation", "on_step_end")


class StepCallback:
    """Subclass and override what you need; the controller calls these on every step, in this order.

    ``configure(config)``: once, before the workers are built; returns the config to run with, a changed copy of
    ``config`` (``verl.utils.config.replace_keys``, e.g. the reference policy a callback needs switched on), or
    None to keep it (the loaded config is frozen: it cannot change in place).
    ``on_rewards(trainer, batch, metrics)``: after scoring, log-probs, reference log-probs, values and the rewards
    (``token_level_rewards`` = ``token_level_scores / algorithm.reward_temp`` - KL penalty), before advantages. The
    batch holds ``old_log_probs``, ``ref_log_prob`` and ``token_level_kl`` (when a reference policy is loaded),
    ``values`` (with a critic), ``token_level_scores``, ``token_level_rewards``, ``response_mask``. Replacing
    ``trainer.config`` with a copy of another ``algorithm.gamma`` / ``.lam`` here (``replace_keys``) changes this
    step's advantages.
    ``on_advantages(trainer, batch, metrics)``: after advantages (``advantages``, ``returns``), before the critic and
    actor updates; change tensors in place (e.g. ``response_mask``) to change what the updates see.
    ``on_validation(trainer, metrics)``: after each validation, with its ``val-core/*`` and ``eval/*`` metrics.
    ``on_step_end(trainer, batch, metrics)``: after the step's metrics are complete, before they are logged; return
    ``False`` to stop the run.

    Metrics a callback adds to ``metrics`` are logged with the step (by convention under ``callbacks/``).
    """

    def configure(self, config: Any) -> Any:
        return None

    def on_rewards(self, trainer: Any, batch: Any, metrics: dict[str, Any]) -> None:
        return None

    def on_advantages(self, trainer: Any, batch: Any, metrics: dict[str, Any]) -> None:
        return None

    def on_validation(self, trainer: Any, metrics: dict[str, Any]) -> None:
        return None

    def on_step_end(self, trainer: Any, batch: Any, metrics: dict[str, Any]) -> bool | None:
        return None


class FunctionCallback(StepCallback):
    """A plain function ``fn(trainer, batch, metrics)`` run at one hook (default ``on_advantages``, where every
    intermediate product of the step exists and changes still reach the updates)."""

    def __init__(self, fn: Callable[..., Any], hook: str = "on_advantages"):
        if hook not in HOOKS:
            raise ValueError(f"hook={hook!r}: use one of {HOOKS}")
        self.fn, self.hook = fn, hook
        setattr(self, hook, fn)

    @property
    def name(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))


def as_callback(obj: Any, hook: str = "on_advantages") -> Any:
    """A callback object as is; a plain function wrapped as a :class:`FunctionCallback` at ``hook``."""
    if isinstance(obj, type):
        raise TypeError(f"{obj.__name__} is a class: pass an instance, e.g. {obj.__name__}()")
    if any(hasattr(obj, h) for h in HOOKS) or hasattr(obj, "configure"):
        return obj
    if callable(obj):
        return FunctionCallback(obj, hook)
    raise TypeError(f"{obj!r} is neither a step callback (an object with one of {HOOKS}) nor a function")


def callback_name(cb: Any) -> str:
    """How errors name a callback: its class name, or the wrapped function's qualified name."""
    return cb.name if isinstance(cb, FunctionCallback) else type(cb).__name__


# ---------------------------------------------------------------------------------------------- checked calls


def _batch_tensors(batch: Any) -> Mapping[str, Any]:
    """The batch's tensors (a TensorDict, which has no truth value), or an empty mapping."""
    tensors = getattr(batch, "batch", None)
    return {} if tensors is None else tensors


def _snapshot(batch: Any) -> dict[str, tuple[int, int, tuple[int, ...]]]:
    tensors = _batch_tensors(batch)
    return {k: (id(v), v._version, tuple(v.shape)) for k, v in tensors.items()}


def check_batch_after(name: str, before: Mapping[str, tuple[int, int, tuple[int, ...]]], batch: Any) -> None:
    """Raise ``ValueError`` naming ``name`` and the key if a batch tensor was removed, changed shape, or was written
    (replaced or changed in place) and now holds NaN/inf. New keys must have the batch's length and be finite."""
    import torch

    tensors = _batch_tensors(batch)
    for key, (ident, version, shape) in before.items():
        if key not in tensors:
            raise ValueError(f"{name} removed the batch tensor {key!r}; callbacks may change values, not drop keys")
        t = tensors[key]
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} changed the shape of {key!r} from {list(shape)} to {list(t.shape)}")
        touched = id(t) != ident or t._version != version
        if touched and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} wrote NaN or inf into {key!r}")
    n = next((s[0] for _, _, s in before.values() if s), None)
    for key, t in tensors.items():
        if key in before:
            continue
        if n is not None and (t.dim() == 0 or t.shape[0] != n):
            raise ValueError(f"{name} added {key!r} with shape {list(t.shape)}; its first dim must be the batch ({n})")
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} added {key!r} holding NaN or inf")


def run_callbacks(callbacks: Sequence[Any], hook: str, trainer: Any, *args: Any) -> list[Any]:
    """Call ``hook`` on every callback that has it, checking the batch (and the metrics it set: no NaN/inf) after
    each call (see the module docstring).

    ``args`` is ``(batch, metrics)`` for the batch hooks and ``(metrics,)`` for ``on_validation``. Returns the
    callbacks' return values. An exception from a callback propagates, with a note naming the callback and hook.
    """
    batch = args[0] if len(args) == 2 else None
    metrics = args[-1]
    results = []
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        if fn is None:
            continue
        name = f"{callback_name(cb)}.{hook}"
        before = _snapshot(batch) if batch is not None else {}
        before_metrics = dict(metrics)
        try:
            results.append(fn(trainer, *args))
        except Exception as e:
            e.add_note(f"raised by step callback {name} at step {getattr(trainer, 'global_steps', '?')}")
            raise
        if batch is not None:
            check_batch_after(name, before, batch)
        _check_metrics_after(name, before_metrics, metrics)
    return results


def _check_metrics_after(name: str, before: Mapping[str, Any], metrics: dict[str, Any]) -> None:
    """Metrics a callback set are numbers (numpy and 0-d tensor scalars become Python floats, so every logger can
    write them) and finite; anything else is an error naming the callback and the key, before the step is logged."""
    for key, value in list(metrics.items()):
        if key in before and before[key] is value:
            continue
        if isinstance(value, (int, str)):  # bool is an int
            continue
        if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # numpy scalar, 0-d tensor or array
            value = value.item()
        if not isinstance(value, (int, float)):
            raise TypeError(f"{name} set the metric {key!r} to {type(value).__name__} {value!r}: a metric is a number")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{name} set the metric {key!r} to {value}")
        metrics[key] = value


def apply_reward_hooks(hooks: Sequence[Callable[[Any], Any]], reward_tensor: Any) -> Any:
    """Run ``reward_tensor`` through each hook ``fn(tensor) -> tensor``; a hook that returns something that is not a
    tensor of the same shape, or holds NaN/inf, raises ``ValueError`` naming the hook."""
    import torch

    for hook in hooks:
        name = getattr(hook, "__qualname__", None) or repr(hook)
        out = hook(reward_tensor)
        if not isinstance(out, torch.Tensor):
            raise ValueError(f"reward hook {name} returned {type(out).__name__}, not a tensor")
        if out.shape != reward_tensor.shape:
            raise ValueError(
                f"reward hook {name} changed the reward tensor's shape from {list(reward_tensor.shape)} to "
                f"{list(out.shape)}; it must return a tensor of the same shape (batch, response_length)"
            )
        if not bool(torch.isfinite(out).all()):
            raise ValueError(f"reward hook {name} returned NaN or inf rewards")
        reward_tensor = out.to(reward_tensor.dtype)
    return reward_tensor


# ---------------------------------------------------------------------------------------------- built-ins


class KLFilterCallback(StepCallback):
    """Tokens whose per-token KL to the reference policy exceeds ``threshold`` leave the loss.

    At ``on_advantages`` (rewards and advantages already computed over the whole response) it sets ``response_mask``
    to 0 where ``token_level_kl > threshold``, so the actor's policy loss and the critic's value loss skip those
    tokens this step. ``token_level_kl`` is the ``algorithm.kl_penalty`` estimator (default ``kl``: log pi - log
    pi_ref) of each sampled token. Logs ``callbacks/kl_filtered_frac`` (share of response tokens dropped).

    It needs the reference policy: ``configure`` turns ``actor_rollout_ref.ref.enable`` on when it is unset (null)
    and refuses a config that set it to false.
    """

    def __init__(self, threshold: float = 0.5):
        self.threshold = float(threshold)

    def configure(self, config: Any) -> Any:
        from verl.utils.config import replace_keys

        ref = config.actor_rollout_ref.ref
        if ref.enable is False:
            raise ValueError(
                "KLFilterCallback needs the reference policy, but actor_rollout_ref.ref.enable=false: set it to true "
                "(or null)"
            )
        return replace_keys(config, {"actor_rollout_ref.ref.enable": True})

    def on_advantages(self, trainer: Any, batch: Any, metrics: dict[str, Any]) -> None:
        b = batch.batch
        if "token_level_kl" not in b:
            raise ValueError(
                "KLFilterCallback needs per-token KL, which exists only with a reference policy: set "
                "actor_rollout_ref.ref.enable=true, or register the callback before the first step (run_ppo and "
                "the Python API then switch it on)"
            )
        mask = b["response_mask"]
        drop = (b["token_level_kl"] > self.threshold) & mask.bool()
        valid = int(mask.sum())
        mask.masked_fill_(drop, 0)
        metrics["callbacks/kl_filtered_frac"] = int(drop.sum()) / valid if valid else 0.0


class DynamicGammaScheduler(StepCallback):
    """``algorithm.gamma`` = ``low_gamma`` while the step's reward variance exceeds ``high_var``, else ``base_gamma``.

    The variance is that of the sequence scores (``token_level_scores`` summed over each response, before
    ``reward_temp``) in the step's batch. Set at ``on_rewards``, so it applies to this step's advantages. ``gamma``
    only enters the ``gae`` and ``reinforce_plus_plus`` estimators; with the others it is logged but has no effect.
    ``base_gamma=None`` takes the configured ``algorithm.gamma`` at the first step. Logs ``callbacks/gamma`` and
    ``callbacks/reward_var``.
    """

    def __init__(self, high_var: float = 0.1, low_gamma: float = 0.9, base_gamma: float | None = None):
        if not 0.0 <= low_gamma <= 1.0 or (base_gamma is not None and not 0.0 <= base_gamma <= 1.0):
            raise ValueError(f"gamma values must be in [0, 1], got low_gamma={low_gamma}, base_gamma={base_gamma}")
        self.high_var, self.low_gamma, self.base_gamma = float(high_var), float(low_gamma), base_gamma

    def on_rewards(self, trainer: Any, batch: Any, metrics: dict[str, Any]) -> None:
        from verl.utils.config import replace_keys

        if self.base_gamma is None:
            self.base_gamma = float(trainer.config.algorithm.gamma)
        scores = batch.batch["token_level_scores"].sum(-1).float()
        var = float(scores.var(unbiased=False)) if scores.numel() > 1 else 0.0
        gamma = self.low_gamma if var > self.high_var else float(self.base_gamma)
        trainer.config = replace_keys(trainer.config, {"algorithm.gamma": gamma})  # the loaded config stays as it is
        metrics["callbacks/reward_var"] = var
        metrics["callbacks/gamma"] = gamma


class RewardAwareEarlyStopping(StepCallback):
    """Stop when ``metric`` (default ``eval/reward_std``) is below ``threshold`` for ``patience`` evaluations in a row.

    Counts every validation (including the one before training); the run stops at the end of the step whose
    validation completed the streak, logging ``callbacks/early_stop`` = 1, and ``trainer.stop_reason`` says why.
    Stopping does not write an extra checkpoint.
    """

    def __init__(self, threshold: float = 0.05, patience: int = 3, metric: str = "eval/reward_std"):
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        self.threshold, self.patience, self.metric = float(threshold), int(patience), metric
        self.streak = 0
        self.history: list[float] = []

    def on_validation(self, trainer: Any, metrics: dict[str, Any]) -> None:
        value = metrics.get(self.metric)
        if value is None:
            raise ValueError(f"RewardAwareEarlyStopping: validation produced no {self.metric!r} metric")
        self.history.append(float(value))
        self.streak = self.streak + 1 if float(value) < self.threshold else 0

    def should_stop(self) -> bool:
        return self.streak >= self.patience

    def on_step_end(self, trainer: Any, batch: Any, metrics: dict[str, Any]) -> bool | None:
        if not self.should_stop():
            return None
        metrics["callbacks/early_stop"] = 1
        reason = (
            f"{self.metric} < {self.threshold} for {self.streak} consecutive evaluations "
            f"(last {', '.join(f'{v:.4g}' for v in self.history[-self.streak :])})"
        )
        if getattr(trainer, "stop_reason", None) is None:
            trainer.stop_reason = reason
        logger.info("early stopping at step %s: %s", getattr(trainer, "global_steps", "?"), reason)
        return False
