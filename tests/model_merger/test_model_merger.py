"""``python -m verl.model_merger``: a checkpoint's dcp/ shards become an HF directory equal to the run's own HF copy."""

import os
import subprocess
import sys

import pytest
import torch

from verl.model_merger import compare_with_hf, load_merged_model, merge_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """One PPO (GAE) step with a checkpoint: actor and critic, each with dcp/ and huggingface/."""
    from verl.trainer.main_ppo import main

    out = tmp_path_factory.mktemp("run")
    main(
        [
            "algorithm.adv_estimator=gae",
            "data.train_files=builtin://arithmetic/train?train_size=16",
            "data.val_files=builtin://arithmetic/test?test_size=4",
            "data.train_batch_size=4",
            "actor_rollout_ref.rollout.n=1",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "trainer.total_training_steps=1",
            "trainer.save_freq=1",
            "trainer.val_before_train=false",
            "trainer.logger=[file]",
            f"trainer.default_local_dir={out}",
        ]
    )
    return out / "global_step_1"


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.slow
def test_merged_actor_and_critic_equal_the_hf_copies(checkpoint, tmp_path):
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

    for role, auto in (("actor", AutoModelForCausalLM), ("critic", AutoModelForTokenClassification)):
        target = merge_checkpoint(str(checkpoint / role), str(tmp_path / role))
        merged, saved = auto.from_pretrained(target), auto.from_pretrained(checkpoint / role / "huggingface")
        a, b = _weights(merged), _weights(saved)
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a), role
        assert AutoTokenizer.from_pretrained(target).pad_token_id is not None  # the tokenizer travels along
    assert compare_with_hf(str(checkpoint / "actor"), str(checkpoint / "actor" / "huggingface"))["ok"]


def test_weights_come_from_dcp_not_from_the_hf_copy(checkpoint, tmp_path):
    # the HF copy's weights deleted: the merge still rebuilds the model (config from huggingface/, weights from dcp/)
    import shutil

    role = tmp_path / "actor"
    shutil.copytree(checkpoint / "actor", role)
    for name in os.listdir(role / "huggingface"):
        if name.endswith(".safetensors"):
            os.remove(role / "huggingface" / name)
    model = load_merged_model(str(role))
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(checkpoint / "actor" / "huggingface")
    assert all(torch.equal(v, _weights(saved)[k]) for k, v in _weights(model).items())


@pytest.mark.slow
def test_cli_merge_and_test(checkpoint, tmp_path):
    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "verl.model_merger", *args],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": ROOT},
        )

    actor = str(checkpoint / "actor")
    out = cli("merge", "--backend", "fsdp", "--local_dir", actor, "--target_dir", str(tmp_path / "hf"))
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "hf" / "config.json").exists() and "merged" in out.stdout
    same = cli("test", "--backend", "fsdp", "--local_dir", actor, "--test_hf_dir", str(tmp_path / "hf"))
    assert same.returncode == 0 and "matches" in same.stdout
    # against the model the run started from: one step of training changed the weights
    from verl.utils.model import resolve_model_path

    start = resolve_model_path("builtin://tiny-qwen2-arith-sft")
    differs = cli("test", "--backend", "fsdp", "--local_dir", actor, "--test_hf_dir", start)
    assert differs.returncode == 1 and "mismatched" in differs.stdout
    wrong = cli("merge", "--backend", "megatron", "--local_dir", actor)
    assert wrong.returncode != 0 and "use --backend fsdp" in wrong.stderr
    missing = cli("merge", "--local_dir", str(checkpoint), "--target_dir", str(tmp_path / "x"))
    assert missing.returncode != 0 and "no distributed checkpoint here" in missing.stderr
