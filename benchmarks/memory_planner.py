"""The memory planner against measured peak memory of real main-job runs on CPU, side by side in one run.

    python benchmarks/memory_planner.py                 # every configuration below, 2 steps each
    python benchmarks/memory_planner.py --only logits   # one of them
    python benchmarks/memory_planner.py --smoke         # the smallest, for CI

Each configuration is a random Qwen2 of its own shape saved as an HF directory and a real ``main_ppo`` run of 2
steps in a fresh subprocess (local backend, 2 threads). Measured: the process's peak resident memory (``VmHWM``)
minus its resident memory just before the run started (after imports), i.e. what the run itself took. Estimated:
``verl.planner.estimate_memory`` on the same loaded config (``plan_inputs_from_config``). The configurations are
chosen so that a different term dominates in each: the logits (a 32k vocabulary), parameters and AdamW moments with a
reference copy (a deep model, KL loss), saved activations (long responses, no shared prompts), and a critic with
gradient checkpointing (PPO/GAE).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

COMMON = [
    "data.train_files=builtin://arithmetic/train?train_size=256",
    "data.val_files=builtin://arithmetic/test?test_size=16",
    "trainer.total_training_steps=2",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "trainer.logger=[]",
    "trainer.resume_mode=disable",
    "actor_rollout_ref.rollout.ignore_eos=true",  # a random model: every response runs to its full length
]
# name -> (model shape, overrides)
CONFIGS: dict[str, tuple[dict, list[str]]] = {
    "logits": (
        dict(hidden_size=256, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=768, vocab_size=32768),
        [
            "data.train_batch_size=8",
            "actor_rollout_ref.rollout.n=8",
            "data.max_response_length=32",
            "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        ],
    ),
    # the same run with the chunked log-prob pass (actor.entropy_from_logits_with_chunking): the logits term shrinks
    "logits-chunked": (
        dict(hidden_size=256, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=768, vocab_size=32768),
        [
            "data.train_batch_size=8",
            "actor_rollout_ref.rollout.n=8",
            "data.max_response_length=32",
            "actor_rollout_ref.actor.ppo_mini_batch_size=8",
            "actor_rollout_ref.actor.entropy_from_logits_with_chunking=true",
        ],
    ),
    "params+ref": (
        dict(hidden_size=768, num_layers=12, num_heads=12, num_kv_heads=4, intermediate_size=2048),
        [
            "data.train_batch_size=8",
            "actor_rollout_ref.rollout.n=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=8",
            "data.max_response_length=16",
            "actor_rollout_ref.actor.use_kl_loss=true",
        ],
    ),
    "activations": (
        dict(hidden_size=384, num_layers=8, num_heads=6, num_kv_heads=2, intermediate_size=1536),
        [
            "data.train_batch_size=16",
            "actor_rollout_ref.rollout.n=8",
            "data.max_response_length=96",
            "actor_rollout_ref.model.use_shared_prefix=false",
            "actor_rollout_ref.actor.ppo_mini_batch_size=16",
        ],
    ),
    "critic+ckpt": (
        dict(hidden_size=512, num_layers=6, num_heads=8, num_kv_heads=4, intermediate_size=1536, vocab_size=8192),
        [
            "algorithm.adv_estimator=gae",
            "data.train_batch_size=32",
            "actor_rollout_ref.rollout.n=1",
            "data.max_response_length=64",
            "actor_rollout_ref.model.enable_gradient_checkpointing=true",
            "critic.model.enable_gradient_checkpointing=true",
            "actor_rollout_ref.actor.ppo_mini_batch_size=32",
            "critic.ppo_mini_batch_size=32",
        ],
    ),
    # the shipped warm start's shape (0.2M parameters): what a run takes besides its tensors
    "overhead": (
        dict(hidden_size=128, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=512),
        [
            "data.train_batch_size=4",
            "actor_rollout_ref.rollout.n=4",
            "data.max_response_length=16",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        ],
    ),
    "smoke": (
        dict(hidden_size=128, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=512, vocab_size=16384),
        [
            "data.train_batch_size=4",
            "actor_rollout_ref.rollout.n=4",
            "data.max_response_length=16",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        ],
    ),
}


def build_model(name: str, cache: str) -> str:
    from verl.models.tiny import TinyModelConfig, save_tiny_model

    shape_name = name.removesuffix("-chunked")  # a variant of a configuration runs the same model
    out = os.path.join(cache, f"planner-{shape_name}")
    if not os.path.isfile(os.path.join(out, "config.json")):
        save_tiny_model(out, TinyModelConfig(**CONFIGS[name][0], tie_word_embeddings=True))
    return out


def overrides(name: str, model_dir: str) -> list[str]:
    extra = ["recipe=quickstart", f"actor_rollout_ref.model.path={model_dir}"]  # the tuned sizes, a model of its own
    if "algorithm.adv_estimator=gae" in CONFIGS[name][1]:
        extra.append(f"critic.model.path={model_dir}")
    return [*COMMON, *CONFIGS[name][1], *extra]


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def measure(args: list[str], out_dir: str) -> dict:
    """In this (fresh) process: the run's peak memory above what the process held before it started."""
    import torch

    torch.set_num_threads(2)
    from verl.planner import estimate_memory, this_machine
    from verl.planner.from_config import plan_inputs_from_config
    from verl.trainer.main_ppo import run_ppo
    from verl.utils.config import load_config

    config = load_config("ppo_trainer", [*args, f"trainer.default_local_dir={out_dir}"])
    estimate = estimate_memory(plan_inputs_from_config(config, this_machine()))
    base = _status_bytes("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak counter starts again from here
    run_ppo(config)
    peak = _status_bytes("VmHWM") - base
    return {
        "measured": peak,
        "estimated": estimate.peak_bytes,
        "phase": estimate.peak_phase,
        "phases": {p: estimate.total(p) for p in estimate.phases},
        "breakdown": estimate.phases[estimate.peak_phase],
    }


def run_one(name: str, cache: str) -> dict:
    model_dir = build_model(name, cache)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONPATH": ROOT}
        code = (
            "import json,sys; sys.path.insert(0, sys.argv[1]); from benchmarks.memory_planner import measure; "
            "print('RESULT', json.dumps(measure(json.loads(sys.argv[2]), sys.argv[3])))"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code, ROOT, json.dumps(overrides(name, model_dir)), tmp],
            env=env,
            capture_output=True,
            text=True,
        )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{name}: the run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][7:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=list(CONFIGS))
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--cache", default=os.path.join(ROOT, "outputs", "benchmarks", "memory_planner"))
    parser.add_argument("--repeats", type=int, default=1, help="runs per configuration; the median is reported")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    names = ["smoke"] if args.smoke else args.only or [n for n in CONFIGS if n != "smoke"]
    os.makedirs(args.cache, exist_ok=True)
    mib = 2**20
    results = {}
    print(f"{'config':<14}{'measured MiB':>14}{'(min-max)':>12}{'estimated MiB':>15}{'est/meas':>10}  peak phase")
    for name in names:
        runs = [run_one(name, args.cache) for _ in range(args.repeats)]
        measured = sorted(r["measured"] for r in runs)
        r = results[name] = {**runs[0], "measured": statistics.median(measured), "runs": measured}
        r["ratio"] = r["estimated"] / r["measured"]
        spread = f"{measured[0] / mib:.0f}-{measured[-1] / mib:.0f}"
        print(
            f"{name:<14}{r['measured'] / mib:>14.0f}{spread:>12}{r['estimated'] / mib:>15.0f}{r['ratio']:>10.2f}  "
            f"{r['phase']}"
        )
        for comp, b in r["breakdown"].items():
            print(f"{'':<16}{comp:<28}{b / mib:>9.0f} MiB")
    worst = max(abs(r["ratio"] - 1) for r in results.values())
    print(f"largest relative error: {worst:.1%}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
