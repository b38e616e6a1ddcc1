"""``python -m verl.model_merger`` on a LoRA run's checkpoint (``dcp/`` with the adapters + ``lora_adapter/``, no
``huggingface/``): the adapter export, the ``--merge_lora`` full model, both rebuilt from ``dcp/``."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

pytest.importorskip("peft")

from peft import PeftModel  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForTokenClassification  # noqa: E402

from verl.model_merger import compare_with_hf, is_lora_checkpoint, load_merged_model, merge_checkpoint  # noqa: E402
from verl.model_merger.__main__ import main as merger_main  # noqa: E402
from verl.utils.model import resolve_model_path  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE = "builtin://tiny-qwen2-arith-sft"
ROLES = ("actor", "critic")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """One PPO (GAE) step with a checkpoint, actor and critic both LoRA: dcp/ (adapters) + lora_adapter/ each."""
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
            "actor_rollout_ref.actor.optim.lr=1e-3",  # one step moves the adapters well away from the base
            "actor_rollout_ref.model.lora_rank=8",
            "critic.model.lora_rank=8",
            "trainer.total_training_steps=1",
            "trainer.save_freq=1",
            "trainer.val_before_train=false",
            "trainer.logger=[file]",
            f"trainer.default_local_dir={out}",
        ]
    )
    step = out / "global_step_1"
    for role in ROLES:
        assert sorted(os.listdir(step / role)) == ["dcp", "extra_state.pt", "lora_adapter"], role
    return step


def _base(role):
    path = resolve_model_path(BASE)
    if role == "actor":
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    config = AutoConfig.from_pretrained(path, num_labels=1)
    return AutoModelForTokenClassification.from_pretrained(path, config=config, dtype=torch.float32)


def _auto(role):
    return AutoModelForCausalLM if role == "actor" else AutoModelForTokenClassification


def _peft(role, adapter_dir):
    return PeftModel.from_pretrained(_base(role), str(adapter_dir)).eval()


def _outputs(model, dtype=torch.float32):
    """Logits (actor) or values (critic) on a few fixed token sequences, the model run in ``dtype``."""
    ids = torch.randint(3, 259, (3, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return model.to(dtype)(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.double()


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.slow
def test_merged_export_equals_the_peft_model(checkpoint, tmp_path):
    for role in ROLES:
        assert is_lora_checkpoint(str(checkpoint / role))
        target = merge_checkpoint(str(checkpoint / role), str(tmp_path / role), merge_lora=True)
        assert not os.path.exists(os.path.join(target, "adapter_config.json"))
        merged = _auto(role).from_pretrained(target).eval()
        assert not any("lora_" in k or "modules_to_save" in k for k in merged.state_dict()), role
        assert next(merged.parameters()).dtype == torch.float32
        peft_model = _peft(role, checkpoint / role / "lora_adapter")
        got, expected = _outputs(merged), _outputs(peft_model)
        assert got.shape == expected.shape
        # fp32: W x + B A x and (W + B A) x round differently; this model's fp32 forward alone is ~1e-5 off fp64
        assert (got - expected).abs().max() < 1e-4, role
        # fp32 against PEFT's own merge of base + adapter (merge_and_unload): the same weights, the same logits
        peft_merged = _peft(role, checkpoint / role / "lora_adapter").merge_and_unload()
        assert (got - _outputs(peft_merged)).abs().max() < 1e-5, role
        # fp64 (the exported fp32 weights, cast): only the merged weights' rounding to fp32 is left
        assert (_outputs(merged, torch.float64) - _outputs(peft_model, torch.float64)).abs().max() < 1e-5, role
        if role == "actor":  # the adapter did train: the merged model is not the base one
            assert (got - _outputs(_base(role).eval())).abs().max() > 1e-2
        else:
            assert merged.config.num_labels == 1 and got.shape[-1] == 1


@pytest.mark.slow
def test_adapter_export_is_the_checkpoints_adapter(checkpoint, tmp_path):
    for role in ROLES:
        source = checkpoint / role / "lora_adapter"
        target = merge_checkpoint(str(checkpoint / role), str(tmp_path / role))
        assert os.path.isfile(os.path.join(target, "tokenizer_config.json"))
        a, b = (
            load_file(os.path.join(target, "adapter_model.safetensors")),
            load_file(source / "adapter_model.safetensors"),
        )
        assert a.keys() == b.keys() and len(a) > 0
        for k in a:
            assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), (role, k)
        with open(os.path.join(target, "adapter_config.json")) as f:
            config = json.load(f)
        assert config["task_type"] == ("CAUSAL_LM" if role == "actor" else "TOKEN_CLS") and config["r"] == 8
        assert os.path.isdir(config["base_model_name_or_path"])
        loaded = _peft(role, target)  # PeftModel.from_pretrained takes it as it is
        assert torch.equal(_outputs(loaded), _outputs(_peft(role, source)))


def test_weights_come_from_dcp_not_from_lora_adapter(checkpoint, tmp_path):
    role = tmp_path / "actor"
    shutil.copytree(checkpoint / "actor", role)
    adapter_file = role / "lora_adapter" / "adapter_model.safetensors"
    save_file({k: torch.zeros_like(v) for k, v in load_file(adapter_file).items()}, adapter_file)
    corrupted = _outputs(_peft("actor", role / "lora_adapter"))
    assert (corrupted - _outputs(_peft("actor", checkpoint / "actor" / "lora_adapter"))).abs().max() > 1e-2

    original = _weights(load_merged_model(str(checkpoint / "actor")))
    rebuilt = _weights(load_merged_model(str(role)))
    assert rebuilt.keys() == original.keys()
    assert all(torch.equal(rebuilt[k], original[k]) for k in original)
    exported = load_file(
        os.path.join(merge_checkpoint(str(role), str(tmp_path / "adapter")), "adapter_model.safetensors")
    )
    source = load_file(checkpoint / "actor" / "lora_adapter" / "adapter_model.safetensors")
    assert all(torch.equal(exported[k], source[k]) for k in source)

    # the base model moved: named with hf_model_path (--hf_model_path), it is the one the export then names
    config_file = role / "lora_adapter" / "adapter_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "base_model_name_or_path": str(tmp_path / "moved")}))
    with pytest.raises(FileNotFoundError, match="--hf_model_path"):
        merge_checkpoint(str(role), str(tmp_path / "none"))
    base = resolve_model_path(BASE)
    moved = _weights(load_merged_model(str(role), hf_model_path=base))
    assert all(torch.equal(moved[k], original[k]) for k in original)
    exported = merge_checkpoint(str(role), str(tmp_path / "adapter2"), hf_model_path=base)
    assert json.loads(open(os.path.join(exported, "adapter_config.json")).read())["base_model_name_or_path"] == base

    shutil.rmtree(role / "dcp")
    with pytest.raises(FileNotFoundError, match="no distributed checkpoint here"):
        merge_checkpoint(str(role), str(tmp_path / "none"), merge_lora=True)


@pytest.mark.slow
def test_cli_merge_lora_and_test(checkpoint, tmp_path, capsys):
    actor = str(checkpoint / "actor")
    out = subprocess.run(
        [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", actor]
        + ["--target_dir", str(tmp_path / "hf"), "--merge_lora"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "merged" in out.stdout
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    expected = _outputs(_peft("actor", checkpoint / "actor" / "lora_adapter"), torch.float64)
    assert (_outputs(model, torch.float64) - expected).abs().max() < 1e-5

    # test: the merged weights against an HF directory (in process: the CLI's main, no second interpreter)
    assert merger_main(["test", "--local_dir", actor, "--test_hf_dir", str(tmp_path / "hf")]) == 0
    assert "matches" in capsys.readouterr().out
    report = compare_with_hf(actor, resolve_model_path(BASE))  # the base model: the adapter changed the weights
    assert not report["ok"] and report["mismatched"] and not report["missing"] and not report["unexpected"]

    # --merge_lora on a checkpoint without lora_adapter/: a note, then the usual full-checkpoint merge
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(FileNotFoundError, match="no distributed checkpoint here"):
        merger_main(["merge", "--local_dir", str(plain), "--target_dir", str(tmp_path / "x"), "--merge_lora"])
    assert "not a LoRA checkpoint" in capsys.readouterr().err
