"""Step callbacks: the checks around every call, and the three built-ins on handmade batches."""

from __future__ import annotations

import pytest
import torch

from verl.engine import (
    DynamicGammaScheduler,
    HybridEngine,
    KLFilterCallback,
    RewardAwareEarlyStopping,
    StepCallback,
)
from verl.engine.callbacks import apply_reward_hooks, as_callback, run_callbacks
from verl.protocol import DataProto
from verl.trainer.config.algorithm import AlgoConfig
from verl.trainer.config.ppo_trainer import PPOTrainerConfig
from verl.utils.config import replace_keys


class FakeTrainer:
    def __init__(self, gamma: float = 0.99):
        self.config = PPOTrainerConfig(algorithm=AlgoConfig(gamma=gamma))  # ref.enable: None, the schema's default
        self.global_steps = 3
        self.stop_reason = None


def batch(**tensors: torch.Tensor) -> DataProto:
    return DataProto.from_dict(tensors)


def step_batch() -> DataProto:
    return batch(
        response_mask=torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]),
        token_level_kl=torch.tensor([[0.1, 0.9, 0.4, 0.0], [0.6, 0.2, 0.0, 0.0]]),
        token_level_scores=torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]),
        advantages=torch.zeros(2, 4),
    )


def test_kl_filter_drops_exactly_the_tokens_over_the_threshold():
    b, metrics = step_batch(), {}
    run_callbacks([KLFilterCallback(threshold=0.5)], "on_advantages", FakeTrainer(), b, metrics)
    assert b.batch["response_mask"].tolist() == [[1, 0, 1, 0], [0, 1, 0, 0]]
    assert metrics["callbacks/kl_filtered_frac"] == pytest.approx(2 / 5)


def test_kl_filter_needs_the_reference_policy():
    cfg = FakeTrainer().config
    configured = KLFilterCallback().configure(cfg)
    assert configured.actor_rollout_ref.ref.enable is True
    assert cfg.actor_rollout_ref.ref.enable is None  # a changed copy: the loaded config stays as it is
    cfg = replace_keys(cfg, {"actor_rollout_ref.ref.enable": False})
    with pytest.raises(ValueError, match="ref.enable=false"):
        KLFilterCallback().configure(cfg)
    b = step_batch()
    b.batch.pop("token_level_kl")
    with pytest.raises(ValueError, match="KLFilterCallback needs per-token KL"):
        run_callbacks([KLFilterCallback()], "on_advantages", FakeTrainer(), b, {})


def test_dynamic_gamma_lowers_gamma_while_reward_variance_is_high():
    trainer, cb = FakeTrainer(gamma=0.99), DynamicGammaScheduler(high_var=0.1, low_gamma=0.9)
    high = batch(token_level_scores=torch.tensor([[0.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]))
    metrics: dict = {}
    run_callbacks([cb], "on_rewards", trainer, high, metrics)  # sequence scores 1, 0, 1, 0: variance 0.25
    assert trainer.config.algorithm.gamma == 0.9
    assert metrics["callbacks/gamma"] == 0.9 and metrics["callbacks/reward_var"] == pytest.approx(0.25)
    low = batch(token_level_scores=torch.tensor([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]))
    run_callbacks([cb], "on_rewards", trainer, low, metrics)
    assert trainer.config.algorithm.gamma == 0.99 and metrics["callbacks/gamma"] == 0.99


def test_early_stopping_after_k_consecutive_low_reward_std():
    trainer, cb = FakeTrainer(), RewardAwareEarlyStopping(threshold=0.05, patience=3)
    stops = []
    for std in [0.01, 0.2, 0.01, 0.02, 0.03, 0.01]:  # the 0.2 breaks the first streak
        run_callbacks([cb], "on_validation", trainer, {"eval/reward_std": std})
        metrics: dict = {}
        stops.append(run_callbacks([cb], "on_step_end", trainer, step_batch(), metrics) == [False])
    assert stops == [False, False, False, False, True, True]
    assert "eval/reward_std < 0.05 for 3 consecutive evaluations" in trainer.stop_reason
    with pytest.raises(ValueError, match="no 'eval/reward_std'"):
        cb.on_validation(trainer, {})


class Reshape(StepCallback):
    def on_advantages(self, trainer, batch, metrics):
        batch.batch["advantages"] = batch.batch["advantages"][:, :2]


class WritesNaN(StepCallback):
    def on_rewards(self, trainer, batch, metrics):
        batch.batch["token_level_scores"][0, 0] = float("nan")  # in place


class Drops(StepCallback):
    def on_advantages(self, trainer, batch, metrics):
        batch.batch.pop("advantages")


class NaNMetric(StepCallback):
    def on_validation(self, trainer, metrics):
        metrics["callbacks/score"] = float("nan")


class Raises(StepCallback):
    def on_advantages(self, trainer, batch, metrics):
        raise RuntimeError("boom")


def test_a_callback_that_breaks_a_tensor_is_named():
    with pytest.raises(ValueError, match=r"Reshape.on_advantages changed the shape of 'advantages' from \[2, 4\]"):
        run_callbacks([Reshape()], "on_advantages", FakeTrainer(), step_batch(), {})
    with pytest.raises(ValueError, match="WritesNaN.on_rewards wrote NaN or inf into 'token_level_scores'"):
        run_callbacks([WritesNaN()], "on_rewards", FakeTrainer(), step_batch(), {})
    with pytest.raises(ValueError, match="Drops.on_advantages removed the batch tensor 'advantages'"):
        run_callbacks([Drops()], "on_advantages", FakeTrainer(), step_batch(), {})
    with pytest.raises(ValueError, match="NaNMetric.on_validation set the metric 'callbacks/score' to nan"):
        run_callbacks([NaNMetric()], "on_validation", FakeTrainer(), {"eval/reward_std": 0.1})
    with pytest.raises(RuntimeError, match="boom") as info:
        run_callbacks([Raises()], "on_advantages", FakeTrainer(), step_batch(), {})
    assert "raised by step callback Raises.on_advantages at step 3" in info.value.__notes__[0]


def test_reward_hooks_are_checked_and_named():
    r = torch.tensor([[0.0, 1.0], [0.0, 0.0]])

    def custom_reward_shaping(reward_tensor):
        return reward_tensor + 0.1 * (reward_tensor > 0).float()

    assert apply_reward_hooks([custom_reward_shaping], r).tolist() == [[0.0, pytest.approx(1.1)], [0.0, 0.0]]

    def shrinks(t):
        return t[:, :1]

    def nan(t):
        return t / 0.0

    with pytest.raises(
        ValueError, match=r"reward hook .*shrinks changed the reward tensor's shape from \[2, 2\] to \[2, 1\]"
    ):
        apply_reward_hooks([shrinks], r)
    with pytest.raises(ValueError, match="reward hook .*nan returned NaN or inf"):
        apply_reward_hooks([nan], r)
    with pytest.raises(ValueError, match="returned list, not a tensor"):
        apply_reward_hooks([lambda t: t.tolist()], r)


def test_functions_become_callbacks_and_engine_step_registers_them():
    class Holder:
        def __init__(self):
            self.callbacks = []

        def add_callback(self, cb, hook="on_advantages"):
            self.callbacks.append(as_callback(cb, hook))

    holder = Holder()
    engine = HybridEngine(holder)
    seen = []

    @engine.step
    def watch(trainer, batch, metrics):
        seen.append(batch.batch["token_level_kl"].max().item())

    engine.step(KLFilterCallback())
    engine.register_step_callback(lambda t, b, m: m.setdefault("x", 1), hook="on_rewards")
    assert [type(c).__name__ for c in holder.callbacks] == ["FunctionCallback", "KLFilterCallback", "FunctionCallback"]
    run_callbacks(holder.callbacks, "on_advantages", FakeTrainer(), step_batch(), {})
    assert seen == [pytest.approx(0.9)]
    with pytest.raises(TypeError):
        as_callback(42)


def test_callback_metrics_become_plain_numbers_and_classes_are_rejected():
    import numpy as np

    class NumpyMetrics(StepCallback):
        def on_validation(self, trainer, metrics):
            metrics["callbacks/np"] = np.float32(0.25)
            metrics["callbacks/t"] = torch.tensor(2.0)

    class ListMetric(StepCallback):
        def on_validation(self, trainer, metrics):
            metrics["callbacks/list"] = [1, 2]

    metrics = {"eval/reward_std": 0.1}
    run_callbacks([NumpyMetrics()], "on_validation", FakeTrainer(), metrics)
    assert metrics["callbacks/np"] == 0.25 and type(metrics["callbacks/np"]) is float
    assert metrics["callbacks/t"] == 2.0 and type(metrics["callbacks/t"]) is float  # every logger can write them
    with pytest.raises(TypeError, match="ListMetric.on_validation set the metric 'callbacks/list' to list"):
        run_callbacks([ListMetric()], "on_validation", FakeTrainer(), {})
    with pytest.raises(TypeError, match=r"KLFilterCallback is a class: pass an instance, e.g. KLFilterCallback\(\)"):
        as_callback(KLFilterCallback)
