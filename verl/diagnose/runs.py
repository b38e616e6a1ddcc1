"""The checks that load or run something: a model directory (config, tokenizer, weights) and a 1-step smoke run
of the main job on the tiny built-in model, in a subprocess in a temporary directory."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time

from verl.diagnose.base import DEFAULT_MODEL, FAIL, PASS, VERL_ROOT, Check, GiB, human_size, tail

FULL_LOAD_LIMIT = 4 * GiB  # larger weights are checked by their safetensors headers, not loaded into memory
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.bin")
SMOKE_OVERRIDES = [
    "trainer.total_training_steps=1",
    "data.train_files=builtin://arithmetic/train?train_size=16",
    "data.val_files=builtin://arithmetic/test?test_size=8",
    "data.train_batch_size=4",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "trainer.save_freq=-1",
    "trainer.logger=[file]",
]
SMOKE_METRICS = (("timing_s/step", "the step itself {:.1f} s"), ("val-core/acc", "val-core/acc {:.3f}"))


def _model_fix(local: str, what: str) -> str:
    return (
        f"{what} in {local} (model.save_pretrained / tokenizer.save_pretrained write them; a partial download is "
        "the usual cause: download the model again), or point --model-path and actor_rollout_ref.model.path at a "
        "complete Hugging Face model directory"
    )


def check_model(path: str = DEFAULT_MODEL) -> Check:
    """The model directory a run would load: config.json, the tokenizer, then the weights (loaded in full up to
    ``FULL_LOAD_LIMIT``, else every safetensors file's header). A failure names the directory or file and the fix."""
    from verl.utils.model import load_causal_lm, load_tokenizer, resolve_model_path

    try:
        local = resolve_model_path(path)
    except (OSError, ValueError) as e:
        return Check(
            "model",
            FAIL,
            str(e),
            "pass a local Hugging Face model directory (config.json, tokenizer files, *.safetensors) to --model-path "
            f"and actor_rollout_ref.model.path, or a built-in one such as {DEFAULT_MODEL}",
        )
    if not os.path.isfile(os.path.join(local, "config.json")):  # a PEFT adapter directory
        return Check(
            "model",
            PASS,
            f"{local}: a LoRA adapter directory, not loaded here (check its base model with --model-path BASE_DIR)",
        )
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(local)
    except Exception as e:
        config_file = os.path.join(local, "config.json")
        return Check(
            "model",
            FAIL,
            f"{config_file} does not load: {type(e).__name__}: {e}",
            _model_fix(local, "rewrite config.json"),
        )
    try:
        tokenizer = load_tokenizer(local)
    except Exception as e:
        return Check(
            "model",
            FAIL,
            str(e),
            _model_fix(local, "restore the tokenizer files (tokenizer.json, tokenizer_config.json)"),
        )
    files = sorted({f for pattern in WEIGHT_PATTERNS for f in glob.glob(os.path.join(local, pattern))})
    if not files:
        return Check(
            "model",
            FAIL,
            f"{local} has no weights file ({', '.join(WEIGHT_PATTERNS)}): config.json and the tokenizer alone",
            _model_fix(local, "put the weights"),
        )
    names = ", ".join(os.path.basename(f) for f in files[:3]) + (
        f" and {len(files) - 3} more" if len(files) > 3 else ""
    )
    size = sum(os.path.getsize(f) for f in files)
    try:
        if size <= FULL_LOAD_LIMIT:
            model = load_causal_lm(local, dtype="bf16")  # memory at most the files' size
            loaded = f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters loaded"
            del model
        else:
            loaded = _check_safetensors_headers(files)
    except Exception as e:
        return Check(
            "model",
            FAIL,
            f"the weights in {local} ({names}) do not load: {type(e).__name__}: {str(e)[:300]}",
            _model_fix(local, "replace the weights files"),
        )
    arch = (getattr(config, "architectures", None) or [config.model_type])[0]
    return Check(
        "model",
        PASS,
        f"{path}{' -> ' + local if local != path else ''}: {arch}, {loaded} from {names} ({human_size(size)}), "
        f"tokenizer vocabulary {len(tokenizer)}",
    )


def _check_safetensors_headers(files: list[str]) -> str:
    from safetensors import safe_open

    tensors = 0
    for f in files:
        if not f.endswith(".safetensors"):
            raise ValueError(f"{os.path.basename(f)} is over the full-load limit and not safetensors: cannot check it")
        with safe_open(f, framework="pt") as handle:  # reads and validates the header against the file's size
            tensors += len(list(handle.keys()))
    return f"{tensors} tensors' headers checked (over {FULL_LOAD_LIMIT / GiB:g} GiB: not loaded)"


def smoke_command(run_dir: str) -> list[str]:
    return [sys.executable, "-m", "verl.trainer.main_ppo", *SMOKE_OVERRIDES, f"trainer.default_local_dir={run_dir}"]


def check_smoke(timeout_s: float = 600.0) -> Check:
    """One step of ``python -m verl.trainer.main_ppo`` on the tiny built-in model and task, in a temporary directory
    (nothing is left behind): PASS with its seconds, FAIL with the last lines it printed."""
    with tempfile.TemporaryDirectory(prefix="verl-diagnose-") as tmp:
        run_dir = os.path.join(tmp, "run")
        cmd = smoke_command(run_dir)
        env = dict(os.environ, TQDM_DISABLE="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(VERL_ROOT), env.get("PYTHONPATH")) if p)
        shown = " ".join(["python", *cmd[1:-1], "trainer.default_local_dir=/tmp/smoke"])
        start = time.perf_counter()
        try:
            out = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            return Check(
                "smoke",
                FAIL,
                f"1 step of the main job did not finish in {timeout_s:g} s:\n{tail(text, 6)}",
                f"rerun with a longer --smoke-timeout on an idle machine, or run it to watch: {shown}",
            )
        seconds = time.perf_counter() - start
        if out.returncode != 0:
            return Check(
                "smoke",
                FAIL,
                f"1 step of the main job exited {out.returncode} after {seconds:.1f} s:\n"
                f"{tail(out.stderr or out.stdout, 8)}",
                f"the last lines above name the cause; the whole log: {shown}",
            )
        metrics = _last_metrics(os.path.join(run_dir, "metrics.jsonl"))
    found = [text.format(metrics[k]) for k, text in SMOKE_METRICS if isinstance(metrics.get(k), (int, float))]
    return Check(
        "smoke",
        PASS,
        f"1 step of python -m verl.trainer.main_ppo on {DEFAULT_MODEL} in {seconds:.1f} s"
        + (f" ({', '.join(found)})" if found else ""),
    )


def _last_metrics(path: str) -> dict:
    """Each metric's last logged value."""
    merged: dict = {}
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    merged.update(json.loads(line))
    except (OSError, ValueError):
        pass
    return merged
