"""``trainer.check_memory``: a run whose estimated peak exceeds the device stops before any model is read, with the
planner's numbers; one that fits runs."""

from __future__ import annotations

import pytest

from verl.planner.check import MemoryCheckError, check_memory
from verl.planner.hardware import GIB, Device
from verl.trainer.main_ppo import run_ppo
from verl.utils.config import load_config


def test_a_run_too_large_for_the_device_stops_before_reading_a_model(tmp_path):
    from verl.models.tiny import TinyModelConfig, save_tiny_model

    model = tmp_path / "model"
    save_tiny_model(str(model), TinyModelConfig())
    for weights in model.glob("*.safetensors"):
        weights.write_bytes(b"")  # proof that nothing read them: loading would fail on this file
    config = load_config(
        "ppo_trainer",
        [
            "recipe=quickstart",
            f"actor_rollout_ref.model.path={model}",
            "trainer.check_memory=true",
            "data.train_batch_size=64",
            "actor_rollout_ref.rollout.n=4096",  # 262k sequences at once: terabytes of KV cache
            f"trainer.default_local_dir={tmp_path / 'run'}",
        ],
    )
    with pytest.raises(MemoryCheckError) as e:
        run_ppo(config)
    text = str(e.value)
    assert "trainer.check_memory: the run needs about" in text and "in rollout" in text
    assert "KV cache" in text and "trainer.check_memory=false" in text


def test_the_check_passes_a_run_that_fits_and_counts_every_worker_on_cpu():
    config = load_config("ppo_trainer", ["trainer.check_memory=true"])
    est = check_memory(config, Device("cpu", 4 * GIB, 0, 0, platform="cpu"))
    assert est.peak_bytes < GIB
    ray = load_config("ppo_trainer", ["trainer.backend=ray", "trainer.n_gpus_per_node=2"])
    need = check_memory(ray, Device("cpu", 4 * GIB, 0, 0, platform="cpu")).peak_bytes * 2
    with pytest.raises(MemoryCheckError, match="x 2 worker processes"):
        check_memory(ray, Device("cpu", int(need * 0.9), 0, 0, platform="cpu"))
