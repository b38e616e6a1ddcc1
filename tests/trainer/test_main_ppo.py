"""End-to-end PPO-family runs of a few steps on the shipped tiny warm start.

Same seed, same results on CPU: asserted by test_same_seed_same_metrics and the resume test.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verl.engine import StepCallback
from verl.trainer.main_ppo import run_ppo
from verl.utils.config import ConfigError, load_config

SMALL = [
    "data.train_files=builtin://arithmetic/train?train_size=64",
    "data.val_files=builtin://arithmetic/test?test_size=16",
    "data.train_batch_size=4",
    "data.max_response_length=24",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "critic.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.actor.optim.lr=1e-4",
    "trainer.total_training_steps=2",
    "trainer.test_freq=2",
    "trainer.logger=[file]",
]


def small_config(tmp_path, *extra: str):
    # the built-in task's tuned settings, also where a test brings data files of its own
    return load_config("ppo_trainer", ["recipe=quickstart", *SMALL, f"trainer.default_local_dir={tmp_path}", *extra])


def numeric(history: dict, step: int) -> dict[str, float]:
    """A step's metrics without wall-clock ones (timings differ between runs, nothing else may)."""
    out = {}
    for key, points in history.items():
        if key.startswith(("timing_s/", "timing_per_token_ms/", "perf/time_per_step", "perf/throughput")):
            continue
        for s, v in points:
            if s == step:
                out[key] = v
    return out


def assert_finite(metrics: dict[str, float]) -> None:
    bad = {k: v for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)}
    assert not bad, bad


REQUIRED = [
    "actor/pg_loss",
    "actor/pg_clipfrac",
    "actor/ppo_kl",
    "actor/entropy",
    "actor/grad_norm",
    "actor/lr",
    "critic/score/mean",
    "critic/rewards/mean",
    "critic/advantages/mean",
    "response_length/mean",
    "response_length/max",
    "response_length/clip_ratio",
    "timing_s/gen",
    "timing_s/reward",
    "timing_s/old_log_prob",
    "timing_s/adv",
    "timing_s/update_actor",
    "timing_s/step",
    "perf/throughput",
    "perf/total_num_tokens",
    "perf/time_per_step",
    "val-core/arithmetic/reward/mean@1",
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator",
    ["grpo", "gae", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "opo", "grpo_passk"],
)
def test_each_advantage_estimator_trains(tmp_path, estimator):
    result = run_ppo(small_config(tmp_path, f"algorithm.adv_estimator={estimator}"))
    h = result["history"]
    for key in REQUIRED:
        assert key in h, f"{estimator}: metric {key} missing"
    if estimator == "gae":
        assert "critic/vf_loss" in h and "timing_s/values" in h and "timing_s/update_critic" in h
    assert_finite(numeric(h, 2))
    assert result["global_steps"] == 2
    lines = [json.loads(x) for x in open(tmp_path / "metrics.jsonl")]
    assert [x["step"] for x in lines] == [0, 1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("loss_mode", ["vanilla", "gspo", "gpg", "clip_cov", "kl_cov", "cispo"])
def test_each_policy_loss_trains(tmp_path, loss_mode):
    result = run_ppo(
        small_config(
            tmp_path,
            f"actor_rollout_ref.actor.policy_loss.loss_mode={loss_mode}",
            "trainer.total_training_steps=1",
            "trainer.val_before_train=false",
        )
    )
    assert_finite(numeric(result["history"], 1))
    assert "actor/pg_loss" in result["history"]


@pytest.mark.slow
def test_kl_loss_and_kl_in_reward(tmp_path):
    r1 = run_ppo(
        small_config(
            tmp_path / "loss",
            "actor_rollout_ref.actor.use_kl_loss=true",
            "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
            "trainer.val_before_train=false",
        )
    )
    assert "actor/kl_loss" in r1["history"] and "timing_s/ref" in r1["history"]
    r2 = run_ppo(
        small_config(
            tmp_path / "reward",
            "algorithm.use_kl_in_reward=true",
            "algorithm.kl_ctrl.type=adaptive",
            "algorithm.kl_penalty=mse",
            "trainer.val_before_train=false",
        )
    )
    assert "actor/reward_kl_penalty_coeff" in r2["history"]
    assert_finite(numeric(r2["history"], 2))


@pytest.mark.slow
def test_dapo_options(tmp_path):
    result = run_ppo(
        small_config(
            tmp_path,
            "algorithm.filter_groups.enable=true",
            "actor_rollout_ref.actor.clip_ratio_high=0.28",
            "reward_model.overlong_buffer.enable=true",
            "reward_model.overlong_buffer.len=8",
            "actor_rollout_ref.actor.loss_agg_mode=token-mean",
            "trainer.val_before_train=false",
        )
    )
    h = result["history"]
    assert "train/num_gen_batches" in h and "reward/overlong_penalty_mean" in h
    assert_finite(numeric(h, 2))


@pytest.mark.slow
def test_same_seed_same_metrics(tmp_path):
    a = run_ppo(small_config(tmp_path / "a"))
    b = run_ppo(small_config(tmp_path / "b"))
    for step in (0, 1, 2):
        assert numeric(a["history"], step) == numeric(b["history"], step)
    c = run_ppo(small_config(tmp_path / "c", "trainer.seed=2"))
    assert numeric(a["history"], 1) != numeric(c["history"], 1)


class StopAfter(StepCallback):
    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, trainer, batch, metrics):
        return trainer.global_steps < self.step


@pytest.mark.slow
def test_resume_gives_the_uninterrupted_next_step(tmp_path):
    args = [
        "trainer.total_training_steps=3",
        "trainer.save_freq=1",
        "trainer.test_freq=-1",
        "trainer.max_actor_ckpt_to_keep=2",
    ]
    full = run_ppo(small_config(tmp_path / "full", *args))
    run_ppo(small_config(tmp_path / "resumed", *args), callbacks=[StopAfter(2)])  # "killed" after step 2
    resumed = run_ppo(small_config(tmp_path / "resumed", *args))
    assert resumed["history"]["actor/pg_loss"][0][0] == 3  # it started at step 3, not 1
    assert numeric(resumed["history"], 3) == numeric(full["history"], 3)
    ckpts = sorted(d for d in os.listdir(tmp_path / "full") if d.startswith("global_step_"))
    assert ckpts == ["global_step_2", "global_step_3"]  # retention kept the last two
    hf = tmp_path / "full" / "global_step_3" / "actor" / "huggingface"
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(hf).config.model_type == "qwen2"
    assert (tmp_path / "full" / "latest_checkpointed_iteration.txt").read_text() == "3"


@pytest.mark.slow
def test_failing_reward_function_gets_fallback_and_is_counted(tmp_path):
    reward_file = tmp_path / "my_reward.py"
    reward_file.write_text(
        "import math\n"
        "calls = {'n': 0}\n"
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n"
        "    calls['n'] += 1\n"
        "    if calls['n'] % 3 == 0:\n"
        "        raise RuntimeError('boom')\n"
        "    if calls['n'] % 3 == 1:\n"
        "        return None if calls['n'] % 2 else math.nan\n"
        "    return 1.0\n"
    )
    result = run_ppo(
        small_config(tmp_path / "run", f"custom_reward_function.path={reward_file}", "reward_model.error_score=-1.0")
    )
    errors = [v for _, v in result["history"]["reward/errors"]]
    assert all(e > 0 for e in errors)
    assert_finite(numeric(result["history"], 2))


@pytest.mark.slow
def test_reward_fields_are_logged_and_validation_samples_n_per_prompt(tmp_path):
    reward_file = tmp_path / "fields.py"
    reward_file.write_text(
        "from verl.utils.reward_score import default_compute_score\n"
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n"
        "    score = default_compute_score(data_source, solution_str, ground_truth, extra_info)\n"
        "    return {'score': score, 'acc': score >= 1.0, 'length': len(solution_str)}\n"
    )
    result = run_ppo(
        small_config(
            tmp_path / "run",
            f"custom_reward_function.path={reward_file}",
            "actor_rollout_ref.rollout.val_kwargs.n=3",
            "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
            "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
            "trainer.total_training_steps=1",
            "trainer.test_freq=1",
            "trainer.log_val_generations=2",
        )
    )
    h = result["history"]
    logged = [json.loads(line) for line in (tmp_path / "run" / "val_generations.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == [0, 0, 1, 1]  # before training and after step 1, 2 samples each
    assert "What is" in logged[0]["input"] and isinstance(logged[0]["output"], str) and "score" in logged[0]
    lengths = dict(h["reward/length/mean"])
    assert lengths[1] > 0 and 0.0 <= dict(h["reward/acc/mean"])[1] <= 1.0
    mean3, best3 = dict(h["val-core/arithmetic/acc/mean@3"]), dict(h["val-core/arithmetic/acc/best@3"])
    assert 0.0 <= mean3[1] <= best3[1] <= 1.0  # best of 3 is at least their mean
    assert dict(h["val-aux/arithmetic/acc/mean@3"])[1] == pytest.approx(mean3[1])
    assert "val-core/arithmetic/acc/mean@1" not in h


@pytest.mark.slow
def test_responses_that_never_reach_eos(tmp_path):
    result = run_ppo(small_config(tmp_path, "data.max_response_length=4", "trainer.val_before_train=false"))
    clip = dict(result["history"]["response_length/clip_ratio"])
    assert clip[1] == 1.0 and dict(result["history"]["response_length/max"])[1] == 4
    assert_finite(numeric(result["history"], 2))


@pytest.mark.slow
def test_overlong_prompts_filtered_or_rejected(tmp_path):
    rows = [
        {
            "data_source": "arithmetic",
            "prompt": [{"role": "user", "content": q}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "3"},
            "extra_info": {"split": "train", "index": i},
        }
        for i, q in enumerate(["What is 1 + 2?"] * 8 + ["What is " + "1 + " * 40 + "2?"])
    ]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    result = run_ppo(
        small_config(
            tmp_path / "f",
            f"data.train_files={path}",
            "data.max_prompt_length=48",
            "trainer.total_training_steps=1",
            "trainer.val_before_train=false",
        )
    )
    assert result["prompts_filtered"] == 1
    with pytest.raises(ValueError, match=r"train\.parquet, row 8: the prompt has \d+ tokens"):
        run_ppo(
            small_config(
                tmp_path / "e",
                f"data.train_files={path}",
                "data.max_prompt_length=48",
                "data.filter_overlong_prompts=false",
                "data.truncation=error",
            )
        )
    result = run_ppo(
        small_config(
            tmp_path / "t",
            f"data.train_files={path}",
            "data.max_prompt_length=48",
            "data.filter_overlong_prompts=false",
            "data.truncation=left",
            "trainer.total_training_steps=1",
            "trainer.val_before_train=false",
        )
    )
    assert result["global_steps"] == 1


@pytest.mark.slow
def test_reward_model_from_a_local_directory(tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from verl.models.tiny import TinyModelConfig, build_model_config, build_tokenizer

    tok = build_tokenizer()
    cfg = build_model_config(tok, TinyModelConfig(hidden_size=32, num_layers=1))
    cfg.num_labels = 1
    rm_dir = tmp_path / "rm"
    AutoModelForSequenceClassification.from_config(cfg).save_pretrained(rm_dir)
    tok.save_pretrained(rm_dir)
    assert AutoTokenizer.from_pretrained(rm_dir).pad_token is not None
    result = run_ppo(
        small_config(
            tmp_path / "run",
            "reward_model.enable=true",
            f"reward_model.model.path={rm_dir}",
            "trainer.total_training_steps=1",
            "trainer.val_before_train=false",
        )
    )
    scores = dict(result["history"]["critic/score/mean"])
    assert scores[1] != 0.0  # the RM's real-valued scores, not the 0/1 rule


@pytest.mark.slow
def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="Did you mean 'algorithm.adv_estimator'"):
        load_config("ppo_trainer", ["algorithm.adv_estimater=grpo"])
    with pytest.raises(ConfigError, match="ppo_mini_batch_size=3 must divide"):
        run_ppo(small_config(tmp_path, "actor_rollout_ref.actor.ppo_mini_batch_size=3"))
    with pytest.raises(ConfigError, match="rollout.n >= 2"):
        run_ppo(small_config(tmp_path, "actor_rollout_ref.rollout.n=1"))
    with pytest.raises(ConfigError, match="ppo_mini_batch_size=0: .* must be >= 1"):
        run_ppo(small_config(tmp_path, "actor_rollout_ref.actor.ppo_mini_batch_size=0"))
    with pytest.raises(ValueError, match=r"data.val_files is empty"):
        run_ppo(small_config(tmp_path, "data.val_files=[]"))


@pytest.mark.slow
def test_cli_prints_start_and_end_accuracy(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "verl.trainer.main_ppo",
            *SMALL,
            f"trainer.default_local_dir={tmp_path}",
            "trainer.logger=[console,file,tensorboard]",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "held-out greedy accuracy:" in out.stdout and "at step 0 ->" in out.stdout
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(tmp_path / "tensorboard"))
