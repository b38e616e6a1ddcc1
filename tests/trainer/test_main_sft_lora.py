"""``python -m verl.trainer.main_sft model.lora_rank=8``: LoRA SFT on the tiny model, its PEFT adapter checkpoints,
and going on from one (``model.lora_adapter_path``). Four short runs in all (~20 s on 2 cores)."""

import contextlib
import io
import json
import os
import re

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from verl.trainer.main_sft import build_sft_datasets, run_sft, validation_loss
from verl.utils.config import load_config
from verl.utils.lora import adapter_base_path
from verl.utils.model import load_causal_lm, load_tokenizer

peft = pytest.importorskip("peft")

SMALL = [
    "recipe=sft_quickstart",  # the built-in task's settings, on the test's own tiny model
    "data.train_files=builtin://arithmetic/train?train_size=256",
    "data.val_files=builtin://arithmetic/test?test_size=32",
    "data.train_batch_size=32",
    "data.micro_batch_size_per_gpu=16",
    "trainer.total_training_steps=6",
    "trainer.log_freq=1",
    "trainer.val_generation_max_new_tokens=12",
    "trainer.logger=[console,file]",
]
LORA = [*SMALL, "model.lora_rank=8", "optim.lr=1e-2", "trainer.save_freq=3"]


def _run(overrides: list[str]) -> tuple[dict, str]:
    """``run_sft`` on ``overrides``; returns its result and what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = run_sft(load_config("sft_trainer", overrides))
    return result, out.getvalue()


def _metrics(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _losses(run_dir) -> list[float]:
    return [m["train/loss"] for m in _metrics(run_dir) if "train/loss" in m]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, tiny_model_dir):
    """Six LoRA steps from the tiny model, checkpoints at steps 3 and 6."""
    run_dir = tmp_path_factory.mktemp("sft-lora") / "a"
    overrides = [*LORA, f"model.partial_pretrain={tiny_model_dir}", f"trainer.default_local_dir={run_dir}"]
    result, printed = _run(overrides)
    return {"result": result, "printed": printed, "dir": run_dir, "overrides": overrides}


@pytest.mark.slow
def test_lora_sft_trains_the_adapters_alone_and_saves_a_peft_adapter(first_run, tiny_model_dir):
    result, run_dir = first_run["result"], first_run["dir"]
    losses = _losses(run_dir)
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.3, losses  # it learns (5.4 -> 4.5)
    counts = re.search(r"LoRA: training ([\d,]+) of ([\d,]+) parameters", first_run["printed"])
    trainable, total = (int(g.replace(",", "")) for g in counts.groups())
    assert 0 < trainable < total / 5

    ckpt = result["checkpoint"]
    assert ckpt == str(run_dir / "global_step_6")
    for step in (3, 6):  # trainer.save_freq=3, and the end
        files = set(os.listdir(run_dir / f"global_step_{step}"))
        assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json"} <= files, files
        assert not any(f.startswith("model") and f.endswith(".safetensors") for f in files), files  # no full weights
    with open(os.path.join(ckpt, "adapter_config.json")) as f:
        cfg = json.load(f)
    assert (cfg["peft_type"], cfg["r"], cfg["lora_alpha"]) == ("LORA", 8, 16)
    assert adapter_base_path(ckpt) == os.path.abspath(tiny_model_dir)  # the model it was trained on
    tensors = load_file(os.path.join(ckpt, "adapter_model.safetensors"))
    assert all(".lora_A." in k or ".lora_B." in k for k in tensors) and sum(t.numel() for t in tensors.values()) == (
        trainable
    )
    assert max(t.abs().max().item() for k, t in tensors.items() if ".lora_B." in k) > 0  # B starts at zero: trained

    # Only the adapters changed: the untouched base from disk plus the adapter reproduce the run's final val loss
    # (the base alone does not).
    tokenizer = load_tokenizer(ckpt)
    _, val_ds = build_sft_datasets(load_config("sft_trainer", first_run["overrides"]), tokenizer)
    loader = torch.utils.data.DataLoader(val_ds, batch_size=256, collate_fn=val_ds.collate)
    base = AutoModelForCausalLM.from_pretrained(adapter_base_path(ckpt), dtype=torch.float32)
    base_loss = validation_loss(base, loader)
    adapted_loss = validation_loss(peft.PeftModel.from_pretrained(base, ckpt), loader)
    assert abs(adapted_loss - result["val/loss"]) < 1e-5, (adapted_loss, result["val/loss"])
    assert base_loss > result["val/loss"] + 0.3, (base_loss, result["val/loss"])


@pytest.mark.slow
def test_the_adapter_dir_loads_with_peft_and_as_a_merged_model_path(first_run, tiny_model_dir):
    ckpt = first_run["result"]["checkpoint"]
    tokenizer = load_tokenizer(ckpt)
    ids = tokenizer(["What is 12 + 30?", "What is 7 + 5? The answer"], return_tensors="pt", padding=True)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        base_logits = base(**ids).logits
        peft_logits = peft.PeftModel.from_pretrained(base, ckpt).eval()(**ids).logits
        merged = load_causal_lm(ckpt, dtype="fp32").eval()  # base named in adapter_config.json, adapter merged in
        assert not hasattr(merged, "peft_config")  # a plain HF model
        merged_logits = merged(**ids).logits
    assert (peft_logits - merged_logits).abs().max().item() < 1e-5
    assert (peft_logits - base_logits).abs().max().item() > 1e-3  # the adapter does something


@pytest.mark.slow
def test_lora_adapter_path_goes_on_from_the_saved_adapter(first_run, tmp_path):
    """The first run's adapter, one step at lr 0 (with gradient checkpointing on): its validation equals the end of
    the first run, and its first-step loss (the first run's first batch: same seed, same data order) is the trained
    adapter's, lower than the fresh adapter's. ``model.lora_adapter_path`` alone turns LoRA on (lora_rank stays 0)."""
    first, ckpt = first_run["result"], first_run["result"]["checkpoint"]
    base = [o for o in first_run["overrides"] if not o.startswith(("model.lora_rank", "optim.lr", "trainer.default"))]
    result, printed = _run(
        [
            *base,
            f"model.lora_adapter_path={ckpt}",
            "model.enable_gradient_checkpointing=true",
            "optim.lr=0",
            "trainer.total_training_steps=1",
            f"trainer.default_local_dir={tmp_path}/b",
        ]
    )
    assert "LoRA: training" in printed and "WARNING: model.lora_adapter_path" not in printed  # same base
    assert abs(result["val/loss"] - first["val/loss"]) < 1e-6 and result["val/acc"] == first["val/acc"]
    first_losses, (step1,) = _losses(first_run["dir"]), _metrics(tmp_path / "b")[:1]
    assert step1["train/loss"] < first_losses[0] - 0.3, (step1["train/loss"], first_losses)
    assert step1["train/grad_norm"] > 0  # gradients reach the adapters through the checkpointed layers
    assert os.path.isfile(os.path.join(result["checkpoint"], "adapter_model.safetensors"))


@pytest.mark.slow
def test_same_seed_same_adapter_bytes(first_run, tmp_path):
    """Deterministic on CPU: the same seed draws the same A matrices and the same data order, so the run repeats
    bit for bit (at the torch thread count the suite runs with, OMP_NUM_THREADS=1 in tests/conftest.py)."""
    overrides = [o for o in first_run["overrides"] if not o.startswith("trainer.default_local_dir")]
    result, _ = _run([*overrides, f"trainer.default_local_dir={tmp_path}/again"])
    assert _losses(tmp_path / "again") == _losses(first_run["dir"])
    for step in (3, 6):
        name = os.path.join(f"global_step_{step}", "adapter_model.safetensors")
        with open(first_run["dir"] / name, "rb") as a, open(tmp_path / "again" / name, "rb") as b:
            assert a.read() == b.read()
    assert result["val/loss"] == first_run["result"]["val/loss"]
