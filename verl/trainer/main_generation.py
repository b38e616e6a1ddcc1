"""Batch generation: ``data.n_samples`` responses to every prompt of a parquet file, written as a new parquet.

    python -m verl.trainer.main_generation model.path=outputs/.../huggingface data.path=~/data/gsm8k/test.parquet \\
        data.n_samples=4 data.output_path=~/data/gsm8k/test-gen.parquet rollout.temperature=1.0
    python -m verl.trainer.main_eval data.path=~/data/gsm8k/test-gen.parquet      # score the file offline

The output holds every input column plus ``responses``: a list of ``n_samples`` texts per row, as verl's
``main_generation`` writes, so its offline ``main_eval`` reads it. Sampling is the rollout's (``HFRollout``: KV cache,
finished rows retired, the model's stop tokens); each response's randomness is keyed by the seed, its row and its
sample number, so the same seed gives the same file whatever ``data.batch_size`` is. The file is written to a temporary
name and renamed, so an interrupted run never leaves a half-written output.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Any

import torch

from verl.trainer.config.generation import GenerationJobConfig
from verl.utils.cli import job_config, run_cli
from verl.utils.config import ConfigError, as_section, omega_conf_to_dataclass
from verl.utils.dataset.parquet import Row, get_nested, prompt_to_messages, read_parquet_rows, render_prompt
from verl.utils.dataset.rl_dataset import collate_prompts
from verl.utils.model import import_external_lib, load_causal_lm, load_tokenizer
from verl.workers.config import RolloutConfig
from verl.workers.fsdp_workers import stop_token_ids
from verl.workers.rollout.hf_rollout import HFRollout

logger = logging.getLogger(__name__)


def check_generation_config(config: GenerationJobConfig) -> None:
    d, r = config.data, config.rollout
    if d.n_samples < 1:
        raise ConfigError(f"data.n_samples={d.n_samples}: the responses per prompt must be >= 1")
    if d.batch_size < 1:
        raise ConfigError(f"data.batch_size={d.batch_size}: the prompts per generation call must be >= 1")
    if r.response_length < 1:
        raise ConfigError(f"rollout.response_length={r.response_length} must be >= 1")
    greedy = r.temperature == 0 or not r.do_sample
    if greedy and d.n_samples > 1:
        raise ConfigError(
            f"data.n_samples={d.n_samples} with greedy decoding (rollout.temperature={r.temperature}, "
            f"do_sample={r.do_sample}) gives {d.n_samples} identical responses: set data.n_samples=1 or sample"
        )
    if config.trainer.device not in ("cpu", "cuda"):
        raise ConfigError(f"trainer.device={config.trainer.device!r}: use cpu or cuda")
    if config.trainer.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("trainer.device=cuda but torch sees no CUDA device: use trainer.device=cpu")
    if not d.output_path:
        raise ConfigError("data.output_path is empty: give the parquet file to write")
    if r.name != "hf":
        logger.warning("rollout.name=%s: generation runs on the built-in HF KV-cache sampler", r.name)


def tokenize_prompts(rows: list[Row], tokenizer, prompt_key: str, prompt_length: int) -> list[list[int]]:
    """Each row's prompt through the chat template, as token ids; a prompt over ``prompt_length`` names its row."""
    ids = []
    for row in rows:
        text = render_prompt(tokenizer, prompt_to_messages(get_nested(row, prompt_key), row), row.where)
        tokens = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(tokens) > prompt_length:
            raise ValueError(
                f"{row.where}: the prompt has {len(tokens)} tokens, more than rollout.prompt_length={prompt_length}; "
                "raise it or shorten the prompt"
            )
        ids.append(tokens)
    return ids


def generate_responses(config: GenerationJobConfig | Any) -> dict[str, Any]:
    """Sample ``data.n_samples`` responses per row of ``data.path`` and write ``data.output_path``; returns a summary
    (rows, responses, tokens, seconds, output path). ``config``: the loaded ``GenerationJobConfig`` (verl's
    ``DictConfig`` or a dict of its keys is loaded as overrides)."""
    config = as_section(config, GenerationJobConfig)
    check_generation_config(config)
    d, r, m = config.data, config.rollout, config.model
    import_external_lib(m.external_lib)
    tokenizer = load_tokenizer(m.path, trust_remote_code=bool(d.trust_remote_code))
    model = load_causal_lm(m.path, dtype=m.dtype, trust_remote_code=bool(m.trust_remote_code))
    model.to(torch.device(config.trainer.device))
    rows = read_parquet_rows(d.path, required_columns=[d.prompt_key])
    if not rows:
        raise ValueError(f"data.path={d.path}: no rows to generate for")
    prompt_ids = tokenize_prompts(rows, tokenizer, d.prompt_key, r.prompt_length)
    rollout_config = omega_conf_to_dataclass(r, RolloutConfig)
    rollout_config = dataclasses.replace(rollout_config, top_k=r.top_k if r.top_k > 0 else -1)  # verl writes 0 for off
    rollout = HFRollout(model, rollout_config, tokenizer.pad_token_id, stop_token_ids(m.path, tokenizer), config.seed)
    n = int(d.n_samples)
    responses: list[list[str]] = []
    tokens = 0
    start = time.perf_counter()
    for lo in range(0, len(rows), d.batch_size):
        chunk = prompt_ids[lo : lo + d.batch_size]
        prompts = collate_prompts([{"input_ids": ids} for ids in chunk], tokenizer.pad_token_id).repeat(
            n, interleave=True
        )
        # row-and-sample keyed randomness: the same responses whatever data.batch_size is
        prompts.batch["sample_index"] = torch.arange(lo * n, (lo + len(chunk)) * n, dtype=torch.int64)
        rollout.set_rng_state(torch.tensor([int(config.seed), 0]))  # one sampling "call" for the whole file
        out = rollout.generate_sequences(prompts)
        mask = out.batch["response_mask"].bool()
        texts = [
            tokenizer.decode(out.batch["responses"][i][mask[i]], skip_special_tokens=True) for i in range(len(out))
        ]
        responses.extend(texts[i : i + n] for i in range(0, len(texts), n))
        tokens += int(mask.sum())
        print(f"[{min(lo + len(chunk), len(rows))}/{len(rows)}] prompts generated", flush=True)
    seconds = time.perf_counter() - start
    path = write_responses(rows, responses, d.output_path)
    return {"rows": len(rows), "responses": len(rows) * n, "tokens": tokens, "seconds": seconds, "output_path": path}


def write_responses(rows: list[Row], responses: list[list[str]], output_path: str) -> str:
    """The rows' columns plus ``responses`` as parquet at ``output_path``: written beside it, then renamed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.abspath(os.path.expanduser(output_path))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    records = [{**row.data, "responses": texts} for row, texts in zip(rows, responses)]
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        pq.write_table(pa.Table.from_pylist(records), tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def main(argv: list[str] | None = None) -> dict[str, Any]:
    config = job_config("generation", argv, "verl.trainer.main_generation", __doc__)
    if config is None:  # --help or --cfg job: printed, nothing to run
        return None
    summary = generate_responses(config)
    print(
        f"wrote {summary['responses']} responses to {summary['rows']} prompts ({config.data.n_samples} each) in "
        f"{summary['seconds']:.1f} s ({summary['tokens'] / max(summary['seconds'], 1e-9):.0f} response tokens/s): "
        f"{summary['output_path']}"
    )
    return summary


if __name__ == "__main__":
    run_cli(main, extra_errors=(ImportError,))
