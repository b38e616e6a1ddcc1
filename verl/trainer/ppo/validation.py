"""Validation: ``rollout.val_kwargs.n`` responses (greedy by default) to every validation prompt, scored by the
validation reward function.

Metrics, with N = ``val_kwargs.n``: ``val-core/<data_source>/reward/mean@N``, ``val-core/<data_source>/acc/mean@N``
(share of full scores) and, for N > 1, ``.../acc/best@N`` (share of prompts with a full score among their N
responses); ``val-core/acc`` and ``val-core/reward`` over all sources; ``val-aux/<data_source>/<key>/mean@N`` for each
numeric field the reward function returns besides the score; ``eval/reward_mean`` and ``eval/reward_std`` (mean and
population std of the sequence scores). Reward hooks and ``reward_temp`` do not apply here: these are the task's raw
scores.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.reward import PROMPT_KEYS, compute_reward
from verl.trainer.ppo.sample_log import append_val_generations, dump_generations, finite_numbers, generation_samples
from verl.utils.dataset.rl_dataset import collate_prompts
from verl.utils.failpoints import failpoint


def validate_policy(
    config: Any,
    val_dataset: Any,
    tokenizer: Any,
    actor_rollout_wg: Any,
    val_reward_fn: Callable,
    step: int,
    rm_wg: Any = None,
) -> tuple[dict[str, float], list[DataProto]]:
    """The validation metrics (module docstring) and the scored validation batches (see `concat_left_padded`)."""
    n = max(config.actor_rollout_ref.rollout.val_kwargs.n, 1)
    items = [val_dataset[i] for i in range(len(val_dataset))]
    bsz = config.data.val_batch_size or len(items)
    num_logged = config.trainer.log_val_generations
    scores, sources, outputs, samples = [], [], [], []
    extras: dict[str, list[float]] = defaultdict(list)
    for start in range(0, len(items), bsz):
        batch = collate_prompts(items[start : start + bsz], tokenizer.pad_token_id).repeat(n, interleave=True)
        gen = batch.select(batch_keys=PROMPT_KEYS)
        gen.meta_info["validate"] = True
        # keyed by the row's place in the whole validation set: the same samples on any number of workers
        gen.batch["sample_index"] = torch.arange(start * n, start * n + len(gen), dtype=torch.int64)
        out = actor_rollout_wg.generate_sequences(gen)
        batch.pop(batch_keys=PROMPT_KEYS)
        batch = batch.union(out)
        if rm_wg is not None:
            batch = batch.union(rm_wg.compute_rm_score(batch))
        reward_tensor, extra = compute_reward(batch, val_reward_fn)
        failpoint("validation")
        batch.batch["token_level_scores"] = reward_tensor
        outputs.append(batch)
        scores.extend(reward_tensor.sum(-1).tolist())
        sources.extend(batch.non_tensor_batch["data_source"].tolist())
        samples.extend(generation_samples(batch, reward_tensor, tokenizer, limit=num_logged - len(samples)))
        dump_generations(batch, config.trainer.validation_data_dir, step, tokenizer, append=start > 0)
        for key, values in extra.items():
            if key not in ("score", "reward_errors") and len(values) == len(batch):
                extras[key].extend(values)
    metrics = per_source_metrics(scores, sources, extras, n)
    if samples:
        append_val_generations(samples, _run_dir(config), step)
    metrics["val-core/acc"] = float(np.mean([s >= 1.0 for s in scores]))
    metrics["val-core/reward"] = float(np.mean(scores))
    metrics["eval/reward_mean"] = float(np.mean(scores))
    metrics["eval/reward_std"] = float(np.std(scores))
    return metrics, outputs


def per_source_metrics(scores: list[float], sources: list[str], extras: dict[str, list], n: int) -> dict[str, float]:
    """``val-core/<source>/...`` and ``val-aux/<source>/...`` metrics (module docstring); rows of one prompt are
    consecutive (interleaved repeat)."""
    metrics: dict[str, float] = {}
    for src in dict.fromkeys(sources):
        rows = [i for i, s in enumerate(sources) if s == src]
        vals = [scores[i] for i in rows]
        metrics[f"val-core/{src}/reward/mean@{n}"] = float(np.mean(vals))
        metrics[f"val-core/{src}/acc/mean@{n}"] = float(np.mean([v >= 1.0 for v in vals]))
        if n > 1:
            groups = [vals[i : i + n] for i in range(0, len(vals), n)]
            metrics[f"val-core/{src}/acc/best@{n}"] = float(np.mean([max(g) >= 1.0 for g in groups]))
        for key, values in extras.items():
            numeric = finite_numbers([values[i] for i in rows])
            if numeric:
                metrics[f"val-aux/{src}/{key}/mean@{n}"] = float(np.mean(numeric))
    return metrics


def _run_dir(config: Any) -> str:
    return os.path.abspath(os.path.expanduser(config.trainer.default_local_dir))


PROMPT_SIDE_KEYS = ("prompts", "input_ids", "attention_mask", "position_ids")


def concat_left_padded(batches: list[DataProto], pad_token_id: int) -> DataProto:
    """Concatenate generation outputs (or prompt batches: no ``prompts`` key) whose prompt widths differ: the prompt
    side of ``prompts``, ``input_ids``, ``attention_mask`` and ``position_ids`` is left-padded to the widest (pad id,
    mask 0, position 0). The result has the first batch's ``meta_info`` (the batches' per-call values, e.g. Ray
    timings, differ)."""
    if len(batches) == 1:
        return batches[0]
    widths = [b.batch["prompts" if "prompts" in b.batch else "input_ids"].shape[1] for b in batches]
    width = max(widths)
    padded = []
    for b, w in zip(batches, widths):
        if w < width:
            b = DataProto(batch=dict(b.batch), non_tensor_batch=dict(b.non_tensor_batch), meta_info=dict(b.meta_info))
            for key in PROMPT_SIDE_KEYS:
                if key in b.batch:
                    t = b.batch[key]
                    fill = pad_token_id if key in ("prompts", "input_ids") else 0
                    pad = torch.full((t.shape[0], width - w), fill, dtype=t.dtype)
                    b.batch[key] = torch.cat([pad, t], dim=1)
        padded.append(DataProto(batch=b.batch, non_tensor_batch=b.non_tensor_batch))
    out = DataProto.concat(padded)
    out.meta_info = dict(batches[0].meta_info)
    return out
