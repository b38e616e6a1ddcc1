"""DataParallelRLTrainer (docs/python_api.md) with the default PPO config, a JSONL dataloader,
train_step, a reward hook, and timestamped logs.

    python examples/python_api/data_parallel_trainer.py [--work-dir DIR] [--use-amp]

Open-ended prompts like these have no ground truth, so the default reward ('auto') scores them with the built-in
length reward; give config['reward']['model'] a reward-model directory or a function for a real task. Every
config key and the tree key it sets are in docs/python_api.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os

from _common import MODEL

from verl import DataParallelRLTrainer
from verl.data import DataLoader, make_pretokenized_dataloader  # noqa: F401  (the imports docs/python_api.md shows)
from verl.trainer import RLTrainer  # noqa: F401
from verl.utils.config import get_ppo_default_config

OPEN_ENDED_PROMPTS = ["请写一首关于春天的诗", "解释什么是光合作用", "推荐三部经典的科幻电影"]


def custom_reward_shaping(reward_tensor):
    # a bonus on top of every positive reward (docs/python_api.md's reward hook)
    return reward_tensor + 0.1 * (reward_tensor > 0).float()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work-dir", default="outputs/verl-python/examples/data_parallel", help="data.jsonl and logs/")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--max-steps", type=int, default=20, help="stop after this many train_step calls")
    p.add_argument("--dp-size", type=int, default=1, help="data-parallel ranks (1: the local backend)")
    p.add_argument("--use-amp", action="store_true", help="bf16 actor and critic (train.use_amp)")
    args = p.parse_args()

    # the default PPO config and the model (a local directory; a hub id such as 'facebook/opt-350m' needs a download)
    config = get_ppo_default_config()
    config["model"]["pretrained_model_name_or_path"] = MODEL
    # parallelism, gradient accumulation, mixed precision
    config["train"]["dp_size"] = args.dp_size
    config["train"]["tp_size"] = 1
    config["train"]["pp_size"] = 1
    config["train"]["grad_accumulation_steps"] = 4
    config["train"]["use_amp"] = args.use_amp
    # the whole verl tree is in the same dict: these prompts have no held-out set, so no periodic validation
    config["trainer"]["test_freq"] = -1

    # a JSONL file with a prompt per line
    os.makedirs(args.work_dir, exist_ok=True)
    data_file = os.path.join(args.work_dir, "data.jsonl")
    with open(data_file, "w", encoding="utf-8") as f:
        for prompt in OPEN_ENDED_PROMPTS:
            f.write(json.dumps({"prompt": prompt}, ensure_ascii=False) + "\n")
    dataloader = make_pretokenized_dataloader(
        file_path=data_file, tokenizer_name_or_path=MODEL, batch_size=4, seq_len=512
    )

    # logs to the console and to a timestamped file in log_dir
    logging.basicConfig(level=logging.INFO)
    trainer = DataParallelRLTrainer(config, log_dir=os.path.join(args.work_dir, "logs"))
    # reward shaping hook
    trainer.set_reward_hook(custom_reward_shaping)

    # the training loop
    steps = 0
    for _epoch in range(args.epochs):
        for batch in dataloader:
            if steps >= args.max_steps:
                break
            output = trainer.train_step(batch)
            steps += 1
            print(f"Loss: {output['loss']:.4f}, Reward: {output['reward']:.4f}")
    print(f"checkpoint: {trainer.save_checkpoint()}")
    trainer.close()
    print(f"log file: {trainer.log_file}")


if __name__ == "__main__":
    main()
