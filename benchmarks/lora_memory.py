"""LoRA against full fine-tuning on a random Qwen2 of Qwen2.5-0.5B's shape: trainable parameters, optimizer-state
bytes and the peak memory of actor + reference, measured side by side in one run.

    python benchmarks/lora_memory.py                  # hidden 896, 24 layers, vocab 151936 (~0.49B parameters)
    python benchmarks/lora_memory.py --smoke          # a small shape, for CI

Each mode runs in a fresh subprocess: the real ``ActorRolloutRefWorker`` (role ``actor_rollout_ref``, local
backend) builds the actor and the reference exactly as a run does -- full fine-tuning loads a second, frozen copy as
the reference; LoRA's reference is the actor with its adapters off -- then one optimizer step on a 4 x 64-token
batch and a reference forward. Reported: the worker's own parameter / optimizer-state bytes (``memory_stats``) and
the process's peak resident memory (``VmHWM``) minus what it held before the models were built. The loader
memory-maps the weight files; every weight is copied into process memory first (as a device placement would, so
the actor and a reference copy cannot share page cache and every byte counts) and the peak counter restarts from
there (Linux ``/proc/self/clear_refs``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SHAPES = {
    "0.5b": dict(hidden_size=896, num_layers=24, num_heads=14, num_kv_heads=2, intermediate_size=4864),
    "smoke": dict(hidden_size=128, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=512),
}
VOCAB = {"0.5b": 151936, "smoke": None}


def build_model(shape: str, out_dir: str) -> str:
    from verl.models.tiny import TinyModelConfig, save_tiny_model

    if not os.path.isfile(os.path.join(out_dir, "config.json")):
        cfg = TinyModelConfig(
            **SHAPES[shape], vocab_size=VOCAB[shape], tie_word_embeddings=True, max_position_embeddings=512
        )
        save_tiny_model(out_dir, cfg)
    return out_dir


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024  # kB
    raise KeyError(key)


def reset_peak_rss() -> None:
    """Start the kernel's peak-RSS counter (VmHWM) again from the current RSS (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def measure(model_dir: str, lora_rank: int) -> dict:
    """One mode, in this process: build the worker, one optimizer step, one reference pass."""
    import torch

    from verl.utils.config import load_config
    from verl.utils.lora import count_parameters
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    torch.manual_seed(0)
    overrides = [
        "recipe=quickstart",
        f"actor_rollout_ref.model.path={model_dir}",
        "actor_rollout_ref.actor.use_kl_loss=true",
    ]
    overrides += [f"actor_rollout_ref.model.lora_rank={lora_rank}", "actor_rollout_ref.model.lora_alpha=32"]
    config = load_config("ppo_trainer", overrides)
    before = _status_bytes("VmRSS")
    worker = ActorRolloutRefWorker(config.actor_rollout_ref, role="actor_rollout_ref", total_training_steps=10)
    worker.init_model()
    module, optimizer = worker.actor_module, worker.actor_optimizer
    # the CPU loader memory-maps the safetensors file, so the actor and a reference copy could share its page cache
    # and untouched pages would not count: copy every weight into process memory, as placing it on a device does
    with torch.no_grad():
        for m in {id(module): module, id(worker.ref_module): worker.ref_module}.values():
            for p in m.parameters():
                p.data = p.data.clone()
    gc.collect()  # the mapped file's pages go with the last tensor that used them
    reset_peak_rss()  # the copies above are the benchmark's doing: the peak counts from the models in memory
    ids = torch.randint(0, 250, (4, 64))
    loss = module(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    ref = worker.ref_module
    ctx = module.disable_adapter() if ref is module else torch.no_grad()
    with torch.no_grad(), ctx:
        ref(input_ids=ids)
    stats = worker.memory_stats()
    counts = count_parameters(module)
    shared = ref is module
    ref_bytes = 0 if shared else sum(p.numel() * p.element_size() for p in ref.parameters())
    return {
        "lora_rank": lora_rank,
        "trainable_params": counts["trainable"],
        "total_params": counts["total"],
        "param_bytes": stats["param_bytes"],
        "ref_param_bytes": ref_bytes,
        "optim_bytes": stats["optim_bytes"],
        "peak_rss_bytes": _status_bytes("VmHWM") - before,
        "ref_is_actor": shared,
    }


def run_mode(model_dir: str, lora_rank: int) -> dict:
    code = f"import json, sys; sys.path.insert(0, {ROOT!r}); sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
    code += f"import lora_memory; print(json.dumps(lora_memory.measure({model_dir!r}, {lora_rank})))"
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"lora_rank={lora_rank} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(full: dict, lora: dict, shape: str) -> str:
    mib = 2**20
    rows = [
        ("trainable parameters", full["trainable_params"], lora["trainable_params"], 1),
        ("optimizer state (MiB)", full["optim_bytes"], lora["optim_bytes"], mib),
        ("actor parameters (MiB)", full["param_bytes"], lora["param_bytes"], mib),
        ("reference copy (MiB)", full["ref_param_bytes"], lora["ref_param_bytes"], mib),
        ("peak RSS of actor + reference, one step (MiB)", full["peak_rss_bytes"], lora["peak_rss_bytes"], mib),
    ]
    lines = [
        f"shape {shape}: {full['total_params'] / 1e6:.1f}M parameters; LoRA rank {lora['lora_rank']} on all linears",
        "",
        "| | full fine-tuning | LoRA | full / LoRA |",
        "|---|---|---|---|",
    ]
    for name, a, b, unit in rows:
        ratio = f"{a / b:.1f}x" if b else "no copy"
        cells = [f"{v:,}" if unit == 1 else f"{v / unit:,.1f}" for v in (a, b)]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="a small shape (CI)")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--work-dir", default=os.path.join(ROOT, "outputs", "lora_memory"))
    args = p.parse_args(argv)
    shape = "smoke" if args.smoke else "0.5b"
    model_dir = build_model(shape, os.path.join(args.work_dir if not args.smoke else tempfile.mkdtemp(), shape))
    full, lora = run_mode(model_dir, 0), run_mode(model_dir, args.lora_rank)
    print(report(full, lora, shape))
    return {"full": full, "lora": lora}


if __name__ == "__main__":
    main()
