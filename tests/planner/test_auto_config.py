"""``scripts/auto_config.py`` (and the guide's ``scripts/generate_trainer_config.sh``): the recommendation fits the
memory model, and the override file it writes loads into main_ppo as is."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from verl.planner import gpu, preset_shape
from verl.planner.memory import PlanInputs, estimate_memory
from verl.planner.recommend import USABLE, recommend
from verl.utils.config import load_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_guides_command_writes_overrides_main_ppo_loads(tmp_path):
    out = tmp_path / "plan.yaml"
    args = ["--model_size", "7b", "--gpu_type", "a100", "--num_gpus", "8", "--task", "code-generation"]
    proc = run_script("scripts/auto_config.py", *args, "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "peak:" in proc.stdout and "rollout TP=" in proc.stdout and f"wrote {out}" in proc.stdout
    plan = yaml.safe_load(out.read_text())
    config = load_config("ppo_trainer", ["--config", str(out)])  # every key is a real main_ppo key
    rollout = config.actor_rollout_ref.rollout
    assert 8 % rollout.tensor_model_parallel_size == 0 and 0.3 <= rollout.gpu_memory_utilization <= 0.9
    assert config.data.max_response_length == 2048 and plan["trainer"]["n_gpus_per_node"] == 8
    assert config.actor_rollout_ref.actor.ppo_max_token_len_per_gpu >= 1024 + 2048


def test_generate_trainer_config_runs_under_python_and_bash(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    assert (
        run_script("scripts/generate_trainer_config.sh", "--task", "code-generation", "--output", str(a)).returncode
        == 0
    )
    proc = subprocess.run(
        ["bash", "scripts/generate_trainer_config.sh", "--task", "code-generation", "--output", str(b)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(a.read_text()) == yaml.safe_load(b.read_text())


@pytest.mark.slow
def test_a_model_directory_plans_from_its_config(tmp_path):
    from verl.models.tiny import TinyModelConfig, save_tiny_model

    save_tiny_model(str(tmp_path / "m"), TinyModelConfig(hidden_size=64, num_layers=2))
    proc = run_script(
        "scripts/auto_config.py",
        "--model_path",
        str(tmp_path / "m"),
        "--gpu_type",
        "l4",
        "--num_gpus",
        "1",
        "--output",
        str(tmp_path / "p.yaml"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "gradient checkpointing off" in proc.stdout  # a tiny model needs none


def test_bad_input_is_one_line_naming_the_fix():
    proc = run_script("scripts/auto_config.py", "--model_size", "9z")
    assert proc.returncode == 2 and "use one of 0.5b" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_script("scripts/auto_config.py", "--gpu_type", "tpu")
    assert proc.returncode == 2 and "--gpu_type 'tpu'" in proc.stderr


@pytest.mark.parametrize("size, gpus", [("7b", 8), ("70b", 16), ("0.5b", 1)])
def test_every_phase_of_the_recommendation_fits_the_gpu(size, gpus):
    device = gpu("a100")
    inp = PlanInputs(
        preset_shape(size),
        device.memory_bytes,
        world_size=gpus,
        prompt_len=512,
        response_len=1024,
        rollout_n=5,
        rollout_rows=1024 * 5 // gpus,
        reference=True,
        rollout_engine="vllm",
    )
    rec = recommend(inp, device, gpus)
    est = estimate_memory(rec.inputs)
    assert est.peak_bytes <= USABLE * device.memory_bytes
    assert rec.inputs.micro_tokens >= 512 + 1024
    if size == "70b":  # 70B's states do not fit 16 x 80 GB with AdamW on the GPUs
        assert rec.inputs.optimizer_offload


def test_a_model_too_large_for_the_gpus_is_an_error_with_the_fix():
    device = gpu("l4")
    inp = PlanInputs(preset_shape("72b"), device.memory_bytes, world_size=1, rollout_rows=8, rollout_engine="vllm")
    with pytest.raises(ValueError, match="more or larger GPUs"):
        recommend(inp, device, 1)
