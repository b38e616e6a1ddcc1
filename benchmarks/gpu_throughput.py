"""GRPO step throughput and MFU on one accelerator: the benchmark workload on a larger random-weight model.

    python benchmarks/gpu_throughput.py                          # Qwen2-0.5B shape, random weights, cuda, bf16 autocast
    python benchmarks/gpu_throughput.py --model-size smoke --device cpu --steps 2   # seconds, any machine

The workload of ``benchmarks/trl_vs_verl.py`` (16 prompts x 8 samples from the built-in arithmetic task, at most
64 response tokens, temperature 1.0, KL loss to a frozen reference, clip 0.2) driven through our own pieces -- the
KV-cache ``HFRollout``, the reference's ``compute_log_prob`` and the actor's ``update_policy`` -- on a Qwen2 config
with random weights (``--model-size``: ``0.5b`` = Qwen2-0.5B's shape with its 151,936-token vocabulary, ``1.5b``,
or ``smoke``, a tiny one for a CPU check). Rewards are random per response (throughput does not depend on them), so
no task learning is measured here. The update is on-policy (one epoch, one mini-batch: no old-log-prob pass).

Reports per step: rollout, reference and update seconds, tokens/s (prompt + response tokens processed, no padding)
and MFU against the device's measured matmul peak in the compute dtype (2*N FLOPs per token for rollout and
reference, 6*N for the update; N = matmul parameters).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.cpu_peak_flops import matmul_params, measure_peak  # noqa: E402

SIZES = {
    # Qwen2-0.5B / 1.5B shapes (public configs), random weights
    "0.5b": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                 intermediate_size=4864, vocab_size=151936),
    "1.5b": dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                 intermediate_size=8960, vocab_size=151936),
    "smoke": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                  intermediate_size=128, vocab_size=259),
}  # fmt: skip


def build_model(size: str, device: str, seed: int):
    from transformers import AutoModelForCausalLM, Qwen2Config

    from verl.models.tiny import build_tokenizer

    tok = build_tokenizer()
    cfg = Qwen2Config(
        **SIZES[size],
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        rms_norm_eps=1e-6,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).to(device)
    return model, tok


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run(a: argparse.Namespace) -> dict:
    import copy

    from verl.protocol import DataProto
    from verl.trainer.ppo import core_algos
    from verl.utils.config import load_config, to_container
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_prompts
    from verl.workers.actor.dp_actor import DataParallelPPOActor
    from verl.workers.rollout.hf_rollout import HFRollout

    device = a.device
    model, tok = build_model(a.model_size, device, a.seed)
    ref = copy.deepcopy(model).requires_grad_(False)
    n_params = matmul_params(model)
    cfg = load_config(
        "ppo_trainer",
        [
            f"actor_rollout_ref.actor.ppo_mini_batch_size={a.prompts}",
            f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={a.micro_batch}",
            "actor_rollout_ref.actor.use_kl_loss=true",
            "actor_rollout_ref.actor.kl_loss_coef=0.04",
            f"actor_rollout_ref.actor.use_dynamic_bsz={str(a.dynamic_bsz).lower()}",
            f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={a.max_token_len}",
            f"actor_rollout_ref.actor.autocast_dtype={a.dtype}",
            f"actor_rollout_ref.actor.optim.lr={a.lr}",
        ],
    ).actor_rollout_ref
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    actor = DataParallelPPOActor(cfg.actor, model, opt, a.remove_padding, tok.pad_token_id)
    ref_policy = DataParallelPPOActor(cfg.actor, ref, None, a.remove_padding, tok.pad_token_id)
    rollout_cfg = to_container(cfg.rollout)
    rollout_cfg.update(response_length=a.max_response_length, temperature=1.0, dtype=a.dtype)
    rollout = HFRollout(model, rollout_cfg, tok.pad_token_id, tok.eos_token_id, seed=a.seed)
    ds = RLHFDataset("builtin://arithmetic/train", tok, max_prompt_length=64)
    g = torch.Generator().manual_seed(a.seed)
    steps = []
    for step in range(a.steps):
        idx = torch.randint(0, len(ds), (a.prompts,), generator=g).tolist()
        prompts = collate_prompts([ds[i] for i in idx], tok.pad_token_id)
        gen = DataProto.from_dict({k: v.to(device) for k, v in prompts.batch.items()}).repeat(a.n, interleave=True)
        sync(device)
        t0 = time.perf_counter()
        batch = rollout.generate_sequences(gen)
        sync(device)
        t1 = time.perf_counter()
        batch.meta_info.update(temperature=1.0, micro_batch_size=a.micro_batch, rollout_n=a.n, global_steps=step)
        batch.meta_info.update(use_dynamic_bsz=a.dynamic_bsz, max_token_len=a.max_token_len)
        ref_lp, _ = ref_policy.compute_log_prob(batch)
        batch.batch["ref_log_prob"] = ref_lp
        sync(device)
        t2 = time.perf_counter()
        scores = torch.zeros_like(batch.batch["response_mask"], dtype=torch.float32)
        last = (batch.batch["response_mask"].sum(-1) - 1).clamp(min=0)
        scores[torch.arange(len(batch)), last] = torch.rand(len(batch), generator=g).to(device)
        uid = np.array([str(i // a.n) for i in range(len(batch))], dtype=object)
        adv, _ = core_algos.get_adv_estimator_fn("grpo")(
            token_level_rewards=scores, response_mask=batch.batch["response_mask"], index=uid
        )
        batch.batch["advantages"] = adv
        actor.update_policy(batch)
        sync(device)
        t3 = time.perf_counter()
        tokens = int(batch.batch["attention_mask"].sum())
        steps.append(
            {
                "rollout_s": t1 - t0,
                "ref_s": t2 - t1,
                "update_s": t3 - t2,
                "step_s": t3 - t0,
                "tokens": tokens,
                "response_tokens": int(batch.batch["response_mask"].sum()),
            }
        )
        print(
            f"step {step + 1}: {t3 - t0:.2f}s (rollout {t1 - t0:.2f}, ref {t2 - t1:.2f}, update {t3 - t2:.2f}), "
            f"{tokens / (t3 - t0):.0f} tokens/s",
            flush=True,
        )
    peak = measure_peak(a.dtype, seconds=2.0, device=device, sizes=(2048, 4096) if device != "cpu" else (1024, 2048))
    used = steps[1:] if len(steps) > 1 else steps
    med = statistics.median
    out = {
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else f"cpu ({os.cpu_count()} cores)",
        "model_size": a.model_size,
        "matmul_params": n_params,
        "dtype": a.dtype,
        "peak_flops": peak,
        "step_s": med(s["step_s"] for s in used),
        "tokens_per_s": med(s["tokens"] / s["step_s"] for s in used),
        "rollout_s": med(s["rollout_s"] for s in used),
        "ref_s": med(s["ref_s"] for s in used),
        "update_s": med(s["update_s"] for s in used),
        "mfu_rollout": med(2 * n_params * s["tokens"] / s["rollout_s"] for s in used) / peak,
        "mfu_train": med(8 * n_params * s["tokens"] / (s["ref_s"] + s["update_s"]) for s in used) / peak,
        "steps": steps,
    }
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-size", choices=sorted(SIZES), default="0.5b")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default=None, help="compute dtype (default: bf16 on cuda)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--max-response-length", type=int, default=64)
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--max-token-len", type=int, default=8192)
    p.add_argument("--remove-padding", type=lambda s: s.lower() in ("1", "true", "yes"), default=True)
    p.add_argument("--dynamic-bsz", type=lambda s: s.lower() in ("1", "true", "yes"), default=True)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    if a.dtype is None:
        a.dtype = "bf16" if a.device.startswith("cuda") else "fp32"
    out = run(a)
    print(
        f"{out['device']}, {a.model_size} ({out['matmul_params'] / 1e6:.0f}M matmul params, {a.dtype}): "
        f"{out['tokens_per_s']:.0f} tokens/s, step {out['step_s']:.2f}s (rollout {out['rollout_s']:.2f}, "
        f"ref {out['ref_s']:.2f}, update {out['update_s']:.2f}); MFU rollout {100 * out['mfu_rollout']:.1f}%, "
        f"train {100 * out['mfu_train']:.1f}% of {out['peak_flops'] / 1e12:.2f} TFLOP/s measured {a.dtype} matmul peak"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
