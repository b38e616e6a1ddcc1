"""``python -m verl.trainer.main_sft data.multiturn.enable=true``: a few steps on the tool task's demonstrations."""

import json

import pytest

from verl.trainer.main_sft import main, run_sft
from verl.utils.config import ConfigError, load_config

TOOL_MODEL = "builtin://tiny-qwen2?tools=true&hidden_size=32&num_layers=1&intermediate_size=64"
SMALL = [
    "data.multiturn.enable=true",
    f"model.partial_pretrain={TOOL_MODEL}",
    "data.train_files=[builtin://calc_multiply/train?train_size=48,builtin://calc_multiply/train?train_size=16"
    "&agent_name=single_turn_agent]",
    "data.val_files=builtin://calc_multiply/test?test_size=6",
    "data.train_batch_size=16",
    "data.micro_batch_size_per_gpu=8",
    "trainer.total_training_steps=4",
    "trainer.log_freq=1",
    "trainer.logger=[file]",
]


@pytest.mark.slow
def test_multiturn_sft_runs_replays_and_is_reproducible(tmp_path):
    r1 = run_sft(load_config("sft_trainer", SMALL + [f"trainer.default_local_dir={tmp_path}/a"]))
    r2 = run_sft(load_config("sft_trainer", SMALL + [f"trainer.default_local_dir={tmp_path}/b"]))
    losses = [json.loads(line).get("train/loss") for line in open(tmp_path / "a" / "metrics.jsonl")]
    losses = [x for x in losses if x is not None]
    assert len(losses) == 4 and losses[-1] < losses[0]  # it learns
    assert r1["val/loss"] == r2["val/loss"] and r1["val/acc"] == r2["val/acc"]  # same seed, same run
    # validation replays the held-out conversations: the samples are final turns after the real tool response
    sample = r1["samples"][0]
    assert "<tool_response>" in sample["prompt"] and sample["prompt"].endswith("<|im_start|>assistant\n")
    assert 0.0 <= r1["val/acc"] <= 1.0 and (tmp_path / "a" / "global_step_4" / "tokenizer.json").exists()


@pytest.mark.slow
def test_cli_and_chat_template_kwargs_only_in_multiturn(tmp_path, capsys):
    main(SMALL + ["trainer.total_training_steps=1", f"trainer.default_local_dir={tmp_path}/cli"])
    assert "held-out greedy accuracy:" in capsys.readouterr().out
    single = [a for a in SMALL if not a.startswith("data.multiturn")]
    cfg = load_config("sft_trainer", single + ["+data.apply_chat_template_kwargs.enable_thinking=false"])
    with pytest.raises(ConfigError, match=r"data\.apply_chat_template_kwargs=.*multi-turn SFT only"):
        run_sft(cfg)
