"""Which directory the server loads for a model path: an HF directory, builtin://, or a training checkpoint."""

from __future__ import annotations

import os

import pytest

from verl.experimental.openai_server.served_model import load_served_model, resolve_served_model_dir


def _hf_dir(path) -> str:
    os.makedirs(path, exist_ok=True)
    open(os.path.join(path, "config.json"), "w").write("{}")
    return os.fspath(path)


def test_hf_and_builtin_directories_are_served_as_they_are(tmp_path):
    assert resolve_served_model_dir(_hf_dir(tmp_path / "m")) == os.fspath(tmp_path / "m")
    assert resolve_served_model_dir("builtin://tiny-qwen2-arith-sft").endswith("tiny-qwen2-arith-sft")


def test_checkpoint_layouts_resolve_to_their_hf_copy(tmp_path):
    run = tmp_path / "run"
    ppo = _hf_dir(run / "global_step_20" / "actor" / "huggingface")
    assert resolve_served_model_dir(os.fspath(run / "global_step_20")) == ppo
    assert resolve_served_model_dir(os.fspath(run / "global_step_20" / "actor")) == ppo
    (run / "latest_checkpointed_iteration.txt").write_text("20\n")
    assert resolve_served_model_dir(os.fspath(run)) == ppo
    sft = _hf_dir(tmp_path / "sft" / "global_step_5")
    assert resolve_served_model_dir(sft) == sft


def test_a_directory_without_a_model_says_what_was_looked_for(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="actor/huggingface/config.json"):
        resolve_served_model_dir(os.fspath(tmp_path / "empty"))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "latest_checkpointed_iteration.txt").write_text("7")
    with pytest.raises(FileNotFoundError, match="points at step 7"):
        resolve_served_model_dir(os.fspath(tmp_path / "run"))
    with pytest.raises(FileNotFoundError, match="not a directory"):
        resolve_served_model_dir(os.fspath(tmp_path / "missing"))


def test_engine_options_are_checked_before_loading():
    with pytest.raises(ValueError, match="--engine 'sglang'"):
        load_served_model("builtin://tiny-qwen2-arith-sft", "sglang")
    with pytest.raises(ValueError, match="needs --engine vllm"):
        load_served_model("builtin://tiny-qwen2-arith-sft", "hf", tensor_parallel_size=2)


def test_the_hf_engine_loads_with_the_models_context():
    served = load_served_model("builtin://tiny-qwen2-arith-sft", "hf", served_model_name="m", device="cpu")
    assert (served.name, served.engine, served.max_model_len, served.vocab_size) == ("m", "hf", 512, 259)
    assert served.rollout.eos_token_ids == [2]
