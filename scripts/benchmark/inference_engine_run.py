"""One engine of the inference benchmark, measured in a process of its own (so its peak memory is its own).

    python scripts/benchmark/inference_engine_run.py --spec spec.json --out row.json

`inference_benchmark.py` writes ``spec.json`` (engine, model directory, prompt token ids, sampling) and starts this
once per engine. The engine is driven through the trainer's rollout classes (``HFRollout``, ``vLLMRollout``) with
one ``DataProto`` of all prompts per call, as an RL step does. What each number means is in ``DEFINITIONS``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DEFINITIONS = {
    "start_s": "building the engine from the model directory (weights, KV cache, warm-up the engine does itself); "
    "the library's import is import_s",
    "batch_s": "one generate call with all prompts (one RL rollout step), median over --repeats",
    "tokens_per_s": "generated tokens (response_mask, EOS included) / batch_s",
    "ttft_s": "time to first token, from the generate call to a request's first token, median over requests. "
    "hf: the batch's prefill + first sampling step (every row gets its first token at once); vllm: "
    "RequestOutput.metrics.first_token_ts (without metrics: first_token_batch_s)",
    "first_token_batch_s": "the same batch with max_new_tokens=1 (prefill + one token); run where an engine has no "
    "request clock, or for every engine with --first_token_run",
    "latency_p50_s / latency_p95_s": "per-request latency, from the generate call to the request's last token "
    "(all requests arrive together); hf: the time of the decode step that sampled the row's last token; vllm: "
    "RequestOutput.metrics.last_token_ts. Percentiles by linear interpolation (numpy)",
    "peak_rss_mb": "the engine process's peak resident memory (VmHWM): Python, libraries, weights, KV cache",
}


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM), in MiB; ``ru_maxrss`` where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def rollout_config(spec: dict[str, Any]):
    """The ``actor_rollout_ref.rollout`` section both engines get: the same sampling, lengths and dtype."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import RolloutConfig

    temperature = float(spec["temperature"])
    values = {
        "name": spec["engine"],
        "temperature": temperature,
        "top_p": float(spec["top_p"]),
        "top_k": -1,
        "do_sample": temperature > 0,
        "prompt_length": max(len(p) for p in spec["prompt_ids"]),
        "response_length": int(spec["max_new_tokens"]),
        "dtype": spec["dtype"],
        "tensor_model_parallel_size": 1,
        "load_format": "auto",  # vllm: the directory's weights (the trainer starts from dummy ones, then syncs)
        "disable_log_stats": False,  # vllm: per-request first/last token times
        "max_num_seqs": max(256, len(spec["prompt_ids"])),
    }
    return omega_conf_to_dataclass(values, RolloutConfig)


class HFRunner:
    """``HFRollout`` over ``AutoModelForCausalLM`` in ``rollout.dtype`` (fp32 weights, autocast for bf16: the
    trainer's setting), with a clock on each decode step."""

    name = "hf"

    def __init__(self, spec: dict[str, Any]):
        import torch

        from verl.utils.model import load_causal_lm, load_tokenizer
        from verl.workers.fsdp_workers import stop_token_ids
        from verl.workers.rollout.hf_rollout import HFRollout

        path = spec["model_path"]
        tokenizer = load_tokenizer(path)
        model = load_causal_lm(path, dtype=torch.float32).to(spec["device"])
        self.pad_token_id = tokenizer.pad_token_id
        self.rollout = HFRollout(
            model, rollout_config(spec), tokenizer.pad_token_id, stop_token_ids(path, tokenizer), seed=spec["seed"]
        )
        self.seed = int(spec["seed"])
        self.step_times: list[float] = []
        sample = self.rollout._sample  # one call per decode step: its return is the moment a token exists

        def clocked_sample(*args, **kwargs):
            result = sample(*args, **kwargs)
            self.step_times.append(time.perf_counter())
            return result

        self.rollout._sample = clocked_sample

    def reset(self) -> None:
        """The same random draws on every timed call, so each repeat samples the same tokens."""
        import torch

        self.rollout.set_rng_state(torch.tensor([self.seed, 0], dtype=torch.int64))

    def generate(self, data) -> tuple[Any, float, list[float] | None, list[float] | None]:
        """``(output, seconds, first-token times, last-token times)``, times per row from the call's start."""
        self.step_times = []
        start = time.perf_counter()
        out = self.rollout.generate_sequences(data)
        elapsed = time.perf_counter() - start
        lengths = out.batch["response_mask"].sum(-1).tolist()
        if len(self.step_times) != max(lengths, default=0):  # several chunks (micro_batch_size): no row clock
            return out, elapsed, None, None
        steps = [t - start for t in self.step_times]
        return out, elapsed, [steps[0]] * len(lengths), [steps[int(n) - 1] for n in lengths]


class VLLMRunner:
    """``vLLMRollout`` (engine core in this process) with the directory's weights and per-request metrics on."""

    name = "vllm"

    def __init__(self, spec: dict[str, Any]):
        from verl.utils.model import load_tokenizer
        from verl.workers.fsdp_workers import stop_token_ids
        from verl.workers.rollout.vllm_rollout import vLLMRollout

        path = spec["model_path"]
        tokenizer = load_tokenizer(path)
        self.pad_token_id = tokenizer.pad_token_id
        self.seed = int(spec["seed"])
        self.rollout = vLLMRollout(
            path,
            rollout_config(spec),
            stop_token_ids(path, tokenizer),
            tokenizer.pad_token_id,
            seed=self.seed,
            device=spec["device"],
        )
        self.outputs: list[Any] | None = None
        generate = self.rollout.llm.generate  # keep the RequestOutputs the rollout turns into a DataProto

        def recorded_generate(*args, **kwargs):
            self.outputs = generate(*args, **kwargs)
            return self.outputs

        self.rollout.llm.generate = recorded_generate

    def reset(self) -> None:
        """Same draws each repeat, and no prompt KV kept from the previous call (an RL step has new prompts)."""
        import torch

        self.rollout.set_rng_state(torch.tensor([self.seed, 0], dtype=torch.int64))
        self.rollout.llm.reset_prefix_cache()

    def generate(self, data) -> tuple[Any, float, list[float] | None, list[float] | None]:
        self.outputs = None
        start_mono, start = time.monotonic(), time.perf_counter()  # the engine core stamps with time.monotonic()
        out = self.rollout.generate_sequences(data)
        elapsed = time.perf_counter() - start
        metrics = [getattr(o, "metrics", None) for o in self.outputs or []]
        if not metrics or any(m is None or not getattr(m, "first_token_ts", 0.0) for m in metrics):
            return out, elapsed, None, None
        first = [m.first_token_ts - start_mono for m in metrics]
        last = [m.last_token_ts - start_mono for m in metrics]
        return out, elapsed, first, last


RUNNERS = {"hf": HFRunner, "vllm": VLLMRunner}
# the engine's library first (its version is reported), then our modules the runner uses
IMPORTS = {
    "hf": ("transformers", "verl.workers.rollout.hf_rollout", "verl.workers.fsdp_workers"),
    "vllm": ("vllm", "verl.workers.rollout.vllm_rollout", "verl.workers.fsdp_workers"),
}


def prompt_batch(prompt_ids: list[list[int]], pad_token_id: int, **meta: Any):
    """Left-padded prompts as the trainer's ``DataProto`` (``input_ids``, ``attention_mask``, ``position_ids``)."""
    from verl.utils.dataset.rl_dataset import collate_prompts

    data = collate_prompts([{"input_ids": ids} for ids in prompt_ids], pad_token_id)
    data.meta_info.update(meta)
    return data


def percentile(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def one_run(runner, data) -> dict[str, Any]:
    runner.reset()
    out, elapsed, first, last = runner.generate(data)
    lengths = out.batch["response_mask"].sum(-1)
    run = {
        "batch_s": elapsed,
        "generated_tokens": int(lengths.sum()),
        "mean_response_tokens": float(lengths.float().mean()),
        "ttft_s": percentile(first, 50) if first else None,
        "latency_p50_s": percentile(last, 50) if last else None,
        "latency_p95_s": percentile(last, 95) if last else None,
    }
    return run


def median(values: list[float | None]) -> float | None:
    import statistics

    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Start the engine, warm it up, then time ``repeats`` full batches (and the one-token batch if asked)."""
    import importlib

    import torch

    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    engine = spec["engine"]
    start = time.perf_counter()
    library, *_ = (importlib.import_module(name) for name in IMPORTS[engine])
    import_s = time.perf_counter() - start
    start = time.perf_counter()
    runner = RUNNERS[engine](spec)
    start_s = time.perf_counter() - start
    prompts = spec["prompt_ids"]
    pad = runner.pad_token_id
    # first-call costs (allocator growth, lazy kernels) stay out of the timings: 2 prompts, 2 greedy tokens
    runner.reset()
    runner.generate(prompt_batch(prompts[:2], pad, do_sample=False, response_length=2))
    runs = [one_run(runner, prompt_batch(prompts, pad)) for _ in range(int(spec["repeats"]))]
    batch_s = median([r["batch_s"] for r in runs])
    tokens = int(median([r["generated_tokens"] for r in runs]))
    ttft_s, ttft_source = median([r["ttft_s"] for r in runs]), "request clock"
    one_token_s = None
    if ttft_s is None or spec.get("first_token_run"):
        one_token_s = one_run(runner, prompt_batch(prompts, pad, response_length=1))["batch_s"]
    if ttft_s is None:
        ttft_s, ttft_source = one_token_s, "max_new_tokens=1 batch"
    row = {
        "engine": engine,
        "status": "ok",
        "version": getattr(library, "__version__", "?"),
        "import_s": import_s,
        "start_s": start_s,
        "batch_s": batch_s,
        "batch_s_per_repeat": [r["batch_s"] for r in runs],
        "generated_tokens": tokens,
        "tokens_per_s": tokens / batch_s if batch_s else None,
        "mean_response_tokens": median([r["mean_response_tokens"] for r in runs]),
        "ttft_s": ttft_s,
        "ttft_source": ttft_source,
        "first_token_batch_s": one_token_s,
        "latency_p50_s": median([r["latency_p50_s"] for r in runs]),
        "latency_p95_s": median([r["latency_p95_s"] for r in runs]),
        "peak_rss_mb": peak_rss_mb(),
        "threads": torch.get_num_threads(),
        "device": spec["device"],
    }
    if spec["device"].startswith("cuda") and torch.cuda.is_available():
        row["peak_gpu_mb"] = torch.cuda.max_memory_reserved() / 2**20
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, help="the JSON spec written by inference_benchmark.py")
    parser.add_argument("--out", required=True, help="where this engine's result row is written (JSON)")
    args = parser.parse_args(argv)
    with open(args.spec) as f:
        spec = json.load(f)
    if spec["engine"] not in RUNNERS:
        raise SystemExit(f"inference_engine_run: no runner for engine {spec['engine']!r}; known: {sorted(RUNNERS)}")
    row = measure(spec)
    with open(args.out, "w") as f:
        json.dump(row, f, indent=1)


if __name__ == "__main__":
    main()
