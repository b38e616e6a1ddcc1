"""End-to-end SFT runs on a tiny model. Same seed, same results on CPU: asserted below."""

import json
import os
import subprocess
import sys

import pytest
from transformers import AutoModelForCausalLM

from verl.trainer.main_sft import main, run_sft
from verl.utils.config import load_config

SMALL = [
    "recipe=sft_quickstart",  # the built-in task's settings, on the test's own tiny model
    "data.train_files=builtin://arithmetic/train?train_size=256",
    "data.val_files=builtin://arithmetic/test?test_size=32",
    "data.train_batch_size=32",
    "data.micro_batch_size_per_gpu=16",
    "trainer.total_training_steps=6",
    "trainer.log_freq=1",
    "trainer.val_generation_max_new_tokens=12",
]


@pytest.mark.slow
def test_sft_runs_saves_hf_checkpoint_and_is_reproducible(tmp_path, tiny_model_dir):
    common = SMALL + [f"model.partial_pretrain={tiny_model_dir}", "trainer.save_freq=3", "trainer.test_freq=3"]
    r1 = run_sft(load_config("sft_trainer", common + [f"trainer.default_local_dir={tmp_path}/a"]))
    r2 = run_sft(load_config("sft_trainer", common + [f"trainer.default_local_dir={tmp_path}/b"]))
    log_a = [json.loads(line) for line in open(tmp_path / "a" / "metrics.jsonl")]
    log_b = [json.loads(line) for line in open(tmp_path / "b" / "metrics.jsonl")]
    losses_a = [m["train/loss"] for m in log_a if "train/loss" in m]
    assert len(losses_a) == 6 and losses_a[-1] < losses_a[0]  # it learns
    assert losses_a == [m["train/loss"] for m in log_b if "train/loss" in m]  # same seed, same losses
    assert r1["val/loss"] == r2["val/loss"] and r1["val/acc"] == r2["val/acc"]
    assert 0.0 <= r1["val/acc"] <= 1.0 and any("val/acc" in m for m in log_a[:-1])  # mid-run validation ran
    for step in (3, 6):
        ckpt = tmp_path / "a" / f"global_step_{step}"
        assert AutoModelForCausalLM.from_pretrained(ckpt).config.model_type == "qwen2"
        assert (ckpt / "tokenizer.json").exists()
    assert (tmp_path / "a" / "config.yaml").exists()


@pytest.mark.slow
def test_gradient_accumulation_matches_one_big_batch(tmp_path, tiny_model_dir):
    base = SMALL + [f"model.partial_pretrain={tiny_model_dir}", "trainer.total_training_steps=2"]
    full = run_sft(
        load_config(
            "sft_trainer", base + ["data.micro_batch_size_per_gpu=32", f"trainer.default_local_dir={tmp_path}/full"]
        )
    )
    accum = run_sft(
        load_config(
            "sft_trainer", base + ["data.micro_batch_size_per_gpu=8", f"trainer.default_local_dir={tmp_path}/accum"]
        )
    )
    assert abs(full["val/loss"] - accum["val/loss"]) < 1e-4


@pytest.mark.slow
def test_cli_prints_heldout_accuracy_and_rejects_bad_keys(tmp_path, tiny_model_dir):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    args = [
        sys.executable,
        "-m",
        "verl.trainer.main_sft",
        *SMALL,
        f"model.partial_pretrain={tiny_model_dir}",
        "trainer.total_training_steps=2",
        f"trainer.default_local_dir={tmp_path}/cli",
    ]
    out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "held-out greedy accuracy:" in out.stdout
    bad = subprocess.run(args + ["optim.lrr=1"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode != 0 and "Did you mean 'optim.lr'" in bad.stderr
    missing = subprocess.run(
        args + [f"model.partial_pretrain={tmp_path}/nope"], capture_output=True, text=True, env=env, timeout=120
    )
    assert missing.returncode != 0 and "is not a directory" in missing.stderr
    assert main is not None


def test_zero_counts_are_errors_before_any_model_loads(tmp_path):
    import pytest

    from verl.utils.config import ConfigError

    for bad in ("data.micro_batch_size_per_gpu=0", "trainer.log_freq=0"):
        cfg = load_config("sft_trainer", [*SMALL, f"trainer.default_local_dir={tmp_path}", bad])
        with pytest.raises(ConfigError, match=rf"{bad.split('=')[0]}=0: .* must be >= 1"):
            run_sft(cfg)


@pytest.mark.slow
def test_a_val_generation_budget_shorter_than_the_answers_is_named(capsys):
    """Code answers (~60 tokens) against the default 32-token greedy budget: one warning with the number to set;
    the arithmetic task's short answers fit and say nothing."""
    from verl.trainer.main_sft import warn_short_val_generation
    from verl.utils.dataset.parquet import read_parquet_rows
    from verl.utils.model import load_tokenizer

    tok = load_tokenizer("builtin://tiny-qwen2")
    code = read_parquet_rows("builtin://code_functions/test?size=20")
    longest = warn_short_val_generation(code, tok, "extra_info.answer", 32)
    assert longest > 32 and f"trainer.val_generation_max_new_tokens={longest} or more" in capsys.readouterr().out
    arithmetic = read_parquet_rows("builtin://arithmetic/test?size=20")
    assert warn_short_val_generation(arithmetic, tok, "extra_info.answer", 32) <= 32
    assert "WARNING" not in capsys.readouterr().out
