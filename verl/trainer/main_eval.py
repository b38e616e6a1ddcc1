"""Held-out greedy accuracy of any local HF model directory on a task.

python -m verl.trainer.main_eval model.path=outputs/.../global_step_600 data.val_files=builtin://arithmetic/test
"""

from __future__ import annotations

import json
import sys
from typing import Any

from omegaconf import DictConfig

from verl.utils.cli import run_cli
from verl.utils.config import load_config
from verl.utils.dataset.parquet import read_parquet_rows
from verl.utils.evaluation import evaluate_greedy_accuracy
from verl.utils.model import load_causal_lm, load_tokenizer


def evaluate_model(
    model_path: str,
    val_files,
    max_new_tokens: int = 32,
    batch_size: int = 256,
    max_samples: int = -1,
    dtype: str = "fp32",
) -> dict[str, Any]:
    tokenizer = load_tokenizer(model_path)
    model = load_causal_lm(model_path, dtype=dtype)
    rows = read_parquet_rows(val_files)
    if not rows:
        raise ValueError(f"data.val_files={val_files}: no rows to evaluate")
    if max_samples > 0:
        rows = rows[:max_samples]
    return evaluate_greedy_accuracy(model, tokenizer, rows, max_new_tokens, batch_size)


def run_eval(config: DictConfig) -> dict[str, Any]:
    result = evaluate_model(
        config.model.path,
        config.data.val_files,
        config.generation.max_new_tokens,
        config.generation.batch_size,
        config.data.max_samples,
        config.model.dtype,
    )
    if config.output.path:
        with open(config.output.path, "w") as f:
            json.dump(result, f, indent=2, default=str)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    config = load_config("evaluation", sys.argv[1:] if argv is None else argv)
    result = run_eval(config)
    print(
        f"held-out greedy accuracy: {result['acc']:.1%} ({result['num_samples']} problems from "
        f"{config.data.val_files}) for {config.model.path}"
    )
    return result


if __name__ == "__main__":
    run_cli(main)
