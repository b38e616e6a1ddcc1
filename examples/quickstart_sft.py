"""The whole warm-start round trip through verl's Python API, on a 2-core CPU in about a minute.

1. build a tiny Qwen2 model + tokenizer and save them as an ordinary HF directory;
2. write the built-in arithmetic task as verl-format parquet;
3. fine-tune with the SFT trainer;
4. score the checkpoint's greedy answers on the held-out split.

    python examples/quickstart_sft.py --out-dir /tmp/verl-quickstart
"""

from __future__ import annotations

import argparse
import os

from verl.data import make_task_dataset
from verl.models.tiny import TinyModelConfig, save_tiny_model
from verl.trainer.main_eval import evaluate_model
from verl.trainer.main_sft import run_sft
from verl.utils.config import load_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", default="outputs/quickstart")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--train-size", type=int, default=4000)
    args = parser.parse_args()
    out = os.path.abspath(args.out_dir)

    model_dir = save_tiny_model(os.path.join(out, "tiny-qwen2"), TinyModelConfig(hidden_size=128, num_layers=2))
    files = make_task_dataset("arithmetic", os.path.join(out, "data"), train_size=args.train_size, test_size=200)

    config = load_config(
        "sft_trainer",
        [
            "recipe=sft_quickstart",  # the built-in task's tuned settings, on this model and data
            f"model.partial_pretrain={model_dir}",
            f"data.train_files={files['train']}",
            f"data.val_files={files['test']}",
            f"trainer.total_training_steps={args.steps}",
            f"trainer.default_local_dir={os.path.join(out, 'sft')}",
        ],
    )
    result = run_sft(config)

    scores = evaluate_model(result["checkpoint"], files["test"])
    for sample in scores["samples"][:3]:
        print(f"{sample['prompt']!r} -> {sample['response']!r} (expected {sample['ground_truth']})")
    print(
        f"held-out greedy accuracy {scores['acc']:.1%} after {result['steps']} steps; model at {result['checkpoint']}"
    )


if __name__ == "__main__":
    main()
