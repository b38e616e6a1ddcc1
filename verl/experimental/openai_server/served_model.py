"""What the server serves: a model directory (or a training checkpoint) loaded into a rollout engine.

``--model_path`` may be any of

- a Hugging Face model directory (``config.json`` + weights + tokenizer), or a ``builtin://`` model;
- a checkpoint: an SFT ``global_step_N/`` (itself an HF directory), a PPO ``global_step_N/`` (its
  ``actor/huggingface/``), a role's checkpoint directory (its ``huggingface/``), or a run's checkpoint directory holding
  ``latest_checkpointed_iteration.txt`` (the newest complete checkpoint's step).

The engine is the rollout's (``hf``: `HFRollout`, the KV-cache sampler the trainer samples with; ``vllm``:
`vLLMRollout`, a vLLM engine in this process), so the server samples exactly as rollouts do, through the same
per-request ``generate`` the agent loop drives.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from verl.utils.model import BUILTIN_PREFIX, resolve_model_path

__all__ = ["ServedModel", "check_engine", "load_served_model", "resolve_served_model_dir"]

ENGINES = ("hf", "vllm")
LATEST = "latest_checkpointed_iteration.txt"  # verl's pointer to a run's newest checkpoint


@dataclass
class ServedModel:
    """A loaded model: its public ``name``, directory, tokenizer, rollout engine and limits."""

    name: str
    model_dir: str
    engine: str
    tokenizer: Any
    rollout: Any  # a BaseRollout with the per-request ``async generate``
    max_model_len: int  # prompt + response tokens at most
    vocab_size: int
    created: int  # unix time the model was loaded (OpenAI's ``created``)


def _is_hf_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "config.json"))


def resolve_served_model_dir(path: str) -> str:
    """The HF directory to serve for ``path`` (see the module docstring); an error lists what was looked for."""
    if str(path).startswith(BUILTIN_PREFIX):
        return resolve_model_path(path)
    local = os.path.abspath(os.path.expanduser(str(path)))
    if not os.path.isdir(local):
        return resolve_model_path(path)  # its error names the path, built-in models and the hub hint
    latest = os.path.join(local, LATEST)
    if not _is_hf_dir(local) and os.path.isfile(latest):
        step = open(latest).read().strip()
        local = os.path.join(local, f"global_step_{step}")
        if not os.path.isdir(local):
            raise FileNotFoundError(f"{latest} points at step {step}, but {local} does not exist")
    for candidate in (local, os.path.join(local, "huggingface"), os.path.join(local, "actor", "huggingface")):
        if _is_hf_dir(candidate):
            return candidate
    raise FileNotFoundError(
        f"{local} is neither a Hugging Face model directory (config.json) nor a checkpoint holding one (looked for "
        f"huggingface/config.json, actor/huggingface/config.json and {LATEST}); a PPO checkpoint written without its "
        "HF copy can be turned into one with `python -m verl.model_merger merge`"
    )


def _config_value(model_dir: str, key: str) -> Any:
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    return config.get(key, (config.get("text_config") or {}).get(key))


def _check_engine_args(engine: str, tensor_parallel_size: int) -> None:
    if engine not in ENGINES:
        raise ValueError(f"--engine {engine!r}: use one of {', '.join(ENGINES)}")
    if tensor_parallel_size < 1:
        raise ValueError(f"--tensor_parallel_size {tensor_parallel_size}: must be >= 1")
    if tensor_parallel_size > 1 and engine != "vllm":
        raise ValueError(
            f"--tensor_parallel_size {tensor_parallel_size} needs --engine vllm: the hf engine holds one whole model"
        )


def _serving_device(device: str | None) -> str:
    """``device``, by default CUDA where torch sees it, else the CPU."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda, but torch sees no CUDA device: use --device cpu")
    return device


def _context_length(model_dir: str, max_model_len: int | None) -> int:
    """Prompt + response tokens at most: ``max_model_len``, else the model's ``max_position_embeddings``."""
    context = max_model_len or _config_value(model_dir, "max_position_embeddings")
    if not context:
        raise ValueError(f"{model_dir}/config.json has no max_position_embeddings: give --max_model_len")
    return int(context)


def _serving_rollout_config(engine: str, context: int, max_num_seqs: int, dtype: str, tensor_parallel_size: int):
    """The rollout config a server's engine runs with: requests bring their own sampling settings and budgets, so
    the defaults are neutral and the whole context is one request's."""
    from verl.workers.config import RolloutConfig

    return RolloutConfig(
        name=engine,
        mode="async",
        temperature=1.0,
        top_p=1.0,
        top_k=-1,
        do_sample=True,
        prompt_length=context,
        response_length=1,  # every request sends its own max_tokens
        max_model_len=context,
        max_num_seqs=int(max_num_seqs),
        dtype=dtype,
        tensor_model_parallel_size=int(tensor_parallel_size),
        load_format="auto",
        enable_prefix_caching=True,
    )


def _load_hf_engine(
    model_dir: str, config: Any, tokenizer: Any, eos_ids: list[int], *, seed: int, device: str, trust_remote_code: bool
) -> tuple[Any, int]:
    """(`HFRollout` over the model on ``device``, its vocabulary size)."""
    import torch

    from verl.utils.model import load_causal_lm
    from verl.workers.rollout.hf_rollout import HFRollout

    model = load_causal_lm(model_dir, dtype=torch.float32, trust_remote_code=trust_remote_code)
    model.to(torch.device(device))
    rollout = HFRollout(model, config, tokenizer.pad_token_id, eos_ids, seed)
    return rollout, int(model.get_input_embeddings().num_embeddings)


def _load_vllm_engine(
    model_dir: str,
    config: Any,
    tokenizer: Any,
    eos_ids: list[int],
    *,
    seed: int,
    device: str,
    tensor_parallel_size: int,
) -> tuple[Any, int]:
    """(`vLLMRollout` over the model directory, its vocabulary size)."""
    from verl.workers.rollout.vllm_rollout import vLLMRollout

    rollout = vLLMRollout(
        model_dir,
        config,
        eos_ids,
        tokenizer.pad_token_id,
        seed=seed,
        device=device,
        tensor_parallel_size=tensor_parallel_size,
    )
    return rollout, int(rollout.llm.model_config.get_vocab_size())


def load_served_model(
    model_path: str,
    engine: str = "hf",
    *,
    served_model_name: str | None = None,
    max_model_len: int | None = None,
    tensor_parallel_size: int = 1,
    dtype: str = "fp32",
    device: str | None = None,
    seed: int = 0,
    max_num_seqs: int = 64,
    trust_remote_code: bool = False,
) -> ServedModel:
    """Load ``model_path`` into the ``engine`` rollout. ``max_model_len`` defaults to the model's
    ``max_position_embeddings``; ``max_num_seqs`` bounds the requests decoded in one batch."""
    import time

    from verl.utils.model import load_tokenizer
    from verl.workers.fsdp_workers import stop_token_ids

    _check_engine_args(engine, tensor_parallel_size)
    device = _serving_device(device)
    model_dir = resolve_served_model_dir(model_path)
    context = _context_length(model_dir, max_model_len)
    tokenizer = load_tokenizer(model_dir, trust_remote_code=trust_remote_code)
    eos_ids = stop_token_ids(model_dir, tokenizer)
    config = _serving_rollout_config(engine, context, max_num_seqs, dtype, tensor_parallel_size)
    if engine == "hf":
        rollout, vocab_size = _load_hf_engine(
            model_dir, config, tokenizer, eos_ids, seed=seed, device=device, trust_remote_code=trust_remote_code
        )
    else:
        rollout, vocab_size = _load_vllm_engine(
            model_dir, config, tokenizer, eos_ids, seed=seed, device=device, tensor_parallel_size=tensor_parallel_size
        )
    return ServedModel(
        name=served_model_name or str(model_path),
        model_dir=model_dir,
        engine=engine,
        tokenizer=tokenizer,
        rollout=rollout,
        max_model_len=context,
        vocab_size=vocab_size,
        created=int(time.time()),
    )


def check_engine(served: ServedModel) -> None:
    """One greedy 1-token request through the engine before the server opens, so an engine that cannot run this model
    fails at start with the reason (e.g. vLLM's CPU attention supports head sizes 32..512 only), not on a user's
    first request."""
    import asyncio

    prompt = served.tokenizer("0", add_special_tokens=False)["input_ids"]
    try:
        asyncio.run(served.rollout.generate(prompt, {"max_tokens": 1, "temperature": 0}, "startup-check"))
    except Exception as e:
        raise RuntimeError(
            f"the {served.engine} engine failed a 1-token request with {served.model_dir}: {type(e).__name__}: {e}"
        ) from e
