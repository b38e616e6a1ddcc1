"""``python scripts/auto_config.py --model_size 7b --gpu_type a100 --num_gpus 8 --task code-generation``
(= ``python -m verl.planner``): per-GPU memory of each phase of a step, a recommended parallel and batch
configuration with its reasons, an estimated step time, and a ready override file for ``main_ppo --config``."""

from __future__ import annotations

import argparse
import os
import sys

import yaml

from verl.planner.hardware import GIB, GPUS, Device, gpu
from verl.planner.memory import PlanInputs, estimate_memory, format_estimate
from verl.planner.recommend import TASKS, recommend
from verl.planner.shapes import PRESETS, preset_shape, shape_from_model_path


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0].split("(= ")[0])
    model = p.add_mutually_exclusive_group()
    model.add_argument("--model_size", default=None, help=f"a preset shape: {', '.join(PRESETS)} (default 7b)")
    model.add_argument("--model_path", help="a HF model directory: its config.json gives the shape")
    p.add_argument("--gpu_type", default="a100", help=f"one of {', '.join(GPUS)} (default a100, 80 GB)")
    p.add_argument("--gpu_memory_gb", type=float, help="override the GPU's memory (GiB)")
    p.add_argument("--num_gpus", type=int, default=8)
    p.add_argument("--task", default="math", choices=sorted(TASKS), help="typical lengths and batch for the task")
    p.add_argument("--algorithm", default="grpo", choices=["grpo", "ppo"], help="ppo adds a critic (GAE)")
    p.add_argument("--no_kl", action="store_true", help="no KL loss: no reference model")
    p.add_argument("--lora_rank", type=int, default=0)
    p.add_argument("--rollout", default="vllm", choices=["vllm", "sglang"])
    p.add_argument("--max_prompt_length", type=int)
    p.add_argument("--max_response_length", type=int)
    p.add_argument("--train_batch_size", type=int, help="prompts per step")
    p.add_argument("--rollout_n", type=int, help="samples per prompt")
    p.add_argument("--ppo_mini_batch_size", type=int)
    p.add_argument("--output", help="write the overrides here (YAML for main_ppo --config); default under outputs/")
    return p


def main(argv: list[str] | None = None, prog: str = "python -m verl.planner") -> int:
    from verl.utils import cli

    prog = cli.COMMAND_NAME or prog  # "verl auto-config" when the verl command runs it
    args = build_parser(prog).parse_args(argv)
    try:
        shape = shape_from_model_path(args.model_path) if args.model_path else preset_shape(args.model_size or "7b")
        device = gpu(args.gpu_type)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.gpu_memory_gb:
        device = Device(device.name, int(args.gpu_memory_gb * GIB), device.bf16_tflops, device.bandwidth_tbps)
    task = TASKS[args.task]
    prompt = args.max_prompt_length or task["prompt"]
    response = args.max_response_length or task["response"]
    n = args.rollout_n or task["n"]
    batch = args.train_batch_size or task["batch"]
    inp = PlanInputs(
        shape=shape,
        device_bytes=device.memory_bytes,
        world_size=args.num_gpus,
        platform=device.platform,
        compute_bytes=2,  # bf16, or fp16 where the GPU has no bf16 (V100): 2 bytes either way
        lora_rank=args.lora_rank,
        prompt_len=prompt,
        response_len=response,
        rollout_n=n,
        rollout_rows=-(-batch * n // args.num_gpus),
        shared_prefix=False,  # the GPU path packs sequences (use_remove_padding)
        reference=not args.no_kl,
        critic=args.algorithm == "ppo",
        rollout_engine=args.rollout,
    )
    try:
        rec = recommend(inp, device, args.num_gpus, mini_batch=args.ppo_mini_batch_size)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    est = estimate_memory(rec.inputs)
    print(
        f"{shape.name}: {shape.num_params / 1e9:.2f}B parameters ({shape.num_layers} layers, hidden "
        f"{shape.hidden_size}, vocab {shape.vocab_size}) on {args.num_gpus} x {device.name} "
        f"({device.memory_bytes / GIB:.0f} GiB); task {args.task}: prompts {prompt} + responses {response} tokens, "
        f"{batch} prompts x {n} samples per step\n"
    )
    print(format_estimate(est))
    if est.kv_cache_tokens is not None:
        print(f"rollout KV cache per replica: {est.kv_cache_tokens:,} tokens")
    print("\nwhy:")
    for reason in rec.reasons:
        print(f"  - {reason}")
    t = rec.throughput
    print(
        f"\nestimated step at full-length responses: generation {t['generation_s']:.0f} s "
        f"({t['generated_tokens']:,} tokens), training passes {t['training_s']:.0f} s (40% MFU)"
    )
    out = args.output or os.path.join(
        "outputs", "auto_config", f"{shape.name.replace('/', '_')}_{device.name}x{args.num_gpus}_{args.task}.yaml"
    )
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(f"# {prog} {' '.join(argv if argv is not None else sys.argv[1:])}\n")
        yaml.safe_dump(rec.overrides, f, sort_keys=False)
    print(f"\nwrote {out}: python -m verl.trainer.main_ppo --config {out} actor_rollout_ref.model.path=<model dir> ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
