"""Every example runs (with a small budget) and does what it says."""

import json
import math
import os
import subprocess
import sys

import pytest
from example_runner import ROOT, run_example_script

from verl.sandbox import bwrap_status
from verl.utils.config import load_config


@pytest.mark.slow
def test_quickstart_sft_example(tmp_path):
    args = ["--out-dir", str(tmp_path), "--steps", "4", "--train-size", "256"]
    stdout = run_example_script("examples/quickstart_sft.py", *args, timeout=300)
    assert "held-out greedy accuracy" in stdout
    assert (tmp_path / "tiny-qwen2" / "config.json").exists()
    assert (tmp_path / "data" / "train.parquet").exists()
    assert (tmp_path / "sft" / "global_step_4" / "model.safetensors").exists()


SMALL_RL = [
    "data.train_files=builtin://arithmetic/train?train_size=64",
    "data.val_files=builtin://arithmetic/test?test_size=16",
    "data.train_batch_size=4",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "trainer.total_training_steps=2",
    "trainer.test_freq=2",
    "trainer.logger=[file]",
]


def _run_script(script: str, tmp_path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", os.path.join(ROOT, "examples", script), *SMALL_RL, f"trainer.default_local_dir={tmp_path}", *extra],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": ROOT},
        cwd=ROOT,
    )


@pytest.mark.slow
def test_grpo_and_gae_example_scripts(tmp_path):
    for script in ("grpo_trainer/run_arithmetic_grpo.sh", "ppo_trainer/run_arithmetic_gae.sh"):
        out = _run_script(script, tmp_path / script.split("/")[0])
        assert out.returncode == 0, out.stderr[-3000:]
        assert "held-out greedy accuracy:" in out.stdout and "at step 2" in out.stdout
    assert (tmp_path / "ppo_trainer" / "global_step_2" / "critic" / "huggingface" / "config.json").exists()


@pytest.mark.slow
def test_code_task_grpo_example_script(tmp_path):
    """GRPO on the built-in code task, scored in the sandbox (two small steps)."""
    import pytest

    if bwrap_status() is not None:
        pytest.skip(f"no bubblewrap here: {bwrap_status()}")
    small = [
        "data.train_files=builtin://code_functions/train?train_size=64",
        "data.val_files=builtin://code_functions/test?size=8",
    ]
    out = _run_script("grpo_trainer/run_code_functions_grpo.sh", tmp_path, *small)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(x) for x in open(tmp_path / "metrics.jsonl")]
    steps = [r for r in rows if "critic/score/mean" in r]
    assert [r["step"] for r in steps] == [1, 2] and all(r["timing_s/reward"] > 0 for r in steps)
    assert any("val-core/acc" in r for r in rows) and "reward/all_passed/mean" in steps[0]


@pytest.mark.slow
def test_collapse_rollback_example(tmp_path):
    """A learning rate of 0.3 destroys the warm start: the run says so and rolls back with the rate halved."""
    out = subprocess.run(
        ["bash", os.path.join(ROOT, "examples", "grpo_trainer", "run_collapse_rollback.sh"),
         f"trainer.default_local_dir={tmp_path}", "trainer.logger=[console,file]"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "COLLAPSE at step 1: held-out val-core/acc" in out.stdout and "learning rate x0.5" in out.stdout
    lr = [(r["step"], r["actor/lr"]) for r in map(json.loads, open(tmp_path / "metrics.jsonl")) if "actor/lr" in r]
    assert [round(v, 6) for _, v in lr] == [0.3, 0.15, 0.075] and (tmp_path / "best_val" / "actor").is_dir()


@pytest.mark.slow
def test_lr_plateau_example(tmp_path):
    """The plateau rule: starts at an eighth of the rate, and on validations that do not beat the best it goes back to
    the best one's policy with the rate halved. A rate of 0.3 (the trust region off, as a script's own rate) makes
    every validation after the first worse, so each one cuts."""
    out = subprocess.run(
        ["bash", os.path.join(ROOT, "examples", "grpo_trainer", "run_lr_plateau.sh"),
         f"trainer.default_local_dir={tmp_path}", "trainer.logger=[console,file]", "actor_rollout_ref.actor.optim.lr=0.3",
         "actor_rollout_ref.actor.trust_region.enable=false", "data.train_batch_size=8", "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
         "data.val_files=builtin://arithmetic/test?ops=-&size=32", "trainer.total_training_steps=3",
         "trainer.test_freq=1", "trainer.lr_plateau.patience=1", "trainer.lr_plateau.min_scale=0.01",
         "trainer.collapse_guard.val_drop=1.0"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    lr = [round(r["actor/lr"], 6) for r in rows if "actor/lr" in r]
    acc = {r["step"]: r["val-core/acc"] for r in rows if "val-core/acc" in r}
    assert lr[0] == round(0.3 * 0.125, 6) and len(lr) == 3  # the first step at initial_scale
    best, expected = acc[0], 0
    for step in (1, 2, 3):  # patience 1: every validation that does not beat the best so far is a cut
        best, expected = max(best, acc[step]), expected + (acc[step] <= best)
    cuts = [r["plateau/cuts"] for r in rows if "plateau/cuts" in r]
    assert cuts[-1] == expected >= 1
    assert "PLATEAU at step" in out.stdout and "rolled back to the best validation's policy" in out.stdout


@pytest.mark.slow
def test_trust_region_example(tmp_path):
    """A rate of 1e-3 set by the script is the trust region's ceiling: the run starts at a tenth of it and logs the
    drift it steers by, every step; the held-out line is the mean of the last evaluations."""
    out = subprocess.run(
        ["bash", os.path.join(ROOT, "examples", "grpo_trainer", "run_trust_region.sh"),
         f"trainer.default_local_dir={tmp_path}", "data.train_batch_size=16", "actor_rollout_ref.rollout.n=4",
         "actor_rollout_ref.actor.ppo_mini_batch_size=4", "trainer.total_training_steps=3", "trainer.test_freq=1"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    steps = [r for r in map(json.loads, open(tmp_path / "metrics.jsonl")) if "actor/lr" in r]
    assert len(steps) == 3 and all(r["actor/policy_drift_kl"] >= 0 for r in steps)
    # the first step's rate: 1e-3 x 0.1, moved by at most x1.5 per measured mini-batch (3 of 4 are measured)
    assert 1e-3 * 0.1 / 1.5**3 <= steps[0]["actor/lr"] <= 1e-3 * 0.1 * 1.5**3
    assert all(r["actor/lr"] <= 1e-3 for r in steps)
    assert "(mean of the last 3 evaluations, steps 1-3;" in out.stdout


@pytest.mark.slow
def test_bypass_mode_example(tmp_path):
    """verl's bypass mode: no old-log-prob pass in any step, the loss's rollout_corr/ metrics logged, the run learns
    nothing broken (finite losses, a held-out line)."""
    out = subprocess.run(
        ["bash", os.path.join(ROOT, "examples", "grpo_trainer", "run_bypass_mode.sh"),
         f"trainer.default_local_dir={tmp_path}", "data.train_batch_size=8", "actor_rollout_ref.rollout.n=4",
         "actor_rollout_ref.actor.ppo_mini_batch_size=4", "trainer.total_training_steps=2", "trainer.test_freq=1",
         "data.val_files=builtin://arithmetic/test?size=32"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    steps = [r for r in map(json.loads, open(tmp_path / "metrics.jsonl")) if "actor/pg_loss" in r]
    assert len(steps) == 2
    for r in steps:
        assert r["timing_s/old_log_prob"] < 0.01 and math.isfinite(r["actor/pg_loss"])
        assert abs(r["rollout_corr/kl"]) < 1e-3 and 0 <= r["rollout_corr/rollout_rs_masked_fraction"] <= 1
    assert "(mean of the last 2 evaluations, steps 1-2;" in out.stdout


@pytest.mark.slow
def test_lora_example_trains_adapters_and_merges(tmp_path):
    """LoRA GRPO for two steps: the checkpoint holds the adapter alone, and the merger's --merge_lora writes a full
    model whose logits are the adapted policy's."""
    pytest.importorskip("peft", reason="LoRA needs peft: pip install peft")
    import torch

    from verl.utils.model import load_causal_lm

    out = subprocess.run(
        ["bash", os.path.join(ROOT, "examples", "grpo_trainer", "run_lora.sh"),
         f"trainer.default_local_dir={tmp_path}", "data.train_batch_size=8", "actor_rollout_ref.rollout.n=4",
         "actor_rollout_ref.actor.ppo_mini_batch_size=8", "trainer.total_training_steps=2", "trainer.save_freq=2",
         "trainer.test_freq=2", "data.val_files=builtin://arithmetic/test?test_size=16"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    actor = tmp_path / "global_step_2" / "actor"
    assert sorted(os.listdir(actor)) == ["dcp", "extra_state.pt", "lora_adapter"]
    steps = [r for r in map(json.loads, open(tmp_path / "metrics.jsonl")) if "actor/kl_loss" in r]
    assert len(steps) == 2 and steps[-1]["perf/actor_optim_state_mb"] < 0.5 * steps[-1]["perf/actor_param_mb"]
    merged = subprocess.run(
        [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(actor),
         "--target_dir", str(tmp_path / "merged"), "--merge_lora"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr[-3000:]
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.no_grad():
        a = load_causal_lm(str(tmp_path / "merged")).double()(input_ids=ids).logits
        b = load_causal_lm(str(actor / "lora_adapter")).double()(input_ids=ids).logits
    assert (a - b).abs().max() < 1e-5


@pytest.mark.slow
def test_auto_config_example_plans_and_runs_a_checked_job(tmp_path):
    plan = tmp_path / "plan.yaml"
    out = subprocess.run(
        [
            "bash",
            os.path.join(ROOT, "examples", "auto_config", "plan_and_check.sh"),
            "trainer.total_training_steps=1",
            "trainer.val_before_train=false",
            "trainer.test_freq=-1",
            f"trainer.default_local_dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT, "PLAN": str(plan)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rollout TP=" in out.stdout and f"wrote {plan}" in out.stdout
    assert load_config("ppo_trainer", ["--config", str(plan)]).data.max_response_length == 2048
    assert "step 1:" in out.stdout  # the checked job passed its memory check and trained


@pytest.mark.slow
def test_custom_reward_example_is_used(tmp_path):
    import json

    out = _run_script("custom_reward/run_custom_reward.sh", tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    scores = [json.loads(x).get("critic/score/max") for x in open(tmp_path / "metrics.jsonl")]
    # correct answers score 1 - 0.002 * len(response) < 1: the custom function, not the 0/1 rule, was used
    assert all(s is None or s < 1.0 for s in scores) and any(s is not None for s in scores)


@pytest.mark.slow
def test_ray_cpu_example_script(tmp_path):
    import pytest

    pytest.importorskip("ray", reason="the example runs the Ray backend: pip install 'ray[default]'")
    out = _run_script("ray/run_grpo_ray_cpu.sh", tmp_path, "data.train_batch_size=4", "trainer.save_freq=2")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ray backend: 2 worker processes" in out.stdout and "at step 2" in out.stdout
    assert (tmp_path / "global_step_2" / "actor" / "dcp" / ".metadata").exists()
    # the two workers' shards merge into the model the run saved as its HF copy (python -m verl.model_merger)
    from verl.model_merger import compare_with_hf

    actor = tmp_path / "global_step_2" / "actor"
    assert compare_with_hf(str(actor), str(actor / "huggingface"))["ok"]


@pytest.mark.slow
def test_verl_style_script_runs_as_written(tmp_path):
    # a package named by actor_rollout_ref.model.external_lib is imported before the models load (as in verl)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "my_arch_registry.py").write_text(
        f"open({str(tmp_path / 'registry_imported')!r}, 'w').write('yes')\n"
    )
    out = subprocess.run(
        [
            "bash",
            os.path.join(ROOT, "examples", "grpo_trainer", "run_verl_style_script.sh"),
            *SMALL_RL,
            f"trainer.default_local_dir={tmp_path / 'run'}",
            "actor_rollout_ref.model.external_lib=my_arch_registry",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path / "lib")])},
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "held-out greedy accuracy:" in out.stdout and "at step 2" in out.stdout
    # verl's deprecated global micro-batch size was mapped, and said so
    assert "ppo_micro_batch_size=128 is verl's deprecated global micro-batch size" in out.stderr
    assert (tmp_path / "registry_imported").read_text() == "yes"


@pytest.mark.slow
def test_verl_style_sft_script_runs_through_torchrun(tmp_path):
    out = subprocess.run(
        [
            "bash",
            os.path.join(ROOT, "examples", "sft", "run_verl_style_sft.sh"),
            "data.train_files=builtin://arithmetic/train?train_size=256",
            "trainer.total_training_steps=3",
            "trainer.val_max_samples=16",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        # torchrun from this interpreter's environment
        env={
            **os.environ,
            "PYTHONPATH": ROOT,
            "SAVE_PATH": str(tmp_path),
            "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
        },
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "held-out greedy accuracy:" in out.stdout and "after 3 steps" in out.stdout
    assert (tmp_path / "global_step_3" / "model.safetensors").exists()


@pytest.mark.slow
def test_verl_style_recipe_example_trains_with_its_own_loss_and_reward_manager(tmp_path):
    """examples/recipe/main_recipe.py: a decorator-registered policy loss and reward manager, the trainer built as
    verl's recipes build it; two steps run and the manager's extra column is reported."""
    out = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "examples", "recipe", "main_recipe.py"),
            *SMALL_RL,
            f"trainer.default_local_dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "trained 2 steps; last step's mean response length:" in out.stdout
    assert "val-core/acc:" in out.stdout
    assert (tmp_path / "metrics.jsonl").exists()


@pytest.mark.slow
def test_agent_loop_tutorial_runs_and_reads_its_trajectories(tmp_path):
    """examples/tutorial/agent_loop_get_started: the tool, the prompt with its schema, 1 GRPO step with the tool
    agent loop, the trajectories read back (the warm start calls the tutorial's tool)."""
    args = ["--steps", "1", "--batch-size", "4", "--n", "2", "--val-size", "8", "--out-dir", str(tmp_path)]
    text = run_example_script("examples/tutorial/agent_loop_get_started/agent_loop_tutorial.py", *args)
    assert "'178377'" in text and "only multiplies two integers" in text and "bad_arguments" in text
    assert "<tools>calculator(expression)</tools>" in text  # the schema rendered into the prompt
    assert "held-out success with the tool:" in text and "at step 1" in text
    rows = [json.loads(line) for line in open(tmp_path / "rollouts" / "1.jsonl")]
    assert len(rows) == 8 and all({"num_turns", "num_tool_calls", "finish_reason"} <= set(row) for row in rows)
    assert any(row["num_tool_calls"] >= 1 and "<tool_response>" in row["output"] for row in rows)


@pytest.mark.slow
def test_secure_sandbox_server_example(tmp_path):
    """The sandbox server with an API key: the keyed client is served (with the isolation named), a caller without
    the key gets a 401."""
    pytest.importorskip("uvicorn")
    script = os.path.join(ROOT, "examples", "sandbox", "secure_sandbox_server.py")
    isolation = "bwrap" if bwrap_status() is None else "rlimit"
    out = subprocess.run(
        [sys.executable, script, "--isolation", isolation],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": ROOT}, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"with the key: stdout '45\\n', isolation {isolation}" in out.stdout
    assert "without it: HTTP 401" in out.stdout and "invalid or missing API key" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("script", ["run_one_step_off.sh", "run_colocate_async.sh"])
def test_async_example_scripts_train_one_step_off(script, tmp_path):
    """verl's one-step-off entry point and the colocate_async mode: from step 2 on every batch was sampled one
    policy version before the one it trains, never more (the threshold), and the run ends with its held-out line."""
    out = _run_script(f"async/{script}", tmp_path, "trainer.total_training_steps=3", "trainer.test_freq=3")
    assert out.returncode == 0, out.stderr[-3000:]
    steps = [r for r in map(json.loads, open(tmp_path / "metrics.jsonl")) if "actor/pg_loss" in r]
    assert [r["training/off_policy/trajectory_staleness/max"] for r in steps] == [0, 1, 1]
    assert all(r["training/off_policy/trajectory_spans/max"] == 1 for r in steps)
    assert all(math.isfinite(r["actor/pg_loss"]) and r["timing_s/update_weights"] >= 0 for r in steps)
    if script == "run_one_step_off.sh":  # bypass mode: the sampler's log-probs are the old ones, no pass
        assert all(r["timing_s/old_log_prob"] < 0.01 for r in steps)
    else:  # the decoupled correction's weights, from the old-log-prob pass against the sampler's log-probs
        assert all("rollout_corr/rollout_is_mean" in r for r in steps[1:])
    assert "held-out greedy accuracy" in out.stdout


@pytest.mark.slow
def test_fully_async_example_runs_a_ray_trainer_and_a_replica(tmp_path):
    """verl's fully-async entry point: trainer.backend=ray with one trainer process and one standalone replica
    streaming prompt groups; nothing trained past the staleness threshold, and the mapped keys are printed."""
    out = _run_script("async/run_fully_async.sh", tmp_path, "trainer.total_training_steps=3", "trainer.test_freq=3")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "fully_async: trainer.v1.partial_rollout_tokens=8 trainer.v1.separate_async.parameter_sync_step=2" in (
        out.stdout
    )  # async_training.partial_rollout=true (verl's default): a quarter of the 32-token responses per segment
    workers = json.load(open(tmp_path / "workers.json"))
    assert sorted(w["pool"] for w in workers) == ["global_pool", "rollout_pool"]
    steps = [r for r in map(json.loads, open(tmp_path / "metrics.jsonl")) if "actor/pg_loss" in r]
    staleness = [r["training/off_policy/trajectory_staleness_worst/max"] for r in steps]
    assert staleness[0] == 0 and max(staleness) <= 8  # the wall clock: up to the threshold (8), by timing
    assert all(1 <= r["training/off_policy/trajectory_spans/max"] <= 4 for r in steps)  # at most 4 segments
    assert all(r["timing_s/old_log_prob"] < 0.01 for r in steps)  # bypass mode
    assert "held-out greedy accuracy" in out.stdout


@pytest.mark.slow
def test_separate_async_tool_example_runs_the_agent_loop_on_the_replica(tmp_path):
    """The agent loop in separate_async: the replica calls the (slow) calculator for the training batches and for
    validation, with several chunks in flight at once, and nothing is trained past the staleness threshold."""
    calc = [
        "data.train_files=builtin://calc_multiply/train?train_size=64",
        "data.val_files=builtin://calc_multiply/test?size=8",
    ]
    out = _run_script("async/run_separate_async_tool.sh", tmp_path, *calc)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    steps = [r for r in map(json.loads, open(tmp_path / "metrics.jsonl")) if "actor/pg_loss" in r]
    assert len(steps) == 2 and all(r["training/off_policy/trajectory_staleness_worst/max"] <= 8 for r in steps)
    assert max(r["async/chunks_in_flight_max"] for r in steps) > 1
    assert sum(r["agent_loop/num_tool_calls/mean"] for r in steps) > 0  # the replica ran the calculator
    assert "held-out greedy accuracy" in out.stdout
