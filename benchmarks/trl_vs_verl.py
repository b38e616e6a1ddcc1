"""GRPO throughput: Hugging Face TRL's ``GRPOTrainer`` against ours on the identical workload, side by side.

    python benchmarks/trl_vs_verl.py                       # default workload, TRL vs ours, A B A B, ~5-10 min on 2 cores
    python benchmarks/trl_vs_verl.py --quick               # tiny smoke run (seconds)
    python benchmarks/trl_vs_verl.py --variant plain:actor_rollout_ref.actor.skip_old_log_prob_on_policy=false \\
        --variant fast:actor_rollout_ref.model.use_remove_padding=true     # compare configurations of ours too

Workload (both sides): a tiny random-init Qwen2 (hidden 256, 4 layers; written once with
``verl.models.tiny.save_tiny_model`` under ``--work-dir``), the first ``steps x 16`` prompts of the built-in
arithmetic train split in a fixed order (the same chat-template text, the same tokens), 16 prompts per step x 8
samples, at most 64 response tokens, temperature 1.0, the same learning rate (constant, AdamW, weight decay 0.01,
grad clip 1.0), KL coefficient to the reference (TRL ``beta`` / our ``use_kl_loss`` + ``kl_loss_coef`` with the same
k3 estimator ``low_var_kl``), clip range (TRL ``epsilon`` / our ``clip_ratio``), token-level loss (TRL ``dapo`` /
our ``token-mean``), group-normalised advantages, one optimizer step per generation, and the arithmetic rule reward
(``verl.utils.reward_score.arithmetic``, wrapped as a TRL reward function).

TRL runs in fp32 without gradient checkpointing by default (its own defaults are ``bf16=True`` and
``gradient_checkpointing=True``; ``--trl-variant NAME:bf16=true,...`` adds TRL configurations, any ``GRPOConfig``
keyword), ours with its default config (``--variant NAME:key=value,...`` adds configurations of ours). An upper-case
``KEY=value`` in either is an environment variable of that child instead (``MALLOC_MMAP_MAX_=0`` gives TRL the
allocator setting ours applies itself, ``trainer.cpu_retain_freed_memory``).

Each framework runs in its own subprocess per repetition, alternating (TRL, ours, TRL, ours, ...), with the same
thread count. Per step: wall time, tokens (prompt + response tokens actually processed, no padding, counted the
same way on both sides: prompt mask + completion mask up to and including EOS), the rollout/training split, reward.
Per run: peak RSS (``os.wait4`` of the child). The summary quotes medians (steps after the first, then over
repetitions), the ratio ours/TRL, and model FLOP utilisation against this machine's measured matmul peak
(``benchmarks/cpu_peak_flops.py``): rollout 2*N FLOPs per processed token, training (reference forward + policy
forward/backward) 8*N per token, N = matmul parameters (lm_head included, embedding lookup not); attention FLOPs are
left out (under 10% at these lengths).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DEFAULTS = dict(
    hidden_size=256,
    num_layers=4,
    prompts_per_step=16,
    n=8,
    max_response_length=64,
    steps=6,
    reps=2,
    lr=1e-4,
    kl_coef=0.04,
    clip=0.2,
    temperature=1.0,
)
QUICK = dict(hidden_size=64, num_layers=2, prompts_per_step=4, n=4, max_response_length=16, steps=2, reps=1)


# --------------------------------------------------------------------------------------------------------- setup
def prepare(
    work_dir: str,
    hidden_size: int,
    num_layers: int,
    num_prompts: int,
    seed: int,
    model: str | None = None,
    eval_size: int = 0,
) -> dict[str, str]:
    """The model directory (``model``, or a random-init tiny Qwen2 written once), a parquet of the first
    ``num_prompts`` arithmetic train prompts and, with ``eval_size``, one of the first ``eval_size`` held-out test
    prompts (cached)."""
    import pyarrow.parquet as pq

    from verl.data.tasks import resolve_data_files
    from verl.models.tiny import TinyModelConfig, save_tiny_model
    from verl.utils.model import resolve_model_path

    os.makedirs(work_dir, exist_ok=True)
    model_dir = os.path.join(work_dir, f"tiny-qwen2-h{hidden_size}-l{num_layers}-s{seed}")
    if model:
        model_dir = os.path.abspath(resolve_model_path(model))
    elif not os.path.isfile(os.path.join(model_dir, "config.json")):
        cfg = TinyModelConfig(
            hidden_size=hidden_size,
            num_layers=num_layers,
            num_heads=max(1, hidden_size // 64),
            num_kv_heads=max(1, hidden_size // 128),
            intermediate_size=4 * hidden_size,
            seed=seed,
        )
        save_tiny_model(model_dir, cfg)
    prompts = os.path.join(work_dir, f"prompts-{num_prompts}.parquet")
    if not os.path.isfile(prompts):
        table = pq.read_table(resolve_data_files(["builtin://arithmetic/train"])[0])
        if table.num_rows < num_prompts:
            raise ValueError(
                f"--steps x --prompts-per-step = {num_prompts} prompts; the train split has {table.num_rows}"
            )
        pq.write_table(table.slice(0, num_prompts), prompts)
    paths = {"model": model_dir, "prompts": prompts}
    if eval_size:
        held_out = os.path.join(work_dir, f"heldout-{eval_size}.parquet")
        if not os.path.isfile(held_out):
            table = pq.read_table(resolve_data_files(["builtin://arithmetic/test"])[0])
            pq.write_table(table.slice(0, eval_size), held_out)
        paths["heldout"] = held_out
    return paths


# --------------------------------------------------------------------------------------------------------- held-out
def heldout_accuracy(model, tokenizer, parquet: str, max_new_tokens: int, batch_size: int = 64) -> float:
    """Greedy accuracy of ``model`` on the held-out prompts: the same function, on the final weights, for every side
    (transformers' own ``generate``, left padding, the arithmetic rule reward), so the evaluator favours no one."""
    import pyarrow.parquet as pq
    import torch

    from verl.utils.dataset.parquet import render_prompt
    from verl.utils.reward_score.arithmetic import compute_score

    rows = pq.read_table(parquet).to_pylist()
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    scores = []
    try:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            texts = [render_prompt(tokenizer, list(r["prompt"])) for r in chunk]
            enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                out = model.generate(
                    **enc,
                    do_sample=False,
                    max_new_tokens=max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
            answers = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            scores += [float(compute_score(a, r["reward_model"]["ground_truth"])) for a, r in zip(answers, chunk)]
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return sum(scores) / len(scores)


# --------------------------------------------------------------------------------------------------------- children
def matmul_params(model) -> int:
    from benchmarks.cpu_peak_flops import matmul_params as count

    return count(model)


def child_verl(a: argparse.Namespace, paths: dict[str, str], overrides: list[str]) -> dict:
    from verl.trainer.main_ppo import build_trainer
    from verl.utils.config import load_config

    bsz = a.prompts_per_step
    run_dir = tempfile.mkdtemp(prefix="verl-bench-")
    args = [
        "recipe=quickstart",  # the built-in settings; the rate below stays fixed, as TRL's
        "actor_rollout_ref.actor.trust_region.enable=false",
        f"actor_rollout_ref.model.path={paths['model']}",
        f"data.train_files=[{paths['prompts']}]",
        f"data.val_files=[{paths['prompts']}]",
        "data.shuffle=false",
        f"data.train_batch_size={bsz}",
        "data.max_prompt_length=64",
        f"data.max_response_length={a.max_response_length}",
        f"actor_rollout_ref.rollout.n={a.n}",
        f"actor_rollout_ref.rollout.temperature={a.temperature}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={bsz}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={bsz * a.n}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={bsz * a.n}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={bsz * a.n}",
        f"actor_rollout_ref.actor.optim.lr={a.lr}",
        "actor_rollout_ref.actor.optim.weight_decay=0.01",
        "actor_rollout_ref.actor.use_kl_loss=true",
        f"actor_rollout_ref.actor.kl_loss_coef={a.kl_coef}",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        f"actor_rollout_ref.actor.clip_ratio_low={a.clip}",
        f"actor_rollout_ref.actor.clip_ratio_high={a.clip}",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "algorithm.adv_estimator=grpo",
        f"trainer.total_training_steps={a.steps}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.logger=[file]",
        "trainer.resume_mode=disable",
        f"trainer.seed={a.seed}",
        f"trainer.default_local_dir={run_dir}",
        *overrides,
    ]
    trainer = build_trainer(load_config("ppo_trainer", args))
    module = getattr(trainer.actor_rollout_wg, "actor_module", None)  # local backend: the live module
    if module is None:  # trainer.backend=ray: the workers hold shards; count the same model on the driver
        from verl.utils.model import load_causal_lm

        module = load_causal_lm(paths["model"])
    n_params = matmul_params(module)
    steps = []
    for _ in range(a.steps):
        m = trainer.train_step()
        step_s = m["timing_s/step"]
        gen_s = m.get("timing_s/gen", 0.0)
        steps.append(
            {
                "step_s": step_s,
                "rollout_s": gen_s,
                "train_s": step_s - gen_s - m.get("timing_s/reward", 0.0),
                "tokens": m["perf/total_num_tokens"],
                "response_tokens": m["response_length/mean"] * a.prompts_per_step * a.n,
                "reward": m["critic/score/mean"],
            }
        )
    result = {"steps": steps, "matmul_params": n_params}
    if paths.get("heldout"):
        if getattr(trainer.actor_rollout_wg, "actor_module", None) is None:
            raise ValueError("--eval-size needs the local backend (the policy's weights in this process)")
        from verl.utils.model import load_tokenizer

        tokenizer = load_tokenizer(paths["model"])
        result["eval_acc"] = heldout_accuracy(module, tokenizer, paths["heldout"], a.max_response_length)
    trainer.shutdown()
    return result


def child_trl(a: argparse.Namespace, paths: dict[str, str], overrides: list[str]) -> dict:
    import pyarrow.parquet as pq
    import torch
    import yaml
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from verl.utils.dataset.parquet import render_prompt
    from verl.utils.reward_score.arithmetic import compute_score

    tokenizer = AutoTokenizer.from_pretrained(paths["model"])
    rows = pq.read_table(paths["prompts"]).to_pylist()
    data = Dataset.from_list(
        [
            {"prompt": render_prompt(tokenizer, list(r["prompt"])), "ground_truth": r["reward_model"]["ground_truth"]}
            for r in rows
        ]
    )
    model = AutoModelForCausalLM.from_pretrained(paths["model"], dtype=torch.float32)
    rewards: list[float] = []

    def arithmetic_reward(completions, ground_truth, **kwargs):
        scores = [float(compute_score(c, gt)) for c, gt in zip(completions, ground_truth)]
        rewards.append(sum(scores) / len(scores))
        return scores

    per_step = a.prompts_per_step * a.n
    out_dir = tempfile.mkdtemp(prefix="trl-bench-")
    kwargs = dict(
        output_dir=out_dir,
        per_device_train_batch_size=per_step,
        gradient_accumulation_steps=1,  # one generation of 16 x 8, one optimizer step (as ours)
        num_generations=a.n,
        max_completion_length=a.max_response_length,
        temperature=a.temperature,
        top_p=1.0,
        top_k=0,
        learning_rate=a.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.01,
        max_grad_norm=1.0,
        beta=a.kl_coef,
        epsilon=a.clip,
        loss_type="dapo",  # token-level normalisation = our token-mean
        scale_rewards="group",
        num_iterations=1,
        max_steps=a.steps,
        use_cpu=True,
        bf16=False,
        shuffle_dataset=False,
        seed=a.seed,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        gradient_checkpointing=False,  # TRL's default is True: recomputation a tiny model does not need
    )
    kwargs.update({k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in overrides)})
    args = GRPOConfig(**kwargs)
    trainer = GRPOTrainer(
        model=model, reward_funcs=arithmetic_reward, args=args, train_dataset=data, processing_class=tokenizer
    )
    timing = {"generate": 0.0}
    step_info: list[dict] = []

    orig_generate = model.generate

    def timed_generate(*gargs, **gkwargs):
        t = time.perf_counter()
        try:
            return orig_generate(*gargs, **gkwargs)
        finally:
            timing["generate"] += time.perf_counter() - t

    model.generate = timed_generate
    orig_gen_score = trainer._generate_and_score_completions

    def counted(*gargs, **gkwargs):
        out = orig_gen_score(*gargs, **gkwargs)
        tokens = int(out["prompt_mask"].sum()) + int(out["completion_mask"].sum())
        step_info.append({"tokens": tokens, "response_tokens": int(out["completion_mask"].sum())})
        return out

    trainer._generate_and_score_completions = counted

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.t0 = time.perf_counter()
            self.g0 = timing["generate"]

        def on_step_end(self, args, state, control, **kwargs):
            i = len(self.records)
            self.records.append(
                {
                    "step_s": time.perf_counter() - self.t0,
                    "rollout_s": timing["generate"] - self.g0,
                    "index": i,
                }
            )

    timer = StepTimer()
    timer.records = []
    trainer.add_callback(timer)
    trainer.train()
    steps = []
    for rec, info, reward in zip(timer.records, step_info, rewards):
        steps.append(
            {
                "step_s": rec["step_s"],
                "rollout_s": rec["rollout_s"],
                "train_s": rec["step_s"] - rec["rollout_s"],
                "tokens": info["tokens"],
                "response_tokens": info["response_tokens"],
                "reward": reward,
            }
        )
    result = {"steps": steps, "matmul_params": matmul_params(model)}
    if paths.get("heldout"):
        result["eval_acc"] = heldout_accuracy(trainer.model, tokenizer, paths["heldout"], a.max_response_length)
    return result


def run_child(a: argparse.Namespace) -> None:
    import torch

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    paths = json.loads(a.paths)
    if a.child == "trl":
        result = child_trl(a, paths, a.overrides)
    else:
        result = child_verl(a, paths, a.overrides)
    result["threads"] = torch.get_num_threads()
    with open(a.result, "w") as f:
        json.dump(result, f)


# --------------------------------------------------------------------------------------------------------- parent
def spawn(a: argparse.Namespace, name: str, kind: str, overrides: list[str], paths: dict) -> dict:
    result = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--result", result, "--paths", json.dumps(paths)]
    for key in list(DEFAULTS) + ["seed", "threads"]:
        cmd += [f"--{key.replace('_', '-')}", str(getattr(a, key))]
    # NAME=value overrides in upper case are environment variables of the child (e.g. glibc's MALLOC_MMAP_MAX_=0)
    env_overrides = dict(kv.split("=", 1) for kv in overrides if kv.split("=", 1)[0].isupper())
    cmd += ["--", *(kv for kv in overrides if not kv.split("=", 1)[0].isupper())]
    env = dict(os.environ, **env_overrides)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if a.threads > 0:
        env["OMP_NUM_THREADS"] = str(a.threads)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    log = tempfile.NamedTemporaryFile(suffix=".log", delete=False).name
    start = time.time()
    with open(log, "w") as logf:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=logf, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{name} failed (log {log}):\n{open(log).read()[-4000:]}")
    with open(result) as f:
        out = json.load(f)
    out.update(name=name, wall_s=wall, peak_rss_mb=usage.ru_maxrss / 1024.0)
    return out


def summarize_run(run: dict) -> dict:
    steps = run["steps"][1:] if len(run["steps"]) > 1 else run["steps"]  # the first step warms up
    med = statistics.median
    return {
        "step_s": med(s["step_s"] for s in steps),
        "tokens_per_s": med(s["tokens"] / s["step_s"] for s in steps),
        "rollout_s": med(s["rollout_s"] for s in steps),
        "train_s": med(s["train_s"] for s in steps),
        "tokens": med(s["tokens"] for s in steps),
        "response_len": med(s["response_tokens"] for s in steps),
        "reward_last": run["steps"][-1]["reward"],
        "reward_mean": statistics.fmean(s["reward"] for s in run["steps"]),
        "peak_rss_mb": run["peak_rss_mb"],
        "rollout_tokens_per_s": med(s["tokens"] / max(s["rollout_s"], 1e-9) for s in steps),
        "train_tokens_per_s": med(s["tokens"] / max(s["train_s"], 1e-9) for s in steps),
        "matmul_params": run["matmul_params"],
        **({"eval_acc": run["eval_acc"]} if "eval_acc" in run else {}),
    }


def compute_dtypes(kind: str, overrides: list[str]) -> tuple[str, str]:
    """(rollout, training) compute dtype of an entry, for the MFU denominator."""
    ov = {k.strip(): v.strip().lower() for k, _, v in (kv.partition("=") for kv in overrides)}
    if kind == "trl":
        bf16 = ov.get("bf16") in ("true", "1")
        return ("bf16", "bf16") if bf16 else ("fp32", "fp32")
    rollout = "bf16" if ov.get("actor_rollout_ref.rollout.dtype") in ("bf16", "bfloat16") else "fp32"
    train = "bf16" if ov.get("actor_rollout_ref.actor.autocast_dtype") == "bf16" else "fp32"
    return rollout, train


def summarize(runs: list[dict], entries: list[tuple], peaks: dict[str, float] | None) -> dict[str, dict]:
    """Medians over repetitions; MFU against the measured matmul peak of each phase's compute dtype."""
    out = {}
    for name, kind, overrides in entries:
        per_run = [summarize_run(r) for r in runs if r["name"] == name]
        s = {k: statistics.median(p[k] for p in per_run) for k in per_run[0]}
        s["runs"] = len(per_run)
        s["tokens_per_s_runs"] = [p["tokens_per_s"] for p in per_run]
        if "eval_acc" in per_run[0]:
            s["eval_acc_runs"] = [p["eval_acc"] for p in per_run]
            s["eval_acc_mean"] = statistics.fmean(s["eval_acc_runs"])
        s["dtypes"] = compute_dtypes(kind, overrides)
        if peaks:
            n = s["matmul_params"]
            s["mfu_rollout"] = 2 * n * s["rollout_tokens_per_s"] / peaks[s["dtypes"][0]]
            s["mfu_train"] = 8 * n * s["train_tokens_per_s"] / peaks[s["dtypes"][1]]
        out[name] = s
    return out


def markdown(summary: dict[str, dict], baseline: str | None, peaks: dict[str, float] | None, cmdline: str) -> str:
    measured = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in (peaks or {}).items())
    lines = [
        f"`{cmdline}` on {platform.machine()}, {os.cpu_count()} CPU cores, {time.strftime('%Y-%m-%d %H:%M')}"
        + (f"; measured matmul peak (GFLOP/s, the MFU denominators): {measured}" if peaks else ""),
        "",
        "| run | step s | tokens/s | x "
        + (baseline or "-")
        + " | rollout s | train s | tokens/step | response tokens/step "
        "| reward (last / mean) | peak RSS MB | MFU rollout | MFU train | tokens/s per rep |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = summary.get(baseline, {}).get("tokens_per_s") if baseline else None
    for name, s in summary.items():
        ratio = f"{s['tokens_per_s'] / base:.2f}" if base else "-"
        mfu_r = f"{100 * s['mfu_rollout']:.1f}%" if "mfu_rollout" in s else "-"
        mfu_t = f"{100 * s['mfu_train']:.1f}%" if "mfu_train" in s else "-"
        reps = ", ".join(f"{v:.0f}" for v in s["tokens_per_s_runs"])
        lines.append(
            f"| {name} | {s['step_s']:.2f} | {s['tokens_per_s']:.0f} | {ratio} | {s['rollout_s']:.2f} | "
            f"{s['train_s']:.2f} | {s['tokens']:.0f} | {s['response_len']:.0f} | "
            f"{s['reward_last']:.3f} / {s['reward_mean']:.3f} | {s['peak_rss_mb']:.0f} | {mfu_r} | {mfu_t} | {reps} |"
        )
    return "\n".join(lines)


def heldout_table(summary: dict[str, dict], baseline: str | None, eval_size: int, seeds: list[int]) -> str:
    """Held-out greedy accuracy after training: mean over repetitions, each repetition, and the paired difference
    to the baseline (same seed, same prompts: the fairest pairing)."""
    names = [n for n, s in summary.items() if "eval_acc_runs" in s]
    if not names:
        return ""
    base = summary.get(baseline, {}).get("eval_acc_runs") if baseline else None
    lines = [
        f"Held-out greedy accuracy after training ({eval_size} test prompts; seeds {seeds}):",
        "",
        f"| run | mean | per repetition | mean difference to {baseline} (± std. error of the paired differences) |",
        "|---|---|---|---|",
    ]
    for name in names:
        acc = summary[name]["eval_acc_runs"]
        diff = "-"
        if base and name != baseline and len(base) == len(acc):
            d = [x - y for x, y in zip(acc, base)]
            se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan")
            diff = f"{statistics.fmean(d):+.3f} ± {se:.3f}"
        lines.append(f"| {name} | {statistics.fmean(acc):.3f} | {', '.join(f'{x:.3f}' for x in acc)} | {diff} |")
    return "\n".join(lines)


def per_rep_ratios(runs: list[dict], names: list[str], baseline: str) -> str:
    """tokens/s of each entry over the baseline's within the same repetition (A B A B: the fairest pairing)."""
    reps: list[dict[str, float]] = []
    count: dict[str, int] = {}
    for r in runs:
        i = count.get(r["name"], 0)
        count[r["name"]] = i + 1
        if len(reps) <= i:
            reps.append({})
        reps[i][r["name"]] = summarize_run(r)["tokens_per_s"]
    lines = ["| repetition | " + " | ".join(f"{n} / {baseline}" for n in names) + " |", "|---" * (len(names) + 1) + "|"]
    for i, rep in enumerate(reps):
        cells = [f"{rep[n] / rep[baseline]:.2f}" if n in rep and baseline in rep else "-" for n in names]
        lines.append(f"| {i + 1} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_variant(spec: str) -> tuple[str, list[str]]:
    name, _, rest = spec.partition(":")
    return name, [kv for kv in rest.split(",") if kv]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny smoke settings (seconds)")
    for key, value in DEFAULTS.items():
        p.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=None)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--model", default=None, help="an HF model dir or builtin:// name instead of the random-init one")
    p.add_argument("--threads", type=int, default=0, help="torch/OpenMP threads for both sides (0: torch default)")
    p.add_argument("--work-dir", default=os.path.join(ROOT, "outputs", "bench"))
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME:key=value,key=value -- a configuration of ours (default: 'verl' with the default config)",
    )
    p.add_argument(
        "--trl-variant",
        action="append",
        default=[],
        help="NAME:key=value,... -- a TRL configuration (GRPOConfig keywords; default: 'trl', fp32, no checkpointing)",
    )
    p.add_argument("--no-trl", action="store_true", help="only our variants")
    p.add_argument(
        "--eval-size",
        type=int,
        default=0,
        help="after training, greedy accuracy of each side's final policy on this many held-out test prompts",
    )
    p.add_argument(
        "--vary-seed", action="store_true", help="repetition r runs with seed + r (independent samples per repetition)"
    )
    p.add_argument("--json", default=None, help="write the raw runs and the summary here")
    p.add_argument("--md", default=None, help="write the markdown table here")
    p.add_argument("--peak-flops", type=float, default=None, help="fp32 matmul peak FLOP/s (default: measure it)")
    p.add_argument("--peak-flops-bf16", type=float, default=None, help="bf16 matmul peak FLOP/s (default: measure)")
    # child mode
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--result", default=None, help=argparse.SUPPRESS)
    p.add_argument("--paths", default=None, help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    base = dict(DEFAULTS, **(QUICK if a.quick else {}))
    for key, value in base.items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    if a.child:
        run_child(a)
        return {}

    paths = prepare(a.work_dir, a.hidden_size, a.num_layers, a.steps * a.prompts_per_step, a.seed, a.model, a.eval_size)
    variants = [parse_variant(v) for v in a.variant] or [("verl", [])]
    entries = [(name, "verl", ov) for name, ov in variants]
    have_trl = True
    if not a.no_trl:
        try:
            import trl  # noqa: F401
        except ImportError:
            have_trl = False
            print("trl is not installed (pip install -e '.[bench]'): running ours only", flush=True)
        if have_trl:
            trl_variants = [parse_variant(v) for v in a.trl_variant] or [("trl", [])]
            entries = [(name, "trl", ov) for name, ov in trl_variants] + entries
    from benchmarks.cpu_peak_flops import measure_peak

    seconds = 1.0 if a.quick else 3.0
    peaks = {
        "fp32": a.peak_flops or measure_peak("fp32", threads=a.threads, seconds=seconds),
        "bf16": a.peak_flops_bf16 or measure_peak("bf16", threads=a.threads, seconds=seconds),
    }
    runs = []
    seeds = [a.seed + rep if a.vary_seed else a.seed for rep in range(a.reps)]
    for rep in range(a.reps):  # A B A B: every entry once per repetition, in the same order
        for name, kind, ov in entries:
            r = spawn(argparse.Namespace(**{**vars(a), "seed": seeds[rep]}), name, kind, ov, paths)
            s = summarize_run(r)
            print(
                f"rep {rep + 1} {name}: {s['tokens_per_s']:.0f} tokens/s, step {s['step_s']:.2f}s "
                f"(rollout {s['rollout_s']:.2f}s), reward {s['reward_mean']:.3f}, RSS {s['peak_rss_mb']:.0f} MB"
                + (f", held-out accuracy {s['eval_acc']:.3f}" if "eval_acc" in s else ""),
                flush=True,
            )
            runs.append(r)
    names = [name for name, _, _ in entries]
    summary = summarize(runs, entries, peaks)
    trl_names = [name for name, kind, _ in entries if kind == "trl"]
    baseline = trl_names[0] if trl_names else names[0]
    cmdline = "python benchmarks/trl_vs_verl.py " + " ".join(argv if argv is not None else sys.argv[1:])
    table = markdown(summary, baseline, peaks, cmdline.strip())
    table += "\n\n" + per_rep_ratios(runs, names, baseline)
    held_out = heldout_table(summary, baseline, a.eval_size, seeds)
    if held_out:
        table += "\n\n" + held_out
    print(table)
    if a.md:
        with open(a.md, "w") as f:
            f.write(table + "\n")
    result = {"summary": summary, "runs": runs, "peak_flops": peaks, "settings": {k: getattr(a, k) for k in base}}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
