"""The Python trainer API (PPOTrainer, DataParallelRLTrainer; docs/python_api.md): argument -> config-key mapping, bad
input, and tiny end-to-end runs through the same controller as main_ppo."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from verl import DataConfig, DataParallelRLTrainer, EngineConfig, Trainer
from verl.engine import DynamicGammaScheduler, KLFilterCallback, RewardAwareEarlyStopping, StepCallback
from verl.trainer import RLTrainer
from verl.trainer.api import resolve_reward, split_rollout
from verl.trainer.ppo import PPOTrainer
from verl.trainer.ppo.evaluators import (
    LatencyEvaluator,
    ResponseLengthEvaluator,
    ToxicityEvaluator,
    run_evaluators,
)
from verl.utils.config import ConfigError, get_ppo_default_config, ppo_dict_to_overrides

MODEL = "builtin://tiny-qwen2-arith-sft"
TINY_DATA = DataConfig(
    rollout_batch_size=4,
    num_rollout_steps=2,
    responses_per_prompt=4,
    train_files="builtin://arithmetic/train?train_size=64",
    val_files="builtin://arithmetic/test?test_size=8",
    max_response_length=24,
)
QUIET = {"trainer.logger": ["file"]}


# ------------------------------------------------------------------------------------------------ mapping (no model)


def test_ppo_trainer_arguments_land_on_their_tree_keys(tmp_path):
    trainer = PPOTrainer(
        actor_model="/models/policy",
        reward_model="rule",
        data_config=DataConfig(rollout_batch_size=32, num_rollout_steps=64),
        engine_config=EngineConfig(kl_coef=0.05, gamma=0.95, reward_temp=2.0),
        optim_config={"actor_lr": 1e-5, "critic_lr": 5e-6},
        output_dir=tmp_path,
    )
    c = trainer.config
    assert c.actor_rollout_ref.model.path == "/models/policy" and c.critic.model.path == "/models/policy"
    assert c.data.train_batch_size == 32
    assert (c.actor_rollout_ref.actor.ppo_mini_batch_size, c.actor_rollout_ref.actor.ppo_epochs) == (1, 2)
    assert (c.critic.ppo_mini_batch_size, c.critic.ppo_epochs) == (1, 2)  # the critic follows the actor
    assert c.algorithm.use_kl_in_reward is True and c.algorithm.kl_ctrl.type == "fixed"
    assert c.algorithm.kl_ctrl.kl_coef == 0.05 and c.algorithm.gamma == 0.95 and c.algorithm.reward_temp == 2.0
    assert c.actor_rollout_ref.actor.optim.lr == 1e-5 and c.critic.optim.lr == 5e-6
    assert c.algorithm.adv_estimator == "gae" and trainer.output_dir == str(tmp_path)
    assert isinstance(DataConfig(rollout_batch_size=1), dict)  # the argument groups are plain dicts
    grpo = PPOTrainer(adv_estimator="grpo", overrides={"trainer.seed": 7}, engine_config={"kl_coef": 0.0})
    assert grpo.config.algorithm.adv_estimator == "grpo" and grpo.config.trainer.seed == 7
    assert grpo.config.algorithm.use_kl_in_reward is False
    assert grpo.output_dir != PPOTrainer().output_dir  # every trainer gets its own run directory
    assert Trainer is RLTrainer


@pytest.mark.parametrize(
    "steps, expected",
    [(16, (2, 1)), (24, (2, 1)), (32, (1, 1)), (48, (1, 1)), (64, (1, 2)), (100, (1, 3)), (128, (1, 4)), (1, (32, 1))],
)
def test_num_rollout_steps_is_updates_per_rollout(steps, expected):
    mini, epochs = split_rollout(32, steps)
    assert (mini, epochs) == expected
    assert (32 // mini) * epochs <= steps


def test_unknown_keys_name_the_closest_valid_one():
    with pytest.raises(ConfigError, match="Did you mean 'rollout_batch_size'"):
        DataConfig(rollout_batch=32)
    with pytest.raises(ConfigError, match="Did you mean 'kl_coef'"):
        EngineConfig(kl_coeff=0.1)
    with pytest.raises(ConfigError, match="Did you mean 'actor_lr'"):
        PPOTrainer(optim_config={"actor_lrr": 1e-5})
    with pytest.raises(ConfigError, match="Did you mean 'algorithm.gamma'"):
        PPOTrainer(overrides={"algorithm.gama": 0.9})
    config = get_ppo_default_config()
    with pytest.raises(KeyError, match="unknown config key 'train.dp_sise'. Did you mean 'train.dp_size'"):
        config["train"]["dp_sise"] = 4
    with pytest.raises(ConfigError, match="Did you mean 'train.use_amp'"):
        DataParallelRLTrainer({"train": {"use_ampp": True}})
    with pytest.raises(ConfigError, match="Did you mean 'model.pretrained_model_name_or_path'"):
        DataParallelRLTrainer({"model": {"pretrained_model_name": "x"}})


@pytest.mark.slow
def test_dict_config_maps_onto_the_tree():
    config = get_ppo_default_config()
    assert config["model"]["pretrained_model_name_or_path"] == MODEL
    assert {"dp_size", "tp_size", "pp_size", "grad_accumulation_steps", "use_amp"} <= set(config["train"])
    assert config["actor_rollout_ref"]["actor"]["optim"]["lr"] == config["train"]["lr"]  # the whole tree is there
    config["model"]["pretrained_model_name_or_path"] = "/models/opt"
    config["train"]["grad_accumulation_steps"] = 4
    config["train"]["use_amp"] = True
    config["train"]["lr"] = 3e-5
    config["algorithm"]["gamma"] = 0.9
    c = DataParallelRLTrainer(config).config
    assert c.actor_rollout_ref.model.path == "/models/opt" and c.critic.model.path == "/models/opt"
    assert c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 16 * 8 // 4
    assert c.critic.ppo_micro_batch_size_per_gpu == 32
    assert c.actor_rollout_ref.model.dtype == "bf16" and c.critic.model.dtype == "bf16"
    assert c.actor_rollout_ref.actor.optim.lr == 3e-5 and c.algorithm.gamma == 0.9
    assert c.algorithm.adv_estimator == "gae"
    config["actor_rollout_ref"]["actor"]["optim"]["lr"] = 1e-6
    with pytest.raises(
        ConfigError, match=r"config\['train'\]\['lr'\]=3e-05 and actor_rollout_ref.actor.optim.lr=1e-06"
    ):
        ppo_dict_to_overrides(config)
    for key, value in [("tp_size", 2), ("pp_size", 2), ("dp_size", 4)]:
        bad = get_ppo_default_config()
        bad["train"][key] = value
        with pytest.raises(NotImplementedError, match=rf"config\['train'\]\['{key}'\]={value}"):
            DataParallelRLTrainer(bad)
    bad = get_ppo_default_config()
    bad["train"]["grad_accumulation_steps"] = 3
    with pytest.raises(ConfigError, match="grad_accumulation_steps'\\]=3 must divide"):
        DataParallelRLTrainer(bad)


def test_reward_model_forms(tmp_path):
    assert resolve_reward("rule") == ({}, None)
    _, auto = resolve_reward(None)
    assert auto("arithmetic", "1 + 2 = 3\n#### 3", "3") == 1.0  # a rule scorer where the data has one
    assert 0.0 < auto("unknown", "x" * 20, None) < 1.0  # else the length reward
    _, forced = resolve_reward("arithmetic")
    assert forced("some_other_source", "#### 3", "3") == 1.0
    _, length = resolve_reward("length")
    assert length("s", "x" * 32, None) == 1.0

    def simple(solution_str, ground_truth):
        return float(solution_str == ground_truth)

    def verl_style(data_source, solution_str, ground_truth, extra_info=None):
        return 0.5

    assert resolve_reward(simple)[1]("src", "a", "a") == 1.0
    assert resolve_reward(verl_style)[1] is verl_style
    assert resolve_reward(str(tmp_path)) == (
        {"reward_model.enable": True, "reward_model.model.path": str(tmp_path)},
        None,
    )
    with pytest.raises(ValueError, match="looks like a hub id"):
        resolve_reward("weibomiaoo/rm-llama3-8b")


def test_evaluator_results_are_named_and_checked():
    evs = {
        "length": lambda t, b: [1, 2, 3],
        "latency": lambda t, b: {"p50": 0.1, "p95": 0.2},
        "one": lambda t, b: 4.0,
    }
    assert run_evaluators(evs, None, None) == {
        "eval/length_mean": 2.0,
        "eval/length_std": pytest.approx(math.sqrt(2 / 3)),
        "eval/latency_p50": 0.1,
        "eval/latency_p95": 0.2,
        "eval/one": 4.0,
    }
    with pytest.raises(ValueError, match="evaluator 'bad'.*returned nan"):
        run_evaluators({"bad": lambda t, b: [float("nan")]}, None, None)
    with pytest.raises(ValueError, match="'reward' is taken"):
        PPOTrainer().add_evaluator("reward", ResponseLengthEvaluator())


def test_validation_chunks_of_different_prompt_widths_are_concatenated_for_evaluators():
    from verl.protocol import DataProto
    from verl.trainer.ppo.ray_trainer import concat_left_padded

    def chunk(width: int, n: int) -> DataProto:
        ones = torch.ones(n, width + 3, dtype=torch.long)
        return DataProto.from_dict(
            {
                "prompts": torch.full((n, width), 7),
                "responses": torch.full((n, 3), 8),
                "input_ids": ones * 9,
                "attention_mask": ones,
                "position_ids": ones.cumsum(-1) - 1,
            },
            {"data_source": ["a"] * n},
        )

    merged = concat_left_padded([chunk(2, 1), chunk(4, 2)], pad_token_id=0)
    assert merged.batch["prompts"].tolist()[0] == [0, 0, 7, 7]
    assert merged.batch["attention_mask"].tolist()[0] == [0, 0, 1, 1, 1, 1, 1]
    assert merged.batch["responses"].shape == (3, 3) and len(merged.non_tensor_batch["data_source"]) == 3
    assert ResponseLengthEvaluator().evaluate(None, merged) == [3.0, 3.0, 3.0]


# ------------------------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory) -> str:
    from verl.models.tiny import save_tiny_classifier

    return save_tiny_classifier(str(tmp_path_factory.mktemp("toxic-clf")))


@pytest.mark.slow
def test_ppo_trainer_train_with_evaluators_and_callbacks(tmp_path, classifier_dir):
    """PPOTrainer end to end: train() returns metric lists with eval/reward_mean and eval/reward_std, the evaluators'
    eval/* values make the weighted objective, and the three built-in callbacks act on the run."""
    calls = []

    def my_reward(solution_str, ground_truth):
        calls.append(solution_str)
        return 1.0 if solution_str.strip().endswith(str(ground_truth)) else 0.25

    trainer = PPOTrainer(
        actor_model=MODEL,
        reward_model=my_reward,
        data_config=TINY_DATA,
        engine_config=EngineConfig(kl_coef=0.05, gamma=0.99, reward_temp=2.0),
        optim_config={"actor_lr": 1e-4, "critic_lr": 5e-5},
        overrides=QUIET,
        output_dir=tmp_path,
    )
    trainer.add_evaluator("toxicity", ToxicityEvaluator(model=classifier_dir))
    trainer.add_evaluator("latency", LatencyEvaluator(model="llama3-8b", batch_size=4, num_batches=2))
    trainer.add_evaluator("response_length", ResponseLengthEvaluator())
    trainer.add_callback(KLFilterCallback(threshold=0.5))  # turns the reference policy on
    trainer.add_callback(DynamicGammaScheduler(high_var=1e-6, low_gamma=0.9))
    stopper = trainer.add_callback(RewardAwareEarlyStopping(threshold=1e9, patience=3))
    seen = {}

    @trainer.engine.step
    def record(ctrl, batch, metrics):  # engine.step(): sees every intermediate product of the step
        seen.update({k: tuple(v.shape) for k, v in batch.batch.items()})

    metrics = trainer.train(max_steps=5, eval_interval=1)

    assert trainer.config.actor_rollout_ref.ref.enable is True
    for key in ("old_log_probs", "ref_log_prob", "token_level_kl", "values", "token_level_rewards", "advantages"):
        assert key in seen, key
    # validations at steps 0, 1, 2; the early stopping streak of 3 ends the run after step 2
    assert metrics.steps["eval/reward_mean"] == [0, 1, 2] and trainer.controller.global_steps == 2
    assert "3 consecutive evaluations" in metrics.stop_reason and metrics["callbacks/early_stop"] == [1]
    assert len(stopper.history) == 3
    assert len(metrics["eval/reward_std"]) == 3 and all(v >= 0 for v in metrics["eval/reward_std"])
    for key in ("eval/toxicity_mean", "eval/latency_p50", "eval/latency_p95", "eval/response_length_mean"):
        assert len(metrics[key]) == 3, key
    assert all(0.0 <= v <= 1.0 for v in metrics["eval/toxicity_mean"])
    assert metrics["eval/latency_p95"][-1] >= metrics["eval/latency_p50"][-1] > 0
    score = (
        0.6 * metrics["eval/reward_mean"][-1]
        - 0.2 * metrics["eval/toxicity_mean"][-1]
        - 0.2 * max(0, metrics["eval/latency_p95"][-1] - 0.8)
    )
    assert math.isfinite(score)
    # the callable was the reward, and reward_temp=2 halves it into the rewards (KL is exactly 0 at step 1)
    assert calls and set(metrics["critic/score/max"]) <= {1.0, 0.25}
    assert metrics["critic/rewards/mean"][0] == pytest.approx(metrics["critic/score/mean"][0] / 2.0)
    assert len(metrics["callbacks/kl_filtered_frac"]) == 2 and metrics["callbacks/gamma"][0] in (0.9, 0.99)
    lines = [json.loads(x) for x in open(tmp_path / "metrics.jsonl")]
    assert [x["step"] for x in lines] == [0, 1, 2]


@pytest.mark.slow
def test_reward_model_directory(tmp_path):
    from verl.models.tiny import save_tiny_classifier

    rm_dir = save_tiny_classifier(str(tmp_path / "rm"), labels=("score",))
    trainer = PPOTrainer(
        MODEL,
        reward_model=rm_dir,
        data_config=TINY_DATA,
        adv_estimator="grpo",
        overrides={**QUIET, "trainer.val_before_train": False},
        output_dir=tmp_path / "run",
    )
    assert trainer.config.reward_model.enable and trainer.config.reward_model.model.path == rm_dir
    metrics = trainer.train(max_steps=1, eval_interval=-1)
    assert metrics["critic/score/mean"][0] not in (0.0, 1.0)  # the RM's real-valued score, not the 0/1 rule


@pytest.mark.slow
def test_data_parallel_trainer_train_step(tmp_path):
    """DataParallelRLTrainer end to end: dict config, JSONL dataloader, train_step returning loss/reward, the reward
    hook, timestamped log file."""
    import logging

    from verl.data import make_pretokenized_dataloader

    config = get_ppo_default_config()
    config["model"]["pretrained_model_name_or_path"] = MODEL
    config["train"].update(batch_size=4, mini_batch_size=2, responses_per_prompt=4, grad_accumulation_steps=2)
    config["train"]["max_response_length"] = 16
    config["trainer"]["logger"] = ["file"]
    config["trainer"]["test_freq"] = -1
    data = tmp_path / "data.jsonl"
    data.write_text(
        "\n".join(json.dumps({"prompt": p}, ensure_ascii=False) for p in ["请写一首诗", "What is 2 + 3?", "Hi"])
    )
    dataloader = make_pretokenized_dataloader(
        file_path=str(data), tokenizer_name_or_path=MODEL, batch_size=4, seq_len=512
    )
    logs = tmp_path / "logs"
    trainer = DataParallelRLTrainer(config, log_dir=str(logs))
    try:
        actor = trainer.build().actor_rollout_wg.actor_module
        before = {k: v.clone() for k, v in actor.state_dict().items()}
        (batch,) = list(dataloader)
        out = trainer.train_step(batch)
        assert {"loss", "reward"} <= set(out) and isinstance(out["loss"], float) and math.isfinite(out["loss"])
        assert 0.0 <= out["reward"] <= 1.0  # open-ended prompts: the default 'auto' reward falls back to length
        assert any(not torch.equal(before[k], v) for k, v in actor.state_dict().items())

        def constant_reward(reward_tensor):
            shaped = torch.zeros_like(reward_tensor)
            shaped[:, 0] = 2.5
            return shaped

        trainer.set_reward_hook(constant_reward)
        assert trainer.train_step(["What is 1 + 1?", "Hi"])["reward"] == pytest.approx(2.5)
        as_dict = {"input_ids": batch.batch["input_ids"], "attention_mask": batch.batch["attention_mask"]}
        assert trainer.train_step(as_dict)["step"] == 3 and "position_ids" not in as_dict

        def shrink(reward_tensor):
            return reward_tensor[:, :-1]

        trainer.set_reward_hook(shrink)
        with pytest.raises(ValueError, match="reward hook .*shrink changed the reward tensor's shape"):
            trainer.train_step(batch)
        trainer.set_reward_hook(lambda r: r * float("nan"))
        with pytest.raises(ValueError, match="reward hook .*<lambda> returned NaN"):
            trainer.train_step(batch)
    finally:
        trainer.close()
    (log_file,) = [f for f in os.listdir(logs) if f.endswith(".log")]
    assert log_file.startswith("verl-") and len(log_file) == len("verl-20261129-214500.log")
    text = (logs / log_file).read_text()
    assert "step 1: loss=" in text and "reward=" in text
    assert (logs / log_file[: -len(".log")] / "metrics.jsonl").exists()
    assert logging.getLogger("verl").handlers == []


class RaiseAtStep(StepCallback):
    def __init__(self, step: int):
        self.step = step

    def on_advantages(self, trainer, batch, metrics):
        if trainer.global_steps == self.step:
            raise RuntimeError("callback failed")


@pytest.mark.slow
def test_a_raising_callback_leaves_a_resumable_checkpoint(tmp_path):
    def make() -> PPOTrainer:
        return PPOTrainer(
            MODEL,
            reward_model="rule",
            data_config=TINY_DATA,
            adv_estimator="grpo",
            overrides={**QUIET, "trainer.save_freq": 1, "trainer.val_before_train": False},
            output_dir=tmp_path,
        )

    failing = make()
    failing.add_callback(RaiseAtStep(2))
    with pytest.raises(RuntimeError, match="callback failed") as info:
        failing.train(max_steps=2, eval_interval=-1)
    assert "RaiseAtStep.on_advantages at step 2" in info.value.__notes__[0]
    assert sorted(d for d in os.listdir(tmp_path) if d.startswith("global_step")) == ["global_step_1"]
    assert (tmp_path / "latest_checkpointed_iteration.txt").read_text() == "1"
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(tmp_path / "global_step_1" / "actor" / "huggingface")
    resumed = make().train(max_steps=2, eval_interval=-1)
    assert resumed.steps["actor/pg_loss"] == [2]  # resumed at step 2 from the intact checkpoint
    assert (tmp_path / "latest_checkpointed_iteration.txt").read_text() == "2"


@pytest.mark.slow
def test_python_api_runs_the_ray_backend_and_shuts_it_down(tmp_path, monkeypatch):
    """PPOTrainer with trainer.backend=ray: two worker processes started in-process, one training step, and the
    context manager's exit stops them (no Ray process left)."""
    pytest.importorskip("ray", reason="the Ray backend needs ray: pip install 'ray[default]'")
    import ray

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # Ray's own defaults may write under HOME
    overrides = {**QUIET, "trainer.backend": "ray", "trainer.n_gpus_per_node": 2, "trainer.val_before_train": False}
    with PPOTrainer(
        actor_model=MODEL, adv_estimator="grpo", data_config=TINY_DATA, output_dir=tmp_path, overrides=overrides
    ) as trainer:
        out = trainer.train_step()
        assert out["step"] == 1 and math.isfinite(out["loss"])
        assert ray.is_initialized()
        assert len(json.load(open(tmp_path / "workers.json"))) == 2
    assert not ray.is_initialized()


def test_num_rollout_steps_splits_the_batch_the_overrides_set_and_kl_coef_is_a_number(tmp_path):
    t = PPOTrainer(
        data_config=DataConfig(num_rollout_steps=16), overrides={"data.train_batch_size": 32}, output_dir=tmp_path
    )
    a = t.config.actor_rollout_ref.actor
    assert t.config.data.train_batch_size == 32
    assert (32 // a.ppo_mini_batch_size) * a.ppo_epochs == 16  # 16 updates per rollout of 32 prompts
    for bad in ("0.1", None, True):
        with pytest.raises(ConfigError, match="EngineConfig.kl_coef=.* must be a number >= 0"):
            PPOTrainer(engine_config={"kl_coef": bad}, output_dir=tmp_path)


def test_evaluation_of_no_rows_is_an_error():
    from verl.utils.evaluation import evaluate_greedy_accuracy

    with pytest.raises(ValueError, match="no rows to score"):
        evaluate_greedy_accuracy(None, None, [])


@pytest.mark.slow
def test_the_dict_configs_reward_group_holds_reward_model_and_the_trees_reward_section():
    """config['reward'] is the dict config's alias group (model) and the tree's reward section (newer verl's
    reward.sandbox_fusion.*, reward.num_workers) at once."""
    from verl.utils.config_dict import get_ppo_default_config, ppo_dict_to_overrides

    config = get_ppo_default_config()
    assert config["reward"]["model"] == "auto" and config["reward"]["sandbox_fusion"]["url"] is None
    config["reward"]["sandbox_fusion"]["url"] = "http://h/run_code"
    overrides, reward = ppo_dict_to_overrides(config)
    assert overrides["reward.sandbox_fusion.url"] == "http://h/run_code" and reward == "auto"
