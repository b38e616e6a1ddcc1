"""Shared bits of the Python-API examples: the local stand-in for hub models, and the CLI knobs that
let the tests run each example for a step or two."""

from __future__ import annotations

import argparse

# Hub models (meta-llama/Llama-3-8b-chat-hf, facebook/opt-350m) need a download; offline, the
# examples use the shipped tiny warm start. Any local HF model directory works in its place.
MODEL = "builtin://tiny-qwen2-arith-sft"


def base_parser(description: str, max_steps: int = 20, eval_interval: int = 10) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--max-steps", type=int, default=max_steps, help="training steps")
    p.add_argument("--eval-interval", type=int, default=eval_interval, help="validate every N steps (and at the end)")
    p.add_argument("--rollout-batch-size", type=int, default=32, help="prompts per step")
    p.add_argument("--responses-per-prompt", type=int, default=4)
    p.add_argument("--num-rollout-steps", type=int, default=16, help="optimizer updates per rollout (often 16-128)")
    p.add_argument("--val-size", type=int, default=64, help="held-out arithmetic prompts per validation")
    p.add_argument("--out-dir", default=None, help="run directory (default: a fresh one under outputs/verl-python)")
    return p


def data_kwargs(args: argparse.Namespace) -> dict:
    """DataConfig keys for the built-in arithmetic task at the CLI's sizes (num_rollout_steps included)."""
    return {
        "rollout_batch_size": args.rollout_batch_size,
        "num_rollout_steps": args.num_rollout_steps,
        "responses_per_prompt": args.responses_per_prompt,
        "val_files": f"builtin://arithmetic/test?test_size={args.val_size}",
    }
